"""CORR, COVAR_POP/SAMP and REGR_* of a (y, x) pair from noisy sums: post-processing only.

The release measures, over the rows where neither y nor x is NULL and with both clamped to their bounds,
some of: the number of pairs n, Σy, Σx, Σy², Σx² and Σyx — each a noisy quantity with its own sensitivity
and an equal share of ε (spec dp-mechanisms.md §2.2 and §7; analysis/aggregates.py ``PAIR_STATISTICS``).
Everything here is arithmetic on those noisy values and on the public bounds, so it costs nothing:

* ``var = Σx²/n − (Σx/n)²`` and ``cov = Σyx/n − (Σy/n)(Σx/n)``, the population moments;
* CORR = cov / sqrt(var_y · var_x) (spec §7: the three statistics of [L]'s construction), NULL when a
  noisy variance is not positive, otherwise clamped into [−1, 1];
* REGR_R2 = CORR², clamped into [0, 1]; as in PostgreSQL it is NULL when var_x is not positive and 1
  when var_y is not (and var_x is);
* REGR_SLOPE = cov / var_x and REGR_INTERCEPT = ȳ − slope · x̄, NULL when var_x is not positive (no
  range bounds a slope: var_x may be arbitrarily small);
* COVAR_POP = cov clamped into ±w_y·w_x/4 (|cov| <= σ_y·σ_x, and a value in an interval of width w has
  σ <= w/2); COVAR_SAMP = that × n/(n − 1); REGR_SXY, REGR_SXX, REGR_SYY = n × the clamped moment;
  REGR_AVGX/AVGY = Σx/n clamped into x's bounds; REGR_COUNT = n.

SQL returns NULL for these over no rows (COVAR_SAMP: fewer than two), so a noisy n below 1 (2) gives
NULL, as for AVG and VAR.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from proxy.analysis.aggregates import AggregateKind, PairInputs

VARIANCE_BASED = frozenset(
    {AggregateKind.CORR, AggregateKind.REGR_R2, AggregateKind.REGR_SLOPE, AggregateKind.REGR_INTERCEPT}
)
"""Aggregates that are NULL when a noisy variance is not positive (not only when n is below 1)."""


def pair_value(kind: AggregateKind, stats: Mapping[str, float], pair: PairInputs) -> float | int | None:
    """The answer of a (y, x) aggregate from its noisy statistics (``quantities.pair_statistics``)."""
    n = stats["n"]
    if kind is AggregateKind.REGR_COUNT:
        return n
    if n < (2 if kind is AggregateKind.COVAR_SAMP else 1):
        return None
    width_y, width_x = _width(pair.y.lower, pair.y.upper), _width(pair.x.lower, pair.x.upper)
    if kind is AggregateKind.REGR_AVGY:
        return _clamp(stats["sy"] / n, pair.y.lower, pair.y.upper)
    if kind is AggregateKind.REGR_AVGX:
        return _clamp(stats["sx"] / n, pair.x.lower, pair.x.upper)
    if kind is AggregateKind.REGR_SYY:
        return n * _clamp(_variance(stats, "y"), 0.0, width_y * width_y / 4)
    if kind is AggregateKind.REGR_SXX:
        return n * _clamp(_variance(stats, "x"), 0.0, width_x * width_x / 4)
    covariance = stats["sxy"] / n - (stats["sy"] / n) * (stats["sx"] / n)
    largest = width_y * width_x / 4
    if kind is AggregateKind.COVAR_POP:
        return _clamp(covariance, -largest, largest)
    if kind is AggregateKind.COVAR_SAMP:
        return _clamp(covariance, -largest, largest) * n / (n - 1)
    if kind is AggregateKind.REGR_SXY:
        return n * _clamp(covariance, -largest, largest)
    variance_x = _variance(stats, "x")
    if variance_x <= 0:
        return None
    if kind is AggregateKind.REGR_SLOPE:
        return covariance / variance_x
    if kind is AggregateKind.REGR_INTERCEPT:
        return (stats["sy"] - covariance / variance_x * stats["sx"]) / n
    variance_y = _variance(stats, "y")
    if kind is AggregateKind.REGR_R2:
        return 1.0 if variance_y <= 0 else _clamp(covariance**2 / (variance_x * variance_y), 0.0, 1.0)
    assert kind is AggregateKind.CORR
    if variance_y <= 0:
        return None
    return _clamp(covariance / math.sqrt(variance_x * variance_y), -1.0, 1.0)


def _variance(stats: Mapping[str, float], axis: str) -> float:
    n = stats["n"]
    return stats[f"s{axis}{axis}"] / n - (stats[f"s{axis}"] / n) ** 2


def _width(lower: float | None, upper: float | None) -> float:
    assert lower is not None and upper is not None
    return upper - lower


def _clamp(value: float, lower: float | None, upper: float | None) -> float:
    assert lower is not None and upper is not None
    return min(max(value, lower), upper)
