"""``veil import``: load a CSV or Parquet file into a dataset's engine and declare it in the policy.

DuckDB reads the file in every case. A ``backend = "duckdb"`` dataset gets the table in its file
(``CREATE TABLE … AS SELECT … FROM read_csv(…)``); a ``backend = "postgres"`` dataset gets it in its
``schema``: ``CREATE TABLE`` with the PostgreSQL types below, then the rows streamed from DuckDB
with ``COPY … FROM STDIN (FORMAT BINARY)``, all in one transaction (DuckDB's own postgres extension
would have to be downloaded, so it is not used). The PostgreSQL user of the dataset's DSN needs
``CREATE`` on the schema for this; the server only ever needs ``SELECT``.

The policy is never derived from the data. Which columns are public, their public values, the
clamping bounds and ``max_contributions`` come from the administrator; the file only supplies column
names and types. (Computing, say, the largest number of rows per person and writing it into the
policy would publish a fact about the private data without any noise.)

Order of work, so that a refusal leaves nothing half-done: validate every argument against the file's
schema, create the table, then write the policy atomically; if the policy cannot be written, the new
table is dropped again (PostgreSQL: the transaction that created it is rolled back; if the commit
itself fails, the policy is put back as it was).

Stored column types are canonical for their policy type, whatever the source used:

=========================================  ===========  ==================  ==================
source (DuckDB) type                       policy type  stored in DuckDB    in PostgreSQL
=========================================  ===========  ==================  ==================
TINYINT … BIGINT, HUGEINT, unsigned kinds  integer      BIGINT              bigint
FLOAT, DOUBLE, DECIMAL(p, s)               real         DOUBLE              double precision
VARCHAR, UUID, ENUM                        text         VARCHAR             text
DATE                                       date         DATE                date
TIMESTAMP (any precision)                  date         DATE (the day)      date (the day)
TIMESTAMP WITH TIME ZONE                   date         DATE (the UTC day)  date (the UTC day)
BOOLEAN                                    boolean      BOOLEAN             boolean
=========================================  ===========  ==================  ==================

Timestamps become dates because the policy has no timestamp type, and because the time of day is
rarely needed for aggregates while it makes rows easier to single out. Other types (BLOB, LIST,
STRUCT, TIME, INTERVAL …) are refused: drop or convert those columns before importing.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import duckdb
import psycopg
from psycopg import sql as pgsql

from proxy.backends.postgres import describe_dsn, with_connection_defaults
from proxy.config import (
    IDENTIFIER,
    POSTGRES,
    ROW_PRIVACY_UNIT,
    ColumnType,
    DatasetPolicy,
    TablePolicy,
    VeilConfig,
    load_config,
    read_document,
    write_document,
)
from proxy.errors import ConfigError

CSV_SUFFIXES = (".csv", ".tsv", ".txt")
COMPRESSION_SUFFIXES = ("", ".gz", ".zst")
PARQUET_SUFFIXES = (".parquet", ".pq")

_NO_PUBLIC: Mapping[str, Sequence[str]] = MappingProxyType({})
Bound = float | datetime.date  # a --bounds end: a number, or a date for a date column
_NO_BOUNDS: Mapping[str, tuple[Bound, Bound]] = MappingProxyType({})

_INTEGER_TYPES = frozenset(
    {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT"}
    | {"UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT"}
)
_REAL_TYPES = frozenset({"FLOAT", "DOUBLE"})
_TEXT_TYPES = frozenset({"VARCHAR", "UUID"})
_TIMESTAMP_TYPES = frozenset({"TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS"})
_STORED_TYPE = {
    ColumnType.INTEGER: "BIGINT",
    ColumnType.REAL: "DOUBLE",
    ColumnType.TEXT: "VARCHAR",
    ColumnType.DATE: "DATE",
    ColumnType.BOOLEAN: "BOOLEAN",
}
_POSTGRES_TYPE = {
    ColumnType.INTEGER: "bigint",
    ColumnType.REAL: "double precision",
    ColumnType.TEXT: "text",
    ColumnType.DATE: "date",
    ColumnType.BOOLEAN: "boolean",
}
_COPY_TYPE = {  # the binary COPY needs each column's type; these are the types' names in pg_type
    ColumnType.INTEGER: "int8",
    ColumnType.REAL: "float8",
    ColumnType.TEXT: "text",
    ColumnType.DATE: "date",
    ColumnType.BOOLEAN: "bool",
}
_COPY_BATCH_ROWS = 10_000
_BOOLEAN_WORDS = {"true": True, "false": False}


@dataclass(frozen=True)
class _SourceColumn:
    source_name: str
    source_type: str
    name: str
    type: ColumnType

    def select_item(self) -> str:
        """The SQL that stores this column under its policy name, in its canonical type."""
        column = quote_identifier(self.source_name)
        if self.source_type == "TIMESTAMP WITH TIME ZONE":
            column = f"timezone('UTC', {column})"
        return f"CAST({column} AS {_STORED_TYPE[self.type]}) AS {quote_identifier(self.name)}"


def import_table(
    config_path: Path,
    *,
    dataset: str,
    table: str,
    source: Path,
    privacy_unit: str,
    public: Mapping[str, Sequence[str]] = _NO_PUBLIC,
    bounds: Mapping[str, tuple[Bound, Bound]] = _NO_BOUNDS,
    max_contributions: int | None = None,
    environ: Mapping[str, str] = MappingProxyType({}),
) -> TablePolicy:
    """Load ``source`` into ``dataset`` as ``table`` and declare it in the policy; returns the new policy.

    ``privacy_unit`` is ``"row"`` or the column identifying a person. ``max_contributions`` is
    required with a privacy-unit column (rows kept per person at query time) and must be absent or
    1 with ``"row"``. ``public`` maps a column to its public values (given as text, converted to the
    column's type); ``bounds`` maps a numeric (or date) column to its clamping bounds ``(lower, upper)``.
    Every other column is private. ``environ`` resolves a postgres dataset's ``dsn_env``.
    """
    config = load_config(config_path)
    dataset_policy = _dataset(config, dataset)
    table = _table_name(dataset_policy, table)
    reader = _reader(source)
    dsn = None
    if dataset_policy.backend == POSTGRES:
        dsn = dataset_policy.resolve_dsn(environ)
    with duckdb.connect() as scratch:  # read the schema without touching the dataset's file
        columns = _source_columns(scratch, reader, source)
    entry = _table_entry(
        columns,
        source=source,
        privacy_unit=privacy_unit,
        public=public,
        bounds=bounds,
        max_contributions=max_contributions,
    )
    if dsn is not None:
        written = _import_into_postgres(
            config_path,
            dataset_policy,
            dsn,
            table,
            entry=entry,
            reader=reader,
            source=source,
            columns=columns,
        )
        return written.datasets[dataset_policy.name].tables[table]
    assert dataset_policy.path is not None  # every duckdb dataset has a path
    with _connect(dataset_policy.path) as connection:
        if _table_exists(connection, table):
            raise ConfigError(
                f'table "{table}" already exists in {dataset_policy.path}',
                hint="choose another table name, or drop the table first",
            )
        _create_table(connection, table, reader=reader, source=source, columns=columns)
        try:
            written = _declare(config_path, dataset_policy.name, table, entry)
        except BaseException:
            connection.execute(f"DROP TABLE {quote_identifier(table)}")
            raise
    return written.datasets[dataset_policy.name].tables[table]


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


def quote_identifier(name: str) -> str:
    """Quote any text as a DuckDB identifier (double quotes, inner quotes doubled)."""
    return '"' + name.replace('"', '""') + '"'


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


def _reader(source: Path) -> str:
    """The DuckDB table function for the file, chosen by its extension."""
    name = source.name.lower()
    if any(name.endswith(csv + packed) for csv in CSV_SUFFIXES for packed in COMPRESSION_SUFFIXES):
        reader = "read_csv"
    elif name.endswith(PARQUET_SUFFIXES):
        reader = "read_parquet"
    else:
        raise ConfigError(
            f"{source}: cannot tell the file format from its extension",
            hint="name CSV files .csv, .tsv or .txt (optionally .gz or .zst) and Parquet files .parquet or .pq",
        )
    if not source.is_file():
        raise ConfigError(f"{source}: no such file")
    return reader


def _source_sql(reader: str) -> str:
    """The FROM item reading the file given as parameter $1 (the path is bound, never interpolated)."""
    return "read_csv($1, auto_detect = true)" if reader == "read_csv" else "read_parquet($1)"


@contextmanager
def _connect(path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    if not path.parent.is_dir():
        raise ConfigError(f"{path}: the dataset's directory does not exist")
    try:
        connection = duckdb.connect(str(path))
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


def _source_columns(connection: duckdb.DuckDBPyConnection, reader: str, source: Path) -> list[_SourceColumn]:
    try:
        described = connection.execute(
            f"DESCRIBE SELECT * FROM {_source_sql(reader)}", [str(source)]
        ).fetchall()
    except duckdb.Error as error:
        raise _unreadable(source, reader, error) from None
    columns = [_source_column(source, str(row[0]), str(row[1])) for row in described]
    seen: set[str] = set()
    for column in columns:
        if column.name in seen:
            raise ConfigError(
                f'{source}: two columns are both named "{column.name}" (names are case-insensitive)',
                hint="rename one of them in the file",
            )
        seen.add(column.name)
    return columns


def _source_column(source: Path, name: str, source_type: str) -> _SourceColumn:
    if not IDENTIFIER.match(name):
        raise ConfigError(
            f'{source}: column "{name}" is not a valid column name',
            hint="rename it in the file: letters, digits and _ only, not starting with a digit",
        )
    column_type = _policy_type(source_type)
    if column_type is None:
        raise ConfigError(
            f'{source}: column "{name}" has type {source_type}, which a policy cannot declare',
            detail="supported: integers, FLOAT, DOUBLE, DECIMAL, VARCHAR, UUID, DATE, TIMESTAMP, BOOLEAN",
            hint="convert or drop the column before importing",
        )
    return _SourceColumn(name, source_type, name.lower(), column_type)


def _policy_type(source_type: str) -> ColumnType | None:
    if source_type in _INTEGER_TYPES:
        return ColumnType.INTEGER
    if source_type in _REAL_TYPES or source_type.startswith("DECIMAL"):
        return ColumnType.REAL
    if source_type in _TEXT_TYPES or source_type.startswith("ENUM("):
        return ColumnType.TEXT
    if source_type == "DATE" or source_type in _TIMESTAMP_TYPES or source_type == "TIMESTAMP WITH TIME ZONE":
        return ColumnType.DATE
    if source_type == "BOOLEAN":
        return ColumnType.BOOLEAN
    return None


def _table_entry(
    columns: Sequence[_SourceColumn],
    *,
    source: Path,
    privacy_unit: str,
    public: Mapping[str, Sequence[str]],
    bounds: Mapping[str, tuple[Bound, Bound]],
    max_contributions: int | None,
) -> dict[str, Any]:
    """The policy document's entry for the table; every argument is checked before anything is written."""
    by_name = {column.name: column for column in columns}

    def lookup(name: str, option: str) -> _SourceColumn:
        column = by_name.get(name.lower())
        if column is None:
            raise ConfigError(
                f'{option}: column "{name}" is not in {source.name}',
                detail=f"its columns are: {', '.join(by_name)}",
            )
        return column

    entry: dict[str, Any] = _privacy_unit_entry(privacy_unit, max_contributions, lookup)
    declared: dict[str, dict[str, Any]] = {column.name: {"type": column.type.value} for column in columns}
    for name, values in public.items():
        column = lookup(name, "--public")
        if column.name == entry["privacy_unit"]:
            raise ConfigError(f'--public: the privacy unit column "{column.name}" cannot be public')
        declared[column.name].update(public=True, values=_public_values(column, values))
    for name, (lower, upper) in bounds.items():
        column = lookup(name, "--bounds")
        declared[column.name].update(_bounds(column, lower, upper))
    entry["columns"] = declared
    return entry


def _privacy_unit_entry(
    privacy_unit: str, max_contributions: int | None, lookup: Callable[[str, str], _SourceColumn]
) -> dict[str, Any]:
    if privacy_unit.lower() == ROW_PRIVACY_UNIT:
        if max_contributions not in (None, 1):
            raise ConfigError(
                '--max-contributions: must be 1 (or absent) when the privacy unit is "row"',
                detail="with privacy unit row, each row is one person",
            )
        return {"privacy_unit": ROW_PRIVACY_UNIT}
    unit = lookup(privacy_unit, "--privacy-unit")
    if max_contributions is None:
        raise ConfigError(
            f'--max-contributions is required when the privacy unit is the column "{unit.name}"',
            detail="it is the number of rows kept per person at query time; it is not computed from the "
            "data, because that would reveal the largest number of rows any one person has",
            hint="pass --max-contributions N, e.g. a number that covers most people's rows",
        )
    if isinstance(max_contributions, bool) or max_contributions < 1:
        raise ConfigError(f"--max-contributions: must be a positive integer, not {max_contributions!r}")
    return {"privacy_unit": unit.name, "max_contributions": max_contributions}


def _public_values(column: _SourceColumn, values: Sequence[str]) -> list[Any]:
    converted = [_public_value(column, str(value)) for value in values]
    if not converted:
        raise ConfigError(f'--public: column "{column.name}" needs at least one public value')
    if len(set(converted)) != len(converted):
        raise ConfigError(f'--public: column "{column.name}" lists a value twice')
    return converted


def _public_value(column: _SourceColumn, text: str) -> str | int | float | bool | datetime.date:
    try:
        if column.type is ColumnType.INTEGER:
            return int(text)
        if column.type is ColumnType.REAL:
            number = float(text)
            if not math.isfinite(number):
                raise ValueError(text)
            return number
        if column.type is ColumnType.BOOLEAN:
            return _BOOLEAN_WORDS[text.lower()]
        if column.type is ColumnType.DATE:
            return datetime.date.fromisoformat(text)
    except (ValueError, KeyError):
        raise ConfigError(
            f'--public: value {text!r} is not a valid {column.type.value} for column "{column.name}"',
            hint={
                ColumnType.BOOLEAN: "use true or false",
                ColumnType.DATE: "use YYYY-MM-DD",
            }.get(column.type),
        ) from None
    return text


def _bounds(column: _SourceColumn, lower: Bound, upper: Bound) -> dict[str, int | float | datetime.date]:
    if column.type is ColumnType.DATE:
        return _date_bounds(column, lower, upper)
    if not column.type.is_numeric:
        raise ConfigError(
            f'--bounds: column "{column.name}" is {column.type.value}; bounds apply only to integer, real '
            "and date columns"
        )
    if not isinstance(lower, float | int) or not isinstance(upper, float | int):
        raise ConfigError(f'--bounds: column "{column.name}" is {column.type.value}; its bounds are numbers')
    if not (math.isfinite(lower) and math.isfinite(upper)):
        raise ConfigError(f'--bounds: the bounds of column "{column.name}" must be finite numbers')
    if lower >= upper:
        raise ConfigError(
            f'--bounds: for column "{column.name}", upper must be greater than lower (got {lower:g}:{upper:g})'
        )
    if column.type is ColumnType.INTEGER and float(lower).is_integer() and float(upper).is_integer():
        return {"lower": int(lower), "upper": int(upper)}
    return {"lower": float(lower), "upper": float(upper)}


def _date_bounds(column: _SourceColumn, lower: Bound, upper: Bound) -> dict[str, int | float | datetime.date]:
    if not isinstance(lower, datetime.date) or not isinstance(upper, datetime.date):
        raise ConfigError(
            f'--bounds: column "{column.name}" is a date; its bounds are dates',
            hint=f"e.g. --bounds {column.name}=2024-01-01:2025-12-31",
        )
    if lower >= upper:
        raise ConfigError(
            f'--bounds: for column "{column.name}", upper must be greater than lower (got {lower}:{upper})'
        )
    return {"lower": lower, "upper": upper}


def _create_table(
    connection: duckdb.DuckDBPyConnection,
    table: str,
    *,
    reader: str,
    source: Path,
    columns: Sequence[_SourceColumn],
) -> None:
    select_list = ", ".join(column.select_item() for column in columns)
    statement = f"CREATE TABLE {quote_identifier(table)} AS SELECT {select_list} FROM {_source_sql(reader)}"
    try:
        connection.execute(statement, [str(source)])
    except duckdb.Error as error:
        raise _unreadable(source, reader, error) from None


def _declare(config_path: Path, dataset: str, table: str, entry: Mapping[str, Any]) -> VeilConfig:
    document = read_document(config_path)
    datasets = document["datasets"]
    key = next(name for name in datasets if name.lower() == dataset)
    datasets[key].setdefault("tables", {})[table] = dict(entry)
    try:
        return write_document(config_path, document)
    except OSError as error:
        raise ConfigError(f"{config_path}: cannot write the policy file: {error.strerror or error}") from None


def _import_into_postgres(
    config_path: Path,
    dataset: DatasetPolicy,
    dsn: str,
    table: str,
    *,
    entry: Mapping[str, Any],
    reader: str,
    source: Path,
    columns: Sequence[_SourceColumn],
) -> VeilConfig:
    """Create and fill the table in one transaction; commit only once the policy is written."""
    where = describe_dsn(dsn)
    previous = read_document(config_path)
    try:
        connection = psycopg.connect(with_connection_defaults(dsn), autocommit=False)
    except psycopg.Error as error:
        raise ConfigError(f"cannot connect to PostgreSQL at {where}: {_first_line(error)}") from None
    with connection:  # closes the connection; a transaction still open is rolled back
        _check_postgres_target(connection, dataset.schema, table, where=where)
        try:
            _create_postgres_table(connection, dataset.schema, table, columns)
            _copy_rows(connection, dataset.schema, table, reader=reader, source=source, columns=columns)
        except psycopg.Error as error:
            raise ConfigError(
                f'PostgreSQL at {where} refused to create or fill table "{dataset.schema}.{table}": '
                f"{_first_line(error)}",
                hint="the user of the dataset's DSN needs CREATE on the schema to import",
            ) from None
        written = _declare(config_path, dataset.name, table, entry)  # if this fails, nothing is committed
        try:
            connection.commit()
        except psycopg.Error as error:
            write_document(config_path, previous)  # the table does not exist: take its declaration back
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
    connection: psycopg.Connection[Any], schema: str, table: str, columns: Sequence[_SourceColumn]
) -> None:
    definitions = pgsql.SQL(", ").join(
        pgsql.SQL("{} {}").format(pgsql.Identifier(column.name), pgsql.SQL(_POSTGRES_TYPE[column.type]))
        for column in columns
    )
    connection.execute(pgsql.SQL("CREATE TABLE {} ({})").format(pgsql.Identifier(schema, table), definitions))


def _copy_rows(
    connection: psycopg.Connection[Any],
    schema: str,
    table: str,
    *,
    reader: str,
    source: Path,
    columns: Sequence[_SourceColumn],
) -> None:
    """Stream the file's rows, converted to their canonical types by DuckDB, through a binary COPY."""
    select_list = ", ".join(column.select_item() for column in columns)
    names = pgsql.SQL(", ").join(pgsql.Identifier(column.name) for column in columns)
    statement = pgsql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
        pgsql.Identifier(schema, table), names
    )
    with duckdb.connect() as scratch, connection.cursor() as cursor:
        try:
            result = scratch.execute(f"SELECT {select_list} FROM {_source_sql(reader)}", [str(source)])
        except duckdb.Error as error:
            raise _unreadable(source, reader, error) from None
        with cursor.copy(statement) as copy:
            copy.set_types([_COPY_TYPE[column.type] for column in columns])
            while True:
                try:
                    batch = result.fetchmany(_COPY_BATCH_ROWS)
                except duckdb.Error as error:
                    raise _unreadable(source, reader, error) from None
                if not batch:
                    break
                for row in batch:
                    copy.write_row(row)


def _unreadable(source: Path, reader: str, error: duckdb.Error) -> ConfigError:
    kind = "CSV" if reader == "read_csv" else "Parquet"
    return ConfigError(
        f"{source}: cannot be read as {kind}",
        detail=_first_line(error),
        hint="check the file; values that do not match a column's detected type are a common cause",
    )


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
