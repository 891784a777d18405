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


DERIVATIVE_STEP = 1e-3
"""The step of the numerical derivatives of ``pair_noise_sd``, as a fraction of each statistic's noise s.d."""


def pair_noise_sd(
    kind: AggregateKind, stats: Mapping[str, float], sds: Mapping[str, float], pair: PairInputs
) -> float | None:
    """The standard deviation of a (y, x) aggregate's noise, for ``veil.round = auto``: each noisy
    statistic's s.d. (public: its mechanism's scale) carried through the aggregate's formula to first
    order — the delta method, ``sqrt(Σ (∂f/∂s · sd_s)²)`` at the noisy values, with ``∂f/∂s`` a central
    difference of ``pair_value`` over ±0.1 % of ``sd_s`` (one-sided where one side is NULL) — and capped at
    half the width of the range the answer is confined to, where there is one (1 for CORR, 0.5 for
    REGR_R2, w_y·w_x/4 for COVAR_POP…), since nothing in an interval spreads more. None: no value, or
    nothing to round by (a value at a clamp does not move with its statistics). Post-processing only."""
    value = pair_value(kind, stats, pair)
    if value is None or kind is AggregateKind.REGR_COUNT:
        return None
    variance = 0.0
    for name, sd in sds.items():
        if not (math.isfinite(sd) and sd > 0):
            continue
        step = sd * DERIVATIVE_STEP
        up = pair_value(kind, {**stats, name: stats[name] + step}, pair)
        down = pair_value(kind, {**stats, name: stats[name] - step}, pair)
        if up is not None and down is not None:
            slope = (up - down) / (2 * step)
        elif up is not None or down is not None:
            slope = ((up if up is not None else value) - (down if down is not None else value)) / step
        else:
            continue
        variance += (slope * sd) ** 2
    cap = _half_range(kind, stats["n"], pair)
    sd_value = math.sqrt(variance)
    return min(sd_value, cap) if cap is not None else sd_value


def _half_range(kind: AggregateKind, n: float, pair: PairInputs) -> float | None:
    """Half the width of the interval ``pair_value`` confines the aggregate to; None for a slope or an
    intercept, which no range bounds."""
    width_y, width_x = _width(pair.y.lower, pair.y.upper), _width(pair.x.lower, pair.x.upper)
    largest = width_y * width_x / 4  # |cov| at most
    halves = {
        AggregateKind.CORR: 1.0,
        AggregateKind.REGR_R2: 0.5,
        AggregateKind.REGR_AVGY: width_y / 2,
        AggregateKind.REGR_AVGX: width_x / 2,
        AggregateKind.COVAR_POP: largest,
        AggregateKind.COVAR_SAMP: largest * n / (n - 1) if n > 1 else None,
        AggregateKind.REGR_SXY: n * largest,
        AggregateKind.REGR_SYY: n * width_y * width_y / 8,
        AggregateKind.REGR_SXX: n * width_x * width_x / 8,
    }
    return halves.get(kind)
