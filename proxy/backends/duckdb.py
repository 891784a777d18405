"""The embedded DuckDB backend.

The dataset file is opened read-only with external access disabled and the configuration
locked: even if a query slipped past the allow-list, it could neither write nor read files
(``read_csv('/etc/passwd')``) nor change those settings back.
"""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb

from proxy.backends.base import Description, Rows
from proxy.backends.interrupts import Watchdog, interruptible
from proxy.backends.priority import engine_executor
from proxy.errors import BackendUnavailableError

log = logging.getLogger("veil.backend")

# Engine calls run on threads of lowered priority (proxy/backends/priority.py), one process-wide pool.
_ENGINE_THREADS = engine_executor()
SANDBOX_CONFIG = {"enable_external_access": False, "lock_configuration": True}


class DuckDBBackend:
    """Implements ``proxy.backends.base.Backend``."""

    dialect = "duckdb"

    def __init__(self, path: Path, *, statement_timeout_ms: int | None = None) -> None:
        """``statement_timeout_ms``: every engine query still running after it is interrupted (57014)."""
        self._path: Path | None = path
        self._watchdog = Watchdog(statement_timeout_ms) if statement_timeout_ms is not None else None
        try:
            self._connection = duckdb.connect(str(path), read_only=True, config=dict(SANDBOX_CONFIG))
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
        backend._connection = duckdb.connect(":memory:", config=dict(SANDBOX_CONFIG))
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
        cursor = self._connection.cursor()
        try:
            with interruptible(cursor.interrupt, watchdog=self._watchdog):
                return _ENGINE_THREADS.submit(_run, cursor, sql).result()
        finally:
            cursor.close()

    def close(self) -> None:
        self._connection.close()


def _run(cursor: duckdb.DuckDBPyConnection, sql: str) -> tuple[Description, Rows]:
    try:
        cursor.execute(sql)
        description = [(column[0], str(column[1])) for column in cursor.description or []]
        return description, cursor.fetchall()
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
