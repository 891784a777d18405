"""The exact quantities a QueryShape needs from the engine, before noise.

AVG, VAR and STDDEV are not quantities: they are post-processed from noisy COUNT, SUM and SUM of
squares of the same column (spec §2.2). Identical quantities are shared (``SUM(x), AVG(x)``
measures ``SUM(x)`` once), so no budget is spent twice on the same number.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

from proxy.analysis.aggregates import (
    PAIR_STATISTICS,
    Aggregate,
    AggregateInput,
    AggregateKind,
    input_order,
    people_label,
    selection_label,
)
from proxy.analysis.shape import QueryShape


class QuantityKind(StrEnum):
    ROWS = "rows"  # COUNT(*)
    NON_NULL = "non_null"  # COUNT(col)
    UNITS = "units"  # COUNT(DISTINCT privacy unit), with column: the people with a row where it is not NULL
    SUM = "sum"  # SUM(clamped col)
    SUM_SQUARES = "sum_squares"  # SUM(clamped col²)
    QUANTILE = "quantile"  # a grid point chosen by the exponential mechanism from a histogram
    MODE = "mode"  # a public value chosen by the (monotone) exponential mechanism from a histogram

    @property
    def selected(self) -> bool:
        """Chosen among public candidates from an engine histogram, not measured with noise."""
        return self in (QuantityKind.QUANTILE, QuantityKind.MODE)


@dataclass(frozen=True)
class Quantity:
    kind: QuantityKind
    column: AggregateInput | None
    q: Fraction | None = None
    # COUNT(DISTINCT unit): the unit as the analyst wrote it; naming only (the threshold's people count
    # is the same quantity)
    unit: str = dataclasses.field(default="", compare=False, repr=False)

    @property
    def label(self) -> str:
        """How notices and ``veil explain`` name the quantity: as SQL the analyst could have written,
        with columns and expressions as written (``sum(v.cost)``, ``sum(price * qty)``), never the
        internal names the engine query uses (``v__cost``, ``e_1a2b…``)."""
        if self.kind.selected:
            return selection_label(self.kind.value, self.column, self.q)
        if self.kind is QuantityKind.ROWS:
            return "count(*)"
        if self.kind is QuantityKind.UNITS:
            return people_label(self.unit, self.column) if self.unit else "people per key"
        assert self.column is not None
        text = self.column.text
        if self.kind is QuantityKind.SUM_SQUARES:
            base = text if re.fullmatch(r"[\w.]+", text) else f"({text})"
            return self.column.called("sum(", argument=f"{base} ^ 2")
        return self.column.called(f"{'count' if self.kind is QuantityKind.NON_NULL else 'sum'}(")

    @property
    def histogram(self) -> str:
        """The engine histogram a selection is made from: one per column for its quantiles (every q
        reads the same grid histogram), one per column for its mode."""
        assert self.kind.selected and self.column is not None
        return self.column.name if self.kind is QuantityKind.QUANTILE else f"mode({self.column.name})"


THRESHOLD_QUANTITY = Quantity(QuantityKind.UNITS, None)


def pair_statistics(aggregate: Aggregate) -> dict[str, Quantity]:
    """The noisy sums a (y, x) aggregate is computed from, by name (``PAIR_STATISTICS``): n (pairs),
    sy, sx (sums), syy, sxx (sums of squares), sxy (sum of products) — all over the masked inputs."""
    pair = aggregate.pair
    assert pair is not None
    axes = sorted((("y", pair.y), ("x", pair.x)), key=lambda axis: input_order(axis[1]))
    every = {"n": Quantity(QuantityKind.NON_NULL, pair.count_input)}  # in one order for (y, x) and (x, y)
    every |= {f"s{name}": Quantity(QuantityKind.SUM, source) for name, source in axes}
    every |= {f"s{name}{name}": Quantity(QuantityKind.SUM_SQUARES, source) for name, source in axes}
    every["sxy"] = Quantity(QuantityKind.SUM, pair.product)
    needed = PAIR_STATISTICS[aggregate.kind]
    return {name: quantity for name, quantity in every.items() if name in needed}


def quantities_for(aggregate: Aggregate) -> tuple[Quantity, ...]:
    """In the order the release computes from: SUM first, then squares, then the count (pairs: the
    count first, then sums, squares and the sum of products)."""
    if aggregate.pair is not None:
        return tuple(pair_statistics(aggregate).values())
    column = aggregate.column
    match aggregate.kind:
        case AggregateKind.COUNT_ROWS:
            return (Quantity(QuantityKind.ROWS, None),)
        case AggregateKind.COUNT_UNITS:
            return (Quantity(QuantityKind.UNITS, column, unit=aggregate.unit),)
        case AggregateKind.COUNT:
            return (Quantity(QuantityKind.NON_NULL, column),)
        case AggregateKind.SUM:
            return (Quantity(QuantityKind.SUM, column),)
        case AggregateKind.AVG:
            return (Quantity(QuantityKind.SUM, column), Quantity(QuantityKind.NON_NULL, column))
        case AggregateKind.QUANTILE:
            return (Quantity(QuantityKind.QUANTILE, column, aggregate.q),)
        case AggregateKind.MODE:
            return (Quantity(QuantityKind.MODE, column),)
    return (
        Quantity(QuantityKind.SUM, column),
        Quantity(QuantityKind.SUM_SQUARES, column),
        Quantity(QuantityKind.NON_NULL, column),
    )


def exact_quantities(shape: QueryShape) -> tuple[Quantity, ...]:
    """Distinct quantities in first-use order; their index gives the SQL alias ``_dp_q<i>``."""
    ordered: dict[Quantity, None] = {}
    for aggregate in shape.aggregates:
        for quantity in quantities_for(aggregate):
            ordered.setdefault(quantity, None)
    if shape.thresholded:  # the noisy number of people per key decides which keys are released
        ordered.setdefault(THRESHOLD_QUANTITY, None)
    return tuple(ordered)
