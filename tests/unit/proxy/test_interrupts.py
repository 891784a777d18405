"""Stopping engine queries: the session's CancelRequest and the statement timeout reach the running
query (and only it), and whatever the engine did, a stopped query raises 57014."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import pytest

from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.interrupts import SESSION_INTERRUPTER, Interrupter, Watchdog, interruptible
from proxy.errors import QueryCanceledError

# 50,000² pairs: seconds of DuckDB work, far longer than any stop takes to arrive
SLOW = "SELECT count(*) FROM t AS a, t AS b WHERE (a.i * b.i) % 7 = 1"


def in_session(interrupter: Interrupter) -> contextvars.Context:
    """A context as a session's worker thread has it: with the session's interrupter."""
    context = contextvars.copy_context()
    context.run(SESSION_INTERRUPTER.set, interrupter)
    return context


def test_every_cancel_stops_the_running_query_again_and_the_first_reason_stays() -> None:
    """A PostgreSQL cancel can miss (it lands between BEGIN and the query): the next one must retry."""
    interrupter, stops = Interrupter(), []

    def engine_query() -> None:
        with interruptible(lambda: stops.append("stop"), watchdog=None):
            interrupter.cancel()
            interrupter.close()  # the client then left: still reported as its cancel
            raise RuntimeError("the engine reports the interrupt its own way")

    with pytest.raises(QueryCanceledError, match="due to user request"):
        in_session(interrupter).run(engine_query)
    assert stops == ["stop", "stop"]


def test_a_query_that_ended_is_not_stopped() -> None:
    interrupter, stops = Interrupter(), []

    def engine_query() -> None:
        with interruptible(lambda: stops.append("stop"), watchdog=None):
            pass

    in_session(interrupter).run(engine_query)
    interrupter.cancel()
    assert stops == []


def test_a_result_that_arrives_after_the_stop_is_not_used() -> None:
    """The stop raced the engine and lost: the client was told "canceled", so the answer is dropped."""
    interrupter = Interrupter()

    def engine_query() -> None:
        with interruptible(lambda: None, watchdog=None):
            interrupter.cancel()  # the engine had already finished: nothing to interrupt

    with pytest.raises(QueryCanceledError):
        in_session(interrupter).run(engine_query)


def test_without_a_session_a_query_still_runs() -> None:
    """``veil explain`` and the admin commands run engine queries outside any session."""
    with interruptible(lambda: None, watchdog=None):
        pass


def test_the_watchdog_stops_a_query_past_its_deadline() -> None:
    stopped = threading.Event()
    started = time.monotonic()
    with (
        pytest.raises(QueryCanceledError, match="statement timeout") as raised,
        interruptible(stopped.set, watchdog=Watchdog(50)),
    ):
        assert stopped.wait(5)
    assert time.monotonic() - started > 0.04  # not before its deadline; how late depends on the load
    assert "50 ms" in (raised.value.detail or "")


@pytest.fixture
def dataset(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "data.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.execute("CREATE TABLE t AS SELECT range AS i FROM range(50000)")
    yield path


def test_a_cancel_interrupts_the_sessions_duckdb_query_and_no_other(dataset: Path) -> None:
    backend = DuckDBBackend(dataset)
    mine, theirs = Interrupter(), Interrupter()
    with ThreadPoolExecutor(max_workers=2) as pool:
        slow = pool.submit(in_session(mine).run, backend.execute, SLOW)
        other = pool.submit(in_session(theirs).run, backend.execute, "SELECT count(*) FROM t")
        assert other.result(timeout=10)[1] == [(50000,)]
        time.sleep(0.2)
        mine.cancel()
        with pytest.raises(QueryCanceledError):
            slow.result(timeout=10)
    assert backend.execute("SELECT 1")[1] == [(1,)]
    backend.close()


def test_the_statement_timeout_interrupts_a_duckdb_query(dataset: Path) -> None:
    backend = DuckDBBackend(dataset, statement_timeout_ms=100)
    with pytest.raises(QueryCanceledError, match="statement timeout"):  # uninterrupted, it runs for minutes
        backend.execute(SLOW)
    assert backend.execute("SELECT count(*) FROM t")[1] == [(50000,)]
    backend.close()
