"""``veil import``: load a CSV or Parquet file into a dataset's engine and declare it in the policy.

DuckDB reads the file in every case (proxy/cli/import_source.py). A ``backend = "duckdb"`` dataset
gets the table in its file (``CREATE TABLE … AS SELECT … FROM read_csv(…)``); a ``backend =
"postgres"`` dataset gets it in its ``schema``; a ``backend = "spark"`` dataset reads the file (or a
directory of Parquet files) where it is, so only the policy is written, with the path in ``sources``. A postgres dataset's table: ``CREATE TABLE`` with the types of
proxy/cli/import_types.py, then the rows streamed from DuckDB with ``COPY … FROM STDIN (FORMAT
BINARY)``, all in one transaction (DuckDB's own postgres extension would have to be downloaded, so it
is not used). The PostgreSQL user of the dataset's DSN needs ``CREATE`` on the schema for this; the
server only ever needs ``SELECT``.

The policy is never derived from the data. Which columns are public, their public values, the
clamping bounds and ``max_contributions`` come from the administrator; the file only supplies column
names and types. (Computing, say, the largest number of rows per person and writing it into the
policy would publish a fact about the private data without any noise.) A public lookup table
(``--public-table``) holds public knowledge by the administrator's declaration, so its ``--key`` is
checked unique in the file, as every query that joins it checks it again.

Order of work, so that a refusal leaves nothing half-done: :func:`plan_import` checks every option
against the file's columns, reads the whole file once (a bad value or a quote that never closes on any
line is refused here) and checks that the policy with the new table is valid — nothing is written;
``--dry-run`` stops there and prints the plan. :func:`apply_import` then creates the table and writes
the policy atomically (proxy/cli/import_policy.py); if the policy cannot be written, the new table is
dropped again (PostgreSQL: the transaction that created it is rolled back; if the commit itself
fails, the policy file is put back as it was).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypedDict, Unpack

import duckdb
import psycopg
from psycopg import sql as pgsql

from proxy.backends.postgres import describe_dsn, with_connection_defaults
from proxy.cli.import_policy import Bound, add_table, check_with_table, section_text, table_entry
from proxy.cli.import_source import (
    CSV,
    PARQUET,
    SourceFile,
    describe,
    open_source,
    quiet,
    quote_identifier,
    require_rows,
    summarize,
    unreadable,
)
from proxy.cli.import_types import FileColumn, ImportColumn, needs_range, policy_type, storage
from proxy.config import (
    DUCKDB,
    IDENTIFIER,
    POSTGRES,
    SPARK,
    DatasetPolicy,
    TablePolicy,
    VeilConfig,
    load_config,
    write_policy_text,
)
from proxy.errors import ConfigError

_NO_PUBLIC: Mapping[str, Sequence[str]] = MappingProxyType({})
_NO_BOUNDS: Mapping[str, tuple[Bound, Bound]] = MappingProxyType({})
_COPY_BATCH_ROWS = 10_000


@dataclass(frozen=True)
class ImportPlan:
    """Everything an import will do, checked: the file and how it is read, the columns with their
    policy types and storage, the number of rows, and the table's policy entry."""

    config_path: Path
    dataset: DatasetPolicy
    table: str
    source: SourceFile
    columns: tuple[ImportColumn, ...]
    rows: int
    entry: Mapping[str, Any]
    dsn: str | None = field(default=None, repr=False)  # a postgres dataset's, resolved up front
    spark_source: str | None = None  # a spark dataset's: the path its sources entry names

    @property
    def public_table(self) -> bool:
        return bool(self.entry.get("public"))

    def section(self) -> str:
        """The policy section the import adds."""
        return section_text(self.dataset.name, self.table, self.entry)


def option_conflict(
    *,
    privacy_unit: str | None,
    max_contributions: int | None,
    public: Mapping[str, Sequence[str]],
    public_table: bool,
    key: str | None,
) -> str | None:
    """What is wrong with this combination of options, if anything (the CLI reports it as a usage
    error, :func:`plan_import` as a ConfigError)."""
    if public_table:
        for given, option in ((privacy_unit, "--privacy-unit"), (max_contributions, "--max-contributions")):
            if given is not None:
                return f"--public-table takes no {option}: a public table's rows are not people's"
        if public:
            return (
                "--public-table takes no --public: every column of a public table is public, "
                "its values read from the table"
            )
        return None
    if key is not None:
        return "--key is only used with --public-table (the unique column private tables are joined on)"
    if privacy_unit is None:
        return (
            "--privacy-unit is required: the column that names the person, or row if each row is one "
            "person (or --public-table for a public lookup table)"
        )
    return None


class ImportOptions(TypedDict, total=False):
    """The options of an import besides where from and to: :func:`plan_import` says what each means and
    gives their defaults."""

    privacy_unit: str | None
    public: Mapping[str, Sequence[str]]
    bounds: Mapping[str, tuple[Bound, Bound]]
    max_contributions: int | None
    public_table: bool
    key: str | None
    encoding: str | None


def import_table(
    config_path: Path,
    *,
    dataset: str,
    table: str,
    source: Path,
    environ: Mapping[str, str] = MappingProxyType({}),
    **options: Unpack[ImportOptions],
) -> TablePolicy:
    """Load ``source`` into ``dataset`` as ``table`` and declare it in the policy; returns the new policy.

    See :func:`plan_import` for the options; ``environ`` resolves a postgres dataset's ``dsn_env``."""
    plan = plan_import(config_path, dataset=dataset, table=table, source=source, environ=environ, **options)
    return apply_import(plan)


def plan_import(
    config_path: Path,
    *,
    dataset: str,
    table: str,
    source: Path,
    privacy_unit: str | None = None,
    public: Mapping[str, Sequence[str]] = _NO_PUBLIC,
    bounds: Mapping[str, tuple[Bound, Bound]] = _NO_BOUNDS,
    max_contributions: int | None = None,
    public_table: bool = False,
    key: str | None = None,
    encoding: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ImportPlan:
    """Check everything an import needs and return its plan; nothing is written, no engine contacted.

    ``privacy_unit`` is ``"row"`` or the column identifying a person. ``max_contributions`` is
    required with a privacy-unit column (rows kept per person at query time) and must be absent or
    1 with ``"row"``. ``public`` maps a column to its public values (given as text, converted to the
    column's type); ``bounds`` maps a numeric column to its clamping bounds ``(lower, upper)``.
    Every other column is private. ``public_table`` declares a public lookup table instead (no
    privacy unit), joinable on its unique ``key`` column. ``encoding`` is a CSV file's (default
    UTF-8). With ``environ``, a postgres dataset's connection string is resolved too (not for a dry
    run, which needs none)."""
    conflict = option_conflict(
        privacy_unit=privacy_unit,
        max_contributions=max_contributions,
        public=public,
        public_table=public_table,
        key=key,
    )
    if conflict is not None:
        raise ConfigError(conflict)
    dataset_policy = _dataset(load_config(config_path), dataset)
    table = _table_name(dataset_policy, table)
    dsn = (
        dataset_policy.resolve_dsn(environ)
        if environ is not None and dataset_policy.backend == POSTGRES
        else None
    )
    with quiet(duckdb.connect()) as scratch:  # reads the file without touching the dataset
        file = open_source(scratch, source, encoding=encoding)
        found = _file_columns(file, describe(scratch, file))
        if file.format == CSV:
            require_rows(scratch, file)
        entry = table_entry(
            found,
            source_name=source.name,
            privacy_unit=privacy_unit,
            max_contributions=max_contributions,
            public=public,
            bounds=bounds,
            public_table=public_table,
            key=key,
        )
        # a Spark dataset stores nothing (it reads the file where it is): DuckDB's storage rules suffice
        stored_as = DUCKDB if dataset_policy.backend == SPARK else dataset_policy.backend
        rows, columns = _stored_columns(scratch, file, found, backend=stored_as)
        if "key" in entry:
            _check_unique_key(scratch, file, next(c for c in columns if c.name == entry["key"]))
    spark_source = _spark_source(config_path, source) if dataset_policy.backend == SPARK else None
    check_with_table(config_path, dataset=dataset_policy.name, table=table, entry=entry, source=spark_source)
    return ImportPlan(
        config_path, dataset_policy, table, file, tuple(columns), rows, entry, dsn, spark_source
    )


def apply_import(plan: ImportPlan) -> TablePolicy:
    """Create and fill the table, and declare it in the policy: both, or neither. A Spark dataset
    reads the file or directory where it is: only the policy is written (the table and its source)."""
    if plan.dataset.backend == SPARK:
        written, _ = add_table(
            plan.config_path,
            dataset=plan.dataset.name,
            table=plan.table,
            entry=plan.entry,
            source=plan.spark_source,
        )
        return written.datasets[plan.dataset.name].tables[plan.table]
    if plan.dataset.backend == POSTGRES:
        assert plan.dsn is not None, "plan_import resolves a postgres dataset's DSN when given environ"
        written = _import_into_postgres(plan, plan.dsn)
        return written.datasets[plan.dataset.name].tables[plan.table]
    assert plan.dataset.path is not None  # every duckdb dataset has a path
    with _connect(plan.dataset.path) as connection:
        if _table_exists(connection, plan.table):
            raise ConfigError(
                f'table "{plan.table}" already exists in {plan.dataset.path}',
                hint="choose another table name, or drop the table first",
            )
        _create_table(connection, plan)
        try:
            written, _ = add_table(
                plan.config_path, dataset=plan.dataset.name, table=plan.table, entry=plan.entry
            )
        except BaseException:
            connection.execute(f"DROP TABLE {quote_identifier(plan.table)}")
            raise
    return written.datasets[plan.dataset.name].tables[plan.table]


def parse_public_option(text: str) -> tuple[str, list[str]]:
    """``COL=v1,v2`` (the ``--public`` syntax) → ``("col", ["v1", "v2"])``; values are stripped."""
    column, separator, values = text.partition("=")
    items = [value.strip() for value in values.split(",")]
    if not separator or not column.strip() or not all(items):
        raise ConfigError(
            f"--public {text!r}: expected COLUMN=VALUE1,VALUE2,…", hint="e.g. --public sex=female,male"
        )
    return column.strip(), items


def parse_bounds_option(text: str) -> tuple[str, tuple[Bound, Bound]]:
    """``COL=lo:hi`` (the ``--bounds`` syntax) → ``("col", (lo, hi))``: numbers, or two dates
    (``day=2024-01-01:2025-12-31``) for a date column."""
    column, separator, interval = text.partition("=")
    lower, colon, upper = interval.partition(":")
    try:
        if not separator or not colon or not column.strip():
            raise ValueError(text)
        try:
            return column.strip(), (float(lower), float(upper))
        except ValueError:
            return column.strip(), (datetime.date.fromisoformat(lower), datetime.date.fromisoformat(upper))
    except ValueError:
        raise ConfigError(
            f"--bounds {text!r}: expected COLUMN=LOWER:UPPER",
            hint="e.g. --bounds age=0:100, or --bounds day=2024-01-01:2025-12-31 for a date column",
        ) from None


def _dataset(config: VeilConfig, name: str) -> DatasetPolicy:
    policy = config.dataset(name.lower())
    if policy is None:
        known = ", ".join(sorted(config.datasets)) or "none"
        raise ConfigError(
            f'dataset "{name}" is not declared in {config.path}',
            detail=f"declared datasets: {known}",
            hint=f"add a [datasets.{name}] section with backend and path first",
        )
    return policy


def _table_name(dataset: DatasetPolicy, name: str) -> str:
    if not IDENTIFIER.match(name):
        raise ConfigError(
            f'"{name}" is not a valid table name',
            hint="use letters, digits and _ only, not starting with a digit",
        )
    if dataset.table(name) is not None:
        raise ConfigError(
            f'table "{name.lower()}" is already declared in dataset "{dataset.name}"',
            hint="choose another table name, or remove the table from the policy file first",
        )
    return name.lower()


def _file_columns(file: SourceFile, described: Sequence[tuple[str, str]]) -> list[FileColumn]:
    columns = [_file_column(file, name, source_type) for name, source_type in described]
    seen: set[str] = set()
    for column in columns:
        if column.name in seen:
            raise ConfigError(
                f'{file.path}: two columns are both named "{column.name}" (names are case-insensitive)',
                hint="rename one of them in the file",
            )
        seen.add(column.name)
    return columns


def _file_column(file: SourceFile, name: str, source_type: str) -> FileColumn:
    if not IDENTIFIER.match(name):
        header = " (the file's first line must name its columns)" if file.format == CSV else ""
        raise ConfigError(
            f'{file.path}: column "{name}" is not a valid column name',
            hint=f"rename it in the file{header}: letters, digits and _ only, not starting with a digit",
        )
    column_type = policy_type(source_type)
    if column_type is None:
        raise ConfigError(
            f'{file.path}: column "{name}" has type {source_type}, which a policy cannot declare',
            detail="supported: integers, FLOAT, DOUBLE, DECIMAL, VARCHAR, UUID, DATE, TIMESTAMP, BOOLEAN",
            hint="convert or drop the column before importing",
        )
    return FileColumn(name, source_type, name.lower(), column_type)


def _stored_columns(
    connection: duckdb.DuckDBPyConnection, file: SourceFile, columns: Sequence[FileColumn], *, backend: str
) -> tuple[int, list[ImportColumn]]:
    """Read the whole file once (every value of every column) and choose each column's storage."""
    declared = file.format == PARQUET
    ranged = [
        c.source_name for c in columns if needs_range(c.source_type, backend=backend, declared=declared)
    ]
    summary = summarize(connection, file, columns=[c.source_name for c in columns], ranges=ranged)
    stored = [
        ImportColumn(
            c.source_name,
            c.source_type,
            c.name,
            c.type,
            storage(
                c.name,
                c.source_type,
                c.type,
                backend=backend,
                declared=declared,
                value_range=summary.ranges.get(c.source_name),
            ),
        )
        for c in columns
    ]
    return summary.rows, stored


def _check_unique_key(connection: duckdb.DuckDBPyConnection, file: SourceFile, column: ImportColumn) -> None:
    """A lookup table's key must be unique (as stored: two timestamps with a time zone that are one
    instant are one UTC timestamp)."""
    reader, parameters = file.reader()
    key = quote_identifier(column.name)
    query = (
        f"SELECT {key}, count(*) FROM (SELECT {column.select_item()} FROM {reader}) WHERE {key} IS NOT NULL"
        f" GROUP BY {key} HAVING count(*) > 1 ORDER BY count(*) DESC, {key} LIMIT 3"
    )
    try:
        repeated = connection.execute(query, parameters).fetchall()
    except duckdb.Error as error:
        raise unreadable(connection, file, error) from None
    if repeated:
        shown = ", ".join(f"{value!s} ({count} rows)" for value, count in repeated)
        raise ConfigError(
            f'--key: column "{column.name}" is not unique in {file.path.name}',
            detail=f"repeated values: {shown}",
            hint="a lookup table's key must name one row: fix the file, or choose another --key",
        )


@contextmanager
def _connect(path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    if not path.parent.is_dir():
        raise ConfigError(f"{path}: the dataset's directory does not exist")
    try:
        connection = quiet(duckdb.connect(str(path)))
    except duckdb.IOException as error:
        if "lock" in str(error).lower():
            raise ConfigError(
                f"{path} is in use by another process (is `veil serve` running?)",
                hint="stop the server, import, then start it again",
            ) from None
        raise ConfigError(f"{path}: cannot open the database: {_first_line(error)}") from None
    try:
        yield connection
    finally:
        connection.close()


def _table_exists(connection: duckdb.DuckDBPyConnection, table: str) -> bool:
    query = "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'main' AND lower(table_name) = $1"
    row = connection.execute(query, [table]).fetchone()
    return row is not None and row[0] > 0


def _create_table(connection: duckdb.DuckDBPyConnection, plan: ImportPlan) -> None:
    reader, parameters = plan.source.reader()
    select_list = ", ".join(column.select_item() for column in plan.columns)
    statement = f"CREATE TABLE {quote_identifier(plan.table)} AS SELECT {select_list} FROM {reader}"
    try:
        connection.execute(statement, parameters)
    except duckdb.Error as error:
        raise unreadable(connection, plan.source, error) from None


def _import_into_postgres(plan: ImportPlan, dsn: str) -> VeilConfig:
    """Create and fill the table in one transaction; commit only once the policy is written."""
    where = describe_dsn(dsn)
    schema, table = plan.dataset.schema, plan.table
    try:
        connection = psycopg.connect(with_connection_defaults(dsn), autocommit=False)
    except psycopg.Error as error:
        raise ConfigError(f"cannot connect to PostgreSQL at {where}: {_first_line(error)}") from None
    with connection:  # closes the connection; a transaction still open is rolled back
        _check_postgres_target(connection, schema, table, where=where)
        try:
            _create_postgres_table(connection, schema, table, plan.columns)
            _copy_rows(connection, plan)
        except psycopg.Error as error:
            raise ConfigError(
                f'PostgreSQL at {where} refused to create or fill table "{schema}.{table}": '
                f"{_first_line(error)}",
                hint="the user of the dataset's DSN needs CREATE on the schema to import",
            ) from None
        # if this fails, nothing is committed
        written, previous = add_table(
            plan.config_path, dataset=plan.dataset.name, table=table, entry=plan.entry
        )
        try:
            connection.commit()
        except psycopg.Error as error:
            write_policy_text(plan.config_path, previous)  # the table does not exist: take it back
            raise ConfigError(
                f"PostgreSQL at {where} could not commit the new table: {_first_line(error)}"
            ) from None
    return written


def _check_postgres_target(
    connection: psycopg.Connection[Any], schema: str, table: str, *, where: str
) -> None:
    if (
        connection.execute("SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = %s", (schema,)).fetchone()
        is None
    ):
        raise ConfigError(
            f'schema "{schema}" does not exist in PostgreSQL at {where}',
            hint=f"create it first (CREATE SCHEMA {schema}) or set the dataset's schema key",
        )
    query = (
        "SELECT 1 FROM pg_catalog.pg_class AS c JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = %s"
    )
    if connection.execute(query, (schema, table)).fetchone() is not None:
        raise ConfigError(
            f'table "{table}" already exists in schema "{schema}" of PostgreSQL at {where}',
            hint="choose another table name, or drop the table first",
        )


def _create_postgres_table(
    connection: psycopg.Connection[Any], schema: str, table: str, columns: Sequence[ImportColumn]
) -> None:
    definitions = pgsql.SQL(", ").join(
        pgsql.SQL("{} {}").format(pgsql.Identifier(column.name), pgsql.SQL(column.storage.name))
        for column in columns
    )
    connection.execute(pgsql.SQL("CREATE TABLE {} ({})").format(pgsql.Identifier(schema, table), definitions))


def _copy_rows(connection: psycopg.Connection[Any], plan: ImportPlan) -> None:
    """Stream the file's rows, converted to their storage types by DuckDB, through a binary COPY."""
    reader, parameters = plan.source.reader()
    select_list = ", ".join(column.select_item() for column in plan.columns)
    names = pgsql.SQL(", ").join(pgsql.Identifier(column.name) for column in plan.columns)
    statement = pgsql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
        pgsql.Identifier(plan.dataset.schema, plan.table), names
    )
    with quiet(duckdb.connect()) as scratch, connection.cursor() as cursor:
        try:
            result = scratch.execute(f"SELECT {select_list} FROM {reader}", parameters)
        except duckdb.Error as error:
            raise unreadable(scratch, plan.source, error) from None
        with cursor.copy(statement) as copy:
            copy.set_types([column.storage.copy for column in plan.columns])
            while True:
                try:
                    batch = result.fetchmany(_COPY_BATCH_ROWS)
                except duckdb.Error as error:
                    raise unreadable(scratch, plan.source, error) from None
                if not batch:
                    break
                for row in batch:
                    copy.write_row(row)


def _spark_source(config_path: Path, source: Path) -> str:
    """The path a Spark dataset's ``sources`` gets: relative to the policy file when the data lies
    under its directory (the policy and data move together), absolute otherwise."""
    resolved = source.resolve()
    try:
        return str(resolved.relative_to(config_path.resolve().parent))
    except ValueError:
        return str(resolved)


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
