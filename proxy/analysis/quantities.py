"""The exact quantities a QueryShape needs from the engine, before noise.

AVG is not a quantity: it is post-processed from a noisy SUM and a noisy COUNT of the same column
(spec §2.2, ``expand_averages``). Identical quantities are shared (``SUM(x), AVG(x)`` measures
``SUM(x)`` once), so no budget is spent twice on the same number.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from proxy.analysis.shape import Aggregate, AggregateKind, QueryShape
from proxy.config import ColumnPolicy


class QuantityKind(StrEnum):
    ROWS = "rows"  # COUNT(*)
    NON_NULL = "non_null"  # COUNT(col)
    SUM = "sum"  # SUM(clamped col)


@dataclass(frozen=True)
class Quantity:
    kind: QuantityKind
    column: ColumnPolicy | None

    @property
    def label(self) -> str:
        if self.column is None:
            return "count(*)"
        return f"{'count' if self.kind is QuantityKind.NON_NULL else 'sum'}({self.column.name})"


def quantities_for(aggregate: Aggregate) -> tuple[Quantity, ...]:
    match aggregate.kind:
        case AggregateKind.COUNT_ROWS:
            return (Quantity(QuantityKind.ROWS, None),)
        case AggregateKind.COUNT:
            return (Quantity(QuantityKind.NON_NULL, aggregate.column),)
        case AggregateKind.SUM:
            return (Quantity(QuantityKind.SUM, aggregate.column),)
        case AggregateKind.AVG:
            return (
                Quantity(QuantityKind.SUM, aggregate.column),
                Quantity(QuantityKind.NON_NULL, aggregate.column),
            )


def exact_quantities(shape: QueryShape) -> tuple[Quantity, ...]:
    """Distinct quantities in first-use order; their index gives the SQL alias ``_dp_q<i>``."""
    ordered: dict[Quantity, None] = {}
    for aggregate in shape.aggregates:
        for quantity in quantities_for(aggregate):
            ordered.setdefault(quantity, None)
    return tuple(ordered)
