"""CancelRequest and the statement timeout, through ``veil serve``, on DuckDB and PostgreSQL.

A cancelled or timed-out DP query fails with SQLSTATE 57014 and is charged — its reservation is
committed, since whether and when a query stops depends on private rows (docs/privacy.md, "Side
channels") — and the connection goes on working. A CancelRequest with a wrong secret key does nothing,
as in PostgreSQL.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import tomli_w
from psycopg import errors as pg_errors

from tests.conftest import Admin, Analyst, RunningServer, running_server, schema_in
from tests.integration.slow_dataset import (
    MEDIUM_QUERY,
    SLOW_QUERY,
    build_slow_dataset,
    connect,
    with_server_settings,
)

CANCEL_REQUEST_CODE = 80877102
TIMEOUT_MS = 300


@contextlib.contextmanager
def cancelling(connection: psycopg.Connection[Any]) -> Iterator[None]:
    """Send CancelRequests for ``connection`` from another thread while the block runs, every 0.2 s
    from 0.2 s on: the first may arrive before the engine query has started, and be lost."""
    done = threading.Event()

    def cancel_until_done() -> None:
        while not done.wait(0.2):
            connection.cancel_safe(timeout=5)

    thread = threading.Thread(target=cancel_until_done)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def only_spend(admin: Admin, analyst: Analyst) -> str:
    (spend,) = admin.history(analyst)
    return str(spend["state"])


def check_cancel(
    server: RunningServer, admin: Admin, query: str, params: tuple[Any, ...] | None = None
) -> None:
    """``params``: None sends the query over the simple protocol, a tuple over the extended one."""
    for _ in range(3):  # a cancel that lands before the engine query starts stops it for free: try again
        analyst = admin.add_analyst(1.0, prefix="canceller")
        with connect(server, analyst) as connection:
            started = time.monotonic()
            with cancelling(connection), pytest.raises(pg_errors.QueryCanceled) as raised:
                connection.execute(query, params)
            assert time.monotonic() - started < 20
            assert raised.value.sqlstate == "57014"
            assert raised.value.diag.message_primary == "canceling statement due to user request"
            assert connection.execute("SELECT 1").fetchone() == (1,)
        if "this failed query was charged" in (raised.value.diag.message_detail or ""):
            assert_charged(admin, analyst)
            return
        assert admin.history(analyst) == []  # stopped before the engine saw private rows: nothing spent
    pytest.fail("three cancels in a row landed before the engine query started")


def assert_charged(admin: Admin, analyst: Analyst) -> None:
    """The stopped query's one spend was committed, and it is all the analyst spent."""
    (spend,) = admin.history(analyst)
    assert spend["state"] == "committed" and spend["epsilon"] > 0
    assert admin.balance(analyst)["spent_epsilon"] == pytest.approx(spend["epsilon"])


def test_a_cancel_request_stops_a_duckdb_query_and_is_charged(
    slow_server: RunningServer, slow_config: Path
) -> None:
    check_cancel(slow_server, Admin(slow_config), SLOW_QUERY)


def test_a_cancel_request_stops_a_query_sent_with_parameters(
    slow_server: RunningServer, slow_config: Path
) -> None:
    check_cancel(slow_server, Admin(slow_config), SLOW_QUERY + " AND b.v < %s", (1000,))


def test_a_cancel_request_with_a_wrong_secret_is_ignored(
    slow_server: RunningServer, slow_config: Path
) -> None:
    """The query runs to its answer although a request naming its session arrived meanwhile."""
    admin = Admin(slow_config)
    analyst = admin.add_analyst(1.0, prefix="ignored")
    with connect(slow_server, analyst) as connection:
        process_id = connection.info.backend_pid
        handled = threading.Event()

        def wrong_cancel() -> None:
            time.sleep(0.1)
            with socket.create_connection((slow_server.host, slow_server.port), timeout=5) as sock:
                sock.sendall(struct.pack("!iiII", 16, CANCEL_REQUEST_CODE, process_id, 12345))
                assert sock.recv(1) == b""  # no answer: the server just closes the connection
            handled.set()

        thread = threading.Thread(target=wrong_cancel)
        thread.start()
        (row,) = connection.execute(MEDIUM_QUERY).fetchall()
        answered = handled.is_set()
        thread.join()
    assert isinstance(row[0], int | float)
    assert answered, "the query ended before the cancel request was handled; the test proves nothing"
    assert only_spend(admin, analyst) == "committed"
    assert "cancel request with an unknown key" in slow_server.output()


def test_the_statement_timeout_stops_a_duckdb_query_and_is_charged(slow_config: Path, tmp_path: Path) -> None:
    config = with_server_settings(slow_config, "timeout.toml", statement_timeout_ms=TIMEOUT_MS)
    admin = Admin(config)
    analyst = admin.add_analyst(1.0, prefix="hasty")
    with running_server(config, tmp_path / "serve.log") as server, connect(server, analyst) as connection:
        started = time.monotonic()
        with pytest.raises(pg_errors.QueryCanceled, match="statement timeout") as raised:
            connection.execute(SLOW_QUERY)
        assert time.monotonic() - started < 10
        assert f"{TIMEOUT_MS} ms" in (raised.value.diag.message_detail or "")
        assert connection.execute("SELECT COUNT(*) FROM medium WHERE v > 50").fetchone() is not None
    assert [spend["state"] for spend in admin.history(analyst)] == ["committed", "committed"]


# ---- PostgreSQL ---------------------------------------------------------------------------------

PG_DSN_VARIABLE = "VEIL_CANCEL_TEST_DSN"
PG_ROWS = 200_000  # 100 people × 2,000 rows: the join has 4·10⁸ pairs, minutes of PostgreSQL work


@pytest.fixture
def postgres_config(
    postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Path]]:
    """``make(**server)`` → a policy whose dataset ``demo`` is ``events`` in a fresh PostgreSQL schema."""
    monkeypatch.setenv(PG_DSN_VARIABLE, postgres_dsn)  # the served process inherits it
    with schema_in(postgres_dsn) as schema, psycopg.connect(postgres_dsn, autocommit=True) as pg:
        pg.execute(f'SET search_path TO "{schema}"')
        pg.execute(
            "CREATE TABLE events AS SELECT (g % 100)::integer AS person, (g % 97)::integer AS v"
            f" FROM generate_series(1, {PG_ROWS}) AS g"
        )
        base = build_slow_dataset(tmp_path / "demo")  # for its policy and ledger; the data is in PostgreSQL
        document = tomllib.loads(base.read_text(encoding="utf-8"))
        dataset = document["datasets"]["demo"]
        del dataset["path"]
        dataset.update(backend="postgres", dsn_env=PG_DSN_VARIABLE, schema=schema)
        base.write_text(tomli_w.dumps(document), encoding="utf-8")
        yield lambda **server: with_server_settings(base, "postgres.toml", **server)


@pytest.mark.postgres
def test_a_cancel_request_stops_a_postgres_query_and_is_charged(
    postgres_config: Callable[..., Path], tmp_path: Path
) -> None:
    config = postgres_config()
    with running_server(config, tmp_path / "serve.log") as server:
        check_cancel(server, Admin(config), SLOW_QUERY)


@pytest.mark.postgres
def test_the_server_statement_timeout_applies_to_postgres_datasets(
    postgres_config: Callable[..., Path], tmp_path: Path
) -> None:
    config = postgres_config(statement_timeout_ms=TIMEOUT_MS)
    admin = Admin(config)
    analyst = admin.add_analyst(1.0, prefix="pg-hasty")
    with running_server(config, tmp_path / "serve.log") as server, connect(server, analyst) as connection:
        with pytest.raises(pg_errors.QueryCanceled, match="statement timeout"):
            connection.execute(SLOW_QUERY)
        assert connection.execute("SELECT 1").fetchone() == (1,)
    assert_charged(admin, analyst)
