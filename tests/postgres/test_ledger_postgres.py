"""The ledger on PostgreSQL: the whole contract of tests/unit/budget/test_ledger.py, run again with
every ledger in its own schema of the test server, and what only this store has — schemas,
concurrent creation, pooled connections, reconnecting, an isolation level of its own.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from budget.errors import LedgerStoreError
from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from budget.postgres_store import DEFAULT_MAX_CONNECTIONS, PostgresStore, _postgres_fault
from budget.store import open_store
from tests.postgres.conftest import in_schema
from tests.unit.budget.test_ledger import *  # noqa: F403 -- every contract test, collected again here
from tests.unit.budget.test_ledger import VERIFIER, Ledgers, race, spend

pytestmark = pytest.mark.postgres


@pytest.fixture
def ledgers(postgres_ledgers: Ledgers) -> Ledgers:
    return (
        postgres_ledgers  # the contract tests collected here run on PostgreSQL (tests/postgres/conftest.py)
    )


@pytest.fixture
def scratch_schema(postgres_dsn: str) -> Iterator[str]:
    """A schema name that does not exist yet; dropped after the test if something made it."""
    name = f"veil_test_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(postgres_dsn, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def test_a_dsn_opens_a_postgres_store_in_the_default_schema(postgres_dsn: str) -> None:
    store = open_store(postgres_dsn)
    assert isinstance(store, PostgresStore)
    assert store.schema == "veil_ledger"
    assert store.description.endswith("(schema veil_ledger)")


def test_ledgers_in_two_schemas_of_one_database_are_separate(ledgers: Ledgers) -> None:
    first, second = ledgers.new(), ledgers.new()
    first.add_analyst("alice", VERIFIER)
    assert first.list_analysts() != [] and second.list_analysts() == []


def test_create_makes_a_missing_schema(postgres_dsn: str, scratch_schema: str) -> None:
    ledger = Ledger.create(postgres_dsn, schema=scratch_schema)
    try:
        ledger.add_analyst("alice", VERIFIER)
        assert ledger.store.tables() >= {"analysts", "grants", "spends", "totals", "caps"}
    finally:
        ledger.close()


def test_open_refuses_a_schema_without_a_ledger(postgres_dsn: str, fresh_schema: str) -> None:
    with pytest.raises(LedgerStoreError, match=rf"\(schema {fresh_schema}\) is not a Veil ledger \(it lacks"):
        Ledger.open(postgres_dsn, schema=fresh_schema)


def test_create_refuses_a_schema_holding_other_tables(
    postgres_dsn: str, fresh_schema: str, pg: psycopg.Connection[Any]
) -> None:
    in_schema(pg, fresh_schema, "CREATE TABLE users (id INTEGER)")
    with pytest.raises(LedgerStoreError, match=r"is not a Veil ledger \(it already holds other tables\)"):
        Ledger.create(postgres_dsn, schema=fresh_schema)


@pytest.mark.parametrize("schema", ['x"; DROP SCHEMA public; --', "Ledger", "1st", ""])
def test_refuses_a_schema_name_that_is_not_a_plain_identifier(postgres_dsn: str, schema: str) -> None:
    with pytest.raises(LedgerStoreError, match=r"schema name .* is not allowed"):
        PostgresStore(postgres_dsn, schema=schema)


def test_refuses_a_malformed_dsn() -> None:
    with pytest.raises(LedgerStoreError, match="the ledger DSN is not valid"):
        PostgresStore("host=127.0.0.1 dbname=test nonsense")


def test_an_unreachable_server_is_a_store_error(scratch_schema: str) -> None:
    with pytest.raises(LedgerStoreError, match=r"cannot connect to the ledger at .*port=1 "):
        Ledger.open("host=127.0.0.1 port=1 dbname=test connect_timeout=2", schema=scratch_schema)


def test_processes_creating_one_ledger_at_once_all_succeed(postgres_dsn: str, scratch_schema: str) -> None:
    """Without a lock the second CREATE TABLE of a race fails on a duplicate."""
    barrier = threading.Barrier(6)
    made: list[Ledger] = []
    failures: list[Exception] = []

    def create() -> None:
        barrier.wait()
        try:
            made.append(Ledger.create(postgres_dsn, schema=scratch_schema))
        except LedgerStoreError as error:
            failures.append(error)

    threads = [threading.Thread(target=create) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for ledger in made:
        ledger.close()
    assert failures == []
    assert len(made) == 6


def test_a_ledger_connection_killed_while_idle_is_replaced(
    ledger: Ledger, pg: psycopg.Connection[Any]
) -> None:
    with ledger.store.transaction(write=False) as tx:
        (pid,) = tx.execute("SELECT pg_backend_pid()")[0]
    pg.execute("SELECT pg_terminate_backend(%s)", (pid,))
    spend(ledger, 0.25)
    assert ledger.balance("alice", "demo").spent_epsilon == 0.25


def test_a_transaction_that_loses_its_connection_fails_and_the_next_one_reconnects(ledger: Ledger) -> None:
    with pytest.raises(LedgerStoreError, match=r"cannot use the ledger at .*terminat"):  # noqa: SIM117
        with ledger.store.transaction(write=True) as tx:
            tx.execute("SELECT pg_terminate_backend(pg_backend_pid())")
    spend(ledger, 0.25)
    assert ledger.balance("alice", "demo").spent_epsilon == 0.25


def test_reservations_do_not_depend_on_the_servers_default_isolation(
    postgres_dsn: str, new_schema: Callable[[], str]
) -> None:
    """Under SERIALIZABLE the row lock that orders reservations would end them in serialization
    failures instead; the store always asks for READ COMMITTED."""
    dsn = f"{postgres_dsn} options='-c default_transaction_isolation=serializable'"
    ledger = Ledger.create(dsn, schema=new_schema())
    try:
        ledger.add_analyst("alice", VERIFIER)
        ledger.grant("alice", "demo", PrivacyLoss(1.0))
        assert race([ledger], attempts=30, epsilon=0.1) == 10
    finally:
        ledger.close()


def test_fifty_threads_share_a_bounded_pool_of_connections(
    postgres_dsn: str, new_schema: Callable[[], str], pg: psycopg.Connection[Any]
) -> None:
    """Every connection the pool opened stays open and idle afterwards, so counting them after the
    race counts the most that were ever open at once."""
    name = f"veil_pool_{uuid.uuid4().hex[:8]}"
    ledger = Ledger.create(f"{postgres_dsn} application_name={name}", schema=new_schema())
    try:
        ledger.add_analyst("alice", VERIFIER)
        ledger.grant("alice", "demo", PrivacyLoss(1.0))
        assert race([ledger], attempts=50, epsilon=0.1) == 10
        assert 1 <= backends(pg, name) <= DEFAULT_MAX_CONNECTIONS
    finally:
        ledger.close()
    deadline = time.monotonic() + 10  # a backend goes away a moment after its client hangs up
    while backends(pg, name) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert backends(pg, name) == 0  # close() closed them all


def backends(pg: psycopg.Connection[Any], application: str) -> int:
    row = pg.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (application,))
    return int(row.fetchone()[0])  # type: ignore[index]


def test_commit_and_cancel_skip_the_flush_only_in_their_own_transaction(ledger: Ledger) -> None:
    with ledger.store.transaction(write=True, durable=False) as tx:
        assert tx.execute("SHOW synchronous_commit") == [("off",)]
    with ledger.store.transaction(write=True) as tx:
        assert tx.execute("SHOW synchronous_commit") == [("on",)]


def test_writes_run_at_read_committed_and_reads_see_one_snapshot(ledger: Ledger) -> None:
    with ledger.store.transaction(write=True) as tx:
        assert tx.execute("SHOW transaction_isolation") == [("read committed",)]
    with ledger.store.transaction(write=False) as tx:
        assert tx.execute("SHOW transaction_isolation") == [("repeatable read",)]
        assert tx.execute("SHOW transaction_read_only") == [("on",)]


@pytest.mark.parametrize(
    ("statement", "fault"),
    [
        (None, "lost"),  # a closed connection: OperationalError without a SQLSTATE
        ("SET statement_timeout = 1; SELECT pg_sleep(1)", "locked"),  # 57014, a cancelled wait
        ("SELECT 1 / 0", "unavailable"),  # 22012: no fault of the server or the connection
    ],
)
def test_postgresql_errors_are_classified_by_their_sqlstate(
    postgres_dsn: str, statement: str | None, fault: str
) -> None:
    """Provoked for real on the test server; the proxy gives each fault its own SQLSTATE and message."""
    connection = psycopg.connect(postgres_dsn, autocommit=True)
    if statement is None:
        connection.close()
    with connection, pytest.raises(psycopg.Error) as failed:
        connection.execute(statement or "SELECT 1")
    assert _postgres_fault(failed.value) == fault
