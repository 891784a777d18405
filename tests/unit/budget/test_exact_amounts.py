"""Exact ledger arithmetic (budget/amounts.py, issue 21): no overshoot of any size past a grant or a
cap, for ε and δ — 10⁻¹², 10⁻³⁰, one ulp — while spends that add up exactly to a grant are all
accepted; with renewals and partitions too. The ledger is tested directly, with amounts far below
the proxy's ε floor: its arithmetic must be exact whatever the floor.

The ledger tests take their ledgers from the ``ledgers`` fixture (SQLite here);
tests/postgres/test_exact_amounts_postgres.py runs them again on PostgreSQL.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from budget.amounts import (
    QUANTUM,
    SCALE,
    as_decimal,
    charge_units,
    exact_units,
    float_down,
    float_up,
    from_text,
    to_text,
    units_up,
)
from budget.errors import BudgetExhaustedError, InvalidBudgetError
from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from budget.partitions import Partition
from tests.unit.budget.test_ledger import VERIFIER, Clock, Ledgers
from tests.unit.budget.test_ledger import ledgers as ledgers  # the fixture, for SQLite

ONE_QUANTUM = float(QUANTUM)  # 1e-30
# Floats across the whole range a ledger may meet, down to far below the quantum.
tiny_to_large = st.floats(min_value=1e-40, max_value=10.0, allow_nan=False, allow_infinity=False)
amounts = st.one_of(
    tiny_to_large,
    st.sampled_from([1e-30, 1e-24, 1e-12, 1e-9, 1e-6, 0.1, 0.3, 1 / 3, 0.30000000000000004]),
)
grant_epsilons = st.one_of(
    st.sampled_from([1e-12, 1e-9, 0.1, 0.3, 1.0, 3.0]), st.floats(min_value=1e-14, max_value=10.0)
)
grant_deltas = st.sampled_from([1e-12, 1e-9, 1e-6, 1e-5])
LEDGER_PROPERTY = settings(
    max_examples=20, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def exact(amount: float) -> Fraction:
    """A float as the ledger reads it: the decimal of its shortest repr, exactly."""
    return Fraction(as_decimal(amount))


def overshoots(amount: float) -> list[float]:
    """Amounts just past ``amount``: the quantum, 1e-12, one ulp (as a second spend and as the gap)."""
    return [ONE_QUANTUM, 1e-12, math.nextafter(amount, math.inf) - amount, math.ulp(amount)]


# -- amounts ------------------------------------------------------------------------------------------


@given(st.integers(min_value=0, max_value=10**40))
def test_text_round_trips_every_amount(units: int) -> None:
    text = to_text(units)
    assert from_text(text) == units
    assert text.count(".") == 1 and len(text.split(".")[1]) == 30


@given(amounts)
def test_a_charge_is_the_decimal_rounded_up_to_the_quantum(amount: float) -> None:
    if exact(amount) < Fraction(1, SCALE):
        with pytest.raises(InvalidBudgetError, match="below the ledger's quantum of 1e-30"):
            charge_units(amount)
        return
    charged = Fraction(charge_units(amount), SCALE)
    assert exact(amount) <= charged < exact(amount) + Fraction(1, SCALE)


@given(st.floats(min_value=1e-14, max_value=1e6))
def test_every_float_of_at_least_1e_14_is_charged_exactly(amount: float) -> None:
    assert Fraction(charge_units(amount), SCALE) == exact(amount)


@pytest.mark.parametrize("amount", [-1.0, -1e-30, math.inf, math.nan])
@pytest.mark.parametrize("convert", [charge_units, units_up, exact_units])
def test_a_negative_or_infinite_amount_is_refused(convert: Callable[..., int], amount: float) -> None:
    with pytest.raises(InvalidBudgetError, match=r"epsilon must be a finite number >= 0, got"):
        convert(amount, name="epsilon")


def test_a_grant_finer_than_the_quantum_is_refused() -> None:
    with pytest.raises(InvalidBudgetError, match="finer than the ledger's quantum") as refused:
        exact_units(1.5e-31, name="delta")
    assert refused.value.hint == "round it to at most 30 decimal places"
    assert exact_units(1e-30) == 1


@given(st.integers(min_value=0, max_value=10**31))
def test_float_up_and_down_bracket_an_amount_as_tightly_as_floats_can(units: int) -> None:
    target = Fraction(units, SCALE)
    up, down = float_up(units), float_down(units)
    assert exact(down) <= target <= exact(up)
    assert exact(math.nextafter(up, 0.0)) < target or up == 0
    assert exact(math.nextafter(down, math.inf)) > target


# -- the ledger: grants ---------------------------------------------------------------------------------


def funded(ledgers: Ledgers, loss: PrivacyLoss, **kwargs: object) -> Ledger:
    ledger = ledgers.new(**kwargs)  # type: ignore[arg-type]
    ledger.add_analyst("alice", VERIFIER)
    ledger.grant("alice", "demo", loss)
    return ledger


def reserve(ledger: Ledger, epsilon: float, delta: float = 0.0, **kwargs: object) -> int:
    return ledger.reserve("alice", "demo", PrivacyLoss(epsilon, delta), statement="SELECT 1", **kwargs)  # type: ignore[arg-type]


@LEDGER_PROPERTY
@given(grant=grant_epsilons, spends=st.lists(amounts, max_size=8))
@example(grant=1.0, spends=[1.0, 1e-30])  # the bug
@example(grant=1.0, spends=[1.0, 1e-12])
@example(grant=0.3, spends=[0.1, 0.1, 0.1, 1e-30])
def test_the_ledger_accepts_a_spend_exactly_when_the_charges_fit_the_grant(
    ledgers: Ledgers, grant: float, spends: list[float]
) -> None:
    """A model in exact rationals: each spend is charged its decimal rounded up to the quantum (or
    refused below it), and accepted iff the charges so far plus its own stay within the grant."""
    ledger = funded(ledgers, PrivacyLoss(grant))
    charged = Fraction(0)
    for amount in spends:
        if exact(amount) < Fraction(1, SCALE):
            with pytest.raises(InvalidBudgetError, match="below the ledger's quantum"):
                reserve(ledger, amount)
            continue
        charge = Fraction(charge_units(amount), SCALE)
        if charged + charge <= exact(grant):
            reserve(ledger, amount)
            charged += charge
        else:
            with pytest.raises(BudgetExhaustedError):
                reserve(ledger, amount)
        assert exact(ledger.balance("alice", "demo").spent_epsilon) >= charged
    assert ledger.balance("alice", "demo").spent_epsilon == float_up(int(charged * SCALE))
    assert ledger.verify() == []


@LEDGER_PROPERTY
@given(grant=grant_epsilons)
def test_no_overshoot_of_any_size_past_a_spent_epsilon_grant(ledgers: Ledgers, grant: float) -> None:
    ledger = funded(ledgers, PrivacyLoss(grant))
    with pytest.raises(BudgetExhaustedError):
        reserve(ledger, math.nextafter(grant, math.inf))  # one ulp over, in one spend
    reserve(ledger, grant)
    for overshoot in overshoots(grant):
        with pytest.raises(BudgetExhaustedError, match="privacy budget exhausted"):
            reserve(ledger, overshoot)
    balance = ledger.balance("alice", "demo")
    assert balance.spent_epsilon == balance.granted_epsilon == grant and balance.remaining_epsilon == 0


@LEDGER_PROPERTY
@given(delta=grant_deltas, overshoot=st.sampled_from([1e-30, 1e-18, 1e-12, 1e-6]))
def test_no_overshoot_of_any_size_past_a_spent_delta_grant(
    ledgers: Ledgers, delta: float, overshoot: float
) -> None:
    ledger = funded(ledgers, PrivacyLoss(10.0, delta))
    with pytest.raises(BudgetExhaustedError):
        reserve(ledger, 0.1, math.nextafter(delta, 1.0))
    reserve(ledger, 0.1, delta)
    with pytest.raises(BudgetExhaustedError, match="privacy budget exhausted") as refused:
        reserve(ledger, 0.1, overshoot)
    assert refused.value.hint is not None and "the δ is what is short" in refused.value.hint
    assert ledger.balance("alice", "demo").remaining_delta == 0


@LEDGER_PROPERTY
@given(
    share=st.sampled_from([0.1, 0.01, 0.3, 1 / 3, 0.7, 1e-9, 1e-12, 1e-30, 0.123456789012345]),
    count=st.integers(min_value=2, max_value=12),
)
def test_spends_adding_up_exactly_to_the_grant_are_all_accepted(
    ledgers: Ledgers, share: float, count: int
) -> None:
    """0.1 × 3 == 0.3: a grant of ``count`` shares pays for exactly ``count`` spends of one share —
    then not one quantum more."""
    grant = float(exact(share) * count)
    assume(exact(grant) == exact(share) * count)  # the grant is a float whose decimal is the sum
    ledger = funded(ledgers, PrivacyLoss(grant))
    for _ in range(count):
        reserve(ledger, share)
    with pytest.raises(BudgetExhaustedError):
        reserve(ledger, ONE_QUANTUM)
    assert ledger.balance("alice", "demo").remaining_epsilon == 0


def test_three_tenths_pay_for_three_queries_of_one_tenth(ledgers: Ledgers) -> None:
    ledger = funded(ledgers, PrivacyLoss(0.3))
    for _ in range(3):
        ledger.commit(reserve(ledger, 0.1))
    assert ledger.balance("alice", "demo").spent_epsilon == 0.3


def test_a_revoke_of_everything_left_leaves_exactly_nothing(ledgers: Ledgers) -> None:
    ledger = funded(ledgers, PrivacyLoss(1.0, 1e-9))
    reserve(ledger, 0.1234567890123456789e-10)  # 27 decimals: still exact
    balance = ledger.revoke("alice", "demo")
    assert (balance.remaining_epsilon, balance.remaining_delta) == (0, 0)
    with pytest.raises(BudgetExhaustedError):
        reserve(ledger, ONE_QUANTUM)


# -- caps, renewals, partitions ------------------------------------------------------------------------


@LEDGER_PROPERTY
@given(cap=grant_epsilons, overshoot=st.sampled_from([1e-30, 1e-12, 5e-324]))
def test_no_overshoot_past_a_dataset_cap_across_analysts(
    ledgers: Ledgers, cap: float, overshoot: float
) -> None:
    ledger = funded(ledgers, PrivacyLoss(100.0))
    ledger.add_analyst("bob", VERIFIER)
    ledger.grant("bob", "demo", PrivacyLoss(100.0))
    ledger.set_cap("demo", PrivacyLoss(cap))
    half = float_down(charge_units(cap) // 2)
    reserve(ledger, half)
    rest = float(exact(cap) - exact(half))
    assume(exact(rest) == exact(cap) - exact(half))
    ledger.reserve("bob", "demo", PrivacyLoss(rest), statement="SELECT 2")
    for analyst in ("alice", "bob"):
        with pytest.raises((BudgetExhaustedError, InvalidBudgetError)):
            ledger.reserve(analyst, "demo", PrivacyLoss(overshoot), statement="SELECT 3")
    assert ledger.cap("demo").spent_epsilon == cap


def test_a_renewing_grant_is_exact_in_every_period(ledgers: Ledgers) -> None:
    """(0.4, 1e-12) a month: four spends of (0.1, 2.5e-13) fit exactly, in January and again in
    February — not one ulp of ε, nor one quantum of δ, more."""
    clock = Clock(datetime(2026, 1, 31, 23, tzinfo=UTC))
    ledger = ledgers.new(clock=clock)
    ledger.add_analyst("alice", VERIFIER)
    ledger.grant("alice", "demo", PrivacyLoss(0.4, 1e-12), renewal="month")
    for _month in ("January", "February"):
        for _ in range(3):
            reserve(ledger, 0.1, 2.5e-13)
        with pytest.raises(BudgetExhaustedError, match=r"delta 0\.00000000000025000000000000005 on"):
            reserve(ledger, 0.1, math.nextafter(2.5e-13, 1.0))  # one ulp of δ too much
        with pytest.raises(BudgetExhaustedError):
            reserve(ledger, math.nextafter(0.1, math.inf), 2.5e-13)
        reserve(ledger, 0.1, 2.5e-13)
        with pytest.raises(BudgetExhaustedError):
            reserve(ledger, ONE_QUANTUM)
        balance = ledger.balance("alice", "demo")
        assert (balance.remaining_epsilon, balance.remaining_delta) == (0, 0)
        clock.now += timedelta(hours=2)
    assert ledger.verify() == []


NORTH = Partition("patients.region", ("north",))
SOUTH = Partition("patients.region", ("south",))


@LEDGER_PROPERTY
@given(grant=grant_epsilons, overshoot=st.sampled_from([1e-30, 1e-12]))
def test_no_overshoot_in_any_partition_value(ledgers: Ledgers, grant: float, overshoot: float) -> None:
    """Parallel composition: north and south may each spend the whole grant — and not a quantum more,
    in either value or outside them."""
    ledger = funded(ledgers, PrivacyLoss(grant))
    reserve(ledger, grant, partition=NORTH)
    reserve(ledger, grant, partition=SOUTH)
    for partition in (NORTH, SOUTH, None):  # a value not charged yet ("east") still has its whole grant
        with pytest.raises(BudgetExhaustedError):
            reserve(ledger, overshoot, partition=partition)
    assert ledger.balance("alice", "demo").spent_epsilon == grant
    assert ledger.verify() == []


def test_grants_and_caps_finer_than_the_quantum_are_refused_not_rounded(ledgers: Ledgers) -> None:
    ledger = funded(ledgers, PrivacyLoss(1.0))
    with pytest.raises(InvalidBudgetError, match=r"epsilon 1\.5e-30 is finer than the ledger's quantum"):
        ledger.grant("alice", "demo", PrivacyLoss(1.5e-30))
    with pytest.raises(InvalidBudgetError, match=r"delta 2\.5e-31 is finer than the ledger's quantum"):
        ledger.set_cap("demo", PrivacyLoss(1.0, 2.5e-31))
    with pytest.raises(InvalidBudgetError, match="finer than the ledger's quantum"):
        ledger.revoke("alice", "demo", PrivacyLoss(1.5e-30))
    assert ledger.balance("alice", "demo").granted_epsilon == 1.0
    assert ledger.cap("demo").cap_epsilon is None
