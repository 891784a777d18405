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
from mechanisms.contribution_bound import bound_target, selection_share
from mechanisms.gaussian import (
    analytic_gaussian_sigma,
    discrete_gaussian_sigma,
    discrete_gaussian_upper_tail,
    gaussian_upper_tail,
)
from mechanisms.laplace import discrete_laplace_upper_tail, laplace_error_bound, laplace_upper_tail
from mechanisms.mode import mode_count_gap_bound
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
    weight: int = 1  # quantiles and modes: histogram units per row (K with per-person integer weights)

    @property
    def gaussian(self) -> bool:
        return self.delta > 0 and not self.quantity.kind.selected

    def gaussian_sigma(self) -> float:
        calibrate = discrete_gaussian_sigma if self.exact_integer else analytic_gaussian_sigma
        return calibrate(sensitivity=self.sensitivity, epsilon=self.epsilon, delta=self.delta)

    def noise_sd(self) -> float:
        """The standard deviation of the noise a noisy quantity gets, from public parameters only: σ for
        Gaussian noise, √2·Δ/ε for Laplace noise (the discrete and grid variants differ from it by
        a fraction of a unit, which does not matter for what it is used for: how many digits of an
        answer mean something, ``veil.round = auto``)."""
        if self.gaussian:
            return self.gaussian_sigma()
        return math.sqrt(2.0) * self.sensitivity / self.epsilon

    @property
    def mechanism(self) -> str:
        if self.quantity.kind is QuantityKind.QUANTILE:
            return "exponential (permute-and-flip)"
        if self.quantity.kind is QuantityKind.MODE:
            return "exponential (permute-and-flip, monotone)"
        family = "Gaussian" if self.gaussian else "Laplace"
        return f"discrete {family}" if self.exact_integer else f"{family} on a 2^k grid"

    def error_bound(self, *, cells: int, confidence: float = 0.95) -> float:
        """No cell's noise exceeds this with probability >= confidence (union bound over cells); one
        extra grid step makes the continuous bound hold for discrete noise (docs/privacy.md).
        For a quantile: the extra error in *rank* (people), per cell. For a mode: how many rows the
        released value's count may fall short of the true mode's, in no cell more (union bound)."""
        if self.gaussian:  # union bound over cells on a two-sided normal tail
            z = NormalDist().inv_cdf(1 - (1 - confidence) / (2 * cells))
            return z * self.gaussian_sigma() + (1.0 if self.exact_integer else 0.0)
        rows = round(self.sensitivity / self.weight)  # L: the selection's sensitivity in rows
        if self.quantity.kind is QuantityKind.QUANTILE:
            return quantile_rank_error_bound(
                epsilon=self.epsilon, max_contributions=rows, grid_size=QUANTILE_GRID, confidence=confidence
            )
        if self.quantity.kind is QuantityKind.MODE:
            assert self.quantity.column is not None and self.quantity.column.values is not None
            return mode_count_gap_bound(
                epsilon=self.epsilon,
                max_contributions=rows,
                candidates=len(self.quantity.column.values),
                confidence=confidence,
                outputs=cells,
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
    delta: float = 0.0  # > 0 when keys come from the data or noise is Gaussian: what the ledger charges
    threshold: float | None = None  # τ: a data-derived key is released iff its noisy people count > τ
    bound_epsilon: float = 0.0  # spent choosing max_contributions with a DP quantile ("auto")
    threshold_delta: float = 0.0  # δ_τ: the share of delta that a single person's key may show
    remembered_bound: bool = False  # max_contributions is a DP choice this analyst paid for earlier

    @property
    def loss(self) -> PrivacyLoss:
        return PrivacyLoss(self.epsilon, self.delta)

    @property
    def scalar_measurements(self) -> tuple[Measurement, ...]:
        """Measured by the main engine query, in its column order."""
        return tuple(m for m in self.measurements if not m.quantity.kind.selected and not m.total)

    @property
    def total_measurements(self) -> tuple[Measurement, ...]:
        """Measured by one engine query without GROUP BY, for the "(other)" row."""
        return tuple(m for m in self.measurements if m.total)

    @property
    def quantile_measurements(self) -> tuple[Measurement, ...]:
        """Measured from per-column histograms (one engine query per column)."""
        return tuple(m for m in self.measurements if m.quantity.kind is QuantityKind.QUANTILE)

    @property
    def mode_measurements(self) -> tuple[Measurement, ...]:
        """Measured from per-value histograms (one engine query per column)."""
        return tuple(m for m in self.measurements if m.quantity.kind is QuantityKind.MODE)

    @property
    def delta_shares(self) -> tuple[float, ...]:
        """How the charged δ is spent: one share per Gaussian measurement, then the threshold's δ_τ.
        Their exact sum is at most ``delta`` (``split_delta``)."""
        gaussian = tuple(m.delta for m in self.measurements if m.gaussian)
        return gaussian + ((self.threshold_delta,) if self.threshold is not None else ())

    def split(self) -> tuple[tuple[str, float, float], ...]:
        """(what, ε, δ) of every part of the charge, in order — the DP choice of the contribution bound
        first, when there is one (ε = 0 when it is remembered from an earlier answer). The NOTICE of an
        answer and ``veil explain`` both list exactly this. Before the choice (``veil explain``) the bound
        reads ``L=auto``."""
        parts = tuple(
            (m.quantity.label, m.epsilon, m.delta if m.gaussian else 0.0) for m in self.measurements
        )
        table = self.shape.table
        if self.bound_epsilon and self.shape.value_bounds:  # per-person values: ε shared by their bounds
            share = split_epsilon(self.bound_epsilon, len(self.shape.value_bounds))
            return (*((bound.describe(), share, 0.0) for bound in self.shape.value_bounds), *parts)
        if self.remembered_bound:  # paid for by an earlier answer of this analyst
            remembered = f"contribution bound L={table.max_contributions} remembered from an earlier choice"
            return ((remembered, 0.0, 0.0), *parts)
        if not self.bound_epsilon:
            return parts
        bound = f"auto (≤ {table.max_contributions})" if table.auto_contributions else table.max_contributions
        return ((f"contribution bound L={bound}", self.bound_epsilon, 0.0), *parts)

    def describe(self) -> str:
        shares = ", ".join(
            f"{label} ε={epsilon:.4g}" + (f" δ={delta:.3g}" if delta else "")
            for label, epsilon, delta in self.split()
        )
        charge = f"ε={self.epsilon:.4g}" + (f", δ={self.delta:.3g}" if self.delta else "")
        keys = ""
        if self.threshold is not None:
            split = f" (δ={self.threshold_delta:.3g})" if self.threshold_delta != self.delta else ""
            keys = f"; keys released above τ={self.threshold:.4g} people{split}"
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
    if quantity.kind.selected:  # histogram weights: K per row, at most L·K per person
        return bound * WEIGHT_UNIT if weighted else bound
    if quantity.kind is QuantityKind.UNITS:
        return 1.0 if cells == 1 else bound if cells is None else min(bound, float(cells))
    if quantity.kind in (QuantityKind.ROWS, QuantityKind.NON_NULL):
        return bound
    column = quantity.column
    assert column is not None and column.lower is not None and column.upper is not None
    largest = max(abs(column.lower), abs(column.upper))
    return bound * (largest * largest if quantity.kind is QuantityKind.SUM_SQUARES else largest)


def l2_sensitivity(quantity: Quantity, *, max_contributions: int, cells: int | None) -> float:
    """ℓ2 sensitivity of a noisy quantity's vector over all group cells: what Gaussian noise needs.

    Counts and sums: the ℓ1 bound of :func:`sensitivity` — one person may put all their weight in one
    cell, and then the ℓ2 change equals the ℓ1 change. COUNT(DISTINCT unit), and the people count that
    gates data-derived keys: a person in g groups adds min(1, L/g) to each (each of at most L groups when
    keys come from the data), so the ℓ2 change is sqrt(g)·min(1, L/g) <= sqrt(min(L, cells)), rounded up
    to a float — tighter than the ℓ1 bound min(L, cells) whenever a person may be in several groups.
    """
    if quantity.kind is not QuantityKind.UNITS:
        return sensitivity(quantity, max_contributions=max_contributions, cells=cells)
    groups = 1 if cells == 1 else max_contributions if cells is None else min(max_contributions, cells)
    return _sqrt_up(groups)


def _sqrt_up(number: int) -> float:
    """The smallest float whose square is at least ``number``."""
    root = math.sqrt(number)
    return root if Fraction(root) ** 2 >= number else math.nextafter(root, math.inf)


def _integer_valued(quantity: Quantity) -> bool:
    """Counts, and sums (of squares) of integer columns with integral bounds, are integers per row."""
    if quantity.kind.selected:
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


def split_epsilon(epsilon: float, parts: int, *, already_spent: float | Fraction = 0.0) -> float:
    """The largest float share with ``already_spent + parts × share <= ε`` exactly, where ε is the
    decimal the ledger charges (``as_decimal``: 0.1 means 0.1, not the binary float just above it) —
    so the charge is an upper bound on the privacy loss the noise actually gives."""
    available = Fraction(as_decimal(epsilon)) - Fraction(already_spent)
    share = float(available) / parts
    while share > 0 and Fraction(share) * parts > available:
        share = math.nextafter(share, 0.0)
    return share


def split_delta(delta: float, *, gaussian_parts: int, thresholded: bool) -> tuple[float, float]:
    """(δ of each Gaussian measurement, δ_τ of the threshold), in exact arithmetic at most ``delta``.

    With Gaussian noise, δ is shared equally by the Gaussian measurements and the threshold; the
    threshold takes what the equal shares leave (the largest float not above it), so the shares sum
    to ``delta`` up to one rounding and never above it. With Laplace noise, all of δ is the threshold's.
    """
    if not gaussian_parts:  # the largest float not above the charged decimal (1e-3 is a hair above it)
        return 0.0, split_epsilon(delta, 1) if thresholded else 0.0
    if not thresholded:
        return split_epsilon(delta, gaussian_parts), 0.0
    share = split_epsilon(delta, gaussian_parts + 1)
    return share, split_epsilon(delta, 1, already_spent=gaussian_parts * Fraction(share))


def bound_selection_epsilon(epsilon: float) -> float:
    """What a query that chooses its contribution bound with DP spends on it: ``selection_share(ε)``
    of its ε (a tenth at ε >= 1, up to 3/10 at small ε), as the largest float not above that share of
    the decimal the ledger charges."""
    exact = Fraction(as_decimal(epsilon)) * selection_share(epsilon)
    share = float(exact)
    while Fraction(share) > exact:
        share = math.nextafter(share, 0.0)
    return share


def bound_target_people(plan: ReleasePlan) -> int:
    """C for the DP choice of L (mechanisms/contribution_bound.py): the query's cells over the ε of one
    noisy quantity — every quantity's noise grows with L. Data-derived keys count as one cell."""
    epsilon = min((m.epsilon for m in plan.measurements), default=plan.epsilon)
    return bound_target(cells=plan.shape.cells or 1, epsilon_per_quantity=epsilon)


def bound_matters(shape: QueryShape) -> bool:
    """Whether max_contributions changes anything the query measures. It does not for
    ``COUNT(DISTINCT <privacy unit>)`` without GROUP BY: each person is one count whatever their rows,
    so its sensitivity is 1 and the engine query does not read L — choosing L with DP would spend ε
    for nothing."""
    return bool(shape.group_keys) or any(q.kind is not QuantityKind.UNITS for q in exact_quantities(shape))


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
    ``gaussian``: noisy quantities use the Gaussian mechanism, sharing ``delta`` equally (with the
    threshold, when keys come from the data: ``split_delta``).
    ``other_row``: also measure each additive quantity over all rows, so that one "(other)" row can
    carry what the released groups do not (their difference: post-processing)."""
    grouped = exact_quantities(shape)
    totals = other_row_quantities(shape) if other_row and shape.group_keys else ()
    entries = [(q, False) for q in grouped] + [(q, True) for q in totals]
    share = split_epsilon(epsilon, len(entries), already_spent=bound_epsilon)
    noisy = [q for q, _ in entries if not q.kind.selected]
    delta_share, threshold_delta = split_delta(
        delta, gaussian_parts=len(noisy) if gaussian else 0, thresholded=shape.thresholded
    )
    measurements = tuple(
        _measurement(shape, quantity, total=total, epsilon=share, delta=delta_share)
        for quantity, total in entries
    )
    if not shape.thresholded:  # δ is charged only if some Gaussian measurement spends it
        charged = delta if gaussian and noisy else 0.0
        return ReleasePlan(shape, measurements, epsilon, charged, bound_epsilon=bound_epsilon)
    gate = next(m for m in measurements if m.quantity == THRESHOLD_QUANTITY and not m.total)
    groups_per_person = 1 if shape.table.privacy_unit is None else shape.table.max_contributions
    threshold = key_threshold(gate, groups_per_person, threshold_delta)
    return ReleasePlan(
        shape,
        measurements,
        epsilon,
        delta,
        threshold,
        bound_epsilon=bound_epsilon,
        threshold_delta=threshold_delta,
    )


def _measurement(
    shape: QueryShape, quantity: Quantity, *, total: bool, epsilon: float, delta: float
) -> Measurement:
    """``delta`` > 0: Gaussian noise, calibrated on the ℓ2 sensitivity; quantiles and modes are
    selections and take none of it."""
    cells = 1 if total else shape.cells
    weighted = shape.table.privacy_unit is not None
    gaussian = delta > 0 and not quantity.kind.selected
    bound = shape.table.max_contributions
    return Measurement(
        quantity=quantity,
        sensitivity=l2_sensitivity(quantity, max_contributions=bound, cells=cells)
        if gaussian
        else sensitivity(quantity, max_contributions=bound, cells=cells, weighted=weighted),
        epsilon=epsilon,
        exact_integer=_exactly_integer(quantity, shape),
        integer_output=_integer_valued(quantity),
        delta=delta if gaussian else 0.0,
        total=total,
        weight=WEIGHT_UNIT if weighted and quantity.kind.selected else 1,
    )


def key_threshold(gate: Measurement, groups_per_person: int, delta: float) -> float:
    """τ for releasing data-derived keys (Korolova et al. 2009; Wilson et al. 2020, "Differentially
    private SQL with bounded user contribution").

    A key held only by the added person has an exact people count of at most 1, and that person adds
    at most ``groups_per_person`` such keys; by the union bound all stay hidden except with probability
    δ when each passes with probability at most δ / ``groups_per_person``:

    * Laplace noise of scale b: about ``τ = 1 + b·ln(groups_per_person / (2δ))``, since
      ``P(1 + Lap(b) > τ) = ½·exp(−(τ − 1)/b)``;
    * Gaussian noise of σ: about ``τ = 1 + σ·Φ⁻¹(1 − δ / groups_per_person)``;

    both taken from the tail of the noise the mechanism actually adds (discrete, or on its grid), so a
    little above those: the continuous Laplace formula understates a discrete tail by up to a factor 2.
    ``release`` compares the noisy count *before* rounding (a count rounded up past τ would pass more
    often than this tail says).
    """
    probability = _float_at_most(Fraction(delta) / groups_per_person)
    if gate.gaussian:
        tail = discrete_gaussian_upper_tail if gate.exact_integer else gaussian_upper_tail
        return 1.0 + tail(
            sensitivity=gate.sensitivity, epsilon=gate.epsilon, delta=gate.delta, probability=probability
        )
    laplace_tail = discrete_laplace_upper_tail if gate.exact_integer else laplace_upper_tail
    return 1.0 + laplace_tail(sensitivity=gate.sensitivity, epsilon=gate.epsilon, probability=probability)


def _float_at_most(number: Fraction) -> float:
    """The largest float <= number (float() rounds to nearest, which may be above)."""
    nearest = float(number)
    return math.nextafter(nearest, 0.0) if Fraction(nearest) > number else nearest
