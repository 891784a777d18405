"""The embedded DuckDB backend.

The dataset file is opened read-only with external access disabled and the configuration
locked: even if a query slipped past the allow-list, it could neither write nor read files
(``read_csv('/etc/passwd')``) nor change those settings back.

Its time zone is UTC, whatever the machine's (DuckDB takes ``TZ`` by default): a ``TIMESTAMP WITH TIME
ZONE`` column declared ``timestamp`` is then read, truncated and compared in UTC, as on a PostgreSQL
dataset (proxy/backends/postgres.py sets the same) and as Veil sends timestamps.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from proxy.backends.base import Columns, Description, Rows
from proxy.backends.interrupts import Watchdog, interruptible
from proxy.backends.priority import engine_executor
from proxy.errors import BackendUnavailableError

log = logging.getLogger("veil.backend")

# Engine calls run on threads of lowered priority (proxy/backends/priority.py), one process-wide pool.
_ENGINE_THREADS = engine_executor()
SANDBOX_CONFIG = {"enable_external_access": False, "lock_configuration": True}
# Set once the database is open (the ICU extension that knows time zones is loaded only then), before the
# configuration is locked: a query cannot change them back.
_SESSION_SETTINGS = ("SET GLOBAL TimeZone = 'UTC'", "SET GLOBAL lock_configuration = true")
# Engine types whose NumPy form (``fetchnumpy``) turns back into exactly the Python values ``fetchall``
# gives: integers up to 64 bits, floats, booleans, strings. Not HUGEINT or DECIMAL (NumPy makes them
# float64), nor dates and times (datetime64: a DATE would come back as a datetime).
_NUMPY_EXACT = frozenset(
    {
        "BOOLEAN",
        "TINYINT",
        "SMALLINT",
        "INTEGER",
        "BIGINT",
        "UTINYINT",
        "USMALLINT",
        "UINTEGER",
        "UBIGINT",
        "FLOAT",
        "DOUBLE",
        "VARCHAR",
    }
)
T = TypeVar("T")


class DuckDBBackend:
    """Implements ``proxy.backends.base.Backend``."""

    dialect = "duckdb"

    def __init__(self, path: Path, *, statement_timeout_ms: int | None = None) -> None:
        """``statement_timeout_ms``: every engine query still running after it is interrupted (57014)."""
        self._path: Path | None = path
        self._watchdog = Watchdog(statement_timeout_ms) if statement_timeout_ms is not None else None
        try:
            self._connection = _connect(str(path), read_only=True)
        except duckdb.Error as error:
            raise BackendUnavailableError(
                f"cannot open the dataset file {path}",
                detail=str(error).splitlines()[0],
                hint="check the dataset path in the policy; is another process writing to it?",
            ) from None

    @classmethod
    def sandbox(cls) -> DuckDBBackend:
        """An empty in-memory engine for constant queries (``SELECT 1``): it holds no data at all."""
        backend = cls.__new__(cls)
        backend._connection = _connect(":memory:", read_only=False)
        backend._path = None
        backend._watchdog = None
        return backend

    def data_version(self) -> str:
        """The file's modification time and size. Veil holds the file open read-only, so DuckDB's
        lock keeps writers out while it runs: the data can only change between two runs."""
        if self._path is None:
            return "empty"
        status = self._path.stat()
        return f"{status.st_mtime_ns}:{status.st_size}"

    def execute(self, sql: str) -> tuple[Description, Rows]:
        """Run one query on a fresh cursor (cursors are safe across threads) → (name, type) pairs, rows.

        A cursor is a connection of its own to the same database, so interrupting it (a CancelRequest,
        the statement timeout) stops this query and no other session's. Engine error text is logged,
        never returned: it may quote private values."""
        return self._on_cursor(_run, sql)

    def execute_columns(self, sql: str) -> Columns:
        """``execute``, column by column. A result of integers, floats, booleans and strings only is
        fetched as NumPy arrays, each turned into a list at once (``tolist``): no tuple per row, and
        a fifth of ``fetchall``'s time for 100,000 rows. Any other result is fetched row by row and
        transposed."""
        return self._on_cursor(_run_columns, sql)

    def _on_cursor(self, run: Callable[[duckdb.DuckDBPyConnection, str], T], sql: str) -> T:
        cursor = self._connection.cursor()
        try:
            with interruptible(cursor.interrupt, watchdog=self._watchdog):
                return _ENGINE_THREADS.submit(run, cursor, sql).result()
        finally:
            cursor.close()

    def close(self) -> None:
        self._connection.close()


def _connect(database: str, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A connection without external access, in UTC, its configuration locked (the cursors that run
    queries are connections to the same database: they share it)."""
    config = {**SANDBOX_CONFIG, "lock_configuration": False}
    connection = duckdb.connect(database, read_only=read_only, config=config)
    for setting in _SESSION_SETTINGS:
        connection.execute(setting)
    return connection


def _run(cursor: duckdb.DuckDBPyConnection, sql: str) -> tuple[Description, Rows]:
    with _engine_errors():
        cursor.execute(sql)
        return _description(cursor), cursor.fetchall()


def _run_columns(cursor: duckdb.DuckDBPyConnection, sql: str) -> Columns:
    with _engine_errors():
        cursor.execute(sql)
        description = _description(cursor)
        names = [name.lower() for name, _ in description]
        # fetchnumpy keys its arrays by name, renaming duplicates: only distinct names keep the order plain
        if len(set(names)) < len(names) or not all(kind in _NUMPY_EXACT for _, kind in description):
            return Columns.of_rows(description, cursor.fetchall())
        arrays = list(cursor.fetchnumpy().values())
        count = len(arrays[0]) if arrays else 0
        return Columns(description, [_values(array) for array in arrays], count)


def _values(array: Any) -> list[Any]:
    """A NumPy column as the Python values ``fetchall`` gives: NULLs (masked entries) are None."""
    if not hasattr(array, "mask"):  # a column without NULLs is a plain ndarray
        return array.tolist()  # type: ignore[no-any-return]
    values: list[Any] = array.data.tolist()
    for index in array.mask.nonzero()[0].tolist() if array.mask.shape else ():
        values[index] = None
    return values


def _description(cursor: duckdb.DuckDBPyConnection) -> Description:
    return [(column[0], str(column[1])) for column in cursor.description or []]


@contextlib.contextmanager
def _engine_errors() -> Iterator[None]:
    try:
        yield
    except duckdb.InterruptException:
        log.info("engine query interrupted")  # interruptible() reports it as canceled (57014)
        raise BackendUnavailableError("the database engine query was interrupted") from None
    except duckdb.Error as error:
        # the message can quote private values (an overflowing expression, a failed cast):
        # its text is kept out of the normal log level
        log.warning("backend error: %s", type(error).__name__)
        log.debug("backend error detail: %s", str(error).splitlines()[0])
        raise BackendUnavailableError(
            "the database engine could not run the query", hint="the server log has the details"
        ) from None
