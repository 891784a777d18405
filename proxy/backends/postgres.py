"""A PostgreSQL server behind a dataset: read-only sessions from a small pool, the dataset's schema first.

Every connection is set up once, when it is opened:

* ``SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY`` (``default_transaction_read_only``);
* ``search_path`` = the dataset's schema, so generated SQL that names bare tables (``FROM visits``)
  resolves there. ``pg_catalog`` is not listed, so PostgreSQL keeps searching it *first*: a function
  or operator defined in the dataset's schema can never shadow a built-in (CVE-2018-1058);
* ``statement_timeout``, when the policy sets one; ``client_encoding`` UTF8;
* loaders under which a date or timestamp that Python cannot hold (``'infinity'``, beyond year 9999,
  before year 1) arrives as the text ``'infinity'`` or ``'-infinity'`` instead of failing the fetch: a
  query whose answer failed to load because of one person's birth date would reveal it.

Then each query runs in its own ``BEGIN READ ONLY`` transaction that psycopg opens (so no SQL can
make it read-write, not even ``set_config('default_transaction_read_only', 'off', false)``) and that
is always rolled back, which also undoes any session setting the query might have changed: a pooled
connection carries nothing from one query to the next. Two extra round trips, well below a
millisecond on a local network, buy that.

Queries are sent with the extended protocol (binary results), which admits exactly one statement:
a stacked ``SELECT …; SET default_transaction_read_only = off`` is refused by the server itself.
These are defences in depth; connect as a role that may only ``SELECT`` the dataset's tables.

**Pool.** A LIFO queue of idle connections and a semaphore of ``pool_size`` slots: a query takes a
slot, then an idle connection or, if there is none, a new one; at most ``pool_size`` connections
ever exist. Not one connection per thread: sessions run engine calls on asyncio's default executor
(up to 32 threads), so per-thread connections would open that many server sessions and never close
them when a thread ends. A connection that breaks is discarded; a query that failed only because its
pooled connection had been lost while idle (server restart, ``idle_session_timeout``) is run once
more on a new connection — harmless, as every query is read-only.

**Start-up.** The constructor opens the first connection and checks that the schema exists, so
``veil serve`` stops at once with a message naming the server (never the password) instead of
answering every query with SQLSTATE 58000. Later connections open lazily; while the server is down,
queries fail with the same generic error and nothing is charged.

**Cancel and timeout.** A client's CancelRequest reaches the pooled connection running its query as a
PostgreSQL cancel request of its own (``interrupts.py``); the server's ``statement_timeout`` stops a
query by itself. Both are reported as 57014 and the connection goes back to the pool.

Engine error text is logged at DEBUG only (its type and SQLSTATE at WARNING): it can quote private
values, as in ``invalid input syntax for type integer: "Alice"``.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql as pgsql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow
from psycopg.types.datetime import DateBinaryLoader, TimestampBinaryLoader, TimestamptzBinaryLoader

from proxy.backends.base import Columns, Description, Rows
from proxy.backends.interrupts import interruptible, statement_timeout_error
from proxy.errors import BackendUnavailableError, ProxyError

log = logging.getLogger("veil.backend")

CONNECT_TIMEOUT_SECONDS = 10
CANCEL_TIMEOUT_SECONDS = 5
APPLICATION_NAME = "veil"
_SHOWN_PARAMETERS = ("host", "hostaddr", "port", "dbname", "user")

Connection = psycopg.Connection[TupleRow]


def describe_dsn(dsn: str) -> str:
    """The connection string for messages: server, database and user only — never a password."""
    try:
        parameters = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "(an invalid connection string)"
    shown = {key: parameters[key] for key in _SHOWN_PARAMETERS if parameters.get(key) not in (None, "")}
    return make_conninfo(**shown) if shown else "(libpq defaults)"  # type: ignore[arg-type]


class PostgresBackend:
    """Implements ``proxy.backends.base.Backend`` on a PostgreSQL server (psycopg 3)."""

    dialect = "postgres"

    def __init__(
        self, dsn: str, *, schema: str, pool_size: int = 4, statement_timeout_ms: int | None = None
    ) -> None:
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, got {pool_size}")
        self.where = describe_dsn(dsn)
        self.schema = schema
        self._conninfo = with_connection_defaults(dsn)
        self._statement_timeout_ms = statement_timeout_ms
        self._idle: queue.LifoQueue[Connection] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(pool_size)
        self._lock = threading.Lock()
        self._closed = False
        self._idle.put(self._first_connection())

    def __repr__(self) -> str:
        return f"PostgresBackend({self.where!r}, schema={self.schema!r})"

    def execute(self, sql: str) -> tuple[Description, Rows]:
        """Run one generated query → (name, type) pairs and rows; values pass through as psycopg loads
        them (``numeric`` as ``Decimal``). Any failure is a generic ``BackendUnavailableError``."""
        query = sql.encode("utf-8")  # bytes: psycopg sends it as is (no %-placeholder parsing)
        with self._slot():
            for attempt in (1, 2):
                connection, reused = self._checkout()
                try:
                    with interruptible(functools.partial(_cancel, connection), watchdog=None):
                        return _run(connection, query)
                except psycopg.errors.QueryCanceled as error:
                    raise self._canceled_by_server(error) from None
                except psycopg.Error as error:
                    if attempt == 1 and reused and connection.broken:
                        log.info("a pooled PostgreSQL connection was lost while idle; retrying on a new one")
                        continue
                    raise _query_failure(error) from None
                finally:
                    self._checkin(connection)  # after interruptible(): no cancel can still be on its way
        raise AssertionError("unreachable: the second attempt returns or raises")  # pragma: no cover

    def execute_columns(self, sql: str) -> Columns:
        """``execute``, its rows transposed: psycopg loads row by row anyway."""
        return Columns.of_rows(*self.execute(sql))

    def data_version(self) -> str:
        """A digest of every relation in the schema: its file node (changed by TRUNCATE, VACUUM FULL,
        CLUSTER, a reload) and its insert/update/delete counters, plus the server's start time
        (counters restart with it). The counters come from the statistics system, which another
        session's writes reach within seconds — a cached answer may outlive a change by that long."""
        query = _DATA_VERSION.format(schema=pgsql.Literal(self.schema)).as_string(None)
        return str(self.execute(query)[1][0][0])

    def close(self) -> None:
        """Close every idle connection now; connections in use are closed when their query ends."""
        with self._lock:
            self._closed = True
            while True:
                try:
                    self._idle.get_nowait().close()
                except queue.Empty:
                    break

    def _canceled_by_server(self, error: psycopg.errors.QueryCanceled) -> ProxyError:
        """The server stopped the query by itself: its ``statement_timeout`` (Veil's own cancels are
        reported by ``interruptible``). Without a timeout, someone canceled it on the server."""
        if self._statement_timeout_ms is None:
            return _query_failure(error)
        return statement_timeout_error(self._statement_timeout_ms)

    @contextmanager
    def _slot(self) -> Iterator[None]:
        self._slots.acquire()
        try:
            yield
        finally:
            self._slots.release()

    def _checkout(self) -> tuple[Connection, bool]:
        """An idle connection (reused = True) or a new one; the caller holds a slot."""
        if self._closed:
            raise BackendUnavailableError("the database engine has been shut down")
        try:
            return self._idle.get_nowait(), True
        except queue.Empty:
            pass
        try:
            return self._open(), False
        except psycopg.Error as error:
            # connection failures quote no data, only the server; the client still gets a generic error
            log.warning("cannot connect to PostgreSQL at %s: %s", self.where, _first_line(error))
            raise BackendUnavailableError(
                "the database engine is unavailable", hint="the server log has the details"
            ) from None

    def _checkin(self, connection: Connection) -> None:
        healthy = not connection.closed and connection.info.transaction_status == TransactionStatus.IDLE
        with self._lock:
            if healthy and not self._closed:
                self._idle.put(connection)
                return
        connection.close()

    def _first_connection(self) -> Connection:
        """Fail fast at start-up, naming the server and the reason (this goes to the administrator)."""
        try:
            connection = self._open()
        except psycopg.Error as error:
            # libpq's reason is in the message itself: `veil serve` prints message and hint only
            raise BackendUnavailableError(
                f"cannot connect to PostgreSQL at {self.where}: {_first_line(error)}",
                hint="is the server running? check the dataset's dsn, or the variable its dsn_env names",
            ) from None
        try:
            _check_schema(connection, self.schema, where=self.where)
        except BaseException:
            connection.close()
            raise
        return connection

    def _open(self) -> Connection:
        """A new session, set up once; then every query runs in ``BEGIN READ ONLY`` … ``ROLLBACK``."""
        connection: Connection = psycopg.connect(self._conninfo, autocommit=True, prepare_threshold=None)
        try:
            with connection.cursor() as cursor:
                cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
                # A timestamp with time zone (a column, or date_trunc of a date) is computed in UTC, as
                # DuckDB computes it and as Veil sends timestamps, whatever the server's own TimeZone.
                cursor.execute("SET TimeZone TO 'UTC'")
                cursor.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(self.schema)))
                if self._statement_timeout_ms is not None:
                    timeout = pgsql.Literal(self._statement_timeout_ms)
                    cursor.execute(pgsql.SQL("SET statement_timeout TO {}").format(timeout))
            for type_name, loader in _MOMENT_LOADERS.items():
                connection.adapters.register_loader(type_name, loader)
            connection.autocommit = False
            connection.read_only = True  # psycopg itself sends BEGIN READ ONLY: no SQL can turn it off
        except BaseException:
            connection.close()
            raise
        return connection


class _BeyondPython:
    """A binary date or timestamp loader that answers ``'infinity'`` or ``'-infinity'`` for a value
    Python cannot hold, instead of raising (the sign bit of the int32 days or int64 µs says which)."""

    def load(self, data: bytes | bytearray | memoryview) -> object:
        try:
            return super().load(data)  # type: ignore[misc]
        except psycopg.DataError:
            return "-infinity" if bytes(data[:1])[0] & 0x80 else "infinity"


class _DateLoader(_BeyondPython, DateBinaryLoader):
    pass


class _TimestampLoader(_BeyondPython, TimestampBinaryLoader):
    pass


class _TimestamptzLoader(_BeyondPython, TimestamptzBinaryLoader):
    pass


_MOMENT_LOADERS = {"date": _DateLoader, "timestamp": _TimestampLoader, "timestamptz": _TimestamptzLoader}


_DATA_VERSION = pgsql.SQL(
    "SELECT md5(coalesce(string_agg(concat_ws(':', c.oid, c.relfilenode, s.n_tup_ins, s.n_tup_upd,"
    " s.n_tup_del), ',' ORDER BY c.oid), '')) || ':' || pg_postmaster_start_time()::text"
    " FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " LEFT JOIN pg_catalog.pg_stat_all_tables s ON s.relid = c.oid"
    " WHERE n.nspname = {schema} AND c.relkind IN ('r', 'p', 'm')"
)


def with_connection_defaults(dsn: str) -> str:
    """The DSN plus a connect timeout, an application name and UTF-8, unless it sets them itself."""
    try:
        given = conninfo_to_dict(dsn)
    except psycopg.Error:
        raise BackendUnavailableError(
            "the PostgreSQL connection string is not valid",
            hint="use a libpq string (host=… dbname=…) or a postgresql:// URL",
        ) from None
    defaults = {
        "connect_timeout": CONNECT_TIMEOUT_SECONDS,
        "application_name": APPLICATION_NAME,
        "client_encoding": "UTF8",
    }
    extra = {key: value for key, value in defaults.items() if key not in given}
    return make_conninfo(dsn, **extra)


def _check_schema(connection: Connection, schema: str, *, where: str) -> None:
    row = connection.execute(
        "SELECT has_schema_privilege(oid, 'USAGE') FROM pg_catalog.pg_namespace WHERE nspname = %s",
        (schema,),
    ).fetchone()
    if row is None:
        raise BackendUnavailableError(
            f'schema "{schema}" does not exist in PostgreSQL at {where}',
            hint="create it, or set the dataset's schema key to the schema that holds its tables",
        )
    if not row[0]:
        raise BackendUnavailableError(
            f'the PostgreSQL user may not use schema "{schema}" at {where}',
            hint=f"GRANT USAGE ON SCHEMA {schema} (and SELECT on its tables) to the user Veil connects as",
        )


def _run(connection: Connection, query: bytes) -> tuple[Description, Rows]:
    """One query in its own read-only transaction, always rolled back: whatever the query might
    change in the session (``set_config(…, false)`` included) is undone before the next one."""
    try:
        with connection.cursor(binary=True) as cursor:  # binary → extended protocol → one statement only
            cursor.execute(query)
            description = [(column.name, column.type_display) for column in cursor.description or []]
            return description, cursor.fetchall()
    finally:
        if not connection.closed:
            connection.rollback()


def _cancel(connection: Connection) -> None:
    """Ask the server to cancel the query running on ``connection`` (a CancelRequest of its own).

    A failure is logged, not raised: the client's cancel is best effort, as in PostgreSQL."""
    try:
        connection.cancel_safe(timeout=CANCEL_TIMEOUT_SECONDS)
    except psycopg.Error as error:
        log.warning("could not cancel a PostgreSQL query: %s", _first_line(error))


def _query_failure(error: psycopg.Error) -> BackendUnavailableError:
    # the message can quote private values (a failed cast, an overflow): its text stays at DEBUG
    log.warning("backend error: %s (SQLSTATE %s)", type(error).__name__, error.sqlstate or "none")
    log.debug("backend error detail: %s", _first_line(error))
    return BackendUnavailableError(
        "the database engine could not run the query", hint="the server log has the details"
    )


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
