"""A ledger in PostgreSQL, so that ``veil serve`` processes on several hosts share one budget.

Writers run concurrently here (READ COMMITTED), so the ledger serialises whatever changes a balance
by locking the dataset's totals row with ``SELECT … FOR UPDATE`` first (budget/ledger.py). The
tables live in their own schema (default ``veil_ledger``), set as the connection's search_path.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import psycopg
from psycopg import sql as pgsql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from budget.errors import LedgerStoreError
from budget.store import Row, Transaction

DEFAULT_SCHEMA = "veil_ledger"
_PLACEHOLDER = re.compile(r"\?")


class _PostgresTransaction:
    def __init__(self, connection: psycopg.Connection) -> None:
        self._connection = connection

    def execute(self, sql: str, parameters: Sequence[object] = ()) -> list[Row]:
        cursor = self._connection.execute(_PLACEHOLDER.sub("%s", sql), tuple(parameters) or None)
        return cursor.fetchall() if cursor.description is not None else []


class PostgresStore:
    dialect = "postgres"
    lock_suffix = " FOR UPDATE"

    def __init__(self, dsn: str, *, schema: str = DEFAULT_SCHEMA) -> None:
        try:
            parts = conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as error:
            raise LedgerStoreError(f"the ledger DSN is not valid: {error}") from None
        self.schema = schema
        self._dsn = make_conninfo(**parts)  # type: ignore[arg-type]
        self.location = make_conninfo(**{k: v for k, v in parts.items() if k != "password"})  # type: ignore[arg-type]
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[psycopg.Connection] = []

    @contextmanager
    def transaction(self, *, write: bool, durable: bool = True) -> Iterator[Transaction]:
        connection = self._connection()
        try:
            connection.execute("BEGIN" if write else "BEGIN READ ONLY")
            if not durable:
                connection.execute("SET LOCAL synchronous_commit = off")
            try:
                yield _PostgresTransaction(connection)
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        except psycopg.Error as error:
            self._discard(connection)
            raise LedgerStoreError(
                f"cannot use the ledger at {self.location}: {str(error).strip()}",
                hint="check that the PostgreSQL server is up and the role may use the ledger's schema",
            ) from error

    def tables(self) -> set[str]:
        with self.transaction(write=False) as transaction:
            rows = transaction.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = ?", (self.schema,)
            )
        return {str(row[0]) for row in rows}

    def close(self) -> None:
        with self._lock:
            for connection in self._connections:
                connection.close()
            self._connections.clear()
        self._local = threading.local()

    def _connection(self) -> psycopg.Connection:
        connection: psycopg.Connection | None = getattr(self._local, "connection", None)
        if connection is not None and not connection.closed:
            return connection
        try:
            connection = psycopg.connect(self._dsn, autocommit=True, connect_timeout=10)
            connection.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(self.schema)))
        except psycopg.Error as error:
            raise LedgerStoreError(
                f"cannot connect to the ledger at {self.location}: {str(error).strip()}",
                hint="check ledger.dsn in veil.toml and that the server is up",
            ) from None
        self._local.connection = connection
        with self._lock:
            self._connections.append(connection)
        return connection

    def _discard(self, connection: psycopg.Connection) -> None:
        """A connection whose transaction failed may be broken; the next call opens a new one."""
        if getattr(self._local, "connection", None) is connection:
            self._local.connection = None
        with self._lock:
            if connection in self._connections:
                self._connections.remove(connection)
        connection.close()
