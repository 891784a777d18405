"""What the ledger's refusals say, to the letter: the names a refused name is checked as, the hint a
closed reservation or a refused name carries, which amount an invalid grant names, and which hint a
budget refusal gives when the δ is not what is short.

Found by mutation testing of budget/ledger.py (issue 21): these messages were only matched in part."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from budget.errors import BudgetExhaustedError, InvalidBudgetError, InvalidNameError, UnknownReservationError
from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from tests.unit.budget import test_ledger
from tests.unit.budget.test_ledger import VERIFIER, spend

ledgers = test_ledger.ledgers
ledger = test_ledger.ledger

NAME_HINT = 'use 1 to 63 ASCII letters, digits, "_", "-" or "."'
EXHAUSTED_HINT = "ask an administrator for more budget (veil budget grant) or lower veil.epsilon"


@pytest.mark.parametrize(
    ("kind", "call"),
    [
        ("analyst", lambda ledger: ledger.add_analyst("a b", VERIFIER)),
        ("dataset", lambda ledger: ledger.grant("alice", "a b", PrivacyLoss(1.0))),
        ("dataset", lambda ledger: ledger.set_cap("a b", PrivacyLoss(1.0))),
        (
            "dataset",
            lambda ledger: ledger.reserve("alice", "a b", PrivacyLoss(0.1), statement="SELECT 1"),
        ),
    ],
)
def test_a_refused_name_says_what_it_names_and_what_is_allowed(
    ledger: Ledger, kind: str, call: Callable[[Ledger], object]
) -> None:
    """The administrator is told which argument was wrong (the analyst or the dataset) and how to fix it."""
    with pytest.raises(InvalidNameError) as refused:
        call(ledger)
    assert str(refused.value) == f"{kind} name 'a b' is not allowed"
    assert refused.value.hint == NAME_HINT


@pytest.mark.parametrize("close", [Ledger.commit, Ledger.cancel])
def test_a_closed_reservation_is_refused_with_a_hint(
    ledger: Ledger, close: Callable[[Ledger, int], None]
) -> None:
    reservation = spend(ledger, 0.5)
    ledger.cancel(reservation)
    with pytest.raises(UnknownReservationError) as refused:
        close(ledger, reservation)
    assert str(refused.value) == f"reservation {reservation} is not open: it is already cancelled"
    assert refused.value.hint == "only a reserved spend can be committed or cancelled, and only once"


@pytest.mark.parametrize(
    "call",
    [
        lambda ledger: ledger.grant("alice", "demo", PrivacyLoss(1.0, 1e-31)),
        lambda ledger: ledger.revoke("alice", "demo", PrivacyLoss(0.1, 1e-31)),
        lambda ledger: ledger.set_cap("demo", PrivacyLoss(1.0, 1e-31)),
    ],
)
def test_a_delta_finer_than_the_quantum_is_named_delta(
    ledger: Ledger, call: Callable[[Ledger], object]
) -> None:
    """A δ of 10⁻³¹ cannot be granted, revoked or capped; the refusal names δ, not ε (nor "None")."""
    with pytest.raises(InvalidBudgetError) as refused:
        call(ledger)
    assert str(refused.value) == "delta 1e-31 is finer than the ledger's quantum of 1e-30"


def test_an_epsilon_refusal_with_no_delta_left_or_asked_gives_the_epsilon_hint(
    ledgers: test_ledger.Ledgers,
) -> None:
    """Without a δ grant, a spend of δ 0 that is refused is refused for its ε: the hint must not send
    the analyst after a δ grant (0 asked is not more than the 0 left)."""
    ledger = ledgers.new()
    ledger.add_analyst("alice", VERIFIER)
    ledger.grant("alice", "demo", PrivacyLoss(0.5))
    with pytest.raises(BudgetExhaustedError) as refused:
        spend(ledger, 0.75)
    assert str(refused.value) == (
        'privacy budget exhausted: analyst "alice" asked for epsilon 0.75 on dataset "demo",'
        " but only epsilon 0.5 remains"
    )
    assert refused.value.hint == EXHAUSTED_HINT


def test_an_epsilon_refusal_asking_exactly_the_delta_left_gives_the_epsilon_hint(ledger: Ledger) -> None:
    """δ 10⁻⁵ asked of the 10⁻⁵ left fits: only the ε is short."""
    with pytest.raises(BudgetExhaustedError) as refused:
        spend(ledger, 1.5, 1e-5)
    assert refused.value.hint == EXHAUSTED_HINT
