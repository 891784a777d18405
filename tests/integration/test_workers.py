"""``veil serve --workers 2``: two processes on one port, one ledger.

Both workers answer and share the answer cache; CancelRequests reach the session they name whichever
worker the kernel hands their connection to; SIGHUP reloads every worker and SIGTERM stops them all; a
worker killed with ``kill -9`` is replaced while the other goes on serving; TLS works in every worker.
Exact spending across workers is tested in test_wire_concurrency.py and test_concurrency.py (run there
with two workers too), kill -9 of the whole server in test_crash_recovery.py.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import errors as pg_errors

from budget.ledger import Ledger
from proxy.server.cancel_keys import owner
from tests.conftest import Admin, Analyst, Demo, RunningServer, running_server, start_server, wait_until_ready
from tests.integration.slow_dataset import SLOW_QUERY, connect
from tests.integration.test_cancel import cancelling
from tests.integration.test_robustness import startup
from tests.integration.test_tls import tls_policy
from tests.tls_certificates import make_certificate

WORKERS = 2
CONNECTIONS = 24  # the kernel spreads connections by a hash: all on one worker has odds 2⁻²³


@pytest.fixture(scope="module")
def workers_server(demo: Demo) -> Iterator[RunningServer]:
    with running_server(
        demo.config, demo.directory / "workers.log", workers=WORKERS, log_level="info"
    ) as server:
        yield server


def worker_pids(supervisor: int) -> set[int]:
    """The supervisor's child processes (the workers), from /proc."""
    children = Path(f"/proc/{supervisor}/task/{supervisor}/children")
    return {int(pid) for pid in children.read_text().split()}


def worker_of(connection: psycopg.Connection[object]) -> int:
    return owner(connection.info.backend_pid)


def test_both_workers_answer_connections(workers_server: RunningServer, admin: Admin) -> None:
    analyst = admin.add_analyst(5.0, prefix="spread")
    seen = set()
    for number in range(CONNECTIONS):
        with connect(workers_server, analyst) as connection:
            seen.add(worker_of(connection))
            (count,) = connection.execute(
                f"SELECT COUNT(*) FROM visits WHERE cost > -1 - {number}"
            ).fetchone()  # type: ignore[misc]
            assert isinstance(count, int)
    assert seen == {0, 1}
    assert len(worker_pids(workers_server.process.pid)) == WORKERS


def test_the_answer_cache_is_shared_by_the_workers(workers_server: RunningServer, admin: Admin) -> None:
    """The same query asked on connections of both workers: one spend, one (noisy) answer for all."""
    analyst = admin.add_analyst(5.0, prefix="cached")
    answers, seen = [], set()
    for _ in range(CONNECTIONS):
        with connect(workers_server, analyst) as connection:
            seen.add(worker_of(connection))
            answers.append(connection.execute("SELECT COUNT(*) FROM visits WHERE cost > -7").fetchone())
    assert seen == {0, 1}
    assert len(set(answers)) == 1
    assert len(admin.history(analyst)) == 1


def test_sighup_reloads_every_worker(workers_server: RunningServer) -> None:
    before = workers_server.output().count("reloaded policy")
    os.kill(workers_server.process.pid, signal.SIGHUP)
    deadline = time.monotonic() + 20
    while workers_server.output().count("reloaded policy") < before + WORKERS:
        assert time.monotonic() < deadline, workers_server.output()
        time.sleep(0.05)


def test_a_killed_worker_is_replaced_and_the_other_serves_meanwhile(
    workers_server: RunningServer, admin: Admin
) -> None:
    analyst = admin.add_analyst(5.0, prefix="survivor")
    victim = min(worker_pids(workers_server.process.pid))
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while victim in worker_pids(workers_server.process.pid):  # its connections die with it, as in a crash
        assert time.monotonic() < deadline, workers_server.output()
        time.sleep(0.01)
    for number in range(8):  # connections keep being answered (by the survivor, then both)
        with connect(workers_server, analyst) as connection:
            assert connection.execute(f"SELECT COUNT(*) FROM visits WHERE cost > -2 - {number}").fetchone()
    while len(worker_pids(workers_server.process.pid) - {victim}) < WORKERS:
        assert time.monotonic() < deadline, workers_server.output()
        time.sleep(0.05)
    assert "died (signal SIGKILL); restarting it" in workers_server.output()


def test_a_killed_worker_leaves_the_ledger_consistent(demo: Demo) -> None:
    """After the kill above (module order): every running total still equals its spends."""
    ledger = Ledger.open(demo.ledger)
    try:
        assert ledger.verify() == []
    finally:
        ledger.close()


def test_sigterm_stops_every_worker(demo: Demo, tmp_path: Path) -> None:
    process = start_server(demo.config, tmp_path / "stopped.log", workers=WORKERS)
    try:
        server = wait_until_ready(process, tmp_path / "stopped.log")
        workers = worker_pids(server.process.pid)
        assert len(workers) == WORKERS
        process.terminate()
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert [pid for pid in workers if Path(f"/proc/{pid}").exists()] == []
    assert server.output().count("shutdown complete") == WORKERS


def test_tls_works_in_every_worker(demo: Demo, tmp_path: Path, admin: Admin) -> None:
    make_certificate(demo.directory / "tls")
    config = tls_policy(demo, "tls-workers.toml")
    analyst = admin.add_analyst(5.0, prefix="tlsworkers")
    seen = set()
    with running_server(config, tmp_path / "tls.log", workers=WORKERS) as server:
        conninfo = psycopg.conninfo.make_conninfo(server.conninfo(analyst), sslmode="require")
        for number in range(CONNECTIONS):
            with psycopg.connect(conninfo, prepare_threshold=None, autocommit=True) as connection:
                assert connection.pgconn.ssl_in_use
                seen.add(worker_of(connection))
                assert connection.execute(
                    f"SELECT COUNT(*) FROM visits WHERE cost > -3 - {number}"
                ).fetchone()
    assert seen == {0, 1}


# ---- cancel routing --------------------------------------------------------------------------------

CANCELS = 20


@pytest.fixture(scope="module")
def slow_workers(slow_config: Path) -> Iterator[RunningServer]:
    log = slow_config.with_name("workers-serve.log")
    with running_server(slow_config, log, workers=WORKERS, log_level="info") as server:
        yield server


def cancelled(server: RunningServer, analyst: Analyst) -> int:
    """Run the slow query and cancel it (psycopg's ``cancel_safe``, a new connection each time);
    → the worker of the session that was cancelled."""
    with connect(server, analyst) as connection:
        with cancelling(connection), pytest.raises(pg_errors.QueryCanceled) as raised:
            connection.execute(SLOW_QUERY)
        assert raised.value.diag.message_primary == "canceling statement due to user request"
        assert connection.execute("SELECT 1").fetchone() == (1,)
        return worker_of(connection)


def test_cancel_requests_reach_the_session_whichever_worker_receives_them(
    slow_workers: RunningServer, slow_config: Path
) -> None:
    """Each cancel comes on a new connection the kernel gives to either worker: over CANCELS
    statements, sessions of both workers are cancelled, and some requests had to be forwarded."""
    analyst = Admin(slow_config).add_analyst(50.0, prefix="routed")
    owners = [cancelled(slow_workers, analyst) for _ in range(CANCELS)]
    assert set(owners) == {0, 1}
    log = slow_workers.output()
    assert "forwarded to worker 0" in log and "forwarded to worker 1" in log
    assert "does not answer" not in log


def scram_salt(server: RunningServer, user: str) -> bytes:
    """The salt the server's SCRAM first message gives ``user`` (a fake, fixed one for unknown roles)."""
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        reader = sock.makefile("rb")

        def message() -> tuple[bytes, bytes]:
            kind, length = reader.read(1), struct.unpack("!i", reader.read(4))[0]
            return kind, reader.read(length - 4)

        sock.sendall(startup(user=user, database="demo"))
        assert message()[0] == b"R"  # AuthenticationSASL
        first = b"n,,n=,r=workersaltprobe"
        body = b"SCRAM-SHA-256\0" + struct.pack("!i", len(first)) + first
        sock.sendall(b"p" + struct.pack("!i", len(body) + 4) + body)
        kind, payload = message()
        assert kind == b"R" and struct.unpack("!i", payload[:4])[0] == 11  # AuthenticationSASLContinue
        attributes = dict(part.split(b"=", 1) for part in payload[4:].split(b","))
        return base64.b64decode(attributes[b"s"])


def test_an_unknown_role_gets_one_salt_from_every_worker(workers_server: RunningServer) -> None:
    """A real role has one salt; if each worker made up its own for unknown names, an unknown name would
    show two salts over a few connections and be told apart from a real one. The workers share the key
    the fake salts are derived from (the kernel puts 24 connections on one worker with odds 2⁻²³)."""
    salts = {scram_salt(workers_server, "nobody-by-that-name") for _ in range(CONNECTIONS)}
    assert len(salts) == 1
