"""The ledger's clock and its SQLite lock: a naive clock is read as UTC, renewal periods start at
midnight UTC whatever the process's time zone, an upgrade on open keeps the clock it was given, and
reads (opening, balances, verifiers, open reservations) never wait for another process's write lock.

Found by mutation testing of budget/ledger.py (issue 21)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from budget.errors import LedgerStoreError
from budget.ledger import Ledger, period_start
from budget.loss import PrivacyLoss
from tests.unit.budget import test_ledger, test_mutants_budget_records
from tests.unit.budget.test_group_commit import write_lock_held
from tests.unit.budget.test_ledger import VERIFIER, Clock, spend

ledgers = test_ledger.ledgers
new_york = test_mutants_budget_records.new_york

# 02:00 UTC on 1 March 2024 is still 29 February (21:00) in New York.
EARLY_MARCH_UTC = datetime(2024, 3, 1, 2, 0, tzinfo=UTC)


def test_a_naive_clock_is_read_as_utc(ledgers: test_ledger.Ledgers) -> None:
    """A clock without a zone gives UTC times, stored and read back as aware datetimes."""
    ledger = ledgers.new(clock=lambda: datetime(2024, 5, 1, 9, 30))
    created = ledger.add_analyst("amy", VERIFIER).created_at
    assert created == datetime(2024, 5, 1, 9, 30, tzinfo=UTC)
    assert [analyst.created_at for analyst in ledger.list_analysts()] == [created]


@pytest.mark.parametrize(
    ("renewal", "start"), [("day", "2024-03-01"), ("month", "2024-03-01"), ("week", "2024-02-26")]
)
def test_period_start_is_in_utc_whatever_the_local_zone(new_york: None, renewal: str, start: str) -> None:
    """The period a spend counts in must not depend on the zone of the host that reserved it: two
    proxies in different zones share one ledger."""
    assert period_start(renewal, EARLY_MARCH_UTC) == start


def test_a_daily_grant_renews_at_midnight_utc_in_new_york(
    ledgers: test_ledger.Ledgers, new_york: None
) -> None:
    clock = Clock(datetime(2024, 2, 29, 12, tzinfo=UTC))
    ledger = ledgers.new(clock=clock)
    ledger.add_analyst("alice", VERIFIER)
    ledger.grant("alice", "demo", PrivacyLoss(1.0), renewal="day")
    spend(ledger, 1.0)
    clock.now = EARLY_MARCH_UTC
    balance = ledger.balance("alice", "demo")
    assert (balance.period_start, balance.remaining_epsilon) == (date(2024, 3, 1), 1.0)


def test_opening_an_older_ledger_keeps_the_clock_it_was_given(ledgers: test_ledger.Ledgers) -> None:
    """Ledger.open upgrades a version-4 ledger by creating it again: the ledger it returns must still
    use the caller's clock (a test's, or a tool's) for its timestamps and renewal periods."""
    location, schema = ledgers.version_4()
    at = datetime(2030, 6, 1, 12, tzinfo=UTC)
    ledger = ledgers.open(location, schema, clock=lambda: at)
    assert ledger.upgraded_from == 4
    assert ledger.add_analyst("zed", VERIFIER).created_at == at


@pytest.fixture
def quick(tmp_path: Path) -> Ledger:
    """An SQLite ledger that gives up on a held lock after 0.2 s; alice holds ε 1 and has one reservation."""
    location = tmp_path / "ledger.sqlite"
    ledger = Ledger.create(location, lock_timeout=0.2)
    ledger.add_analyst("alice", VERIFIER)
    ledger.grant("alice", "demo", PrivacyLoss(1.0))
    spend(ledger, 0.25)
    return ledger


def test_reads_do_not_wait_for_another_processs_write_lock(quick: Ledger) -> None:
    """Authentication, `veil budget show` and the reservations list must answer while another process
    (a proxy reserving) holds SQLite's write lock — a read that took it would fail as locked."""
    with write_lock_held(quick.path):
        assert quick.verifier("alice") == VERIFIER
        assert quick.balance("alice", "demo").remaining_epsilon == 0.75
        assert [reserved.epsilon for reserved in quick.reservations("demo")] == [0.25]
        again = Ledger.open(quick.path, lock_timeout=0.2)
        again.close()
        with pytest.raises(LedgerStoreError) as locked:  # while a write does wait, and fails
            quick.grant("alice", "demo", PrivacyLoss(1.0))
    assert locked.value.fault == "locked"
    quick.close()


def test_the_default_clock_is_utc_whatever_the_local_zone(tmp_path: Path, new_york: None) -> None:
    """Without a test clock the ledger stamps rows with the real time in UTC — not New York's wall time
    labelled UTC, five hours off, which would put spends in the wrong renewal period."""
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    before = datetime.now(UTC)
    created = ledger.add_analyst("amy", VERIFIER).created_at
    after = datetime.now(UTC)
    ledger.close()
    assert before <= created <= after
