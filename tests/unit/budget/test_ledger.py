"""The epsilon ledger: analysts, grants, reserve/commit/cancel, and no overspending under concurrency."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget.amounts import decimal_sum
from budget.errors import (
    AnalystExistsError,
    BudgetExhaustedError,
    InvalidBudgetError,
    InvalidNameError,
    InvalidVerifierError,
    LedgerStoreError,
    UnknownAnalystError,
    UnknownReservationError,
)
from budget.ledger import Analyst, Balance, Ledger, SpendState
from budget.loss import PrivacyLoss

VERIFIER = "SCRAM-SHA-256$4096:c2FsdHNhbHQ=$c3RvcmVka2V5:c2VydmVya2V5"
OTHER_VERIFIER = "SCRAM-SHA-256$8192:b3RoZXJzYWx0$b3RoZXJzdG9yZWQ=:b3RoZXJzZXJ2ZXI="
REPO_ROOT = Path(__file__).resolve().parents[3]


def fixed_clock(start: datetime) -> Callable[[], datetime]:
    """A clock that ticks one second per call, so timestamps are predictable."""
    ticks = iter(range(1_000_000))
    return lambda: start + timedelta(seconds=next(ticks))


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    """A ledger where alice holds epsilon 1.0 and delta 1e-5 on dataset demo."""
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    ledger.add_analyst("alice", VERIFIER)
    ledger.grant("alice", "demo", PrivacyLoss(1.0, 1e-5))
    return ledger


def spend(ledger: Ledger, epsilon: float, delta: float = 0.0, *, dataset: str = "demo") -> int:
    return ledger.reserve("alice", dataset, PrivacyLoss(epsilon, delta), statement="SELECT COUNT(*) FROM t")


# -- the store ------------------------------------------------------------------------------------


def test_create_is_idempotent_and_keeps_data(ledger: Ledger) -> None:
    again = Ledger.create(ledger.path)
    assert again.balance("alice", "demo").granted_epsilon == 1.0


def test_open_finds_an_existing_ledger(ledger: Ledger) -> None:
    assert Ledger.open(ledger.path).verifier("alice") == VERIFIER


def test_open_requires_the_file_to_exist(tmp_path: Path) -> None:
    missing = tmp_path / "missing.sqlite"
    with pytest.raises(LedgerStoreError, match=r"no ledger at .*missing\.sqlite; run `veil init-demo`"):
        Ledger.open(missing)
    assert not missing.exists()


def test_open_refuses_a_file_that_is_not_sqlite(tmp_path: Path) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_bytes(b"not a database " * 300)
    with pytest.raises(LedgerStoreError, match=r"notes\.txt is not a Veil ledger") as raised:
        Ledger.open(junk)
    assert "veil init-demo" in (raised.value.hint or "")


def test_create_refuses_a_foreign_sqlite_database(tmp_path: Path) -> None:
    other = tmp_path / "app.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (id INTEGER)")
    conn.close()
    with pytest.raises(LedgerStoreError, match=r"app\.sqlite is not a Veil ledger \(it already holds"):
        Ledger.create(other)


def test_open_refuses_a_newer_schema(ledger: Ledger) -> None:
    with sqlite3.connect(ledger.path) as conn:
        conn.execute("UPDATE schema_version SET version = 99")
    conn.close()
    with pytest.raises(LedgerStoreError, match="schema version 99"):
        Ledger.open(ledger.path)


def test_uses_wal_journal_mode(ledger: Ledger) -> None:
    conn = sqlite3.connect(ledger.path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        conn.close()


def test_spends_cannot_be_deleted_behind_the_ledgers_back(ledger: Ledger) -> None:
    spend(ledger, 0.5)
    conn = sqlite3.connect(ledger.path)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("DELETE FROM spends")
    finally:
        conn.close()


# -- analysts -------------------------------------------------------------------------------------


def test_verifier_round_trip(ledger: Ledger) -> None:
    assert ledger.verifier("alice") == VERIFIER


def test_set_verifier_replaces_it(ledger: Ledger) -> None:
    ledger.set_verifier("alice", OTHER_VERIFIER)
    assert ledger.verifier("alice") == OTHER_VERIFIER


def test_verifier_of_unknown_analyst_is_none(ledger: Ledger) -> None:
    assert ledger.verifier("mallory") is None


def test_refuses_a_plaintext_password_as_verifier(ledger: Ledger) -> None:
    with pytest.raises(InvalidVerifierError, match="not a SCRAM-SHA-256 verifier"):
        ledger.add_analyst("bob", "hunter2")


def test_add_analyst_twice_is_refused(ledger: Ledger) -> None:
    with pytest.raises(AnalystExistsError, match='analyst "alice" already exists'):
        ledger.add_analyst("alice", VERIFIER)


@pytest.mark.parametrize("name", ["", "a b", "x" * 64, "zoë", "bob;drop", "a/b"])
def test_refuses_invalid_analyst_names(ledger: Ledger, name: str) -> None:
    with pytest.raises(InvalidNameError, match=r"analyst name .* is not allowed"):
        ledger.add_analyst(name, VERIFIER)


def test_accepts_names_of_letters_digits_and_punctuation(ledger: Ledger) -> None:
    name = "A.b-c_9" + "x" * 56
    ledger.add_analyst(name, VERIFIER)
    assert ledger.verifier(name) == VERIFIER


def test_list_analysts_is_sorted_and_timestamped_by_the_clock(tmp_path: Path) -> None:
    start = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    ledger = Ledger.create(tmp_path / "ledger.sqlite", clock=fixed_clock(start))
    ledger.add_analyst("zed", VERIFIER)
    ledger.add_analyst("amy", VERIFIER)
    assert ledger.list_analysts() == [
        Analyst("amy", start + timedelta(seconds=1)),
        Analyst("zed", start),
    ]


def test_timestamps_are_stored_in_utc(tmp_path: Path) -> None:
    tokyo = timezone(timedelta(hours=9))
    ledger = Ledger.create(tmp_path / "ledger.sqlite", clock=lambda: datetime(2024, 5, 1, 9, tzinfo=tokyo))
    created = ledger.add_analyst("amy", VERIFIER).created_at
    assert created == datetime(2024, 5, 1, 0, tzinfo=UTC)
    assert created.utcoffset() == timedelta(0)


def test_remove_analyst_revokes_login_and_spending(ledger: Ledger) -> None:
    ledger.remove_analyst("alice")
    assert ledger.verifier("alice") is None
    with pytest.raises(UnknownAnalystError):
        spend(ledger, 0.1)


def test_readded_analyst_keeps_what_was_spent(ledger: Ledger) -> None:
    spend(ledger, 0.75)
    ledger.remove_analyst("alice")
    ledger.add_analyst("alice", VERIFIER)
    assert ledger.balance("alice", "demo").remaining_epsilon == 0.25


def test_remove_unknown_analyst_is_refused(ledger: Ledger) -> None:
    with pytest.raises(UnknownAnalystError, match='analyst "bob" does not exist') as raised:
        ledger.remove_analyst("bob")
    assert raised.value.hint == "run `veil analyst add bob` to create it"


# -- grants and balances --------------------------------------------------------------------------


def test_grant_to_unknown_analyst_says_how_to_add_one(ledger: Ledger) -> None:
    with pytest.raises(UnknownAnalystError, match=r'^analyst "bob" does not exist$') as raised:
        ledger.grant("bob", "demo", PrivacyLoss(1.0))
    assert raised.value.hint == "run `veil analyst add bob` to create it"


def test_grant_needs_positive_epsilon(ledger: Ledger) -> None:
    with pytest.raises(InvalidBudgetError, match="epsilon > 0"):
        ledger.grant("alice", "demo", PrivacyLoss(0.0))


def test_grants_add_up(ledger: Ledger) -> None:
    balance = ledger.grant("alice", "demo", PrivacyLoss(0.5, 1e-5))
    assert (balance.granted_epsilon, balance.granted_delta) == (1.5, 2e-5)


def test_balance_without_grant_is_zero(ledger: Ledger) -> None:
    assert ledger.balance("alice", "other") == Balance("alice", "other", 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def test_balance_of_unknown_analyst_is_refused(ledger: Ledger) -> None:
    with pytest.raises(UnknownAnalystError):
        ledger.balance("bob", "demo")


def test_balances_list_every_pair_with_a_grant(ledger: Ledger) -> None:
    ledger.add_analyst("bob", VERIFIER)
    ledger.add_analyst("carol", VERIFIER)
    ledger.grant("bob", "sales", PrivacyLoss(2.0))
    ledger.grant("alice", "sales", PrivacyLoss(3.0))
    pairs = [(b.analyst, b.dataset, b.granted_epsilon) for b in ledger.balances()]
    assert pairs == [("alice", "demo", 1.0), ("alice", "sales", 3.0), ("bob", "sales", 2.0)]


def test_balances_of_one_analyst(ledger: Ledger) -> None:
    ledger.add_analyst("bob", VERIFIER)
    ledger.grant("bob", "sales", PrivacyLoss(2.0))
    assert [b.dataset for b in ledger.balances("bob")] == ["sales"]


# -- spending -------------------------------------------------------------------------------------


def test_reserve_debits_the_balance(ledger: Ledger) -> None:
    spend(ledger, 0.25, 1e-6)
    balance = ledger.balance("alice", "demo")
    assert (balance.spent_epsilon, balance.remaining_epsilon) == (0.25, 0.75)
    assert balance.spent_delta == 1e-6


def test_overspend_is_refused_and_spends_nothing(ledger: Ledger) -> None:
    spend(ledger, 0.75)
    before = ledger.balance("alice", "demo")
    with pytest.raises(BudgetExhaustedError):
        spend(ledger, 0.5)
    assert ledger.balance("alice", "demo") == before
    assert len(ledger.history("alice")) == 1


def test_exhausted_error_says_what_was_asked_and_what_remains(ledger: Ledger) -> None:
    spend(ledger, 0.75)
    with pytest.raises(
        BudgetExhaustedError, match=r"asked for epsilon 0\.5 .*only epsilon 0\.25 .*remains"
    ) as e:
        spend(ledger, 0.5)
    assert e.value.hint == "ask an administrator for more budget (veil budget grant) or lower veil.epsilon"


def test_delta_overspend_is_refused(ledger: Ledger) -> None:
    with pytest.raises(BudgetExhaustedError, match="delta"):
        spend(ledger, 0.1, 2e-5)


def test_reserve_without_a_grant_is_refused(ledger: Ledger) -> None:
    with pytest.raises(BudgetExhaustedError, match='dataset "other"'):
        spend(ledger, 0.1, dataset="other")


def test_reserve_for_unknown_analyst_is_refused(ledger: Ledger) -> None:
    with pytest.raises(UnknownAnalystError, match='analyst "bob" does not exist') as raised:
        ledger.reserve("bob", "demo", PrivacyLoss(0.1), statement="SELECT 1")
    assert "veil analyst add bob" in (raised.value.hint or "")


def test_reserve_needs_positive_epsilon(ledger: Ledger) -> None:
    with pytest.raises(InvalidBudgetError, match="epsilon > 0"):
        spend(ledger, 0.0)


def test_exact_fit_is_accepted(ledger: Ledger) -> None:
    spend(ledger, 0.25)
    spend(ledger, 0.75, 1e-5)
    assert ledger.balance("alice", "demo").remaining_epsilon == 0.0


def test_ten_tenths_fit_into_one(ledger: Ledger) -> None:
    for _ in range(10):
        spend(ledger, 0.1)
    with pytest.raises(BudgetExhaustedError):
        spend(ledger, 1e-9)


def test_reserving_exactly_what_remains_is_accepted(ledger: Ledger) -> None:
    spend(ledger, 0.3)
    spend(ledger, 0.1)
    remaining = ledger.balance("alice", "demo").remaining_epsilon
    spend(ledger, remaining)
    assert ledger.balance("alice", "demo").spent_epsilon == 1.0


def test_cancel_releases_the_reservation(ledger: Ledger) -> None:
    reservation = spend(ledger, 1.0)
    ledger.cancel(reservation)
    assert ledger.balance("alice", "demo").spent_epsilon == 0.0
    spend(ledger, 1.0)


def test_commit_keeps_the_charge(ledger: Ledger) -> None:
    ledger.commit(spend(ledger, 0.5))
    assert ledger.balance("alice", "demo").spent_epsilon == 0.5


def test_reserved_but_not_committed_counts_as_spent_after_a_crash(ledger: Ledger) -> None:
    spend(ledger, 0.5)
    restarted = Ledger.open(ledger.path)
    assert restarted.balance("alice", "demo").spent_epsilon == 0.5
    assert [s.state for s in restarted.history("alice")] == [SpendState.RESERVED]


@pytest.mark.parametrize("close", [Ledger.commit, Ledger.cancel])
def test_a_closed_reservation_cannot_change_again(
    ledger: Ledger, close: Callable[[Ledger, int], None]
) -> None:
    reservation = spend(ledger, 0.5)
    ledger.commit(reservation)
    with pytest.raises(
        UnknownReservationError, match=f"reservation {reservation} is not open: it is already committed"
    ):
        close(ledger, reservation)


def test_unknown_reservation_is_refused(ledger: Ledger) -> None:
    with pytest.raises(UnknownReservationError, match="there is no reservation 42"):
        ledger.cancel(42)


def test_history_records_every_state_in_order(tmp_path: Path) -> None:
    start = datetime(2024, 5, 1, tzinfo=UTC)
    ledger = Ledger.create(tmp_path / "ledger.sqlite", clock=fixed_clock(start))
    ledger.add_analyst("alice", VERIFIER)
    ledger.grant("alice", "demo", PrivacyLoss(1.0))
    ledger.commit(first := spend(ledger, 0.1))
    ledger.cancel(spend(ledger, 0.2))
    spend(ledger, 0.3)
    history = ledger.history("alice")
    assert [(s.epsilon, s.state) for s in history] == [
        (0.1, SpendState.COMMITTED),
        (0.2, SpendState.CANCELLED),
        (0.3, SpendState.RESERVED),
    ]
    assert history[0].id == first
    assert history[0].statement == "SELECT COUNT(*) FROM t"
    assert history[0].updated_at > history[0].created_at


def test_history_filters_by_dataset(ledger: Ledger) -> None:
    ledger.grant("alice", "sales", PrivacyLoss(1.0))
    spend(ledger, 0.1)
    spend(ledger, 0.2, dataset="sales")
    assert [s.dataset for s in ledger.history("alice", "sales")] == ["sales"]
    assert len(ledger.history("alice")) == 2


# -- concurrency ----------------------------------------------------------------------------------


def race(ledgers: list[Ledger], attempts: int, epsilon: float) -> int:
    """``attempts`` threads, all released at once, each reserving ``epsilon``; returns how many got it."""
    barrier = threading.Barrier(attempts)
    successes: list[int] = []
    refusals: list[BudgetExhaustedError] = []

    def attempt(ledger: Ledger) -> None:
        barrier.wait()
        try:
            successes.append(ledger.reserve("alice", "demo", PrivacyLoss(epsilon), statement="race"))
        except BudgetExhaustedError as refused:
            refusals.append(refused)

    threads = [threading.Thread(target=attempt, args=(ledgers[i % len(ledgers)],)) for i in range(attempts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(successes) + len(refusals) == attempts
    return len(successes)


def test_fifty_threads_never_overspend(ledger: Ledger) -> None:
    assert race([ledger], attempts=50, epsilon=0.1) == 10
    balance = ledger.balance("alice", "demo")
    assert balance.spent_epsilon <= balance.granted_epsilon


def test_two_ledger_objects_on_one_file_never_overspend(ledger: Ledger) -> None:
    assert race([ledger, Ledger.open(ledger.path)], attempts=30, epsilon=0.1) == 10
    balance = Ledger.open(ledger.path).balance("alice", "demo")
    assert balance.spent_epsilon <= balance.granted_epsilon


PROCESS_WORKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from budget.errors import BudgetExhaustedError
    from budget.ledger import Ledger
    from budget.loss import PrivacyLoss

    ledger = Ledger.open(Path(sys.argv[1]))
    won = 0
    for _ in range(8):
        try:
            ledger.reserve("alice", "demo", PrivacyLoss(0.1), statement="process")
            won += 1
        except BudgetExhaustedError:
            pass
    print(won)
    """
)


def test_separate_processes_never_overspend(ledger: Ledger) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", PROCESS_WORKER, str(ledger.path)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(4)
    ]
    won = [int(worker.communicate(timeout=60)[0]) for worker in workers]
    assert sum(won) == 10
    assert ledger.balance("alice", "demo").spent_epsilon <= 1.0


# -- property -------------------------------------------------------------------------------------

operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("reserve"),
            st.floats(min_value=0.01, max_value=0.7, allow_nan=False),
            st.sampled_from([0.0, 1e-6, 4e-6]),
        ),
        st.tuples(st.sampled_from(["commit", "cancel"]), st.integers(0, 20), st.just(0.0)),
    ),
    max_size=12,
)


@settings(max_examples=30, deadline=None, database=None)
@given(grant=st.floats(min_value=0.1, max_value=2.0, allow_nan=False), steps=operations)
def test_no_sequence_of_operations_overspends(
    tmp_path_factory: pytest.TempPathFactory, grant: float, steps: list[tuple[str, float, float]]
) -> None:
    ledger = Ledger.create(tmp_path_factory.mktemp("property") / "ledger.sqlite")
    ledger.add_analyst("alice", VERIFIER)
    ledger.grant("alice", "demo", PrivacyLoss(grant, 1e-5))
    counting: dict[int, float] = {}  # reserved or committed: what the ledger must count as spent
    still_open: set[int] = set()
    reservations: list[int] = []
    for action, amount, delta in steps:
        if action == "reserve":
            try:
                reservation = spend(ledger, amount, delta)
            except BudgetExhaustedError:
                continue
            reservations.append(reservation)
            still_open.add(reservation)
            counting[reservation] = amount
        elif reservations:
            reservation = reservations[int(amount) % len(reservations)]
            if reservation not in still_open:
                with pytest.raises(UnknownReservationError):
                    getattr(ledger, action)(reservation)
                continue
            getattr(ledger, action)(reservation)
            still_open.remove(reservation)
            if action == "cancel":
                del counting[reservation]
        balance = ledger.balance("alice", "demo")
        assert balance.spent_epsilon <= balance.granted_epsilon
        assert balance.spent_delta <= balance.granted_delta
        assert balance.spent_epsilon == float(decimal_sum(counting.values()))  # exact decimals
    remaining = ledger.balance("alice", "demo")
    if remaining.remaining_epsilon > 0:
        spend(ledger, remaining.remaining_epsilon, remaining.remaining_delta)
