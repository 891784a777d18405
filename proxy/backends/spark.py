"""Apache Spark behind a dataset: a local session (``spark_master``, ``local[*]`` by default) or a Spark
Connect server (``spark_remote``), with each table registered as a temporary view over its Parquet or
CSV files (``sources``), or read by name from the server's catalog.

**One session per process.** Starting Spark launches a JVM (5–15 s), so the root session is started
once, lazily (by the first dataset that opens it, in a background thread, so ``veil serve`` starts
listening at once) and shared. Each dataset gets a session of its own on top of it (``newSession``:
its own temporary views and SQL settings, one JVM); closing the dataset drops its views, not the JVM.

**Settings, on every dataset session** (:data:`SESSION_SETTINGS`):

* ``spark.sql.ansi.enabled = false`` — explicitly, because Spark 4 turns ANSI mode *on* by default, and
  in ANSI mode a division by zero, an overflow or a failed cast raises an error. An error that depends
  on one private value would reveal it without noise (docs/privacy.md, "Side channels"). With ANSI off,
  Spark returns NULL for those (an integer overflow wraps around instead), and Veil's rewrites add what
  remains (rewrite/spark_semantics.py, rewrite/safe_predicates.py);
* ``spark.sql.runSQLOnFiles = false`` — no ``SELECT … FROM parquet.`/any/path```, even if a query got
  past the allow-list;
* the session time zone UTC, timestamps without time zone (as the policy's ``timestamp`` type), and the
  ``CORRECTED`` date parser (the legacy one raises on some dates instead of answering NULL).

**Cancel and timeout.** Every engine query runs under a job tag of its own (set in the thread that runs
it); a CancelRequest or the statement timeout cancels the jobs with that tag — that query's and no
other's — and keeps cancelling until the query has ended, since its later jobs start after the cancel.

**Results.** A date or timestamp Python cannot hold (past year 9999, before year 1) arrives as the text
``'infinity'`` or ``'-infinity'``, as from the PostgreSQL backend, instead of failing the fetch. Engine
error text is logged at DEBUG only: it can quote private values.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import threading
import uuid
from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proxy.backends.base import Description, Rows
from proxy.backends.interrupts import Watchdog, interruptible
from proxy.backends.priority import engine_executor
from proxy.config import SparkSource
from proxy.errors import BackendUnavailableError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("veil.backend")

_ENGINE_THREADS = engine_executor()
SESSION_SETTINGS = {
    "spark.sql.ansi.enabled": "false",
    "spark.sql.runSQLOnFiles": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.timestampType": "TIMESTAMP_NTZ",
    "spark.sql.legacy.timeParserPolicy": "CORRECTED",
    # shuffles of a small answer collapse to one partition (by size, not one per core): measured 3–4×
    # faster on the SQL tests' few thousand rows, and large inputs still split by size
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
}
ROOT_SETTINGS = {  # set once, when the local JVM starts
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.scheduler.mode": "FAIR",  # one long query does not hold every core until it ends
    "spark.sql.shuffle.partitions": str(4 * (os.cpu_count() or 1)),
    "spark.driver.memory": "2g",
    **SESSION_SETTINGS,
}
INSTALL_HINT = (
    "install it with: pip install 'veil-sql[spark]' (pyspark with its Spark Connect client; a local "
    "session needs Java 17 or later on the PATH)"
)
_MOMENT_TYPES = ("date", "timestamp", "timestamp_ntz")
_TYPE_NAMES = {  # Spark's simple type names → the DuckDB-style names the query service reads
    "tinyint": "TINYINT",
    "smallint": "SMALLINT",
    "int": "INTEGER",
    "bigint": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "string": "VARCHAR",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamp_ntz": "TIMESTAMP",
}

_ROOTS: dict[str, Future[SparkSession]] = {}
_ROOTS_LOCK = threading.Lock()
_TAGS = itertools.count()


def root_session(*, master: str | None, remote: str | None) -> Future[SparkSession]:
    """The process's Spark session for a master or a Connect URL, starting in the background on first
    use. A process has one local JVM: a second local master is refused rather than silently ignored. A
    start that failed is forgotten, so the next dataset opened (``kill -HUP``'s reload) tries again."""
    key = f"remote:{remote}" if remote is not None else f"local:{master}"
    with _ROOTS_LOCK:
        for name, started in list(_ROOTS.items()):
            if started.done() and started.exception() is not None:
                del _ROOTS[name]
        if key not in _ROOTS:
            local = [name for name in _ROOTS if name.startswith("local:")]
            if remote is None and local:
                raise BackendUnavailableError(
                    f"a Spark session with master {local[0][6:]} already runs in this process",
                    hint="give every spark dataset served together the same spark_master",
                )
            if _ROOTS and (remote is None) != bool(local):
                # pyspark switches the whole process to Spark Connect once a remote session exists
                raise BackendUnavailableError(
                    "one process serves spark datasets either with a local session or over Spark Connect",
                    hint="give every spark dataset served together spark_master, or every one spark_remote",
                )
            future: Future[SparkSession] = Future()
            _ROOTS[key] = future
            thread = threading.Thread(
                target=_start, args=(future, master, remote), name="veil-spark-start", daemon=True
            )
            thread.start()
        return _ROOTS[key]


def _start(future: Future[SparkSession], master: str | None, remote: str | None) -> None:
    """Resolve ``future`` whatever happens: a query waiting for the session must never wait forever."""
    try:
        future.set_result(_new_session(master, remote))
    except BackendUnavailableError as error:
        future.set_exception(error)
    except BaseException as error:  # Java missing, a refused connection, a warning raised as an error…
        where, reason = remote or master, f"{type(error).__name__}: {_first_line(error)}"
        log.warning("cannot start Spark (%s): %s", where, reason)
        future.set_exception(
            BackendUnavailableError(
                f"cannot start Spark ({where}): {reason}",
                hint="is Java 17 or later installed, or the Spark Connect server running? " + INSTALL_HINT,
            )
        )


def _new_session(master: str | None, remote: str | None) -> SparkSession:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise BackendUnavailableError(
            "a spark dataset needs pyspark, which is not installed", hint=INSTALL_HINT
        ) from None
    if remote is not None:
        try:
            session = SparkSession.builder.remote(remote).getOrCreate()
        except BaseException:
            # pyspark marks the process as Spark Connect before it connects; undo it when it failed
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
            raise
        _quiet_query_context_loggers()
        return session
    builder = SparkSession.builder.master(master or "local[*]").appName("veil")
    for name, value in ROOT_SETTINGS.items():
        builder = builder.config(name, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    _quiet_query_context_loggers()
    return session


def _quiet_query_context_loggers() -> None:
    """pyspark logs every failed query's message at ERROR (its own loggers, not propagated): the
    message can quote private values, which Veil keeps to DEBUG in its own log."""
    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)


class SparkBackend:
    """Implements ``proxy.backends.base.Backend`` on a Spark session (pyspark)."""

    dialect = "spark"

    def __init__(
        self,
        *,
        master: str | None,
        remote: str | None,
        sources: Mapping[str, SparkSource],
        catalog_tables: tuple[str, ...] = (),
        schema: str = "default",
        statement_timeout_ms: int | None = None,
    ) -> None:
        """Checks that every local source exists (fast, at start-up) and starts the session in the
        background; the first query waits for it. ``catalog_tables`` are read from ``schema``."""
        for table, source in sources.items():
            if "://" not in source.location and not Path(source.location).exists():
                raise BackendUnavailableError(
                    f"the source of table {table} does not exist: {source.location}",
                    hint="check the dataset's sources in the policy",
                )
        self._sources = dict(sources)
        self._catalog_tables = catalog_tables
        self._schema = schema
        self._root = root_session(master=master, remote=remote)
        self._remote = remote is not None
        self._watchdog = Watchdog(statement_timeout_ms) if statement_timeout_ms is not None else None
        self._lock = threading.Lock()
        self._session: SparkSession | None = None
        self._registered_version: str | None = None
        self._closed = False

    def execute(self, sql: str) -> tuple[Description, Rows]:
        """Run one query under a tag of its own → (name, type) pairs and rows. Any failure is a generic
        ``BackendUnavailableError``; the engine's text goes to the log at DEBUG."""
        session = self._ready()
        tag = f"veil-{os.getpid()}-{next(_TAGS)}"
        finished = threading.Event()
        stopper = _Stopper(session, tag, remote=self._remote, finished=finished)
        try:
            with interruptible(stopper.stop, watchdog=self._watchdog):
                return _ENGINE_THREADS.submit(_run, session, tag, sql, self._remote).result()
        finally:
            finished.set()

    def data_version(self) -> str:
        """Every local source's files: names, sizes and modification times (a directory's files
        included). Tables in a catalog or behind a URL have no version Veil can read: a fresh one each
        time, so their answers are never served from the cache."""
        digest = hashlib.sha256()
        for table in sorted(self._sources):
            location = self._sources[table].location
            if "://" in location:
                return f"unversioned:{uuid.uuid4()}"
            for path in _files(Path(location)):
                status = path.stat()
                digest.update(f"{table}\0{path}\0{status.st_size}\0{status.st_mtime_ns}\n".encode())
        if self._catalog_tables:
            return f"unversioned:{uuid.uuid4()}"
        return digest.hexdigest()[:32]

    def close(self) -> None:
        """Drop this dataset's views; the process's Spark session stays for the next dataset."""
        with self._lock:
            self._closed = True
            session, self._session = self._session, None
        if session is not None and not self._remote:
            for table in self._sources:
                try:
                    session.catalog.dropTempView(table)
                except Exception as error:  # best effort at shutdown
                    log.info("could not drop Spark view %s: %s", table, _first_line(error))

    def _ready(self) -> SparkSession:
        """The dataset's session with its views registered — again when a source's files changed, as
        Spark keeps the file listing of a view it has read."""
        root = self._root.result()  # raises the start-up failure, if any
        version = self.data_version() if self._sources else "catalog"
        with self._lock:
            if self._closed:
                raise BackendUnavailableError("the database engine has been shut down")
            if self._session is None:
                self._session = _dataset_session(root, remote=self._remote)
            if self._registered_version != version:
                _register(self._session, self._sources, self._catalog_tables, self._schema)
                self._registered_version = version
            return self._session


def _dataset_session(root: SparkSession, *, remote: bool) -> SparkSession:
    session = root if remote else root.newSession()
    for name, value in SESSION_SETTINGS.items():
        session.conf.set(name, value)
    return session


def _register(
    session: SparkSession, sources: Mapping[str, SparkSource], catalog: tuple[str, ...], schema: str
) -> None:
    """A view per table. One that cannot be read (a file that is not Parquet, a table missing from the
    catalog) is left out and logged — reading it reads file metadata, never rows — so a query on it
    fails as a query on a missing DuckDB table does, and the others still answer."""
    tables: list[tuple[str, SparkSource | None]] = [*sources.items(), *((table, None) for table in catalog)]
    for table, source in tables:
        try:
            register_view(session, table, source, schema=schema)
        except Exception as error:  # the file's name and format only, never its rows
            session.catalog.dropTempView(table)
            where = f"from {source.location}" if source is not None else f"from the catalog ({schema})"
            log.warning("Spark cannot read table %s %s: %s", table, where, _first_line(error))


def register_view(session: SparkSession, table: str, source: SparkSource | None, *, schema: str) -> None:
    """Temporary view ``table`` over its files (``source``), or over ``schema.table`` of the session's
    catalog when it has none."""
    if source is None:
        session.table(f"`{schema}`.`{table}`").createOrReplaceTempView(table)
        return
    reader = session.read
    if source.format == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    reader.format(source.format).load(source.location).createOrReplaceTempView(table)


def table_session(
    *, master: str | None, remote: str | None, table: str, source: SparkSource | None, schema: str
) -> SparkSession:
    """A session with the dataset's settings and one table as a view, for a command the data holder runs
    on their own rows (``veil materialize``, ``veil risk``): it waits for Spark to start, and a table
    Spark cannot read is an error that says why — the holder's own file, the holder's own words."""
    session = _dataset_session(root_session(master=master, remote=remote).result(), remote=remote is not None)
    try:
        register_view(session, table, source, schema=schema)
    except Exception as error:  # pyspark raises many types; the reason is one line for the holder
        where = source.location if source is not None else f"the catalog's database {schema}"
        raise BackendUnavailableError(
            f"Spark cannot read table {table} from {where}: {_first_line(error)}",
            hint="check the dataset's sources in the policy",
        ) from None
    return session


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file())
    return [path] if path.exists() else []


class _Stopper:
    """Cancels a query's Spark jobs by their tag — and keeps cancelling every ``RETRY_S`` until the
    query has ended: a cancel finds only the jobs running at that moment, while a query starts its
    first job after planning and, with adaptive execution, further jobs stage by stage."""

    RETRY_S = 0.25

    def __init__(self, session: SparkSession, tag: str, *, remote: bool, finished: threading.Event) -> None:
        self._session, self._tag, self._remote, self._finished = session, tag, remote, finished
        self._started = False

    def stop(self) -> None:
        self._cancel()
        if not self._started:
            self._started = True
            threading.Thread(target=self._keep_cancelling, name="veil-spark-cancel", daemon=True).start()

    def _keep_cancelling(self) -> None:
        while not self._finished.wait(self.RETRY_S):
            self._cancel()

    def _cancel(self) -> None:
        try:
            if self._remote:
                self._session.interruptTag(self._tag)
            else:
                self._session.sparkContext.cancelJobsWithTag(self._tag)
        except Exception as error:  # a cancel is best effort, as in PostgreSQL
            log.warning("could not interrupt a Spark query: %s", _first_line(error))


def _run(session: SparkSession, tag: str, sql: str, remote: bool) -> tuple[Description, Rows]:
    """In an engine thread: the tag is the thread's (Spark Connect: the session's, for this thread),
    so every job the query starts carries it."""
    if remote:
        session.addTag(tag)
    else:
        session.sparkContext.addJobTag(tag)
        session.sparkContext.setInterruptOnCancel(True)  # a cancelled task's thread is interrupted too
    try:
        frame = session.sql(sql)
        description = [(field.name, _type_name(field.dataType.simpleString())) for field in frame.schema]
        return description, _collect(frame)
    except BackendUnavailableError:
        raise
    except Exception as error:  # pyspark raises many types; none may reach the client
        # the message can quote private values (a value in a plan, a file's contents): DEBUG only
        log.warning("backend error: %s", type(error).__name__)
        log.debug("backend error detail: %s", _first_line(error))
        raise BackendUnavailableError(
            "the database engine could not run the query", hint="the server log has the details"
        ) from None
    finally:
        if remote:
            session.removeTag(tag)
        else:
            session.sparkContext.removeJobTag(tag)


def _collect(frame: DataFrame) -> Rows:
    """The rows as tuples; a date or timestamp outside years 1–9999 as ``'infinity'``/``'-infinity'``."""
    types = [field.dataType.simpleString() for field in frame.schema]
    moments = [i for i, name in enumerate(types) if name in _MOMENT_TYPES]
    if not moments:
        return [tuple(row) for row in frame.collect()]
    from pyspark.sql import functions as F

    renamed = frame.toDF(*[f"_veil_{i}" for i in range(len(types))])
    columns: list[Any] = []
    for i in range(len(types)):
        column = F.col(f"_veil_{i}")
        if i in moments:
            year = F.year(column)
            columns.append(F.when(year.between(1, 9999), column))
            columns.append(F.when(year > 9999, F.lit(1)).when(year < 1, F.lit(-1)))
        else:
            columns.append(column)
    rows = []
    for row in renamed.select(*columns).collect():
        values, position = [], 0
        for i in range(len(types)):
            value = row[position]
            if i in moments:
                side = row[position + 1]
                value = value if side is None else ("infinity" if side > 0 else "-infinity")
                position += 2
            else:
                position += 1
            values.append(value)
        rows.append(tuple(values))
    return rows


def _type_name(spark_type: str) -> str:
    if spark_type.startswith("decimal"):
        return spark_type.upper()
    return _TYPE_NAMES.get(spark_type, spark_type.upper())


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
