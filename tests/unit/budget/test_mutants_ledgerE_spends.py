"""Spends as the ledger reads them back: an administrator's resolution of a reservation left by a crash,
and the spends rows the ledger's listings return.

Found by mutation testing of budget/ledger.py (issue 21): ``Ledger.resolve`` had no test in the budget
suites (only the CLI's)."""

from __future__ import annotations

import pytest

from budget.accountants import get_accountant
from budget.errors import UnknownReservationError
from budget.ledger import BASIC, DatasetCap, Ledger, SpendState
from budget.loss import PrivacyLoss
from budget.totals import Release
from tests.unit.budget import test_ledger
from tests.unit.budget.test_ledger import spend

ledgers = test_ledger.ledgers
ledger = test_ledger.ledger

ZCDP = get_accountant("zcdp")


@pytest.mark.parametrize(
    ("release", "state", "remaining"),
    [(True, SpendState.CANCELLED, 1.0), (False, SpendState.COMMITTED, 0.75)],
)
def test_resolve_releases_or_keeps_a_reservation_and_returns_it(
    ledger: Ledger, release: bool, state: SpendState, remaining: float
) -> None:
    """Releasing gives the budget back (nothing was delivered); keeping commits it (an answer may have
    left). Either way the spend comes back as it now is, and it is no longer open."""
    kept = spend(ledger, 0.5)
    reservation = spend(ledger, 0.25)
    resolved = ledger.resolve(reservation, release=release)
    assert (resolved.id, resolved.analyst, resolved.dataset, resolved.epsilon) == (
        reservation,
        "alice",
        "demo",
        0.25,
    )
    assert resolved.state is state
    assert resolved.statement == "SELECT COUNT(*) FROM t"
    assert [open_.id for open_ in ledger.reservations()] == [kept]
    assert ledger.balance("alice", "demo").remaining_epsilon == remaining - 0.5
    assert ledger.verify() == []


@pytest.mark.parametrize("release", [True, False])
def test_resolve_refuses_a_spend_that_is_not_reserved(ledger: Ledger, release: bool) -> None:
    reservation = spend(ledger, 0.25)
    ledger.commit(reservation)
    with pytest.raises(
        UnknownReservationError, match=f"reservation {reservation} is not open: it is already committed"
    ):
        ledger.resolve(reservation, release=release)


def test_balances_compose_each_dataset_under_the_accountant_named_for_it(ledger: Ledger) -> None:
    """`veil budget show` passes the policy's accountant per dataset: a zCDP dataset's spends of ρ must be
    shown as zCDP composes them, not added up as basic composition would."""
    ledger.grant("alice", "sales", PrivacyLoss(1.0, 1e-5))
    for dataset in ("demo", "sales"):
        ledger.reserve("alice", dataset, Release(0.3, 0.0, rho=0.001), statement="SELECT 1", accountant=ZCDP)
    chosen = {"demo": ZCDP, "sales": BASIC}
    balances = {
        balance.dataset: balance for balance in ledger.balances("alice", accountant=chosen.__getitem__)
    }
    assert (balances["demo"].accountant, balances["sales"].accountant) == ("zcdp", "basic")
    assert balances["demo"] == ledger.balance("alice", "demo", accountant=ZCDP)
    assert balances["sales"] == ledger.balance("alice", "sales")
    assert balances["demo"].spent_epsilon < balances["sales"].spent_epsilon == 0.3


def test_a_cap_reports_every_field_spent_by_all_analysts(ledger: Ledger) -> None:
    """`veil budget cap` shows the δ all analysts spent against the cap's δ, not only the ε."""
    ledger.set_cap("demo", PrivacyLoss(2.0, 1e-5))
    spend(ledger, 0.5, 2e-6)
    spend(ledger, 0.25, 1e-6)
    assert ledger.cap("demo") == DatasetCap(
        "demo", cap_epsilon=2.0, cap_delta=1e-5, spent_epsilon=0.75, spent_delta=3e-6, accountant="basic"
    )


def test_a_zcdp_balance_leaves_the_delta_not_spent(ledger: Ledger) -> None:
    """Under zCDP a share of the grant's δ pays for converting ρ; what is left is the rest of the δ —
    never more than was granted."""
    ledger.reserve("alice", "demo", Release(0.3, 2e-6, rho=0.001), statement="SELECT 1", accountant=ZCDP)
    balance = ledger.balance("alice", "demo", accountant=ZCDP)
    assert 0 < balance.spent_delta < balance.granted_delta == 1e-5
    assert balance.remaining_delta == pytest.approx(1e-5 - balance.spent_delta, rel=1e-12)


def test_an_ordinary_spend_is_stored_without_a_partition(ledger: Ledger) -> None:
    """An ordinary spend's row holds '' in both partition columns, as the version-4 upgrade left every
    older spend: anything reading the append-only table (an audit, a later upgrade) finds no partition
    there, and the row can never be rewritten."""
    reservation = spend(ledger, 0.25)
    with ledger.store.transaction(write=False) as tx:
        rows = tx.execute(
            "SELECT partition_column, partition_values FROM spends WHERE id = ?", (reservation,)
        )
    assert [tuple(row) for row in rows] == [("", "")]
