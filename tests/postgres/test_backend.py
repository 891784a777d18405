"""PostgresBackend against a real server: generated SQL, read-only sessions, quiet errors, the pool."""

from __future__ import annotations

import contextvars
import datetime
import logging
import threading
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest

from budget.ledger import Ledger
from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import PrivateQuery, classify
from proxy.backends import dialect_of, open_backend
from proxy.backends.interrupts import SESSION_INTERRUPTER, Interrupter
from proxy.backends.postgres import PostgresBackend, describe_dsn
from proxy.config import DatasetPolicy, parse_config
from proxy.errors import BackendUnavailableError, ConfigError, QueryCanceledError
from proxy.query.planning import prepare_release
from proxy.server.listener import build_context
from tests.postgres.conftest import in_schema

pytestmark = pytest.mark.postgres

SECRET = "Alice-7f3c"  # a private value that a failing cast would quote


@pytest.fixture
def make_backend(postgres_dsn: str) -> Iterator[Callable[..., PostgresBackend]]:
    """``make_backend(schema, **options)`` → a backend on the test server, closed after the test."""
    opened: list[PostgresBackend] = []

    def make(schema: str, **options: Any) -> PostgresBackend:
        backend = PostgresBackend(postgres_dsn, schema=schema, **options)
        opened.append(backend)
        return backend

    yield make
    for backend in opened:
        backend.close()


def visits_policy(dsn: str, schema: str, tmp_path: Path) -> DatasetPolicy:
    text = f"""
[datasets.clinic]
backend = "postgres"
dsn = "{dsn}"
schema = "{schema}"
default_epsilon = 1.0
max_epsilon = 1.0

[datasets.clinic.tables.visits]
privacy_unit = "patient_id"
max_contributions = 3

[datasets.clinic.tables.visits.columns.patient_id]
type = "integer"

[datasets.clinic.tables.visits.columns.region]
type = "text"
public = true
values = ["north", "south", "east"]

[datasets.clinic.tables.visits.columns.cost]
type = "real"
lower = 0
upper = 100
"""
    policy = parse_config(text, path=tmp_path / "veil.toml").dataset("clinic")
    assert policy is not None
    return policy


VISITS = """
CREATE TABLE visits (patient_id bigint, region text, cost double precision);
INSERT INTO visits VALUES
    (1, 'north', 10), (1, 'north', 20), (2, 'north', 30),
    (3, 'south', 40), (3, 'south', 500), (4, 'west', 5), (5, NULL, 1);
"""


def test_runs_generated_sql_and_returns_exact_rows(
    postgres_dsn: str, fresh_schema: str, pg: psycopg.Connection[Any], make_backend: Any, tmp_path: Path
) -> None:
    in_schema(pg, fresh_schema, VISITS)
    policy = visits_policy(postgres_dsn, fresh_schema, tmp_path)
    backend = make_backend(fresh_schema)
    assert backend.dialect == dialect_of(policy) == "postgres"
    query = "SELECT region, COUNT(*), SUM(cost) FROM visits WHERE cost > 15 GROUP BY region"
    statement = classify(parse_statements(query)[0], policy)
    assert isinstance(statement, PrivateQuery)
    _, engine_sql = prepare_release(statement.shape, epsilon=1.0, dialect=backend.dialect)
    _, rows = backend.execute(engine_sql)
    # every person has at most max_contributions = 3 rows, so nothing is scaled down; 500 is clamped to 100
    exact = {row[0]: tuple(float(value) for value in row[1:]) for row in rows}
    assert exact == {"north": (2.0, 50.0), "south": (2.0, 140.0)}


def test_returns_names_type_names_and_decimals_unchanged(fresh_schema: str, make_backend: Any) -> None:
    description, rows = make_backend(fresh_schema).execute(
        "SELECT 7::bigint AS n, 'x'::text AS t, 1.25::numeric AS d, DATE '2024-01-02' AS day"
    )
    assert description == [("n", "int8"), ("t", "text"), ("d", "numeric"), ("day", "date")]
    (row,) = rows
    assert row[:3] == (7, "x", Decimal("1.25")) and str(row[3]) == "2024-01-02"


def test_a_date_python_cannot_hold_arrives_as_infinity_not_as_an_error(
    fresh_schema: str, make_backend: Any
) -> None:
    """A fetch that failed on one person's birth date ('infinity', year 20000) would reveal it."""
    _, rows = make_backend(fresh_schema).execute(
        "SELECT date 'infinity', date '-infinity', date '20000-01-01', timestamp '0014-05-05 BC',"
        " timestamptz 'infinity', date '2020-01-02'"
    )
    assert rows == [("infinity", "-infinity", "infinity", "-infinity", "infinity", datetime.date(2020, 1, 2))]


def test_bare_table_names_resolve_in_the_dataset_schema(
    new_schema: Callable[[], str], pg: psycopg.Connection[Any], make_backend: Any
) -> None:
    first, second = new_schema(), new_schema()
    in_schema(pg, first, "CREATE TABLE t AS SELECT 'first' AS v")
    in_schema(pg, second, "CREATE TABLE t AS SELECT 'second' AS v")
    assert make_backend(first).execute("SELECT v FROM t")[1] == [("first",)]
    assert make_backend(second).execute("SELECT v FROM t")[1] == [("second",)]


def test_builtins_are_found_before_functions_in_the_dataset_schema(
    fresh_schema: str, pg: psycopg.Connection[Any], make_backend: Any
) -> None:
    """A schema owner cannot hijack COUNT, ABS … for Veil's queries (pg_catalog is searched first)."""
    in_schema(pg, fresh_schema, "CREATE FUNCTION abs(integer) RETURNS integer AS 'SELECT 42' LANGUAGE sql")
    assert make_backend(fresh_schema).execute("SELECT abs(-1)")[1] == [(1,)]


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO visits VALUES (9, 'north', 1)",
        "UPDATE visits SET cost = 0",
        "DELETE FROM visits",
        "CREATE TABLE leak AS SELECT * FROM visits",
        "DROP TABLE visits",
        "SELECT * FROM visits FOR UPDATE",
    ],
)
def test_sessions_are_read_only(
    fresh_schema: str, pg: psycopg.Connection[Any], make_backend: Any, statement: str
) -> None:
    in_schema(pg, fresh_schema, VISITS)
    with pytest.raises(BackendUnavailableError, match="the database engine could not run the query"):
        make_backend(fresh_schema).execute(statement)
    assert in_schema(pg, fresh_schema, "SELECT count(*), sum(cost) FROM visits").fetchone() == (
        7,
        606.0,
    )


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT 1; SELECT 2",
        "SET default_transaction_read_only = off; INSERT INTO visits VALUES (9, 'north', 1)",
        "COMMIT; INSERT INTO visits VALUES (9, 'north', 1)",
    ],
)
def test_refuses_a_second_statement(
    fresh_schema: str, pg: psycopg.Connection[Any], make_backend: Any, statement: str
) -> None:
    in_schema(pg, fresh_schema, VISITS)
    with pytest.raises(BackendUnavailableError):
        make_backend(fresh_schema).execute(statement)
    assert in_schema(pg, fresh_schema, "SELECT count(*) FROM visits").fetchone() == (7,)


def test_engine_error_text_stays_out_of_the_error_and_the_warning_log(
    fresh_schema: str, make_backend: Any, caplog: pytest.LogCaptureFixture
) -> None:
    backend = make_backend(fresh_schema)
    caplog.set_level(logging.WARNING, logger="veil.backend")
    with pytest.raises(BackendUnavailableError) as raised:
        backend.execute(f"SELECT CAST('{SECRET}' AS integer)")
    error = raised.value
    shown = " ".join(str(part) for part in (error, error.message, error.detail, error.hint))
    assert SECRET not in shown
    assert (error.sqlstate, error.message) == ("58000", "the database engine could not run the query")
    assert "InvalidTextRepresentation (SQLSTATE 22P02)" in caplog.text
    assert SECRET not in caplog.text


def test_engine_error_text_is_logged_at_debug_for_the_administrator(
    fresh_schema: str, make_backend: Any, caplog: pytest.LogCaptureFixture
) -> None:
    backend = make_backend(fresh_schema)
    caplog.set_level(logging.DEBUG, logger="veil.backend")
    with pytest.raises(BackendUnavailableError):
        backend.execute(f"SELECT CAST('{SECRET}' AS integer)")
    assert SECRET in caplog.text


def test_connection_survives_a_failed_query(fresh_schema: str, make_backend: Any) -> None:
    backend = make_backend(fresh_schema, pool_size=1)
    pid = backend.execute("SELECT pg_backend_pid()")[1]
    with pytest.raises(BackendUnavailableError):
        backend.execute("SELECT 1 / 0")
    assert backend.execute("SELECT pg_backend_pid()")[1] == pid


def test_pool_reuses_at_most_pool_size_connections_across_threads(
    fresh_schema: str, make_backend: Any
) -> None:
    backend = make_backend(fresh_schema, pool_size=4)
    pids: list[int] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def work(number: int) -> None:
        try:
            for query in range(10):
                _, rows = backend.execute(f"SELECT pg_backend_pid(), {number * 100 + query}, pg_sleep(0.002)")
                ((pid, echoed, _),) = rows
                assert echoed == number * 100 + query
                with lock:
                    pids.append(pid)
        except BaseException as error:  # reported below, with the thread that failed
            failures.append(error)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures
    assert len(pids) == 80
    assert 1 <= len(set(pids)) <= 4


def test_a_lost_connection_is_replaced(
    fresh_schema: str, pg: psycopg.Connection[Any], make_backend: Any
) -> None:
    backend = make_backend(fresh_schema, pool_size=1)
    ((pid,),) = backend.execute("SELECT pg_backend_pid()")[1]
    pg.execute("SELECT pg_terminate_backend(%s)", (pid,))
    _wait_until_gone(pg, pid)
    ((new_pid,),) = backend.execute("SELECT pg_backend_pid()")[1]
    assert new_pid != pid


def test_statement_timeout_fails_the_query_and_keeps_the_connection(
    fresh_schema: str, make_backend: Any
) -> None:
    backend = make_backend(fresh_schema, pool_size=1, statement_timeout_ms=100)
    started = time.monotonic()
    with pytest.raises(QueryCanceledError, match="statement timeout"):
        backend.execute("SELECT pg_sleep(5)")
    assert time.monotonic() - started < 4
    assert backend.execute("SELECT 1")[1] == [(1,)]


def test_a_session_cancel_stops_its_query_and_keeps_the_connection(
    fresh_schema: str, make_backend: Any
) -> None:
    """The cancel reaches the pooled connection running the session's query; with one connection in the
    pool, the next query proves that connection came back healthy."""
    backend = make_backend(fresh_schema, pool_size=1)
    session = Interrupter()
    context = contextvars.copy_context()
    context.run(SESSION_INTERRUPTER.set, session)
    threading.Timer(0.3, session.cancel).start()
    started = time.monotonic()
    with pytest.raises(QueryCanceledError, match="due to user request"):
        context.run(backend.execute, "SELECT pg_sleep(5)")
    assert time.monotonic() - started < 4
    assert backend.execute("SELECT 1")[1] == [(1,)]


def test_a_query_cannot_change_the_session_for_the_next_one(
    fresh_schema: str, pg: psycopg.Connection[Any], make_backend: Any
) -> None:
    in_schema(pg, fresh_schema, VISITS)
    backend = make_backend(fresh_schema, pool_size=1)  # one connection: every query reuses it
    backend.execute("SELECT set_config('search_path', 'pg_catalog', false)")
    backend.execute("SELECT set_config('default_transaction_read_only', 'off', false)")
    assert backend.execute("SELECT count(*) FROM visits")[1] == [(7,)]
    with pytest.raises(BackendUnavailableError):
        backend.execute("SELECT set_config('transaction_read_only', 'off', false)")
    with pytest.raises(BackendUnavailableError):
        backend.execute("DELETE FROM visits")
    assert in_schema(pg, fresh_schema, "SELECT count(*) FROM visits").fetchone() == (7,)


def test_close_closes_every_connection(
    fresh_schema: str, pg: psycopg.Connection[Any], make_backend: Any
) -> None:
    backend = make_backend(fresh_schema, pool_size=2)
    pids = {backend.execute("SELECT pg_backend_pid()")[1][0][0] for _ in range(3)}
    backend.close()
    for pid in pids:
        _wait_until_gone(pg, pid)
    with pytest.raises(BackendUnavailableError, match="shut down"):
        backend.execute("SELECT 1")


def test_unreachable_server_fails_at_start_naming_it_without_the_password(tmp_path: Path) -> None:
    dsn = f"host={tmp_path} port=5999 dbname=clinic user=veil password=hunter2 connect_timeout=2"
    with pytest.raises(BackendUnavailableError, match="cannot connect to PostgreSQL at") as raised:
        PostgresBackend(dsn, schema="public")
    error = raised.value
    assert f"host={tmp_path} port=5999 dbname=clinic user=veil" in error.message
    assert "hunter2" not in " ".join(str(part) for part in (error.message, error.detail, error.hint))
    assert "No such file or directory" in error.message  # libpq's reason, for the administrator


def test_missing_schema_fails_at_start(postgres_dsn: str) -> None:
    with pytest.raises(BackendUnavailableError, match='schema "veil_no_such_schema" does not exist'):
        PostgresBackend(postgres_dsn, schema="veil_no_such_schema")


def test_describe_dsn_drops_the_password() -> None:
    assert describe_dsn("postgresql://veil:hunter2@db.internal:6432/clinic") == (
        "host=db.internal port=6432 dbname=clinic user=veil"
    )


def test_build_context_opens_a_postgres_dataset_from_dsn_env(
    postgres_dsn: str, fresh_schema: str, pg: psycopg.Connection[Any], tmp_path: Path
) -> None:
    in_schema(pg, fresh_schema, VISITS)
    text = f'[datasets.clinic]\nbackend = "postgres"\ndsn_env = "CLINIC_DSN"\nschema = "{fresh_schema}"\n'
    config = parse_config(text, path=tmp_path / "veil.toml")
    Ledger.create(config.ledger.path)
    context = build_context(config, environ={"CLINIC_DSN": postgres_dsn})
    backend = context.services["clinic"].backend
    try:
        assert isinstance(backend, PostgresBackend)
        assert backend.execute("SELECT count(*) FROM visits")[1] == [(7,)]
    finally:
        backend.close()
        context.services["clinic"].sandbox.close()


def test_build_context_refuses_an_unset_dsn_env(tmp_path: Path) -> None:
    text = '[datasets.clinic]\nbackend = "postgres"\ndsn_env = "CLINIC_DSN"\n'
    config = parse_config(text, path=tmp_path / "veil.toml")
    Ledger.create(config.ledger.path)
    with pytest.raises(ConfigError, match=r"datasets\.clinic\.dsn_env: the environment variable CLINIC_DSN"):
        build_context(config, environ={})


def test_build_context_names_the_dataset_that_cannot_connect(tmp_path: Path) -> None:
    text = f'[datasets.clinic]\nbackend = "postgres"\ndsn = "host={tmp_path} port=5999 connect_timeout=2"\n'
    config = parse_config(text, path=tmp_path / "veil.toml")
    Ledger.create(config.ledger.path)
    with pytest.raises(BackendUnavailableError, match='dataset "clinic": cannot connect to PostgreSQL'):
        build_context(config)


def test_open_backend_keeps_duckdb_datasets_on_duckdb(tmp_path: Path) -> None:
    duckdb.connect(str(tmp_path / "d.duckdb")).close()
    dataset = parse_config('[datasets.d]\npath = "d.duckdb"\n', path=tmp_path / "veil.toml").dataset("d")
    assert dataset is not None
    backend = open_backend(dataset, environ={})
    try:
        assert backend.dialect == dialect_of(dataset) == "duckdb"
    finally:
        backend.close()


def _wait_until_gone(pg: psycopg.Connection[Any], pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pg.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone() is None:
            return
        time.sleep(0.02)
    pytest.fail(f"server process {pid} is still alive after {timeout:g} s")
