"""Apply a release plan to the engine's exact rows: noise first, then post-processing.

Group cells come from the policy's public domains, never from the rows: a cell absent from the
engine's answer is released as a noisy zero, so the set of output keys reveals nothing.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from mechanisms.laplace import discrete_laplace_mechanism, laplace_mechanism
from mechanisms.random_source import RandomSource
from proxy.analysis.quantities import Quantity, quantities_for
from proxy.analysis.shape import AggregateKind, OutputColumn
from proxy.config import ColumnType
from proxy.release.plan import Measurement, ReleasePlan

Cell = tuple[object, ...]


@dataclass(frozen=True)
class ResultColumn:
    name: str
    type: ColumnType


@dataclass(frozen=True)
class ReleasedTable:
    columns: tuple[ResultColumn, ...]
    rows: list[tuple[object, ...]]


def public_cells(plan: ReleasePlan) -> list[Cell]:
    domains = [column.values or () for column in plan.shape.group_keys]
    return list(itertools.product(*domains))


def release(
    plan: ReleasePlan, exact_rows: Sequence[tuple[object, ...]], *, rng: RandomSource
) -> ReleasedTable:
    keys = len(plan.shape.group_keys)
    exact = {tuple(row[:keys]): row[keys:] for row in exact_rows}
    rows = []
    for cell in public_cells(plan):
        values = exact.get(cell, (None,) * len(plan.measurements))
        noisy = {
            m.quantity: _noisy(m, value, rng=rng) for m, value in zip(plan.measurements, values, strict=True)
        }
        rows.append(tuple(_output_value(output, plan, cell, noisy) for output in plan.shape.outputs))
    return ReleasedTable(tuple(_result_column(output, plan) for output in plan.shape.outputs), rows)


def _noisy(
    measurement: Measurement, value: int | float | Decimal | None, *, rng: RandomSource
) -> int | float:
    """An empty cell's SUM is NULL in SQL; before noise it is the zero it stands for."""
    exact = 0 if value is None else value
    if measurement.exact_integer:
        return discrete_laplace_mechanism(
            int(exact), sensitivity=measurement.sensitivity, epsilon=measurement.epsilon, rng=rng
        )
    noisy = laplace_mechanism(
        float(exact), sensitivity=measurement.sensitivity, epsilon=measurement.epsilon, rng=rng
    )
    return round(noisy) if measurement.integer_output else noisy  # rounding is post-processing


def _output_value(
    output: OutputColumn, plan: ReleasePlan, cell: Cell, noisy: dict[Quantity, int | float]
) -> object:
    if output.group_index is not None:
        return cell[output.group_index]
    assert output.aggregate_index is not None
    aggregate = plan.shape.aggregates[output.aggregate_index]
    values = [noisy[q] for q in quantities_for(aggregate)]
    if aggregate.kind is not AggregateKind.AVG:
        return values[0]
    return _average(values[0], values[1], aggregate.column.lower, aggregate.column.upper)  # type: ignore[union-attr]


def _average(total: float, count: float, lower: float | None, upper: float | None) -> float | None:
    """Post-processing of a noisy sum and count: NULL when the noisy count says "no rows", as
    AVG of no rows is NULL in SQL; otherwise clamped into the declared bounds."""
    if count < 1:
        return None
    assert lower is not None and upper is not None
    return min(max(total / count, lower), upper) if math.isfinite(total / count) else None


def _result_column(output: OutputColumn, plan: ReleasePlan) -> ResultColumn:
    if output.group_index is not None:
        return ResultColumn(output.name, plan.shape.group_keys[output.group_index].type)
    assert output.aggregate_index is not None
    aggregate = plan.shape.aggregates[output.aggregate_index]
    if aggregate.kind is AggregateKind.AVG:
        return ResultColumn(output.name, ColumnType.REAL)
    measurement = next(m for m in plan.measurements if m.quantity == quantities_for(aggregate)[0])
    return ResultColumn(output.name, ColumnType.INTEGER if measurement.integer_output else ColumnType.REAL)
