"""A ledger in PostgreSQL, so that ``veil serve`` processes on several hosts share one budget.

Writers run concurrently here, so the ledger serialises whatever changes a balance by locking the
dataset's totals row with ``SELECT … FOR UPDATE`` first (budget/ledger.py). That only works at READ
COMMITTED — each statement after the lock sees what the previous lock holder committed; at
REPEATABLE READ or SERIALIZABLE the same transaction would fail with a serialization error. Readers
are the opposite: a balance or :meth:`~budget.ledger.Ledger.verify` reads several tables in several
statements and needs them all from one moment, as SQLite's read transactions give — so they run at
REPEATABLE READ (which never fails a read-only transaction). Every transaction names its level
rather than inheriting the server's default. The tables live in their own schema (default
``veil_ledger``), set as each connection's search_path.

Parameters are bound on the client (``psycopg.ClientCursor``): the ledger's SQL is shared with SQLite
and says ``? IS NULL``, which PostgreSQL cannot type when the parameter is bound on the server.

Connections come from a small pool shared by all threads (at most ``max_connections``): the proxy's
worker threads, or a benchmark's hundred, must not each hold a server connection, since a shared
ledger server serves several Veil hosts. A pooled connection that died while idle (server restart,
``pg_terminate_backend``) is replaced when its ``BEGIN`` fails — nothing was sent yet, so that retry
is safe; a failure later in a transaction is reported and its connection dropped.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import pq
from psycopg import sql as pgsql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from budget.errors import LedgerStoreError
from budget.store import BUSY_TIMEOUT_SECONDS, Row, Transaction

DEFAULT_SCHEMA = "veil_ledger"
DEFAULT_MAX_CONNECTIONS = 16
_PLACEHOLDER = re.compile(r"\?")
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_SERVER_HINT = "check ledger.dsn in veil.toml and that the PostgreSQL server is up"

Connection = psycopg.Connection[Any]


class _PostgresTransaction:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def execute(self, sql: str, parameters: Sequence[object] = ()) -> list[Row]:
        cursor = self._connection.execute(_PLACEHOLDER.sub("%s", sql), tuple(parameters) or None)
        return cursor.fetchall() if cursor.description is not None else []


class PostgresStore:
    """Ledger tables in one schema of a PostgreSQL database; safe to share across threads,
    processes and hosts."""

    dialect = "postgres"
    lock_suffix = " FOR UPDATE"
    location: str  # the DSN without its password

    @property
    def description(self) -> str:
        """For messages: where the ledger is, schema included."""
        return f"{self.location} (schema {self.schema})"

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        lock_timeout: float = BUSY_TIMEOUT_SECONDS,
    ) -> None:
        if not _SCHEMA_NAME.fullmatch(schema):
            raise LedgerStoreError(
                f"the ledger schema name {schema!r} is not allowed",
                hint='use 1 to 63 lowercase ASCII letters, digits or "_", not starting with a digit',
            )
        try:
            parts = conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as error:
            raise LedgerStoreError(f"the ledger DSN is not valid: {error}") from None
        self.schema = schema
        self.lock_timeout = lock_timeout  # waiting for a free connection; PostgreSQL's locks: lock_timeout
        self._dsn = make_conninfo(**parts)  # type: ignore[arg-type]
        self.location = make_conninfo(**{k: v for k, v in parts.items() if k != "password"})  # type: ignore[arg-type]
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        self._idle: list[Connection] = []
        self._closed = False

    @contextmanager
    def transaction(self, *, write: bool, durable: bool = True) -> Iterator[Transaction]:
        if not self._slots.acquire(timeout=self.lock_timeout):
            raise LedgerStoreError(
                f"cannot use the ledger at {self.description}: all its connections stayed busy for"
                f" {self.lock_timeout:g} s",
                hint="check for long-running transactions on the ledger's PostgreSQL server",
            )
        try:
            connection = self._begin(write=write, durable=durable)
            try:
                try:
                    yield _PostgresTransaction(connection)
                except BaseException:
                    if not connection.closed:  # a lost connection has nothing to roll back
                        connection.execute("ROLLBACK")
                    raise
                connection.execute("COMMIT")
            except psycopg.Error as error:
                raise self._error(error) from error
            finally:
                self._give_back(connection)
        finally:
            self._slots.release()

    def tables(self) -> set[str]:
        with self.transaction(write=False) as transaction:
            rows = transaction.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = ?", (self.schema,)
            )
        return {str(row[0]) for row in rows}

    def check_integrity(self) -> None:
        """PostgreSQL checks its own pages (and reports damage as errors of its own): nothing to add."""

    def close(self) -> None:
        """Close the idle connections; those in use are closed when their transaction ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _begin(self, *, write: bool, durable: bool) -> Connection:
        begin = "BEGIN ISOLATION LEVEL " + ("READ COMMITTED" if write else "REPEATABLE READ READ ONLY")
        while True:
            connection, pooled = self._take()
            try:
                connection.execute(begin)
                if not durable:
                    connection.execute("SET LOCAL synchronous_commit = off")
                return connection
            except psycopg.Error as error:
                connection.close()
                if not (pooled and isinstance(error, psycopg.OperationalError)):
                    raise self._error(error) from error
                # An idle connection that died (server restart, terminated backend): try the next.

    def _take(self) -> tuple[Connection, bool]:
        """An idle connection (True) or, when there is none, a new one (False)."""
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        try:
            connection: Connection = psycopg.connect(
                self._dsn, autocommit=True, connect_timeout=10, cursor_factory=psycopg.ClientCursor
            )
            connection.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(self.schema)))
            # a row another process holds locked fails the transaction as "locked" (55P03), not a wait
            connection.execute(pgsql.SQL("SET lock_timeout = {}").format(int(self.lock_timeout * 1000)))
        except psycopg.Error as error:
            raise LedgerStoreError(
                f"cannot connect to the ledger at {self.description}: {str(error).strip()}",
                hint=_SERVER_HINT,
                fault="lost",
            ) from None
        return connection, False

    def _give_back(self, connection: Connection) -> None:
        """Keep a connection for the next transaction only if it is open and outside any transaction."""
        reusable = not connection.closed and connection.info.transaction_status == pq.TransactionStatus.IDLE
        with self._lock:
            if reusable and not self._closed:
                self._idle.append(connection)
                return
        connection.close()

    def _error(self, error: psycopg.Error) -> LedgerStoreError:
        return LedgerStoreError(
            f"cannot use the ledger at {self.description}: {str(error).strip()}",
            hint="check that the PostgreSQL server is up and the role may use the ledger's schema",
            fault=_postgres_fault(error),
        )


def _postgres_fault(error: psycopg.Error) -> str:
    """PostgreSQL's SQLSTATE class (or a broken connection) → LedgerStoreError.fault."""
    state = error.sqlstate or ""
    if state == "53100":
        return "full"
    if state in ("55P03", "40P01") or state.startswith("57014"):
        return "locked"
    if state.startswith(("08", "57P")) or (state == "" and isinstance(error, psycopg.OperationalError)):
        return "lost"
    if state.startswith("58") or state.startswith("XX"):
        return "io"
    return "unavailable"
