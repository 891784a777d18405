"""Price a query before it runs: which mechanism answers each quantity, at what sensitivity and ε.

The plan is computed from the policy and the query alone — never from data — so ``veil explain``
can show it and the ledger can reserve its cost before the engine is touched.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from budget.ledger import as_decimal
from budget.loss import PrivacyLoss
from proxy.analysis.quantities import Quantity, QuantityKind, exact_quantities
from proxy.analysis.shape import QueryShape
from proxy.config import ColumnType


@dataclass(frozen=True)
class Measurement:
    """One noisy quantity (a vector over all group cells): Laplace noise at scale sensitivity/ε."""

    quantity: Quantity
    sensitivity: float
    epsilon: float
    exact_integer: bool  # the engine's answer is an integer → discrete Laplace; else Laplace on a grid
    integer_output: (
        bool  # released as an integer (a count, or a sum of an integer column), rounded after noise
    )


@dataclass(frozen=True)
class ReleasePlan:
    shape: QueryShape
    measurements: tuple[Measurement, ...]
    epsilon: float  # what the ledger is charged: >= the exact sum of the shares

    @property
    def loss(self) -> PrivacyLoss:
        return PrivacyLoss(self.epsilon, 0.0)

    def describe(self) -> str:
        shares = ", ".join(f"{m.quantity.label} ε={m.epsilon:.4g}" for m in self.measurements)
        return f"ε={self.epsilon:.4g} ({shares})"


def sensitivity(quantity: Quantity, *, max_contributions: int) -> float:
    """ℓ1 sensitivity under add/remove-one-person, with at most L rows per person (spec §2.2).

    With every person's rows capped at L *across all groups*, the ℓ1 norm of the change to the
    whole vector of group cells is bounded by the same number as for a single cell.
    """
    if quantity.kind is not QuantityKind.SUM:
        return float(max_contributions)
    column = quantity.column
    assert column is not None and column.lower is not None and column.upper is not None
    return max_contributions * max(abs(column.lower), abs(column.upper))


def _integer_valued(quantity: Quantity) -> bool:
    """Counts, and sums of integer columns with integral bounds, are integers per row."""
    column = quantity.column
    if quantity.kind is not QuantityKind.SUM or column is None:
        return True
    assert column.lower is not None and column.upper is not None
    return (
        column.type is ColumnType.INTEGER
        and float(column.lower).is_integer()
        and float(column.upper).is_integer()
    )


def split_epsilon(epsilon: float, parts: int) -> float:
    """The largest float share with ``parts × share <= ε`` exactly, where ε is the decimal the ledger
    charges (``as_decimal``: 0.1 means 0.1, not the binary float just above it) — so the charge is
    an upper bound on the privacy loss the noise actually gives."""
    charged = Fraction(as_decimal(epsilon))
    share = epsilon / parts
    while Fraction(share) * parts > charged:
        share = math.nextafter(share, 0.0)
    return share


def price_query(shape: QueryShape, *, epsilon: float) -> ReleasePlan:
    quantities = exact_quantities(shape)
    share = split_epsilon(epsilon, len(quantities))
    measurements = tuple(
        Measurement(
            quantity=quantity,
            sensitivity=sensitivity(quantity, max_contributions=shape.table.max_contributions),
            epsilon=share,
            # per-person weights (bound_contributions) make totals fractional unless rows are people
            exact_integer=_integer_valued(quantity) and shape.table.privacy_unit is None,
            integer_output=_integer_valued(quantity),
        )
        for quantity in quantities
    )
    return ReleasePlan(shape, measurements, epsilon)
