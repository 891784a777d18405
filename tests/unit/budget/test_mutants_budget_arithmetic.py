"""Edges of the budget arithmetic that the accountant and ledger suites left open: the δ a composition
may report, the slack share the slack accountants reserve and use, the ranges their parameters accept,
and the messages and hints a refused parameter carries.

Found by mutation testing (issue 21)."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from budget.accountants import (
    AdvancedAccountant,
    BasicAccountant,
    ZcdpAccountant,
    advanced_composition_epsilon,
    zcdp_epsilon,
    zcdp_epsilon_bun_steinke,
)
from budget.amounts import SCALE, as_decimal, units_down
from budget.errors import BudgetError, InvalidBudgetError, LedgerStoreError
from budget.loss import PrivacyLoss, compose_sequential
from budget.totals import Release, Totals

LARGEST_DELTA = math.nextafter(1.0, 0.0)


# -- sequential composition ------------------------------------------------------------------------------


def test_deltas_adding_past_one_compose_to_the_largest_delta_below_one() -> None:
    """δ's of 0.6 and 0.6 add to 1.2, which no PrivacyLoss may hold: the total is the largest δ below 1
    (it fits no grant anyway), not an error and not 1."""
    total = compose_sequential([PrivacyLoss(1.0, 0.6), PrivacyLoss(2.0, 0.6)])
    assert total.delta == LARGEST_DELTA
    assert total.epsilon == math.nextafter(3.0, math.inf)


def test_deltas_adding_below_one_are_not_capped() -> None:
    total = compose_sequential([PrivacyLoss(1.0, 0.25), PrivacyLoss(1.0, 0.5)])
    assert total.delta == math.nextafter(0.75, math.inf)


# -- errors -------------------------------------------------------------------------------------------


def test_a_store_error_is_unavailable_unless_told_otherwise() -> None:
    """``unavailable`` is the fault the proxy maps to its catch-all SQLSTATE (proxy/errors.py)."""
    error = LedgerStoreError("cannot use the ledger", hint="check it")
    assert (error.fault, error.message, error.hint, str(error)) == (
        "unavailable",
        "cannot use the ledger",
        "check it",
        "cannot use the ledger",
    )
    assert LedgerStoreError("x", fault="locked").fault == "locked"
    assert isinstance(error, BudgetError) and error.hint == "check it"


# -- parameters of the accountants ------------------------------------------------------------------------


def test_bun_steinke_names_delta_when_it_is_out_of_range() -> None:
    for delta in (0.0, 1.0):
        with pytest.raises(InvalidBudgetError) as refused:
            zcdp_epsilon_bun_steinke(1.0, delta)
        assert str(refused.value) == f"delta must be in (0, 1), got {delta!r}"


@pytest.mark.parametrize("convert", [zcdp_epsilon, zcdp_epsilon_bun_steinke])
def test_a_bad_rho_is_refused_with_its_formula_as_the_hint(convert: object) -> None:
    with pytest.raises(InvalidBudgetError) as refused:
        convert(-0.5, 1e-6)  # type: ignore[operator]
    assert str(refused.value) == "rho must be a finite number >= 0, got -0.5"
    assert refused.value.hint == "rho = sensitivity**2 / (2 * sigma**2)"


@pytest.mark.parametrize("name", ["sum_of_squares", "sum_of_expm1"])
@pytest.mark.parametrize("value", [-1.0, -1e-300, math.nan])
def test_advanced_composition_refuses_a_negative_or_nan_sum_and_names_it(name: str, value: float) -> None:
    arguments = {"sum_of_squares": 1.0, "sum_of_expm1": 1.0, "delta_prime": 1e-6, name: value}
    with pytest.raises(InvalidBudgetError) as refused:
        advanced_composition_epsilon(**arguments)
    assert str(refused.value) == f"{name} must be a number >= 0, got {value!r}"


def test_advanced_composition_of_zero_sums_is_zero_rounded_up() -> None:
    """Sums of 0 are legal (nothing of that kind released): the bound is 0, rounded up by at most one step."""
    epsilon = advanced_composition_epsilon(sum_of_squares=0.0, sum_of_expm1=0.0, delta_prime=1e-6)
    assert 0.0 <= epsilon <= math.nextafter(0.0, math.inf)
    assert advanced_composition_epsilon(sum_of_squares=0.0, sum_of_expm1=0.5, delta_prime=0.5) >= 0.5


@pytest.mark.parametrize("share", [0.0, 1.0])
@pytest.mark.parametrize("accountant", [AdvancedAccountant, ZcdpAccountant])
def test_a_slack_of_none_or_all_of_the_grants_delta_is_allowed(accountant: type, share: float) -> None:
    assert accountant(delta_slack=share).delta_slack == share


@pytest.mark.parametrize("accountant", [AdvancedAccountant(delta_slack=0.0), ZcdpAccountant(delta_slack=0.0)])
def test_a_slack_of_zero_composes_like_basic(accountant: AdvancedAccountant | ZcdpAccountant) -> None:
    """The hint's promise: 0 turns the accountant into basic composition."""
    totals = Totals()
    for release in [Release(0.3, 1e-7), Release(0.2, 1e-7, rho=0.02), Release(0.1)]:
        totals = totals.plus(release)
    grant = PrivacyLoss(5.0, 1e-5)
    assert accountant.spent(totals, grant=grant) == BasicAccountant().spent(totals, grant=grant)


@pytest.mark.parametrize(("accountant", "name"), [(AdvancedAccountant, "advanced"), (ZcdpAccountant, "zcdp")])
def test_a_slack_outside_zero_to_one_is_refused_with_a_hint(accountant: type, name: str) -> None:
    with pytest.raises(InvalidBudgetError) as refused:
        accountant(delta_slack=1.5)
    assert str(refused.value) == "delta_slack must be a share of the grant's delta in [0, 1], got 1.5"
    assert refused.value.hint == f"the default is 0.5; 0 turns the {name} accountant into basic composition"


# -- the slack: charged rounded up, used rounded down --------------------------------------------------------

shares = st.one_of(st.sampled_from([0.5, 0.25, 0.1, 1 / 3, 1.0]), st.floats(min_value=1e-6, max_value=1.0))
grant_deltas = st.one_of(
    st.sampled_from([0.5, 0.25, 1e-5, 1e-6, 3e-7]), st.floats(min_value=1e-15, max_value=0.9)
)


@given(shares, grant_deltas)
def test_the_slack_is_charged_up_and_used_as_the_largest_float_not_above_the_share(
    share: float, delta: float
) -> None:
    """δ' in the formula must never exceed what is charged for it (a larger δ' would claim a smaller ε
    than the charge pays for), and should be as large as floats allow."""
    exact = Fraction(as_decimal(share)) * Fraction(as_decimal(delta))
    charged, used = AdvancedAccountant(delta_slack=share)._slack(PrivacyLoss(1.0, delta))
    assert charged == math.ceil(exact * SCALE)
    assert Fraction(used) <= exact < Fraction(math.nextafter(used, math.inf))


def test_a_slack_a_float_holds_exactly_is_used_as_it_is() -> None:
    assert ZcdpAccountant(delta_slack=0.5)._slack(PrivacyLoss(1.0, 0.5)) == (SCALE // 4, 0.25)
    charged, used = dataclasses.replace(ZcdpAccountant(), delta_slack=0.25)._slack(PrivacyLoss(1.0, 0.5))
    assert (charged, used) == (SCALE // 8, 0.125)


# -- amounts --------------------------------------------------------------------------------------------


def test_units_down_names_the_amount_it_refuses() -> None:
    for bad in (-1.0, math.inf, math.nan):
        with pytest.raises(InvalidBudgetError) as refused:
            units_down(bad)
        assert str(refused.value) == f"amount must be a finite number >= 0, got {bad!r}"
    assert units_down(0.1) == SCALE // 10
