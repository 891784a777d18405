"""Stopping engine queries that are running: a client's CancelRequest, the statement timeout and the
response deadline.

An engine query runs in a worker thread while its session waits on the event loop, and a
CancelRequest arrives on a *different* connection. So each backend wraps every engine query in
:func:`interruptible`, handing it the engine's own way to stop that one query (DuckDB: interrupt the
query's cursor; PostgreSQL: a cancel request for the pooled connection running it). The query is
registered with

* the session that asked for it — found through the context variable :data:`SESSION_INTERRUPTER`,
  which the session sets once in its task; ``asyncio.to_thread`` copies it into the worker thread, so
  neither the query pipeline nor the ``Backend`` interface has to carry a cancellation argument;
* the backend's :class:`Watchdog`, when a statement timeout is configured; and
* the response deadline of the statement (:func:`response_deadline`), when the dataset releases at a
  fixed time: every engine query still running at the deadline is stopped.

A client that closes its connection while a statement runs is treated as a cancel that lasts: the
session calls :meth:`Interrupter.close`, which stops the engine queries running then *and* refuses to
start the statement's later ones, since nobody is left to receive the answer.

Whoever stops the query first records why; when the engine call returns — failed, or even succeeded
because the stop came too late to reach the engine — :func:`interruptible` raises
``QueryCanceledError`` (57014) instead. Whether a query ran out of time depends on private rows, so
the query pipeline charges a statement stopped after its engine started as if it had answered
(docs/privacy.md, "Side channels").

A cancel reaches only engine queries running at that moment, as in PostgreSQL: one that arrives
between two engine queries of a statement, or while the session is idle, does nothing.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final

from proxy.errors import QueryCanceledError

USER_REQUEST: Final = "user request"
STATEMENT_TIMEOUT: Final = "statement timeout"
RESPONSE_DEADLINE: Final = "response deadline"
CLIENT_GONE: Final = "client disconnected"
SHUTDOWN: Final = "server shutting down"


class EngineQuery:
    """One engine query in flight; :meth:`stop` interrupts it — again on every call, never after it
    ended — and remembers the first reason.

    Why again: an interrupt can miss. A PostgreSQL cancel that arrives while the pooled connection is
    between the ``BEGIN`` psycopg sends and the query itself finds nothing running and is dropped by the
    server, and the query then runs to its end. The client's next CancelRequest must be able to try once
    more (psycopg and the tests' canceller repeat them)."""

    def __init__(self, interrupt: Callable[[], None]) -> None:
        self._interrupt: Callable[[], None] | None = interrupt
        self._lock = threading.Lock()
        self.reason: str | None = None

    def stop(self, reason: str) -> None:
        """Interrupt under the lock, so the query cannot end (and its PostgreSQL connection go back to
        the pool, to run someone else's query) while the engine is being told to stop it."""
        with self._lock:
            if self._interrupt is None:
                return
            if self.reason is None:
                self.reason = reason
            self._interrupt()

    def finish(self) -> None:
        with self._lock:
            self._interrupt = None


class Interrupter:
    """The engine queries one session is running now; a CancelRequest that names the session stops
    them all. Used from worker threads and the event loop, hence the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[EngineQuery] = set()
        self._closed = False
        self._reason = CLIENT_GONE

    def cancel(self) -> None:
        """Blocking (a PostgreSQL cancel is a network round trip): call it from a worker thread."""
        self._stop_running(USER_REQUEST)

    def close(self, reason: str = CLIENT_GONE) -> None:
        """The session's client has gone (or the server is shutting down, ``reason`` SHUTDOWN): stop
        what runs, and (see :meth:`add`) whatever would start later. Unlike a CancelRequest, which
        reaches only the queries running at that moment, this lasts. Blocking, like :meth:`cancel`."""
        with self._lock:
            self._closed = True
            self._reason = reason
        self._stop_running(reason)

    @property
    def closed_for(self) -> str:
        return self._reason

    def add(self, query: EngineQuery) -> bool:
        """Register a query about to start; False once the session is closed: it must not start."""
        with self._lock:
            if self._closed:
                return False
            self._running.add(query)
            return True

    def _stop_running(self, reason: str) -> None:
        with self._lock:
            running = list(self._running)
        for query in running:
            query.stop(reason)

    def discard(self, query: EngineQuery) -> None:
        with self._lock:
            self._running.discard(query)


SESSION_INTERRUPTER: ContextVar[Interrupter | None] = ContextVar("veil_session_interrupter", default=None)


class Watchdog:
    """Stops engine queries that outlive the statement timeout.

    One thread and a heap of deadlines for all of a backend's queries, rather than a timer thread per
    query: starting a thread would cost more than many engine queries take. Queries that end before
    their deadline stay in the heap until then; stopping them is a no-op."""

    def __init__(self, timeout_ms: int | None, *, reason: str = STATEMENT_TIMEOUT) -> None:
        """``timeout_ms`` for :meth:`watch`; None for a watchdog that is only given deadlines."""
        self.timeout_ms = timeout_ms
        self.reason = reason
        self._deadlines: list[tuple[float, int, EngineQuery]] = []
        self._order = itertools.count()  # ties never compare EngineQuery objects
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def watch(self, query: EngineQuery) -> None:
        assert self.timeout_ms is not None
        self.watch_until(query, time.monotonic() + self.timeout_ms / 1000)

    def watch_until(self, query: EngineQuery, deadline: float) -> None:
        """Stop ``query`` at ``deadline`` (``time.monotonic()`` seconds) if it still runs then."""
        with self._wake:
            heapq.heappush(self._deadlines, (deadline, next(self._order), query))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="veil-statement-timeout", daemon=True)
                self._thread.start()
            self._wake.notify()

    def _run(self) -> None:
        while True:
            for query in self._due():
                query.stop(self.reason)

    def _due(self) -> list[EngineQuery]:
        """Wait until at least one deadline has passed; return those queries."""
        with self._wake:
            while True:
                now = time.monotonic()
                if self._deadlines and self._deadlines[0][0] <= now:
                    due = []
                    while self._deadlines and self._deadlines[0][0] <= now:
                        due.append(heapq.heappop(self._deadlines)[2])
                    return due
                self._wake.wait(self._deadlines[0][0] - now if self._deadlines else None)


# The time (``time.monotonic()``) by which the running statement must be answered, if its dataset
# releases at a fixed time; set by :func:`response_deadline` in the thread that runs the statement.
STATEMENT_DEADLINE: ContextVar[float | None] = ContextVar("veil_statement_deadline", default=None)
# Set by a caller that waits for the deadline itself (the session, on its event loop): a worker thread
# asleep until the deadline would hold one of the few threads every session's statements run in.
RELEASE_AT: ContextVar[list[float] | None] = ContextVar("veil_release_at", default=None)
_DEADLINES = Watchdog(None, reason=RESPONSE_DEADLINE)


@contextmanager
def response_deadline(deadline_ms: int | None) -> Iterator[None]:
    """Release the block's outcome — an answer or an error — exactly ``deadline_ms`` after it began.

    The deadline is fixed before anything runs, from the policy alone, so the response time says
    nothing about private rows; engine queries still running at the deadline are stopped (57014), and
    the block's outcome waits for the deadline otherwise — here, or, when the caller set
    :data:`RELEASE_AT`, in the caller, which is handed the deadline. Without one the block runs as it is."""
    if deadline_ms is None:
        yield
        return
    deadline = time.monotonic() + deadline_ms / 1000
    token = STATEMENT_DEADLINE.set(deadline)
    try:
        yield
    finally:
        STATEMENT_DEADLINE.reset(token)
        if (waiter := RELEASE_AT.get()) is not None:
            waiter.append(deadline)  # the caller waits, without holding this worker thread
        else:
            time.sleep(max(0.0, deadline - time.monotonic()))


@contextmanager
def interruptible(interrupt: Callable[[], None], *, watchdog: Watchdog | None) -> Iterator[None]:
    """Run the block as one engine query that the session's CancelRequest and the watchdog can stop.

    If it was stopped, raise ``QueryCanceledError`` whatever the block did: its failure is the stop's
    doing, and a result that arrived anyway must not be used after the client was told it was
    cancelled."""
    deadline = STATEMENT_DEADLINE.get()
    if deadline is not None and time.monotonic() >= deadline:
        raise response_deadline_error()  # before it starts: a late answer would show the miss anyway
    query = EngineQuery(interrupt)
    interrupter = SESSION_INTERRUPTER.get()
    if interrupter is not None and not interrupter.add(query):
        raise shutdown_error() if interrupter.closed_for == SHUTDOWN else client_gone_error()
    if watchdog is not None:
        watchdog.watch(query)
    if deadline is not None:
        _DEADLINES.watch_until(query, deadline)
    try:
        yield
    finally:
        query.finish()  # from here on nobody can stop it: its reason is final
        if interrupter is not None:
            interrupter.discard(query)
        _raise_if_stopped(query, watchdog)


def _raise_if_stopped(query: EngineQuery, watchdog: Watchdog | None) -> None:
    if query.reason == USER_REQUEST:
        raise QueryCanceledError("canceling statement due to user request") from None
    if query.reason == CLIENT_GONE:
        raise client_gone_error() from None
    if query.reason == SHUTDOWN:
        raise shutdown_error() from None
    if query.reason == STATEMENT_TIMEOUT and watchdog is not None and watchdog.timeout_ms is not None:
        raise statement_timeout_error(watchdog.timeout_ms) from None
    if query.reason == RESPONSE_DEADLINE:
        raise response_deadline_error() from None


def client_gone_error() -> QueryCanceledError:
    """What the audit log records for a statement whose client left (no client reads it)."""
    return QueryCanceledError("canceling statement because the client disconnected", outcome="disconnected")


def shutdown_error() -> QueryCanceledError:
    return QueryCanceledError(
        "canceling statement due to administrator command",
        detail="the server is shutting down and the statement did not finish within its grace period",
    )


def statement_timeout_error(timeout_ms: int) -> QueryCanceledError:
    return QueryCanceledError(
        "canceling statement due to statement timeout",
        outcome="timed out",
        detail=f"an engine query ran past the statement timeout of {timeout_ms} ms",
        hint="narrow the query (fewer rows, groups or joins), or ask the administrator to raise "
        "statement_timeout_ms",
    )


def response_deadline_error() -> QueryCanceledError:
    """The same words whatever was still running: only the fact of the miss is revealed."""
    return QueryCanceledError(
        "canceling statement: the response deadline passed",
        outcome="deadline missed",
        detail="this dataset releases every answer at a fixed time, and the query was not done by then",
        hint="narrow the query (fewer rows, groups or joins), or ask the administrator to raise "
        "response_deadline_ms",
    )
