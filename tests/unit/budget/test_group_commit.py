"""Group commit (budget/group_commit.py): reservations that wait for the ledger's lock together are
committed together, each in a savepoint of its own, and none returns before the batch is durable.

Batches are made deterministic by holding SQLite's write lock from another connection while the
threads queue up; kill -9 in the middle of a stream of batches is tested in a child process.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from budget.errors import BudgetExhaustedError
from budget.group_commit import GroupCommitter
from budget.ledger import Ledger, SpendState
from budget.loss import PrivacyLoss
from budget.store import SQLiteStore, Transaction

VERIFIER = "SCRAM-SHA-256$4096:c2FsdHNhbHQ=$c3RvcmVka2V5:c2VydmVya2V5"
REPO_ROOT = Path(__file__).resolve().parents[3]


class CountingStore(SQLiteStore):
    """The real SQLite store, counting the write transactions it opens."""

    writes = 0

    def transaction(self, *, write: bool, durable: bool = True) -> AbstractContextManager[Transaction]:
        if write:
            self.writes += 1
        return super().transaction(write=write, durable=durable)


@contextmanager
def write_lock_held(path: Path) -> Iterator[None]:
    """SQLite's write lock, held by another connection (as another process would) until the block ends."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        connection.execute("COMMIT")
        connection.close()


def in_threads(calls: Sequence[Callable[[], object]]) -> tuple[list[object], list[threading.Thread]]:
    """Start one thread per call; the list of outcomes (result or exception) fills as they end."""
    outcomes: list[object] = []

    def run(call: Callable[[], object]) -> None:
        try:
            outcomes.append(call())
        except Exception as error:
            outcomes.append(error)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    return outcomes, threads


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CountingStore]:
    Ledger.create(tmp_path / "ledger.sqlite").close()
    opened = CountingStore(tmp_path / "ledger.sqlite")
    yield opened
    opened.close()


def held_batch(
    store: CountingStore, committer: GroupCommitter, calls: Sequence[Callable[[], object]]
) -> list[object]:
    """Run ``calls`` in threads while another connection holds the write lock, so that the first
    waits in BEGIN and the others queue behind it; let go once all are queued."""
    with write_lock_held(store.path):
        outcomes, threads = in_threads(calls)
        wait_for(lambda: committer.queued == len(calls) - 1)
        store.writes = 0
    for thread in threads:
        thread.join()
    return outcomes


def test_transactions_queued_together_share_one_commit(store: CountingStore) -> None:
    committer = GroupCommitter(store)

    def insert(number: int) -> Callable[[], object]:
        def body() -> object:
            with committer.transaction() as tx:
                tx.execute(
                    "INSERT INTO analysts (name, verifier, created_at) VALUES (?, ?, '')",
                    (f"a{number}", VERIFIER),
                )
            return number

        return body

    outcomes = held_batch(store, committer, [insert(number) for number in range(5)])
    assert sorted(outcomes) == [0, 1, 2, 3, 4]  # type: ignore[type-var]
    assert store.writes == 0  # the batch's transaction was opened before the count was reset
    with store.transaction(write=False) as tx:
        assert len(tx.execute("SELECT name FROM analysts")) == 5


def test_a_failing_member_is_rolled_back_alone(store: CountingStore) -> None:
    committer = GroupCommitter(store)

    def insert(name: str, *, fail: bool) -> Callable[[], object]:
        def body() -> object:
            with committer.transaction() as tx:
                tx.execute(
                    "INSERT INTO analysts (name, verifier, created_at) VALUES (?, ?, '')", (name, VERIFIER)
                )
                if fail:
                    raise ValueError(f"{name} refused")
            return name

        return body

    outcomes = held_batch(
        store,
        committer,
        [insert("first", fail=False), insert("second", fail=True), insert("third", fail=False)],
    )
    refused = [outcome for outcome in outcomes if isinstance(outcome, ValueError)]
    assert [str(error) for error in refused] == ["second refused"]
    assert sorted(o for o in outcomes if isinstance(o, str)) == ["first", "third"]
    with store.transaction(write=False) as tx:
        assert sorted(row[0] for row in tx.execute("SELECT name FROM analysts")) == ["first", "third"]


def test_reservations_in_one_batch_are_checked_against_each_other(store: CountingStore) -> None:
    """A grant of 0.25 and four reservations of 0.1 in one batch: the first two fit, the others are
    refused — each checked against the totals the earlier ones wrote — in one commit."""
    ledger = Ledger(store)
    ledger.add_analyst("alice", VERIFIER)
    ledger.grant("alice", "demo", PrivacyLoss(0.25))
    reserve = lambda: ledger.reserve("alice", "demo", PrivacyLoss(0.1), statement="batch")  # noqa: E731
    outcomes = held_batch(store, ledger._reservations, [reserve] * 4)
    assert sum(isinstance(outcome, int) for outcome in outcomes) == 2
    assert sum(isinstance(outcome, BudgetExhaustedError) for outcome in outcomes) == 2
    assert store.writes == 0  # no transaction of their own: all four rode the one batch
    assert ledger.balance("alice", "demo").spent_epsilon == 0.2
    assert ledger.verify() == []


KILLED_CHILD = textwrap.dedent(
    """
    import sys, threading
    from budget.ledger import Ledger
    from budget.loss import PrivacyLoss

    ledger = Ledger.open(sys.argv[1])
    out = threading.Lock()

    def stream():
        while True:
            spend = ledger.reserve("alice", "demo", PrivacyLoss(0.001), statement="stream")
            with out:  # the answer leaves: only after reserve returned
                sys.stdout.write(f"{spend}\\n")
                sys.stdout.flush()
            ledger.commit(spend)

    for _ in range(int(sys.argv[2])):
        threading.Thread(target=stream, daemon=True).start()
    threading.Event().wait()
    """
)


def test_kill_9_during_batches_loses_no_debit_whose_answer_left(tmp_path: Path) -> None:
    """16 threads stream reservations (batched), each 'releasing' its id on stdout only after
    ``reserve`` returned; SIGKILL once 300 have left. Every released id is in the ledger, still
    counting, and the totals equal the counting spends exactly."""
    path = tmp_path / "ledger.sqlite"
    ledger = Ledger.create(path)
    ledger.add_analyst("alice", VERIFIER)
    ledger.grant("alice", "demo", PrivacyLoss(1000.0))
    ledger.close()
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_CHILD, str(path), "16"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    released: list[int] = []
    try:
        assert child.stdout is not None
        while len(released) < 300:
            line = child.stdout.readline()
            assert line, "the child died before it was killed"
            released.append(int(line))
        os.kill(child.pid, signal.SIGKILL)
        released += [int(line) for line in child.stdout.read().split()]  # what left before the kill
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=10)
        if child.stdout is not None:
            child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    ledger = Ledger.open(path)
    try:
        spends = {spend.id: spend for spend in ledger.history("alice")}
        assert set(released) <= set(spends)
        assert {spends[spend].state for spend in released} <= {SpendState.RESERVED, SpendState.COMMITTED}
        assert ledger.verify() == []  # every running total equals its spends
        counting = sum(spend.state != SpendState.CANCELLED for spend in spends.values())
        assert ledger.balance("alice", "demo").spent_epsilon == pytest.approx(counting * 0.001, rel=1e-12)
    finally:
        ledger.close()
