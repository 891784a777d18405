"""Group commit: reservations that arrive together share one durable write.

Every reservation must be on disk before its query runs (a crash after an answer left must not
forget the debit), and the flush to disk is what a reservation costs most. Databases have long
amortised it the same way (PostgreSQL's ``commit_delay``, InnoDB's group commit; Gray & Reuter,
*Transaction Processing*, 1993, §9.4.4): transactions that are ready while a flush runs are
committed together by the next one.

How: the threads of one process take turns (``_turn``) on one open write transaction of the store
(a *batch*). Each runs its body inside a savepoint, so a body that fails — a refused reservation —
is rolled back alone and the others in the batch stand. A body reads the totals the earlier bodies
of the batch wrote, so every budget check stays exact and serialised. The last thread in line (none
is queued behind it), or the one that fills the batch, commits it — one durable write for all — and
only then does any member return: no reservation is reported, and so no answer released, before its
debit is durable. A commit that fails fails every member.

A thread alone commits at once, as a plain transaction would: group commit adds no latency, it only
shares a flush among threads that were waiting for the lock anyway. Across processes the store's
lock (SQLite's write lock, PostgreSQL's row locks) serialises the batches as it serialised single
transactions.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from budget.store import LedgerStore, Transaction

MAX_BATCH = 64  # members per batch, so that other writers (commits, grants) are never kept waiting long
_SAVEPOINT = "veil_group_member"


class _Batch:
    """One open write transaction and the threads whose bodies ran in it."""

    def __init__(self, store: LedgerStore) -> None:
        self._exit = ExitStack()
        self.transaction: Transaction = self._exit.enter_context(store.transaction(write=True))
        self.members = 0
        self.error: BaseException | None = None  # set: the batch must not (or did not) commit
        self._done = threading.Event()

    def end(self) -> None:
        """Commit durably — or roll back when a member could not be undone — and wake every member;
        a failed commit is every member's error."""
        try:
            if self.error is None:
                self._exit.close()
            else:
                self._exit.__exit__(type(self.error), self.error, self.error.__traceback__)
        except BaseException as error:
            self.error = self.error or error
        finally:
            self._done.set()

    def wait(self) -> None:
        self._done.wait()
        if self.error is not None:
            raise self.error


class GroupCommitter:
    """Durable write transactions of one process, batched (see the module docstring)."""

    def __init__(self, store: LedgerStore, *, max_batch: int = MAX_BATCH) -> None:
        self._store = store
        self._max_batch = max_batch
        self._turn = threading.Lock()  # whose body runs on the batch's transaction now
        self._queue = threading.Lock()  # guards _queued
        self._queued = 0  # threads waiting for their turn
        self._batch: _Batch | None = None

    @property
    def queued(self) -> int:
        """Threads waiting for their turn now: the ones the running batch will take in."""
        with self._queue:
            return self._queued

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """A durable write transaction, perhaps shared with other threads': the body runs in a
        savepoint of the batch; on leaving, the batch is durable (or this raises)."""
        with self._queue:
            self._queued += 1
        self._turn.acquire()
        with self._queue:
            self._queued -= 1
        try:
            batch = self._batch = self._batch or _Batch(self._store)
        except BaseException:
            self._turn.release()
            raise
        failure: BaseException | None = None
        try:
            batch.transaction.execute(f"SAVEPOINT {_SAVEPOINT}")
        except BaseException as error:  # the batch's transaction is broken: nothing of it may commit
            batch.error = error
            self._end_turn(batch, failed=False)
            batch.wait()
        try:
            yield batch.transaction
        except BaseException as error:
            failure = error
        self._end_turn(batch, failed=failure is not None)
        batch.wait()
        if failure is not None:
            raise failure

    def _end_turn(self, batch: _Batch, *, failed: bool) -> None:
        """Release (or roll back) this member's savepoint; end the batch if nobody is queued behind
        this thread or the batch is full, else hand the turn on."""
        if batch.error is None:
            try:
                if failed:
                    batch.transaction.execute(f"ROLLBACK TO {_SAVEPOINT}")
                batch.transaction.execute(f"RELEASE {_SAVEPOINT}")
            except BaseException as error:  # this member cannot be undone: the batch must not commit
                batch.error = error
        batch.members += 1
        with self._queue:
            last = self._queued == 0 or batch.members >= self._max_batch or batch.error is not None
        if not last:
            self._turn.release()
            return
        self._batch = None
        try:
            batch.end()
        finally:
            self._turn.release()
