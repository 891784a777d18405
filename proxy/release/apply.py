"""Apply a release plan to the engine's exact rows: noise first, then per-cell post-processing.

The result is the *noisy table* — one row per public group cell, columns ``_dp_key_<i>`` and
``_dp_agg_<i>`` — over which the query's own post-processing (arithmetic, HAVING, ORDER BY,
LIMIT) then runs. Group cells come from the policy's public domains, never from the rows: a cell
absent from the engine's answer is released as a noisy zero, so the set of keys reveals nothing.
"""

from __future__ import annotations

import datetime
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from mechanisms.gaussian import discrete_gaussian_mechanism, gaussian_mechanism
from mechanisms.laplace import discrete_laplace_mechanism, laplace_mechanism
from mechanisms.mode import dp_mode_from_histogram
from mechanisms.quantile import dp_quantile_from_histogram
from mechanisms.random_source import RandomSource
from proxy.analysis.aggregates import PAIR_STATISTICS, Aggregate, AggregateKind, day_of, second_of
from proxy.analysis.quantities import THRESHOLD_QUANTITY, Quantity, pair_statistics, quantities_for
from proxy.analysis.shape import aggregate_column, key_column
from proxy.config import ColumnType
from proxy.release.pairs import VARIANCE_BASED, pair_noise_sd, pair_value
from proxy.release.plan import Measurement, ReleasePlan
from proxy.rewrite.bound_contributions import QUANTILE_GRID

Cell = tuple[object, ...]


@dataclass(frozen=True)
class ResultColumn:
    name: str
    type: ColumnType
    # a more specific PostgreSQL type than the column type's (int4 for `SELECT 1`, timestamptz)
    type_oid: int | None = None


@dataclass(frozen=True)
class ReleasedTable:
    columns: tuple[ResultColumn, ...]
    rows: list[tuple[object, ...]]


def public_cells(plan: ReleasePlan) -> list[Cell]:
    domains = [key.values or () for key in plan.shape.group_keys]
    return list(itertools.product(*domains))


Histograms = Mapping[str, Mapping[Cell, Sequence[int]]]  # Quantity.histogram → cell → weighted counts


def release(
    plan: ReleasePlan,
    exact_rows: Sequence[tuple[Any, ...]],
    *,
    rng: RandomSource,
    histograms: Histograms = MappingProxyType({}),
    exact_totals: Sequence[Any] = (),
) -> ReleasedTable:
    """The noisy table: every public cell, each aggregate computed from noisy quantities, then the
    noise's standard deviation in each rounded aggregate (``noise_column``), for ``veil.round``.
    ``exact_rows`` hold the keys then the scalar quantities; quantiles and modes come from ``histograms``;
    ``exact_totals`` (without GROUP BY) feed the "(other)" row when the plan asks for one."""
    keys = len(plan.shape.group_keys)
    exact = {tuple(row[:keys]): row[keys:] for row in exact_rows}
    cells = list(exact) if plan.threshold is not None else public_cells(plan)
    scalars = plan.scalar_measurements
    spread = noise_spread(plan)
    rows = []
    released: list[dict[Quantity, int | float]] = []
    for cell in cells:
        values = exact.get(cell, (None,) * len(scalars))
        drawn = [(m, _noisy(m, v, rng=rng, rounded=False)) for m, v in zip(scalars, values, strict=True)]
        noisy = {m.quantity: _rounded(m, value) for m, value in drawn}
        noisy |= {m.quantity: _quantile(m, histograms, cell, rng=rng) for m in plan.quantile_measurements}
        noisy |= {m.quantity: _mode(m, histograms, cell, rng=rng) for m in plan.mode_measurements}
        if plan.threshold is not None and _gate(drawn) <= plan.threshold:
            continue  # too few people share this data-derived key to show that it exists
        rows.append(cell + _aggregate_row(plan.shape.aggregates, noisy, spread))
        released.append(noisy)
    if plan.total_measurements:
        rows.append(_other_row(plan, exact_totals, released, spread, rng=rng))
    return ReleasedTable(noisy_columns(plan), rows)


def noise_spread(plan: ReleasePlan) -> dict[Quantity, float]:
    """Each noisy quantity's noise standard deviation (public: from sensitivity and ε), and each
    quantile's resolution (its grid step)."""
    spread = {m.quantity: m.noise_sd() for m in plan.scalar_measurements}
    for m in plan.quantile_measurements:
        column = m.quantity.column
        assert column is not None and column.lower is not None and column.upper is not None
        spread[m.quantity] = (column.upper - column.lower) / QUANTILE_GRID
    return spread


ROUNDED = frozenset(
    {
        AggregateKind.SUM,
        AggregateKind.AVG,
        AggregateKind.VAR_POP,
        AggregateKind.VAR_SAMP,
        AggregateKind.STDDEV_POP,
        AggregateKind.STDDEV_SAMP,
        AggregateKind.QUANTILE,
    }
    | (frozenset(PAIR_STATISTICS) - {AggregateKind.REGR_COUNT})  # REGR_COUNT is a count
)  # the aggregates veil.round = auto rounds: the noisy table carries their noise's standard deviation


def noise_column(index: int) -> str:
    return f"_dp_sd_{index}"


def _aggregate_row(
    aggregates: Sequence[Aggregate], noisy: Mapping[Quantity, Any], spread: Mapping[Quantity, float]
) -> tuple[object, ...]:
    """Each aggregate's value, then the noise standard deviation of each rounded one."""
    pairs = [_aggregate_value(a, noisy, spread) for a in aggregates]
    return tuple(value for value, _ in pairs) + tuple(
        sd for a, (_, sd) in zip(aggregates, pairs, strict=True) if a.kind in ROUNDED
    )


OTHER = "(other)"


def _other_row(
    plan: ReleasePlan,
    exact_totals: Sequence[Any],
    released: list[dict[Quantity, int | float]],
    spread: Mapping[Quantity, float],
    *,
    rng: RandomSource,
) -> tuple[object, ...]:
    """Noisy total minus the released groups' noisy values: all post-processing of DP outputs. It
    carries the groups that were suppressed, outside the public domain, or NULL. Its noise is the
    total's plus every released group's."""
    other: dict[Quantity, int | float] = {}
    other_spread: dict[Quantity, float] = {}
    for measurement, exact in zip(plan.total_measurements, exact_totals, strict=True):
        quantity = measurement.quantity
        total = _noisy(measurement, exact, rng=rng)
        other[quantity] = total - sum(noisy[quantity] for noisy in released)
        other_spread[quantity] = math.hypot(
            measurement.noise_sd(), math.sqrt(len(released)) * spread[quantity]
        )
    keys = tuple(OTHER if key.type is ColumnType.TEXT else None for key in plan.shape.group_keys)
    pairs = [
        _aggregate_value(a, other, other_spread)
        if all(q in other for q in quantities_for(a))
        else (None, None)
        for a in plan.shape.aggregates
    ]
    rounded = [sd for a, (_, sd) in zip(plan.shape.aggregates, pairs, strict=True) if a.kind in ROUNDED]
    return keys + tuple(value for value, _ in pairs) + tuple(rounded)


def _gate(drawn: Sequence[tuple[Measurement, int | float]]) -> int | float:
    """The noisy people count that decides whether a data-derived key is shown, *unrounded*: τ is
    calibrated on the tail of the noise itself (``key_threshold``), and a count rounded up past τ would
    pass more often than δ allows."""
    return next(value for m, value in drawn if m.quantity == THRESHOLD_QUANTITY)


def _rounded(measurement: Measurement, noisy: int | float) -> int | float:
    """An integer quantity measured on a grid is released rounded: post-processing."""
    return round(noisy) if measurement.integer_output and not measurement.exact_integer else noisy


def _noisy(
    measurement: Measurement,
    value: int | float | Decimal | None,
    *,
    rng: RandomSource,
    rounded: bool = True,
) -> int | float:
    """An empty cell's SUM is NULL in SQL; before noise it is the zero it stands for."""
    exact = 0 if value is None else value
    if measurement.gaussian:
        noisy = _gaussian(measurement, exact, rng=rng)
    elif measurement.exact_integer:
        noisy = discrete_laplace_mechanism(
            int(exact), sensitivity=measurement.sensitivity, epsilon=measurement.epsilon, rng=rng
        )
    else:
        noisy = laplace_mechanism(
            float(exact), sensitivity=measurement.sensitivity, epsilon=measurement.epsilon, rng=rng
        )
    return _rounded(measurement, noisy) if rounded else noisy


def _gaussian(measurement: Measurement, exact: int | float | Decimal, *, rng: RandomSource) -> int | float:
    parameters = {
        "sensitivity": measurement.sensitivity,
        "epsilon": measurement.epsilon,
        "delta": measurement.delta,
    }
    if measurement.exact_integer:
        return discrete_gaussian_mechanism(int(exact), rng=rng, **parameters)
    return gaussian_mechanism(float(exact), rng=rng, **parameters)


def _quantile(
    measurement: Measurement, histograms: Histograms, cell: Cell, *, rng: RandomSource
) -> int | float | datetime.date:
    """An empty cell still gets an answer (all grid points then score alike): emptiness stays hidden.
    An integer column's quantile is an integer, a date column's (chosen among day numbers) a date."""
    column = measurement.quantity.column
    assert column is not None and column.lower is not None and column.upper is not None
    counts = histograms.get(measurement.quantity.histogram, {}).get(cell) or [0] * QUANTILE_GRID
    value = dp_quantile_from_histogram(
        counts,
        q=float(measurement.quantity.q or 0),
        lower=column.lower,
        upper=column.upper,
        epsilon=measurement.epsilon,
        sensitivity=round(measurement.sensitivity),
        rng=rng,
    )
    typed = _SELECTED_AS.get(column.type)
    return typed(value, column.lower, column.upper) if typed is not None else value


def _integer_at_rank(point: float, lower: float, upper: float) -> int:
    """An integer column's quantile is an integer: the smallest one at or above the chosen grid point y.
    On integer data it has exactly y's rank, #{x < ⌈y⌉} = #{x < y} — the rank the exponential mechanism
    scored — so the rank guarantee holds for it unchanged (rounding to the nearest integer would not: y =
    9.3 has the rank of 10). It is computed from y's exact grid position, so a float just above an
    integer does not go one up, and kept within the integers of [lower, upper]. Post-processing."""
    width = Fraction(upper) - Fraction(lower)
    index = round((point - lower) * QUANTILE_GRID / (upper - lower))
    value = math.ceil(Fraction(lower) + index * width / QUANTILE_GRID)
    low, high = math.ceil(lower), math.floor(upper)
    return min(max(value, low), high) if low <= high else value


def _date_at_rank(point: float, lower: float, upper: float) -> datetime.date:
    """A date column's quantile is a date: its day numbers are integers, so the day taken as for an
    integer column (same rank), as a date."""
    return day_of(_integer_at_rank(point, lower, upper))


def _timestamp_at_rank(point: float, lower: float, upper: float) -> datetime.datetime:
    """A timestamp column's quantile is a timestamp in whole seconds: its epoch second taken as for an
    integer column (same rank, since the second at or above a grid point has that point's rank on data
    in whole seconds; a fraction of a second below it ranks with it), as a timestamp."""
    return second_of(_integer_at_rank(point, lower, upper))


# How a chosen grid point is given in its column's type, and that type (``_aggregate_type``). Real
# columns keep the grid point.
_SELECTED_AS: dict[ColumnType, Callable[[float, float, float], Any]] = {
    ColumnType.INTEGER: _integer_at_rank,
    ColumnType.DATE: _date_at_rank,
    ColumnType.TIMESTAMP: _timestamp_at_rank,
}


def _mode(measurement: Measurement, histograms: Histograms, cell: Cell, *, rng: RandomSource) -> Any:
    """The public value chosen for this cell; an empty cell gets a uniformly random one (all values then
    score alike), so emptiness stays hidden."""
    column = measurement.quantity.column
    assert column is not None and column.values is not None
    counts = histograms.get(measurement.quantity.histogram, {}).get(cell) or [0] * len(column.values)
    index = dp_mode_from_histogram(
        counts, epsilon=measurement.epsilon, sensitivity=round(measurement.sensitivity), rng=rng
    )
    return column.values[index]


def _aggregate_value(
    aggregate: Aggregate, noisy: Mapping[Quantity, Any], spread: Mapping[Quantity, float]
) -> tuple[Any, float | None]:
    """The aggregate from its noisy quantities, and the standard deviation of its noise — from public
    parameters and noisy values only (the first-order, delta-method spread of a ratio), never from
    exact ones. None where veil.round = auto has nothing to round by."""
    if aggregate.pair is not None:
        statistics = pair_statistics(aggregate)
        stats = {name: noisy[q] for name, q in statistics.items()}
        sds = {name: spread.get(q, 0.0) for name, q in statistics.items()}
        value = pair_value(aggregate.kind, stats, aggregate.pair)
        return value, pair_noise_sd(aggregate.kind, stats, sds, aggregate.pair)
    quantities = quantities_for(aggregate)
    values = [noisy[q] for q in quantities]
    if len(values) == 1:
        return values[0], spread.get(quantities[0]) if aggregate.kind in ROUNDED else None
    column = aggregate.column
    assert column is not None and column.lower is not None and column.upper is not None
    sds = [spread.get(q, 0.0) for q in quantities]
    if aggregate.kind is AggregateKind.AVG:
        (total, count), (total_sd, count_sd) = values, sds
        return _average(total, count, total_sd, count_sd, column.lower, column.upper)
    return _spread(aggregate.kind, values, sds, column.upper - column.lower)


AVERAGE_COUNT_FLOOR = 1  # a noisy count below this is taken as this many rows in AVG, VAR and STDDEV


def _average(
    total: float, count: float, total_sd: float, count_sd: float, lower: float, upper: float
) -> tuple[float, float]:
    """noisy SUM / noisy COUNT, never NULL: the noisy count is floored at one row (a group asked about
    is taken to have rows — whether it has none is exactly what noise hides, so NULL would be a guess),
    and the ratio clamped into the declared bounds, where a true average must lie. The spread of the
    ratio, by the delta method, is at most the width of the bounds."""
    rows = max(count, AVERAGE_COUNT_FLOOR)
    value = float(min(max(total / rows, lower), upper))
    sd = math.hypot(total_sd, value * count_sd) / rows
    return value, min(sd, upper - lower)


def _spread(
    kind: AggregateKind, values: Sequence[float], sds: Sequence[float], width: float
) -> tuple[float, float]:
    """VAR/STDDEV from noisy sums (spec §2.2): var_pop = Σx²/n − (Σx/n)², clamped into the range a
    variance of values in an interval of this width can take; never NULL: the noisy count is floored
    at one row (two for the sample forms, which divide by n − 1). The spread of the noise, by the
    delta method, is at most that range."""
    (total, squares, count), (total_sd, squares_sd, count_sd) = values, sds
    sample = kind in (AggregateKind.VAR_SAMP, AggregateKind.STDDEV_SAMP)
    n = max(count, AVERAGE_COUNT_FLOOR + 1 if sample else AVERAGE_COUNT_FLOOR)
    largest = width * width / 4
    mean = total / n
    population = min(max(squares / n - mean * mean, 0.0), largest)  # products, not **: no OverflowError
    by_count = (2 * mean * mean - squares / n) / n
    sd = math.hypot(squares_sd / n, 2 * mean * total_sd / n, by_count * count_sd)
    factor = n / (n - 1) if sample else 1.0
    variance, variance_sd = population * factor, min(sd * factor, largest * factor)
    if kind in (AggregateKind.STDDEV_POP, AggregateKind.STDDEV_SAMP):
        deviation = math.sqrt(variance)
        cap = math.sqrt(largest * factor)
        return deviation, min(variance_sd / (2 * deviation), cap) if deviation > 0 else cap
    return variance, variance_sd


def null_notes(plan: ReleasePlan, table: ReleasedTable) -> list[str]:
    """Why a CORR or REGR_* cell is NULL although SQL might have answered: its noisy count was below 1
    or a noisy variance not positive (spec §7 asks for a notice). Read from the noisy table only."""
    keys = len(plan.shape.group_keys)
    notes = []
    for index, aggregate in enumerate(plan.shape.aggregates):
        if aggregate.kind not in VARIANCE_BASED:
            continue
        empty = sum(1 for row in table.rows if row[keys + index] is None)
        if empty:
            notes.append(
                f"{aggregate.label} is NULL in {empty} of {len(table.rows)} row(s): a noisy count below 1 or "
                "a noisy variance that is not positive (too few rows or too little spread for the noise at "
                "this ε; a larger ε or a wider group helps)"
            )
    return notes


def noisy_columns(plan: ReleasePlan) -> tuple[ResultColumn, ...]:
    """The noisy table's columns, known from the plan alone (a Describe needs them before any noise):
    keys, aggregates, then the noise standard deviation of each rounded aggregate."""
    keys = [ResultColumn(key_column(i), key.type) for i, key in enumerate(plan.shape.group_keys)]
    integers = {m.quantity for m in plan.measurements if m.integer_output}
    aggregates = [
        ResultColumn(aggregate_column(i), _aggregate_type(a, integers))
        for i, a in enumerate(plan.shape.aggregates)
    ]
    noise = [
        ResultColumn(noise_column(i), ColumnType.REAL)
        for i, a in enumerate(plan.shape.aggregates)
        if a.kind in ROUNDED
    ]
    return (*keys, *aggregates, *noise)


def _aggregate_type(aggregate: Aggregate, integers: set[Quantity]) -> ColumnType:
    """A mode has its column's type, a quantile too where the grid point can be given in it (an integer
    column's quantiles are integers, a date column's dates); counts and integer sums are integers; the
    rest is real."""
    if aggregate.kind is AggregateKind.MODE:
        assert aggregate.column is not None
        return aggregate.column.type
    column = aggregate.column
    if aggregate.kind is AggregateKind.QUANTILE and column is not None:
        return column.type if column.type in _SELECTED_AS else ColumnType.REAL
    quantities = quantities_for(aggregate)
    return ColumnType.INTEGER if len(quantities) == 1 and quantities[0] in integers else ColumnType.REAL
