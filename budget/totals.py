"""What one answer cost, and the running sums from which every accountant computes a total.

The ledger keeps, per (analyst, dataset, period) and per dataset, the sufficient statistics of the
releases that count — so checking a reservation reads one row instead of the whole spend history,
and the dataset's accountant can be basic, advanced or zCDP without re-reading anything:

* basic composition needs Σε and Σδ (exact: integers of the ledger's quantum, budget/amounts.py);
* advanced composition (Kairouz–Oh–Viswanath 2015, heterogeneous form) needs Σε², Σε(e^ε − 1), Σδ;
* zCDP (Bun–Steinke 2016) needs Σρ and the δ of releases that are not Gaussian.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from budget.amounts import add_up, charge_units, float_up, subtract_up, units_up
from budget.errors import InvalidBudgetError
from budget.loss import PrivacyLoss


@dataclass(frozen=True)
class Charge:
    """What the ledger debits for one release, in quanta (budget/amounts.py): its ε and δ rounded up,
    and the part of its δ outside ρ (``rho_delta``, rounded up too, so never above the δ)."""

    epsilon: int
    delta: int
    rho_delta: int


@dataclass(frozen=True)
class Release:
    """The privacy cost of one answer.

    ``rho``: the answer's zCDP parameter when its noise is Gaussian (ρ = Δ₂²/2σ², summed over the
    answer's measurements), and ``rho_delta`` the δ it spends outside ρ (τ-thresholding of its keys).
    None for Laplace and exponential-mechanism answers, which are ε-DP and therefore (ε²/2)-zCDP
    (Bun–Steinke 2016, Prop. 1.4); their δ (τ-thresholding) is approximate-zCDP slack that adds up
    on its own.

    ``charged``: what the ledger debits (:class:`Charge`); computed from the floats — rounded up to the
    quantum, refused below it — unless given, as for a spend read back from the ledger, whose floats
    are its stored charge shown as floats."""

    epsilon: float
    delta: float = 0.0
    rho: float | None = None
    rho_delta: float = 0.0
    charged: Charge | None = None

    def __post_init__(self) -> None:
        PrivacyLoss(self.epsilon, self.delta)  # validates the ranges
        if not self.epsilon > 0:
            raise InvalidBudgetError(
                f"a release needs epsilon > 0, got {self.epsilon!r}",
                hint="a release that costs nothing needs no reservation",
            )
        if self.rho is not None and not (math.isfinite(self.rho) and self.rho > 0):
            raise InvalidBudgetError(f"rho must be a finite number > 0, got {self.rho!r}")
        if not 0 <= self.rho_delta <= self.delta:
            raise InvalidBudgetError(f"rho_delta must be in [0, delta], got {self.rho_delta!r}")
        if self.charged is None:
            charge = Charge(
                charge_units(self.epsilon),
                charge_units(self.delta, name="delta"),
                units_up(self.rho_delta),
            )
            object.__setattr__(self, "charged", charge)

    @property
    def charge(self) -> Charge:
        assert self.charged is not None  # set by __post_init__
        return self.charged

    @property
    def loss(self) -> PrivacyLoss:
        return PrivacyLoss(self.epsilon, self.delta)


@dataclass(frozen=True)
class Totals:
    """Sufficient statistics of a set of releases. Float sums round up at every step, so they are
    upper bounds of the exact sums; ε, δ and the δ outside ρ are exact sums of charges, in quanta
    (budget/amounts.py)."""

    releases: int = 0
    epsilon: int = 0
    delta: int = 0
    epsilon_squares: float = 0.0
    epsilon_expm1: float = 0.0  # Σ ε(e^ε − 1)
    rho: float = 0.0
    zcdp_delta: int = 0

    def plus(self, release: Release) -> Totals:
        return self._step(release, +1)

    def minus(self, release: Release) -> Totals:
        return self._step(release, -1)

    def combined(self, other: Totals) -> Totals:
        """The releases of both (two disjoint sets of releases, such as the ordinary spends and one
        partition's); float sums still round up, and stay exact where the float sum is."""
        return Totals(
            releases=self.releases + other.releases,
            epsilon=self.epsilon + other.epsilon,
            delta=self.delta + other.delta,
            epsilon_squares=_sum_up(self.epsilon_squares, other.epsilon_squares),
            epsilon_expm1=_sum_up(self.epsilon_expm1, other.epsilon_expm1),
            rho=_sum_up(self.rho, other.rho),
            zcdp_delta=self.zcdp_delta + other.zcdp_delta,
        )

    def widest(self, other: Totals) -> Totals:
        """Statistic by statistic, the larger of two totals (``releases`` too).

        Every accountant's bound grows with each statistic, so the bound of the widest totals of the
        values of a partition column is at least the bound of each value's own: what parallel
        composition needs. It is the largest value's bound itself whenever one value's spending is the
        largest in every statistic — always under basic composition, which reads only Σε and Σδ."""
        return Totals(
            releases=max(self.releases, other.releases),
            epsilon=max(self.epsilon, other.epsilon),
            delta=max(self.delta, other.delta),
            epsilon_squares=max(self.epsilon_squares, other.epsilon_squares),
            epsilon_expm1=max(self.epsilon_expm1, other.epsilon_expm1),
            rho=max(self.rho, other.rho),
            zcdp_delta=max(self.zcdp_delta, other.zcdp_delta),
        )

    def _step(self, release: Release, sign: int) -> Totals:
        """Add or take back one release. The float statistics use the ε *charged* (as a float, at least
        the release's own), so that adding a release and taking back the spend read from the ledger
        move them by the same amounts."""
        move = add_up if sign > 0 else subtract_up
        charge = release.charge
        epsilon = float_up(charge.epsilon)
        rho = release.rho if release.rho is not None else epsilon * epsilon / 2
        zcdp_delta = charge.rho_delta if release.rho is not None else charge.delta  # δ outside ρ: all of
        # it unless the answer is Gaussian (ρ covers the Gaussian part)
        return replace(
            self,
            releases=self.releases + sign,
            epsilon=self.epsilon + sign * charge.epsilon,
            delta=self.delta + sign * charge.delta,
            epsilon_squares=move(self.epsilon_squares, _up(epsilon * epsilon)),
            epsilon_expm1=move(self.epsilon_expm1, _up(epsilon * math.expm1(epsilon))),
            rho=move(self.rho, _up(rho)),
            zcdp_delta=self.zcdp_delta + sign * zcdp_delta,
        )


def _sum_up(first: float, second: float) -> float:
    """``first + second`` rounded up: one ulp more only when the float sum is not exact (its error,
    found exactly by Knuth's TwoSum, is positive)."""
    total = first + second
    if math.isinf(total):
        return total
    second_part = total - first
    error = (first - (total - second_part)) + (second - second_part)
    return math.nextafter(total, math.inf) if error > 0 else total


def _up(value: float) -> float:
    """One ulp up: a product or expm1 is correctly rounded to within one ulp of the exact value."""
    return math.nextafter(value, math.inf)
