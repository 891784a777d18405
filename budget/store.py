"""Where a ledger lives: an SQLite file on one host, or a PostgreSQL database shared by several.

The ledger's logic (budget/ledger.py) is written once, in the SQL both engines understand, with
``?`` placeholders; a store supplies connections and transactions and the few things that differ:

* **locking** — SQLite's ``BEGIN IMMEDIATE`` takes the database's single write lock before anything
  is read, so every write transaction is serialised. PostgreSQL runs writers concurrently, so
  the ledger locks the dataset's totals row (``lock_suffix`` = ``FOR UPDATE``) before it reads a
  balance; every transaction that changes a balance takes that lock first.
* **durability** — ``durable=False`` lets a commit skip the flush to disk (SQLite
  ``synchronous = NORMAL`` in WAL mode; PostgreSQL ``synchronous_commit = off``). The write then
  survives a crash of Veil but perhaps not a power cut. Only writes that are safe to lose use it: a
  lost commit or cancel leaves a reservation, which still counts as spent.

SQLite connections are kept per thread (the proxy calls the ledger from a small pool of worker
threads), so a query does not pay for connecting; PostgreSQL ones are pooled (budget/postgres_store.py).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, Protocol

from budget.errors import LedgerStoreError

BUSY_TIMEOUT_SECONDS = 30.0
Row = tuple[Any, ...]
CREATE_HINT = "run `veil init-demo`, or set ledger.path in veil.toml to an existing ledger"


_DAMAGE_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)  # damage, as opposed to locks or I/O


class Transaction(Protocol):
    def execute(self, sql: str, parameters: Sequence[object] = ()) -> list[Row]: ...


class LedgerStore(Protocol):
    dialect: str  # "sqlite" or "postgres": picks the schema's dialect-specific parts
    location: str  # a path, or a DSN without its password
    description: str  # for messages: the location, and the schema of a PostgreSQL ledger
    lock_suffix: str  # appended to the SELECT that locks a dataset's totals row

    def transaction(self, *, write: bool, durable: bool = True) -> AbstractContextManager[Transaction]: ...

    def tables(self) -> set[str]: ...

    def check_integrity(self) -> None: ...

    def close(self) -> None: ...


class _SQLiteTransaction:
    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def execute(self, sql: str, parameters: Sequence[object] = ()) -> list[Row]:
        return self._connection.execute(sql, tuple(parameters)).fetchall()


class SQLiteStore:
    """One SQLite file in WAL mode; any number of threads and processes may share it."""

    dialect = "sqlite"
    lock_suffix = ""

    def __init__(
        self, path: Path, *, create: bool = False, lock_timeout: float = BUSY_TIMEOUT_SECONDS
    ) -> None:
        self.path = Path(path)
        self.lock_timeout = lock_timeout
        self.location = self.description = str(self.path)
        if not create and not self.path.is_file():
            raise LedgerStoreError(f"no ledger at {self.path}; {CREATE_HINT}", hint=CREATE_HINT)
        self._uri = f"{self.path.resolve().as_uri()}" + ("?mode=rwc" if create else "?mode=rw")
        self._local = threading.local()
        self._lock = threading.Lock()
        self._writer = threading.Lock()
        self._connections: list[sqlite3.Connection] = []

    @contextmanager
    def transaction(self, *, write: bool, durable: bool = True) -> Iterator[Transaction]:
        with (
            self._one_writer() if write else nullcontext(),
            self._transaction(write=write, durable=durable) as transaction,
        ):
            yield transaction

    @contextmanager
    def _one_writer(self) -> Iterator[None]:
        """Threads of this process queue for SQLite's write lock here, in turn. SQLite makes a writer
        that finds the lock taken sleep and retry (its busy handler), so with many threads most of
        the time goes to sleeping while the lock is free; other processes still wait that way."""
        if not self._writer.acquire(timeout=self.lock_timeout):
            raise LedgerStoreError(
                f"cannot use the ledger at {self.location}: another thread held it for {self.lock_timeout:g} s",
                hint="check for a stuck veil process",
                fault="locked",
            )
        try:
            yield
        finally:
            self._writer.release()

    @contextmanager
    def _transaction(self, *, write: bool, durable: bool) -> Iterator[Transaction]:
        connection = self._connection()
        try:
            connection.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")
            connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield _SQLiteTransaction(connection)
            except BaseException:
                connection.rollback()
                raise
            connection.execute("COMMIT")
        except sqlite3.DatabaseError as error:
            if connection.in_transaction:
                connection.rollback()
            raise self._error(error) from error

    def tables(self) -> set[str]:
        with self.transaction(write=False) as transaction:
            rows = transaction.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {str(row[0]) for row in rows}

    def check_integrity(self) -> None:
        """SQLite's ``quick_check`` of every page: a ledger with corrupt pages may open, then fail on
        the first spend or login; ``veil serve`` refuses to start on one instead."""
        try:
            with self.transaction(write=False) as transaction:
                problems = [str(row[0]) for row in transaction.execute("PRAGMA quick_check")]
        except LedgerStoreError as error:  # some damage stops the check itself, or its COMMIT
            if getattr(error.__cause__, "sqlite_errorcode", None) not in _DAMAGE_CODES:
                raise
            problems = [str(error.__cause__)]
        if problems != ["ok"]:
            raise LedgerStoreError(
                f"the ledger at {self.location} is damaged: {problems[0]}",
                hint=_DAMAGED_HINT,
                fault="io",
            )

    def close(self) -> None:
        with self._lock:
            for connection in self._connections:
                connection.close()
            self._connections.clear()
        self._local = threading.local()

    def _connection(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            try:
                connection = sqlite3.connect(
                    self._uri,
                    uri=True,
                    timeout=self.lock_timeout,
                    isolation_level=None,
                    check_same_thread=False,
                )
                connection.execute("PRAGMA journal_mode = WAL")
            except sqlite3.Error as error:
                raise self._error(error) from error
            self._local.connection = connection
            with self._lock:
                self._connections.append(connection)
        return connection

    def _error(self, error: sqlite3.Error) -> LedgerStoreError:
        if getattr(error, "sqlite_errorname", None) == "SQLITE_NOTADB":
            return not_a_ledger(self.location, "it is not an SQLite database")
        fault = _sqlite_fault(getattr(error, "sqlite_errorname", "") or "")
        return LedgerStoreError(
            f"cannot use the ledger at {self.location}: {error}",
            hint=_DAMAGED_HINT
            if fault == "io"
            else "check that the file and its directory are readable and writable and not on a network share",
            fault=fault,
        )


_DAMAGED_HINT = "restore the ledger from a backup (sqlite3 ledger.sqlite '.recover' may save what is left)"


def _sqlite_fault(name: str) -> str:
    """SQLite's error name (SQLITE_BUSY, SQLITE_IOERR_WRITE …) → LedgerStoreError.fault."""
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return "locked"
    if name == "SQLITE_FULL":
        return "full"
    if name.startswith(("SQLITE_IOERR", "SQLITE_CORRUPT", "SQLITE_CANTOPEN")):  # NOTADB: not_a_ledger
        return "io"
    return "unavailable"


def open_store(
    location: str | Path,
    *,
    create: bool = False,
    schema: str | None = None,
    lock_timeout: float = BUSY_TIMEOUT_SECONDS,
) -> LedgerStore:
    """A DSN (``postgresql://…`` or ``host=… dbname=…``) opens a PostgreSQL ledger in ``schema``
    (default ``veil_ledger``); anything else is the path of an SQLite file."""
    text = str(location)
    if is_dsn(text):
        from budget.postgres_store import DEFAULT_SCHEMA, PostgresStore  # psycopg: only for this store

        return PostgresStore(text, schema=schema or DEFAULT_SCHEMA, lock_timeout=lock_timeout)
    return SQLiteStore(Path(location), create=create, lock_timeout=lock_timeout)


def is_dsn(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://")) or "dbname=" in location


def not_a_ledger(location: str, why: str) -> LedgerStoreError:
    return LedgerStoreError(
        f"{location} is not a Veil ledger ({why})",
        hint="set ledger.path in veil.toml to another file, or move this one aside and run `veil init-demo`",
    )
