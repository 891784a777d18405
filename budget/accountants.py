"""Composition accountants: how the releases recorded on one grant add up to one (ε, δ).

Every accountant reads the ledger's running totals (:class:`budget.totals.Totals`, the sufficient
statistics of the releases that count) and the grant they are charged to, and returns a
:class:`PrivacyLoss` that is a valid differential-privacy guarantee for all those releases together.
All arithmetic rounds *up*: a result is never below the exact value of its formula.

* ``basic`` — sequential composition (McSherry 2009; Dwork & Roth 2014, Thm 3.16): ε and δ add. The
  ledger's exact sums (integers of its quantum, budget/amounts.py), rounded up to a float; the default.
* ``advanced`` — Dwork, Rothblum & Vadhan (FOCS 2010, Thm III.3; Dwork & Roth Thm 3.20) for k
  releases of (ε, δ): ``(√(2k·ln(1/δ'))·ε + k·ε(e^ε − 1), kδ + δ')``. Heterogeneous ε_i use
  ``√(2·ln(1/δ')·Σε_i²) + Σε_i(e^{ε_i} − 1)``, which is implied by Kairouz, Oh & Viswanath (ICML 2015,
  Thm 3.5), whose drift term ε·tanh(ε/2) is smaller than ε(e^ε − 1). Because a ledger lets the analyst
  choose each ε after seeing earlier answers, it is the condition of a *privacy filter* (Rogers, Roth,
  Ullman & Vadhan 2016); Whitehouse, Ramdas, Rogers & Wu (ICML 2023) give a filter for adaptively
  chosen ε_i that continues while ``√(2·ln(1/δ')·Σε_i²) + ½Σε_i² ≤ ε_grant``, and our condition implies
  theirs (ε(e^ε − 1) ≥ ε² ≥ ε²/2). The reported ε is the smaller of this bound and basic composition.
* ``zcdp`` — Bun & Steinke (TCC 2016): a Gaussian answer is ρ-zCDP with ρ = Δ₂²/(2σ²); an ε-DP answer
  is (ε²/2)-zCDP (Prop. 1.4); an (ε, δ)-DP answer is δ-approximately (ε²/2)-zCDP (Prop. 1.13), and
  approximate zCDP composes by adding the ρ's and, separately, the δ's (§8). The total ρ converts to
  (ε, δ_c) by Canonne, Kamath & Steinke (NeurIPS 2020, Cor. 13), which is never worse than Bun &
  Steinke's Prop. 1.3; the δ that ρ does not cover (τ-thresholding) is added on top.

δ slack: ``advanced`` needs a δ' and ``zcdp`` a conversion δ_c. Both take it as ``delta_slack``, a
share of the grant's δ (default one half). It is charged as soon as anything has been released — it is
the price of using the accountant, reserved on every path — so the releases' own δ must fit in the
rest of the grant. A grant with δ = 0 has no slack, and then both compose exactly like ``basic``.

Parallel composition (:func:`compose_parallel`) is not an accountant: it prices *one* query whose
measurements are over disjoint parts of the data. Across statements, the ledger composes the spends
charged to disjoint partitions (budget/partitions.py) by handing every accountant the ordinary spends
plus, per partition column, the statistic-by-statistic largest of its values' totals
(:meth:`budget.totals.Totals.widest`): each accountant's bound grows with every statistic, so that is
a valid bound for whoever holds any one value, under each of the three.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType

from budget.amounts import SCALE, as_decimal, float_up
from budget.errors import InvalidBudgetError, UnknownAccountantError
from budget.loss import ZERO_LOSS, PrivacyLoss
from budget.totals import Release, Totals

DEFAULT_DELTA_SLACK = 0.5

# Every term below comes out of at most a handful of floating-point operations, each correctly
# rounded (+ − × ÷ √) or faithfully rounded by the C library (log, log1p): a relative error far below
# 2^-50 per term. Adding 2^-44 times the sum of the terms' magnitudes covers that with room to spare.
_ROUNDING_SLACK = 2.0**-44
_LARGEST_DELTA = math.nextafter(1.0, 0.0)


class Accountant(ABC):
    """A composition rule. Implements the ledger's accountant protocol (``name`` and :meth:`spent`)."""

    name: str

    @abstractmethod
    def spent(self, totals: Totals, *, grant: PrivacyLoss) -> PrivacyLoss:
        """The (ε, δ) of all releases in ``totals`` together, when charged to ``grant`` (whose δ
        sets the slack of the accountants that need one). Monotone: adding a release never lowers
        either component."""

    def fits(self, totals: Totals, release: Release, *, grant: PrivacyLoss) -> bool:
        """Whether ``release``, added to the releases in ``totals``, keeps the total within ``grant``.

        Under ``basic`` this is the ledger's exact rule (a grant of 0.3 pays for three releases of
        0.1): the spent ε is the smallest float whose decimal is at least the exact sum, so comparing
        it with the grant's float is comparing the sum with the grant's decimal."""
        return self.allows(totals.plus(release), grant=grant)

    def allows(self, totals: Totals, *, grant: PrivacyLoss) -> bool:
        """Whether the releases in ``totals`` together stay within ``grant`` (see :meth:`fits`)."""
        after = self.spent(totals, grant=grant)
        return after.epsilon <= grant.epsilon and after.delta <= grant.delta


@dataclass(frozen=True)
class BasicAccountant(Accountant):
    """Sequential composition: ε's add, δ's add (the ledger's exact sums, rounded up to floats)."""

    name = "basic"

    def spent(self, totals: Totals, *, grant: PrivacyLoss) -> PrivacyLoss:
        if totals.releases == 0:
            return ZERO_LOSS
        return PrivacyLoss(float_up(totals.epsilon), _delta_up(totals.delta))


@dataclass(frozen=True)
class _SlackAccountant(Accountant):
    """An accountant that spends ``delta_slack`` × the grant's δ on its own bound."""

    delta_slack: float = DEFAULT_DELTA_SLACK

    def __post_init__(self) -> None:
        if not 0 <= self.delta_slack <= 1:
            raise InvalidBudgetError(
                f"delta_slack must be a share of the grant's delta in [0, 1], got {self.delta_slack!r}",
                hint=f"the default is {DEFAULT_DELTA_SLACK}; 0 turns the {self.name} accountant into basic composition",
            )

    def _slack(self, grant: PrivacyLoss) -> tuple[int, float]:
        """The slack as charged (the decimal share of the grant's δ, rounded up to the ledger's
        quantum) and as used in a formula (the largest float not above the exact share, so the
        formula's ε is for a δ no larger than the charge)."""
        exact = Fraction(as_decimal(self.delta_slack)) * Fraction(as_decimal(grant.delta))
        used = float(exact)
        if Fraction(used) > exact:
            used = math.nextafter(used, 0.0)
        return math.ceil(exact * SCALE), used

    def _basic(self, totals: Totals, slack: int) -> PrivacyLoss:
        """Basic composition, with the slack reserved like every other bound of this accountant."""
        return PrivacyLoss(float_up(totals.epsilon), _delta_up(totals.delta + slack))


@dataclass(frozen=True)
class AdvancedAccountant(_SlackAccountant):
    """Advanced composition (Dwork–Rothblum–Vadhan, heterogeneous form), or basic where smaller.

    ε = min(Σε_i, √(2·ln(1/δ')·Σε_i²) + Σε_i(e^{ε_i} − 1)),  δ = Σδ_i + δ'."""

    name = "advanced"

    def spent(self, totals: Totals, *, grant: PrivacyLoss) -> PrivacyLoss:
        if totals.releases == 0:
            return ZERO_LOSS
        charged, slack = self._slack(grant)
        basic = self._basic(totals, charged)
        advanced = advanced_composition_epsilon(
            sum_of_squares=totals.epsilon_squares, sum_of_expm1=totals.epsilon_expm1, delta_prime=slack
        )
        return PrivacyLoss(min(basic.epsilon, advanced), basic.delta)


@dataclass(frozen=True)
class ZcdpAccountant(_SlackAccountant):
    """zCDP: ρ's add; Σρ converts to (ε, δ_c) (Canonne–Kamath–Steinke); other δ's add on top.

    Basic composition (with δ_c reserved too) is reported instead when it is no worse in both ε and
    δ — as for a few pure-ε answers, which zCDP prices at ε²/2 each. That choice keeps the total
    monotone: once Gaussian answers have spent δ outside ρ, basic composition never dominates again."""

    name = "zcdp"

    def spent(self, totals: Totals, *, grant: PrivacyLoss) -> PrivacyLoss:
        if totals.releases == 0:
            return ZERO_LOSS
        charged, slack = self._slack(grant)
        basic = self._basic(totals, charged)
        if slack == 0:
            return basic
        zcdp = PrivacyLoss(zcdp_epsilon(totals.rho, slack), _delta_up(totals.zcdp_delta + charged))
        if basic.epsilon <= zcdp.epsilon and basic.delta <= zcdp.delta:
            return basic
        return zcdp


ACCOUNTANTS: Mapping[str, Accountant] = MappingProxyType(
    {
        accountant.name: accountant
        for accountant in (BasicAccountant(), AdvancedAccountant(), ZcdpAccountant())
    }
)


def get_accountant(name: str) -> Accountant:
    """The accountant called ``name``, with the default slack (change it with
    ``dataclasses.replace(get_accountant("zcdp"), delta_slack=0.25)``)."""
    try:
        return ACCOUNTANTS[name]
    except KeyError:
        raise UnknownAccountantError(
            f'unknown accountant "{name}"', hint=f"use one of: {', '.join(sorted(ACCOUNTANTS))}"
        ) from None


def compose_parallel(losses: Iterable[PrivacyLoss]) -> PrivacyLoss:
    """Parallel composition (McSherry 2009; spec dp-mechanisms §6.1): measurements over disjoint
    parts of the data cost the largest ε and the largest δ among them, not the sum.

    Valid only when the parts are disjoint *in privacy units*: after contribution bounding, every
    person's rows fall in exactly one part, so adding or removing one person changes one part."""
    epsilon = delta = 0.0
    for loss in losses:
        epsilon, delta = max(epsilon, loss.epsilon), max(delta, loss.delta)
    return PrivacyLoss(epsilon, delta)


def advanced_composition_epsilon(*, sum_of_squares: float, sum_of_expm1: float, delta_prime: float) -> float:
    """``√(2·ln(1/δ')·Σε_i²) + Σε_i(e^{ε_i} − 1)``, rounded up; +inf when δ' = 0 (no bound). The
    composition is then (this ε, Σδ_i + δ')-DP.

    For k equal releases this is DRV's ``√(2k·ln(1/δ'))·ε + k·ε(e^ε − 1)``."""
    for value, name in ((sum_of_squares, "sum_of_squares"), (sum_of_expm1, "sum_of_expm1")):
        if math.isnan(value) or value < 0:
            raise InvalidBudgetError(f"{name} must be a number >= 0, got {value!r}")
    _check_delta(delta_prime, name="delta_prime", zero_ok=True)
    if delta_prime == 0 or math.isinf(sum_of_squares) or math.isinf(sum_of_expm1):
        return math.inf
    return _sum_up(math.sqrt(2 * -math.log(delta_prime) * sum_of_squares), sum_of_expm1)


def zcdp_epsilon_bun_steinke(rho: float, delta: float) -> float:
    """ε with ρ-zCDP ⇒ (ε, δ)-DP by Bun & Steinke 2016, Prop. 1.3: ρ + 2·√(ρ·ln(1/δ)), rounded up."""
    _check_rho(rho)
    _check_delta(delta, name="delta")
    return _sum_up(rho, 2 * math.sqrt(rho * -math.log(delta))) if rho else 0.0


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The smallest ε with ρ-zCDP ⇒ (ε, δ)-DP by Canonne, Kamath & Steinke 2020, Cor. 13, rounded up.

    Cor. 13: ρ-zCDP implies (ε, δ)-DP for ``δ = inf_{α>1} exp((α−1)(αρ−ε))/(α−1) · (1−1/α)^α``.
    Solving for ε at a fixed α, with a = α − 1 and L = ln(1/δ):

        ε(a) = ρ(1 + a) + L/a − ln(1 + 1/a) − ln(1 + a)/a.

    Every a > 0 gives a valid ε. ε'(a) = (ρa² + ln(1 + a) − L)/a², so ε(a) falls then rises and its
    minimum is the root of ρa² + ln(1 + a) = L, found by bisection on (0, √(L/ρ)]. At a = √(L/ρ),
    α is the one behind Prop. 1.3 and the last two (negative) terms are what Cor. 13 saves; that
    point is evaluated too, so the result is never worse than :func:`zcdp_epsilon_bun_steinke`.
    """
    _check_rho(rho)
    _check_delta(delta, name="delta")
    if rho == 0:
        return 0.0
    log_inverse_delta = -math.log(delta)
    bun_steinke_a = math.sqrt(log_inverse_delta) / math.sqrt(rho)  # a = √(L/ρ), without overflow
    lower, upper = 0.0, bun_steinke_a
    while True:
        middle = (lower + upper) / 2
        if middle in (lower, upper):
            break
        if rho * middle * middle + math.log1p(middle) < log_inverse_delta:
            lower = middle
        else:
            upper = middle
    best = min(_cks_epsilon(rho, log_inverse_delta, a) for a in (upper, bun_steinke_a))
    return max(0.0, best)


def _cks_epsilon(rho: float, log_inverse_delta: float, a: float) -> float:
    return _sum_up(rho, rho * a, log_inverse_delta / a, -math.log1p(1 / a), -math.log1p(a) / a)


def _sum_up(*terms: float) -> float:
    """An upper bound of the exact sum of ``terms``, each computed to a few ulps (see _ROUNDING_SLACK)."""
    total = math.fsum(terms) + math.fsum(abs(term) for term in terms) * _ROUNDING_SLACK
    return math.nextafter(total, math.inf)


def _delta_up(units: int) -> float:
    """A δ sum (in quanta) rounded up, kept below 1 as PrivacyLoss requires (a δ that large fits no
    grant anyway)."""
    return min(float_up(units), _LARGEST_DELTA)


def _check_rho(rho: float) -> None:
    if not (math.isfinite(rho) and rho >= 0):
        raise InvalidBudgetError(
            f"rho must be a finite number >= 0, got {rho!r}", hint="rho = sensitivity**2 / (2 * sigma**2)"
        )


def _check_delta(delta: float, *, name: str, zero_ok: bool = False) -> None:
    if not ((0 <= delta < 1) if zero_ok else (0 < delta < 1)):
        interval = "[0, 1)" if zero_ok else "(0, 1)"
        raise InvalidBudgetError(f"{name} must be in {interval}, got {delta!r}")
