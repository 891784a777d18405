"""Group commit's limits and failures: a batch holds at most ``max_batch`` members, and a member that
cannot be undone stops the whole batch from committing — every member gets the error, nothing of the
batch is written, and the store is usable afterwards.

Found by mutation testing (issue 21): the batch size and the failure of a member's savepoint were not
pinned by tests/unit/budget/test_group_commit.py."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from budget.group_commit import GroupCommitter
from budget.ledger import Ledger
from budget.store import LedgerStore, SQLiteStore, Transaction
from tests.unit.budget.test_group_commit import CountingStore, held_batch

VERIFIER = "SCRAM-SHA-256$4096:c2FsdHNhbHQ=$c3RvcmVka2V5:c2VydmVya2V5"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CountingStore]:
    Ledger.create(tmp_path / "ledger.sqlite").close()
    opened = CountingStore(tmp_path / "ledger.sqlite")
    yield opened
    opened.close()


def inserting(committer: GroupCommitter, name: str) -> Callable[[], object]:
    def body() -> object:
        with committer.transaction() as tx:
            tx.execute(
                "INSERT INTO analysts (name, verifier, created_at) VALUES (?, ?, '')", (name, VERIFIER)
            )
        return name

    return body


def names(store: LedgerStore) -> list[str]:
    with store.transaction(write=False) as tx:
        return sorted(str(row[0]) for row in tx.execute("SELECT name FROM analysts"))


def test_a_batch_holds_at_most_max_batch_members(store: CountingStore) -> None:
    """Five queued members with ``max_batch`` = 2 commit in batches of 2, 2 and 1: the first batch's
    transaction was opened before the count was reset, so two more write transactions follow."""
    committer = GroupCommitter(store, max_batch=2)
    outcomes = held_batch(store, committer, [inserting(committer, f"a{n}") for n in range(5)])
    assert sorted(outcomes) == ["a0", "a1", "a2", "a3", "a4"]  # type: ignore[type-var]
    assert store.writes == 2
    assert names(store) == ["a0", "a1", "a2", "a3", "a4"]


def test_a_thread_alone_commits_at_once(store: CountingStore) -> None:
    committer = GroupCommitter(store)
    assert inserting(committer, "alone")() == "alone"
    assert inserting(committer, "again")() == "again"
    assert store.writes == 2 and committer.queued == 0
    assert names(store) == ["again", "alone"]


class _FailingRelease:
    """The batch's transaction, failing the release of chosen members' savepoints (as a broken
    connection or a full disk could)."""

    def __init__(self, inner: Transaction, store: FaultyStore) -> None:
        self._inner = inner
        self._store = store

    def execute(self, sql: str, parameters: Sequence[object] = ()) -> list[tuple[object, ...]]:
        if sql.startswith("RELEASE"):
            self._store.releases += 1
            if self._store.releases in self._store.failing:
                raise sqlite3.OperationalError("disk I/O error (injected)")
        return self._inner.execute(sql, parameters)


class FaultyStore(CountingStore):
    """The real SQLite store, whose n-th savepoint release fails for every n in ``failing``."""

    releases = 0
    failing: frozenset[int] = frozenset()

    def transaction(self, *, write: bool, durable: bool = True) -> AbstractContextManager[Transaction]:
        @contextmanager
        def wrapped() -> Iterator[Transaction]:
            with super(FaultyStore, self).transaction(write=write, durable=durable) as inner:
                yield _FailingRelease(inner, self)

        return wrapped()


@pytest.fixture
def faulty(tmp_path: Path) -> Iterator[FaultyStore]:
    Ledger.create(tmp_path / "ledger.sqlite").close()
    opened = FaultyStore(tmp_path / "ledger.sqlite")
    yield opened
    opened.close()


def test_a_member_that_cannot_be_undone_fails_the_whole_batch(faulty: FaultyStore) -> None:
    """Alone: the one member's release fails, so its batch is rolled back and it gets the error."""
    committer = GroupCommitter(faulty)
    faulty.failing = frozenset({1})
    with pytest.raises(sqlite3.OperationalError, match="injected"):
        inserting(committer, "lost")()
    assert names(faulty) == []
    assert inserting(committer, "kept")() == "kept"  # the store and the committer still work
    assert names(faulty) == ["kept"]


def test_a_failed_member_takes_the_earlier_members_of_its_batch_with_it(faulty: FaultyStore) -> None:
    """Three queued members; the second one's release fails. The batch ends there, rolled back: the
    first two get the error (no debit they wrote is durable), the third runs in a batch of its own."""
    committer = GroupCommitter(faulty)
    faulty.failing = frozenset({2})
    outcomes = held_batch(faulty, committer, [inserting(committer, name) for name in ("one", "two", "three")])
    failed = [outcome for outcome in outcomes if isinstance(outcome, sqlite3.OperationalError)]
    succeeded = [outcome for outcome in outcomes if isinstance(outcome, str)]
    assert len(failed) == 2 and len(succeeded) == 1
    assert names(faulty) == succeeded
    assert faulty.writes == 1  # the third member's own batch


def test_group_commit_on_a_plain_store_writes_durably(tmp_path: Path) -> None:
    """The batch is a write transaction with the flush: ``synchronous`` is FULL inside it."""
    Ledger.create(tmp_path / "ledger.sqlite").close()
    store = SQLiteStore(tmp_path / "ledger.sqlite")
    try:
        with GroupCommitter(store).transaction() as tx:
            assert tx.execute("PRAGMA synchronous") == [(2,)]
    finally:
        store.close()
