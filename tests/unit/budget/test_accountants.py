"""Composition accountants against the textbook formulas, computed again here in 40-digit decimals."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from decimal import Decimal, localcontext
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget.accountants import (
    ACCOUNTANTS,
    Accountant,
    AdvancedAccountant,
    BasicAccountant,
    ZcdpAccountant,
    advanced_composition_epsilon,
    compose_parallel,
    get_accountant,
    zcdp_epsilon,
    zcdp_epsilon_bun_steinke,
)
from budget.amounts import SCALE, as_decimal, charge_units
from budget.errors import BudgetError, InvalidBudgetError, UnknownAccountantError
from budget.loss import ZERO_LOSS, PrivacyLoss, compose_sequential
from budget.totals import Release, Totals

BASIC, ADVANCED, ZCDP = BasicAccountant(), AdvancedAccountant(), ZcdpAccountant()
PRECISION = 40


def totals_of(releases: Sequence[Release]) -> Totals:
    return functools.reduce(Totals.plus, releases, Totals())


# -- reference values in decimal arithmetic ----------------------------------------------------


def drv_reference(epsilons: Sequence[float], delta_prime: float) -> Decimal:
    """√(2·ln(1/δ')·Σε²) + Σε(e^ε − 1) on the floats' exact values."""
    with localcontext(prec=PRECISION):
        squares = sum((Decimal(e) ** 2 for e in epsilons), Decimal(0))
        drift = sum((Decimal(e) * (Decimal(e).exp() - 1) for e in epsilons), Decimal(0))
        return (2 * -Decimal(delta_prime).ln() * squares).sqrt() + drift


def bun_steinke_reference(rho: float, delta: float) -> Decimal:
    with localcontext(prec=PRECISION):
        return Decimal(rho) + 2 * (Decimal(rho) * -Decimal(delta).ln()).sqrt()


def cks_reference(rho: float, delta: float) -> tuple[Decimal, Decimal]:
    """(α, ε) at the optimum of Cor. 13: the root a of ρa² + ln(1 + a) = ln(1/δ) (bisection in floats,
    then Newton's method in decimals), α = 1 + a and ε = ρ(1 + a) + L/a − ln(1 + 1/a) − ln(1 + a)/a."""
    lower, upper = 0.0, math.sqrt(-math.log(delta)) / math.sqrt(rho)
    for _ in range(2000):
        middle = (lower + upper) / 2
        if rho * middle * middle + math.log1p(middle) < -math.log(delta):
            lower = middle
        else:
            upper = middle
    with localcontext(prec=PRECISION):
        r, log_inverse, a = Decimal(rho), -Decimal(delta).ln(), Decimal(upper)
        for _ in range(6):
            a -= (r * a * a + (1 + a).ln() - log_inverse) / (2 * r * a + 1 / (1 + a))
        epsilon = r * (1 + a) + log_inverse / a - (1 + 1 / a).ln() - (1 + a).ln() / a
        return 1 + a, epsilon


def cks_delta(rho: float, epsilon: float, alpha: Decimal) -> Decimal:
    """Canonne–Kamath–Steinke 2020, Cor. 13, as stated: exp((α−1)(αρ−ε))/(α−1) · (1−1/α)^α."""
    with localcontext(prec=PRECISION):
        r, e = Decimal(rho), Decimal(epsilon)
        return ((alpha - 1) * (alpha * r - e)).exp() / (alpha - 1) * (1 - 1 / alpha) ** alpha


# -- basic ---------------------------------------------------------------------------------------


def test_basic_pays_three_tenths_from_point_three() -> None:
    two = totals_of([Release(0.1)] * 2)
    assert BASIC.spent(two.plus(Release(0.1)), grant=PrivacyLoss(0.3)) == PrivacyLoss(0.3)
    assert BASIC.fits(two, Release(0.1), grant=PrivacyLoss(0.3))


def test_basic_refuses_the_release_past_the_grant() -> None:
    assert not BASIC.fits(totals_of([Release(0.1)] * 3), Release(0.1), grant=PrivacyLoss(0.3))


def test_basic_adds_deltas() -> None:
    spent = BASIC.spent(totals_of([Release(0.5, 1e-6), Release(0.5, 2e-6)]), grant=PrivacyLoss(2, 1e-5))
    assert spent == PrivacyLoss(1.0, 3e-6)


def test_nothing_released_costs_nothing_under_every_accountant() -> None:
    for accountant in ACCOUNTANTS.values():
        assert accountant.spent(Totals(), grant=PrivacyLoss(1.0, 1e-6)) == ZERO_LOSS


# -- advanced ------------------------------------------------------------------------------------


def test_advanced_composition_textbook_k100_epsilon_tenth() -> None:
    # DRV 2010 Thm III.3 / Dwork-Roth Thm 3.20 by hand: √(2·100·ln 10⁶)·0.1 + 100·0.1·(e^0.1 − 1)
    # = 5.2565217697569 + 1.0517091807565 = 6.3082309505134.
    totals = totals_of([Release(0.1)] * 100)
    epsilon = advanced_composition_epsilon(
        sum_of_squares=totals.epsilon_squares, sum_of_expm1=totals.epsilon_expm1, delta_prime=1e-6
    )
    assert epsilon == pytest.approx(6.3082309505134, abs=1e-12)
    assert Decimal(epsilon) >= drv_reference([0.1] * 100, 1e-6)


def test_advanced_accountant_charges_the_bound_and_the_slack() -> None:
    spent = ADVANCED.spent(totals_of([Release(0.1)] * 100), grant=PrivacyLoss(10, 2e-6))
    assert spent.epsilon == pytest.approx(6.3082309505134, abs=1e-12)
    assert spent.delta == 1e-6  # δ' = half the grant's δ


def test_advanced_accountant_lets_more_small_queries_through_than_basic() -> None:
    grant = PrivacyLoss(7, 2e-6)
    totals = totals_of([Release(0.1)] * 100)
    assert not BASIC.fits(totals, Release(0.1), grant=grant)
    assert ADVANCED.fits(totals, Release(0.1), grant=grant)


def test_advanced_accountant_reports_basic_for_few_queries() -> None:
    spent = ADVANCED.spent(totals_of([Release(0.1)] * 3), grant=PrivacyLoss(1, 2e-6))
    assert spent == PrivacyLoss(0.3, 1e-6)


def test_advanced_accountant_is_basic_on_a_pure_grant() -> None:
    totals, grant = totals_of([Release(0.1)] * 100), PrivacyLoss(20)
    assert ADVANCED.spent(totals, grant=grant) == BASIC.spent(totals, grant=grant)


def test_advanced_composition_has_no_bound_without_slack() -> None:
    assert advanced_composition_epsilon(sum_of_squares=1.0, sum_of_expm1=1.0, delta_prime=0.0) == math.inf


def test_advanced_slack_is_a_share_of_the_grant() -> None:
    accountant = dataclasses.replace(ADVANCED, delta_slack=0.25)
    spent = accountant.spent(totals_of([Release(0.1, 1e-7)]), grant=PrivacyLoss(1, 4e-6))
    assert spent.delta == pytest.approx(1.1e-6, rel=1e-15)
    assert spent.delta >= 1.1e-6


@pytest.mark.parametrize("share", [-0.1, 1.5, math.nan])
def test_rejects_a_delta_slack_that_is_not_a_share(share: float) -> None:
    with pytest.raises(
        InvalidBudgetError, match=r"delta_slack must be a share of the grant's delta in \[0, 1\]"
    ):
        AdvancedAccountant(delta_slack=share)


# -- zCDP ----------------------------------------------------------------------------------------


def test_bun_steinke_conversion_textbook() -> None:
    # ρ = 0.5, δ = 1e-5: 0.5 + 2·√(0.5·ln 10⁵) = 0.5 + 2·2.3992629562 = 5.2985259122.
    epsilon = zcdp_epsilon_bun_steinke(0.5, 1e-5)
    assert epsilon == pytest.approx(5.29852591218808, abs=1e-11)
    assert Decimal(epsilon) >= bun_steinke_reference(0.5, 1e-5)


def test_canonne_kamath_steinke_conversion_textbook() -> None:
    delta = 1e-5
    epsilon = zcdp_epsilon(0.5, delta)
    alpha, exact = cks_reference(0.5, delta)
    assert epsilon == pytest.approx(4.72838698494331, abs=1e-11)
    assert Decimal(epsilon) >= exact
    assert cks_delta(0.5, epsilon, alpha) <= Decimal(delta)


def test_zcdp_of_nothing_is_pure() -> None:
    assert zcdp_epsilon(0.0, 1e-6) == zcdp_epsilon_bun_steinke(0.0, 1e-6) == 0.0


@pytest.mark.parametrize(("rho", "delta"), [(-1.0, 1e-6), (math.inf, 1e-6), (1.0, 0.0), (1.0, 1.0)])
def test_zcdp_conversion_rejects_parameters_outside_their_range(rho: float, delta: float) -> None:
    with pytest.raises(InvalidBudgetError, match="must be"):
        zcdp_epsilon(rho, delta)


@pytest.mark.parametrize(
    ("convert", "message"),
    [
        (lambda: zcdp_epsilon(1.0, 0.0), "delta must be in (0, 1), got 0.0"),
        (lambda: zcdp_epsilon(1.0, 1.0), "delta must be in (0, 1), got 1.0"),
        (
            lambda: advanced_composition_epsilon(sum_of_squares=1.0, sum_of_expm1=1.0, delta_prime=1.0),
            "delta_prime must be in [0, 1), got 1.0",  # δ' = 0 is allowed: no bound, ε = +inf
        ),
    ],
)
def test_a_delta_out_of_range_names_its_interval(convert: Callable[[], float], message: str) -> None:
    with pytest.raises(InvalidBudgetError) as refused:
        convert()
    assert str(refused.value) == message


def test_gaussian_answers_spend_no_delta_under_zcdp() -> None:
    gaussian = Release(0.5, 1e-6, rho=0.01)
    spent = ZCDP.spent(totals_of([gaussian] * 50), grant=PrivacyLoss(10, 2e-5))
    assert spent.delta == 1e-5  # only δ_c; basic composition would charge 50 · 1e-6 as well
    assert spent.epsilon == pytest.approx(zcdp_epsilon(0.5, 1e-5), rel=1e-12)
    assert spent.epsilon >= zcdp_epsilon(0.5, 1e-5)


def test_zcdp_adds_thresholding_delta_on_top() -> None:
    thresholded = Release(0.5, 2e-7, rho=0.01, rho_delta=1e-7)
    spent = ZCDP.spent(totals_of([thresholded] * 50), grant=PrivacyLoss(10, 2e-5))
    assert spent.delta == pytest.approx(1e-5 + 50 * 1e-7, rel=1e-15)
    assert Decimal(spent.delta) >= Decimal("0.000015")


def test_zcdp_reports_basic_for_a_few_pure_answers() -> None:
    assert ZCDP.spent(totals_of([Release(0.5)]), grant=PrivacyLoss(1, 2e-6)) == PrivacyLoss(0.5, 1e-6)


def test_zcdp_accountant_is_basic_on_a_pure_grant() -> None:
    totals = totals_of([Release(0.1)] * 100)
    assert ZCDP.spent(totals, grant=PrivacyLoss(20)) == PrivacyLoss(10.0)


# -- parallel, registry ----------------------------------------------------------------------------


def test_parallel_composition_costs_the_largest_part() -> None:
    parts = [PrivacyLoss(1.0), PrivacyLoss(0.5, 1e-6), PrivacyLoss(0.2)]
    assert compose_parallel(parts) == PrivacyLoss(1.0, 1e-6)


def test_parallel_composition_of_nothing_is_zero() -> None:
    assert compose_parallel([]) == ZERO_LOSS


def test_registry_names_each_accountant() -> None:
    assert {name: type(accountant) for name, accountant in ACCOUNTANTS.items()} == {
        "basic": BasicAccountant,
        "advanced": AdvancedAccountant,
        "zcdp": ZcdpAccountant,
    }
    assert all(get_accountant(name).name == name for name in ACCOUNTANTS)


def test_unknown_accountant_lists_the_valid_names() -> None:
    with pytest.raises(UnknownAccountantError, match='unknown accountant "rdp"') as caught:
        get_accountant("rdp")
    assert caught.value.hint == "use one of: advanced, basic, zcdp"
    assert isinstance(caught.value, BudgetError)


# -- properties ----------------------------------------------------------------------------------

epsilons = st.floats(min_value=1e-3, max_value=5.0)
deltas = st.one_of(st.just(0.0), st.floats(min_value=1e-10, max_value=1e-6))


@st.composite
def releases(draw: st.DrawFn) -> Release:
    epsilon, delta = draw(epsilons), draw(deltas)
    if draw(st.booleans()):
        return Release(epsilon, delta)
    rho_delta = draw(st.sampled_from([0.0, delta]))
    return Release(epsilon, delta, rho=draw(st.floats(min_value=1e-4, max_value=2.0)), rho_delta=rho_delta)


grants = st.builds(
    PrivacyLoss,
    st.floats(min_value=0.1, max_value=100.0),
    st.one_of(st.just(0.0), st.floats(min_value=1e-8, max_value=1e-3)),
)
histories = st.lists(releases(), max_size=12)
accountants = st.sampled_from([BASIC, ADVANCED, ZCDP, AdvancedAccountant(0.1), ZcdpAccountant(0.9)])
PROPERTY = settings(max_examples=200, deadline=None, database=None)
QUICK_PROPERTY = settings(max_examples=100, deadline=None, database=None)


@PROPERTY
@given(accountants, histories, releases(), grants)
def test_adding_a_release_never_lowers_the_total(
    accountant: Accountant, history: list[Release], extra: Release, grant: PrivacyLoss
) -> None:
    before = accountant.spent(totals_of(history), grant=grant)
    after = accountant.spent(totals_of([*history, extra]), grant=grant)
    assert after.epsilon >= before.epsilon and after.delta >= before.delta


@PROPERTY
@given(histories, grants)
def test_advanced_is_never_worse_than_basic(history: list[Release], grant: PrivacyLoss) -> None:
    totals = totals_of(history)
    assert ADVANCED.spent(totals, grant=grant).epsilon <= BASIC.spent(totals, grant=grant).epsilon


@QUICK_PROPERTY
@given(histories, grants)
def test_basic_is_the_exact_sum_of_charges_rounded_up(history: list[Release], grant: PrivacyLoss) -> None:
    """Each amount is charged its decimal rounded up to the quantum; basic composition shows the exact
    sum of the charges as the smallest float whose decimal is not below it."""
    spent = BASIC.spent(totals_of(history), grant=grant)
    for value, amounts, name in (
        (spent.epsilon, [r.epsilon for r in history], "epsilon"),
        (spent.delta, [r.delta for r in history], "delta"),
    ):
        charged = sum((Fraction(charge_units(amount, name=name), SCALE) for amount in amounts), Fraction(0))
        assert charged >= sum((Fraction(as_decimal(amount)) for amount in amounts), Fraction(0))
        assert Fraction(as_decimal(value)) >= charged
        assert value == 0 or Fraction(as_decimal(math.nextafter(value, 0.0))) < charged


@QUICK_PROPERTY
@given(histories, releases(), grants)
def test_basic_fits_is_the_ledgers_decimal_rule(
    history: list[Release], extra: Release, grant: PrivacyLoss
) -> None:
    after = totals_of([*history, extra])
    exact_rule = Fraction(after.epsilon, SCALE) <= Fraction(as_decimal(grant.epsilon)) and Fraction(
        after.delta, SCALE
    ) <= Fraction(as_decimal(grant.delta))
    assert BASIC.fits(totals_of(history), extra, grant=grant) == exact_rule


@QUICK_PROPERTY
@given(accountants, histories, releases(), grants)
def test_fits_means_the_total_stays_within_the_grant(
    accountant: Accountant, history: list[Release], extra: Release, grant: PrivacyLoss
) -> None:
    totals = totals_of(history)
    after = accountant.spent(totals.plus(extra), grant=grant)
    assert accountant.fits(totals, extra, grant=grant) == (
        after.epsilon <= grant.epsilon and after.delta <= grant.delta
    )


@PROPERTY
@given(st.lists(epsilons, min_size=1, max_size=30), st.floats(min_value=1e-300, max_value=0.5))
def test_advanced_composition_is_never_below_the_exact_formula(
    values: list[float], delta_prime: float
) -> None:
    totals = totals_of([Release(value) for value in values])
    epsilon = advanced_composition_epsilon(
        sum_of_squares=totals.epsilon_squares, sum_of_expm1=totals.epsilon_expm1, delta_prime=delta_prime
    )
    exact = drv_reference(values, delta_prime)
    assert exact <= Decimal(epsilon) <= exact * (1 + Decimal("1e-10"))


rhos = st.floats(min_value=1e-12, max_value=1e6)
conversion_deltas = st.floats(min_value=1e-300, max_value=0.999)


@PROPERTY
@given(rhos, conversion_deltas)
def test_canonne_kamath_steinke_is_never_worse_than_bun_steinke(rho: float, delta: float) -> None:
    assert zcdp_epsilon(rho, delta) <= zcdp_epsilon_bun_steinke(rho, delta)


@QUICK_PROPERTY
@given(rhos, conversion_deltas)
def test_bun_steinke_is_never_below_the_exact_formula(rho: float, delta: float) -> None:
    exact = bun_steinke_reference(rho, delta)
    assert exact <= Decimal(zcdp_epsilon_bun_steinke(rho, delta)) <= exact * (1 + Decimal("1e-10"))


@QUICK_PROPERTY
@given(rhos, conversion_deltas)
def test_canonne_kamath_steinke_is_valid_and_tight(rho: float, delta: float) -> None:
    epsilon = zcdp_epsilon(rho, delta)
    alpha, exact = cks_reference(rho, delta)
    assert cks_delta(rho, epsilon, alpha) <= Decimal(delta)  # Cor. 13 holds at the returned ε
    assert Decimal(epsilon) >= max(exact, Decimal(0))
    assert Decimal(epsilon) <= max(exact, Decimal(0)) + Decimal("1e-9") * (Decimal(rho) + 1)


@QUICK_PROPERTY
@given(st.lists(st.builds(PrivacyLoss, epsilons, deltas), max_size=20))
def test_parallel_composition_is_the_componentwise_max(losses: list[PrivacyLoss]) -> None:
    parallel = compose_parallel(losses)
    assert parallel.epsilon == max((loss.epsilon for loss in losses), default=0.0)
    assert parallel.delta == max((loss.delta for loss in losses), default=0.0)
    sequential = compose_sequential(losses)
    assert parallel.epsilon <= sequential.epsilon and parallel.delta <= sequential.delta
