"""``kill -9`` of ``veil serve`` in the middle of a stream of DP queries.

Several clients stream queries; once some answers have arrived the server is killed without a
chance to clean up — perhaps between a reservation and its commit. Then, on the same ledger:

* the ledger is consistent (:meth:`Ledger.verify` finds every running total equal to its spends);
* nothing released went uncharged: the spent total is at least ε × the answers the clients got,
  and it is exactly ε × the spends left reserved or committed — a reservation the crash left open
  counts as spent (fail closed: its answer may have left);
* a restarted server serves again, and charges the next answer on top.

Runs on an SQLite ledger and on a PostgreSQL one (``postgres``; skips without a server), with one
worker process and with two (``kill -9`` of the supervisor takes its workers down with it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

from budget.amounts import as_decimal
from budget.ledger import SpendState
from tests.conftest import Analyst, RunningServer, running_server, start_server, wait_until_ready
from tests.integration.ledger_servers import LEDGER_KINDS, ServedDemo, distinct_count_query, served_demo

EPSILON = 0.01
GRANT = 5.0  # 500 answers: far more than the stream gets before the kill
STREAMS = 4
KILL_AFTER_ANSWERS = 24
DEADLINE_SECONDS = 60.0


@pytest.fixture(params=LEDGER_KINDS)
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServedDemo]:
    with served_demo(request.param, tmp_path / "demo", request) as served:
        yield served


@contextlib.contextmanager
def unmanaged_server(config: Path, log: Path, *, workers: int = 1) -> Iterator[RunningServer]:
    """``veil serve`` that the test kills itself (``running_server`` would report its death as a
    failure); killed here too if the test failed before it could. With workers, killing the
    supervisor kills them too (proxy/server/workers.py)."""
    process = start_server(config, log, workers=workers)
    try:
        yield wait_until_ready(process, log)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


class Stream:
    """STREAMS connections asking distinct DP queries back to back until their connection dies."""

    def __init__(self, server: RunningServer, analyst: Analyst) -> None:
        self.answers = 0
        self.lost_connections = 0
        self.other_errors: list[str] = []
        self._lock = threading.Lock()
        self._connections = [
            psycopg.connect(server.conninfo(analyst), prepare_threshold=None, autocommit=True)
            for _ in range(STREAMS)
        ]
        for connection in self._connections:
            connection.execute(f"SET veil.epsilon = {EPSILON}")
        self._threads = [threading.Thread(target=self._ask, args=(c,)) for c in self._connections]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def join(self) -> None:
        for thread in self._threads:
            thread.join(timeout=DEADLINE_SECONDS)
        for connection in self._connections:
            connection.close()

    def _ask(self, connection: psycopg.Connection) -> None:
        while True:
            try:
                (row,) = connection.execute(distinct_count_query()).fetchall()
                assert isinstance(row[0], int | float)
            except psycopg.OperationalError:
                with self._lock:
                    self.lost_connections += 1
                return
            except psycopg.Error as error:
                with self._lock:
                    self.other_errors.append(f"{error.sqlstate}: {error}")
                return
            with self._lock:
                self.answers += 1


def kill_mid_stream(server: RunningServer, analyst: Analyst) -> int:
    """Stream, SIGKILL the server after KILL_AFTER_ANSWERS answers; → the answers clients received."""
    stream = Stream(server, analyst)
    stream.start()
    deadline = time.monotonic() + DEADLINE_SECONDS
    while stream.answers < KILL_AFTER_ANSWERS and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=10)
    stream.join()
    assert stream.answers >= KILL_AFTER_ANSWERS, f"only {stream.answers} answers before the deadline"
    assert stream.other_errors == []
    assert stream.lost_connections == STREAMS  # every stream was cut off by the kill, none ended early
    return stream.answers


@pytest.mark.parametrize("workers", [1, 2])
def test_kill_9_mid_stream_leaves_a_consistent_ledger_that_charged_every_answer(
    served: ServedDemo, tmp_path: Path, workers: int
) -> None:
    analyst = served.spending_analyst(GRANT, prefix="crash")
    with unmanaged_server(served.config, tmp_path / "killed.log", workers=workers) as server:
        received = kill_mid_stream(server, analyst)
    assert server.process.returncode == -signal.SIGKILL

    ledger = served.open_ledger()
    try:
        assert ledger.verify() == []
        spends = ledger.history(analyst.name)
        counting = [s for s in spends if s.state in (SpendState.RESERVED, SpendState.COMMITTED)]
        committed = [s for s in spends if s.state == SpendState.COMMITTED]
        assert {s.epsilon for s in spends} == {EPSILON}
        assert len(committed) >= received  # a commit precedes every answer on the wire
        spent = ledger.balance(analyst.name, "demo").spent_epsilon
        assert spent == float(
            sum((as_decimal(s.epsilon) for s in counting), Decimal(0))
        )  # open reservations count
        assert Decimal(repr(spent)) >= received * Decimal(repr(EPSILON))
    finally:
        ledger.close()

    with running_server(served.config, tmp_path / "restarted.log", workers=workers) as restarted:  # noqa: SIM117
        with psycopg.connect(
            restarted.conninfo(analyst), prepare_threshold=None, autocommit=True
        ) as connection:
            connection.execute(f"SET veil.epsilon = {EPSILON}")
            (row,) = connection.execute(distinct_count_query()).fetchall()
            assert isinstance(row[0], int | float)

    ledger = served.open_ledger()
    try:
        assert ledger.verify() == []
        after = ledger.balance(analyst.name, "demo").spent_epsilon
        assert Decimal(repr(after)) == Decimal(repr(spent)) + Decimal(repr(EPSILON))
    finally:
        ledger.close()
