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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType
from typing import Any

from mechanisms.gaussian import discrete_gaussian_mechanism, gaussian_mechanism
from mechanisms.laplace import discrete_laplace_mechanism, laplace_mechanism
from mechanisms.mode import dp_mode_from_histogram
from mechanisms.quantile import dp_quantile_from_histogram
from mechanisms.random_source import RandomSource
from proxy.analysis.aggregates import Aggregate, AggregateKind, day_of
from proxy.analysis.quantities import THRESHOLD_QUANTITY, Quantity, pair_statistics, quantities_for
from proxy.analysis.shape import aggregate_column, key_column
from proxy.config import ColumnType
from proxy.release.pairs import VARIANCE_BASED, pair_value
from proxy.release.plan import Measurement, ReleasePlan
from proxy.rewrite.bound_contributions import QUANTILE_GRID

Cell = tuple[object, ...]


@dataclass(frozen=True)
class ResultColumn:
    name: str
    type: ColumnType
    type_oid: int | None = None  # a narrower PostgreSQL type than the column type's (int4 for `SELECT 1`)


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
    """The noisy table: every public cell, each aggregate computed from noisy quantities.
    ``exact_rows`` hold the keys then the scalar quantities; quantiles and modes come from ``histograms``;
    ``exact_totals`` (without GROUP BY) feed the "(other)" row when the plan asks for one."""
    keys = len(plan.shape.group_keys)
    exact = {tuple(row[:keys]): row[keys:] for row in exact_rows}
    cells = list(exact) if plan.threshold is not None else public_cells(plan)
    scalars = plan.scalar_measurements
    rows = []
    released: list[dict[Quantity, int | float]] = []
    for cell in cells:
        values = exact.get(cell, (None,) * len(scalars))
        noisy = {m.quantity: _noisy(m, v, rng=rng) for m, v in zip(scalars, values, strict=True)}
        noisy |= {m.quantity: _quantile(m, histograms, cell, rng=rng) for m in plan.quantile_measurements}
        noisy |= {m.quantity: _mode(m, histograms, cell, rng=rng) for m in plan.mode_measurements}
        if plan.threshold is not None and noisy[THRESHOLD_QUANTITY] <= plan.threshold:
            continue  # too few people share this data-derived key to show that it exists
        rows.append(cell + tuple(_aggregate_value(a, noisy) for a in plan.shape.aggregates))
        released.append(noisy)
    if plan.total_measurements:
        rows.append(_other_row(plan, exact_totals, released, rng=rng))
    return ReleasedTable(noisy_columns(plan), rows)


OTHER = "(other)"


def _other_row(
    plan: ReleasePlan,
    exact_totals: Sequence[Any],
    released: list[dict[Quantity, int | float]],
    *,
    rng: RandomSource,
) -> tuple[object, ...]:
    """Noisy total minus the released groups' noisy values: all post-processing of DP outputs. It
    carries the groups that were suppressed, outside the public domain, or NULL."""
    other: dict[Quantity, int | float] = {}
    for measurement, exact in zip(plan.total_measurements, exact_totals, strict=True):
        total = _noisy(measurement, exact, rng=rng)
        other[measurement.quantity] = total - sum(noisy[measurement.quantity] for noisy in released)
    keys = tuple(OTHER if key.type is ColumnType.TEXT else None for key in plan.shape.group_keys)
    values = tuple(
        _aggregate_value(a, other) if all(q in other for q in quantities_for(a)) else None
        for a in plan.shape.aggregates
    )
    return keys + values


def _noisy(
    measurement: Measurement, value: int | float | Decimal | None, *, rng: RandomSource
) -> int | float:
    """An empty cell's SUM is NULL in SQL; before noise it is the zero it stands for."""
    exact = 0 if value is None else value
    if measurement.gaussian:
        return _gaussian(measurement, exact, rng=rng)
    if measurement.exact_integer:
        return discrete_laplace_mechanism(
            int(exact), sensitivity=measurement.sensitivity, epsilon=measurement.epsilon, rng=rng
        )
    noisy = laplace_mechanism(
        float(exact), sensitivity=measurement.sensitivity, epsilon=measurement.epsilon, rng=rng
    )
    return round(noisy) if measurement.integer_output else noisy  # rounding is post-processing


def _gaussian(measurement: Measurement, exact: int | float | Decimal, *, rng: RandomSource) -> int | float:
    parameters = {
        "sensitivity": measurement.sensitivity,
        "epsilon": measurement.epsilon,
        "delta": measurement.delta,
    }
    if measurement.exact_integer:
        return discrete_gaussian_mechanism(int(exact), rng=rng, **parameters)
    noisy = gaussian_mechanism(float(exact), rng=rng, **parameters)
    return round(noisy) if measurement.integer_output else noisy  # rounding is post-processing


def _quantile(
    measurement: Measurement, histograms: Histograms, cell: Cell, *, rng: RandomSource
) -> float | datetime.date:
    """An empty cell still gets an answer (all grid points then score alike): emptiness stays hidden.
    A date column's quantile is chosen among day numbers and released as the nearest date."""
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
    return day_of(value) if column.type is ColumnType.DATE else value


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


def _aggregate_value(aggregate: Aggregate, noisy: dict[Quantity, Any]) -> Any:
    if aggregate.pair is not None:
        stats = {name: noisy[q] for name, q in pair_statistics(aggregate).items()}
        return pair_value(aggregate.kind, stats, aggregate.pair)
    values = [noisy[q] for q in quantities_for(aggregate)]
    if len(values) == 1:
        return values[0]
    column = aggregate.column
    assert column is not None and column.lower is not None and column.upper is not None
    if aggregate.kind is AggregateKind.AVG:
        total, count = values
        return _average(total, count, column.lower, column.upper)
    total, squares, count = values
    return _spread(aggregate.kind, total, squares, count, column.upper - column.lower)


def _average(total: float, count: float, lower: float, upper: float) -> float | None:
    """NULL when the noisy count says "no rows" (as AVG of no rows is NULL in SQL); otherwise
    clamped into the declared bounds, where the true average must lie."""
    if count < 1:
        return None
    return min(max(total / count, lower), upper)


def _spread(kind: AggregateKind, total: float, squares: float, count: float, width: float) -> float | None:
    """VAR/STDDEV from noisy sums (spec §2.2): var_pop = Σx²/n − (Σx/n)², clamped into the range a
    variance of values in an interval of this width can take; NULL where SQL would return NULL."""
    sample = kind in (AggregateKind.VAR_SAMP, AggregateKind.STDDEV_SAMP)
    if count < (2 if sample else 1):
        return None
    population = min(max(squares / count - (total / count) ** 2, 0.0), width * width / 4)
    variance = population * count / (count - 1) if sample else population
    return math.sqrt(variance) if kind in (AggregateKind.STDDEV_POP, AggregateKind.STDDEV_SAMP) else variance


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
    """The noisy table's columns, known from the plan alone (a Describe needs them before any noise)."""
    keys = [ResultColumn(key_column(i), key.type) for i, key in enumerate(plan.shape.group_keys)]
    integers = {m.quantity for m in plan.measurements if m.integer_output}
    aggregates = [
        ResultColumn(aggregate_column(i), _aggregate_type(a, integers))
        for i, a in enumerate(plan.shape.aggregates)
    ]
    return (*keys, *aggregates)


def _aggregate_type(aggregate: Aggregate, integers: set[Quantity]) -> ColumnType:
    """A mode has its column's type, a quantile of a date column too; counts and integer sums are
    integers; the rest is real."""
    if aggregate.kind is AggregateKind.MODE:
        assert aggregate.column is not None
        return aggregate.column.type
    column = aggregate.column
    if aggregate.kind is AggregateKind.QUANTILE and column is not None and column.type is ColumnType.DATE:
        return ColumnType.DATE
    quantities = quantities_for(aggregate)
    return ColumnType.INTEGER if len(quantities) == 1 and quantities[0] in integers else ColumnType.REAL
