"""Price a query before it runs: which mechanism answers each quantity, at what sensitivity and ε.

The plan is computed from the policy and the query alone — never from data — so ``veil explain``
can show it and the ledger can reserve its cost before the engine is touched.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist

from budget.amounts import as_decimal
from budget.loss import PrivacyLoss
from mechanisms.gaussian import analytic_gaussian_sigma, discrete_gaussian_sigma
from mechanisms.laplace import laplace_error_bound
from mechanisms.quantile import quantile_rank_error_bound
from proxy.analysis.quantities import (
    THRESHOLD_QUANTITY,
    Quantity,
    QuantityKind,
    exact_quantities,
    quantities_for,
)
from proxy.analysis.shape import QueryShape
from proxy.config import ColumnType
from proxy.rewrite.bound_contributions import QUANTILE_GRID, WEIGHT_UNIT


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
    delta: float = 0.0  # > 0: the Gaussian mechanism at (epsilon, delta) instead of Laplace
    total: bool = False  # measured over all rows, without GROUP BY: for the "(other)" row

    @property
    def gaussian(self) -> bool:
        return self.delta > 0 and self.quantity.kind is not QuantityKind.QUANTILE

    def gaussian_sigma(self) -> float:
        calibrate = discrete_gaussian_sigma if self.exact_integer else analytic_gaussian_sigma
        return calibrate(sensitivity=self.sensitivity, epsilon=self.epsilon, delta=self.delta)

    @property
    def mechanism(self) -> str:
        if self.quantity.kind is QuantityKind.QUANTILE:
            return "exponential (permute-and-flip)"
        family = "Gaussian" if self.gaussian else "Laplace"
        return f"discrete {family}" if self.exact_integer else f"{family} on a 2^k grid"

    def error_bound(self, *, cells: int, confidence: float = 0.95) -> float:
        """No cell's noise exceeds this with probability >= confidence (union bound over cells); one
        extra grid step makes the continuous bound hold for discrete noise (docs/privacy.md).
        For a quantile: the extra error in *rank* (people), per cell."""
        if self.gaussian:  # union bound over cells on a two-sided normal tail
            z = NormalDist().inv_cdf(1 - (1 - confidence) / (2 * cells))
            return z * self.gaussian_sigma() + (1.0 if self.exact_integer else 0.0)
        if self.quantity.kind is QuantityKind.QUANTILE:
            return quantile_rank_error_bound(
                epsilon=self.epsilon,
                max_contributions=round(self.sensitivity / WEIGHT_UNIT) or 1,
                grid_size=QUANTILE_GRID,
                confidence=confidence,
            )
        bound = laplace_error_bound(
            sensitivity=self.sensitivity, epsilon=self.epsilon, confidence=confidence, outputs=cells
        )
        return bound + (1.0 if self.exact_integer else 0.0)


@dataclass(frozen=True)
class ReleasePlan:
    shape: QueryShape
    measurements: tuple[Measurement, ...]
    epsilon: float  # what the ledger is charged: >= the exact sum of the shares
    delta: float = 0.0  # > 0 only when keys come from the data
    threshold: float | None = None  # τ: a data-derived key is released iff its noisy people count > τ
    bound_epsilon: float = 0.0  # spent choosing max_contributions with a DP quantile ("auto")

    @property
    def loss(self) -> PrivacyLoss:
        return PrivacyLoss(self.epsilon, self.delta)

    @property
    def scalar_measurements(self) -> tuple[Measurement, ...]:
        """Measured by the main engine query, in its column order."""
        return tuple(
            m for m in self.measurements if m.quantity.kind is not QuantityKind.QUANTILE and not m.total
        )

    @property
    def total_measurements(self) -> tuple[Measurement, ...]:
        """Measured by one engine query without GROUP BY, for the "(other)" row."""
        return tuple(m for m in self.measurements if m.total)

    @property
    def quantile_measurements(self) -> tuple[Measurement, ...]:
        """Measured from per-column histograms (one engine query per column)."""
        return tuple(m for m in self.measurements if m.quantity.kind is QuantityKind.QUANTILE)

    def describe(self) -> str:
        shares = ", ".join(f"{m.quantity.label} ε={m.epsilon:.4g}" for m in self.measurements)
        if self.bound_epsilon:
            shares = f"contribution bound L={self.shape.table.max_contributions} ε={self.bound_epsilon:.4g}, {shares}"
        charge = f"ε={self.epsilon:.4g}" + (f", δ={self.delta:.3g}" if self.delta else "")
        keys = f"; keys released above τ={self.threshold:.4g} people" if self.threshold is not None else ""
        return f"{charge} ({shares}{keys})"


def sensitivity(
    quantity: Quantity, *, max_contributions: int, cells: int | None, weighted: bool = True
) -> float:
    """ℓ1 sensitivity of a quantity's vector over all group cells, under add/remove-one-person.

    Each person's contribution vector is scaled to L rows in total across all groups
    (bound_contributions), so the ℓ1 change of the whole vector is what one cell would allow
    (spec dp-mechanisms.md §2.2): L for counts, L·max(|lower|, |upper|) for sums,
    L·max(lower², upper²) for sums of squares. A person counts once per group in
    COUNT(DISTINCT unit), scaled to at most L groups: min(L, cells); 1 without GROUP BY.
    """
    bound = float(max_contributions)
    if quantity.kind is QuantityKind.QUANTILE:  # histogram weights: K per row, at most L·K per person
        return bound * WEIGHT_UNIT if weighted else bound
    if quantity.kind is QuantityKind.UNITS:
        return 1.0 if cells == 1 else bound if cells is None else min(bound, float(cells))
    if quantity.kind in (QuantityKind.ROWS, QuantityKind.NON_NULL):
        return bound
    column = quantity.column
    assert column is not None and column.lower is not None and column.upper is not None
    largest = max(abs(column.lower), abs(column.upper))
    return bound * (largest * largest if quantity.kind is QuantityKind.SUM_SQUARES else largest)


def _integer_valued(quantity: Quantity) -> bool:
    """Counts, and sums (of squares) of integer columns with integral bounds, are integers per row."""
    if quantity.kind is QuantityKind.QUANTILE:
        return False
    column = quantity.column
    if quantity.kind not in (QuantityKind.SUM, QuantityKind.SUM_SQUARES) or column is None:
        return True
    assert column.lower is not None and column.upper is not None
    return (
        column.type is ColumnType.INTEGER
        and float(column.lower).is_integer()
        and float(column.upper).is_integer()
    )


def _exactly_integer(quantity: Quantity, shape: QueryShape) -> bool:
    """Per-person weights make totals fractional, except where no person is ever scaled."""
    if shape.table.privacy_unit is None:
        return _integer_valued(quantity)
    return quantity.kind is QuantityKind.UNITS and not shape.group_keys


def split_epsilon(epsilon: float, parts: int, *, already_spent: float = 0.0) -> float:
    """The largest float share with ``already_spent + parts × share <= ε`` exactly, where ε is the
    decimal the ledger charges (``as_decimal``: 0.1 means 0.1, not the binary float just above it) —
    so the charge is an upper bound on the privacy loss the noise actually gives."""
    available = Fraction(as_decimal(epsilon)) - Fraction(already_spent)
    share = float(available) / parts
    while share > 0 and Fraction(share) * parts > available:
        share = math.nextafter(share, 0.0)
    return share


BOUND_SELECTION_SHARE = 10  # a query that chooses its contribution bound spends ε/10 on it


def bound_selection_epsilon(epsilon: float) -> float:
    return split_epsilon(epsilon, BOUND_SELECTION_SHARE)


def other_row_quantities(shape: QueryShape) -> tuple[Quantity, ...]:
    """What the "(other)" row needs: the additive quantities of the aggregates, as totals over all rows.
    Counts of distinct people are not additive over groups, and quantiles are not sums: those stay NULL."""
    additive = (QuantityKind.ROWS, QuantityKind.NON_NULL, QuantityKind.SUM, QuantityKind.SUM_SQUARES)
    ordered: dict[Quantity, None] = {}
    for aggregate in shape.aggregates:
        for quantity in quantities_for(aggregate):
            if quantity.kind in additive:
                ordered.setdefault(quantity, None)
    return tuple(ordered)


def price_query(
    shape: QueryShape,
    *,
    epsilon: float,
    delta: float = 0.0,
    bound_epsilon: float = 0.0,
    gaussian: bool = False,
    other_row: bool = False,
) -> ReleasePlan:
    """``bound_epsilon``: the part of ε already spent choosing the contribution bound with DP.
    ``gaussian``: noisy quantities use the Gaussian mechanism, sharing ``delta`` equally.
    ``other_row``: also measure each additive quantity over all rows, so that one "(other)" row can
    carry what the released groups do not (their difference: post-processing)."""
    grouped = exact_quantities(shape)
    totals = other_row_quantities(shape) if other_row and shape.group_keys else ()
    entries = [(q, False) for q in grouped] + [(q, True) for q in totals]
    share = split_epsilon(epsilon, len(entries), already_spent=bound_epsilon)
    noisy = [q for q, _ in entries if q.kind is not QuantityKind.QUANTILE]
    delta_share = split_epsilon(delta, len(noisy)) if gaussian and noisy else 0.0
    measurements = tuple(
        Measurement(
            quantity=quantity,
            sensitivity=sensitivity(
                quantity,
                max_contributions=shape.table.max_contributions,
                cells=1 if total else shape.cells,
                weighted=shape.table.privacy_unit is not None,
            ),
            epsilon=share,
            exact_integer=_exactly_integer(quantity, shape),
            integer_output=_integer_valued(quantity),
            delta=delta_share if quantity.kind is not QuantityKind.QUANTILE else 0.0,
            total=total,
        )
        for quantity, total in entries
    )
    if not shape.thresholded:
        return ReleasePlan(
            shape, measurements, epsilon, delta if gaussian else 0.0, bound_epsilon=bound_epsilon
        )
    gate = next(m for m in measurements if m.quantity == THRESHOLD_QUANTITY and not m.total)
    groups_per_person = 1 if shape.table.privacy_unit is None else shape.table.max_contributions
    threshold = key_threshold(gate, groups_per_person, delta)
    return ReleasePlan(shape, measurements, epsilon, delta, threshold, bound_epsilon=bound_epsilon)


def key_threshold(gate: Measurement, groups_per_person: int, delta: float) -> float:
    """τ for releasing data-derived keys (Korolova et al. 2009; Wilson et al. 2020, "Differentially
    private SQL with bounded user contribution").

    A key held only by the added person has an exact people count of at most 1. With Laplace noise
    of scale b, ``P(1 + Lap(b) > τ) = ½·exp(−(τ − 1)/b)``. That person adds at most
    ``groups_per_person`` such keys, so by the union bound all stay hidden except with probability
    ``groups_per_person · ½·exp(−(τ − 1)/b) = δ`` when ``τ = 1 + b·ln(groups_per_person / (2δ))``.
    """
    scale = gate.sensitivity / gate.epsilon
    return 1.0 + scale * math.log(groups_per_person / (2.0 * delta))
