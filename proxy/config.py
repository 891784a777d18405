"""The policy file (``veil.toml``) as frozen dataclasses.

This is the only module that reads the policy from disk. Every validation error names the file, the
key path and the fix, because the person reading it is an administrator with the file open.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import os
import re
import tempfile
import tomllib
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any

import tomli_w

from budget.accountants import ACCOUNTANTS as ACCOUNTANT_REGISTRY
from budget.store import is_dsn as is_ledger_dsn  # what the ledger store takes for PostgreSQL
from proxy.errors import ConfigError

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
ENVIRONMENT_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ROW_PRIVACY_UNIT = "row"
AUTO = "auto"
DEFAULT_CONTRIBUTION_CAP = 1000
DEFAULT_EPSILON = 0.1
DEFAULT_MAX_EPSILON = 1.0
# The least ε one query may spend (docs/privacy.md, "Side channels"): anything a query reveals outside
# its noise — whether it failed, how long it took — is priced at no less than this, so a grant of ε
# buys at most ε / 0.001 such probes.
DEFAULT_MIN_EPSILON = 0.001
DEFAULT_STATEMENT_TIMEOUT_MS = 30_000  # no statement's engine queries run longer than this by default
CAP_VISIBILITIES = ("coarse", "exact")
COARSE_CAP_STEP = 0.05  # cap_visibility = "coarse": analysts see the cap's use in steps of 5% of it
DEFAULT_PORT = 5433
DEFAULT_MAX_MESSAGE_SIZE = 1 << 20  # bytes; larger protocol messages close the connection (08P01)
DEFAULT_AUTHENTICATION_TIMEOUT_S = 60.0  # PostgreSQL's authentication_timeout
DEFAULT_AUTH_FAILURE_DELAY_MS = 100  # failed logins per (address, role): 0.1 s, 0.2 s, 0.4 s …
DEFAULT_AUTH_FAILURE_MAX_DELAY_MS = 10_000
DEFAULT_MAX_STATEMENTS_PER_ANALYST = 4  # statements of one analyst running at once, all connections
DEFAULT_LEDGER_LOCK_TIMEOUT_S = 30.0  # how long a ledger transaction waits for a lock another holds
DEFAULT_ANALYSIS_PROCESSES = 2  # workers that analyse long statement texts (server/analysis_pool.py)
MIN_MAX_MESSAGE_SIZE = 1024  # below this, ordinary startup packets and queries would not fit
DUCKDB = "duckdb"
POSTGRES = "postgres"
SPARK = "spark"
BACKENDS = (DUCKDB, POSTGRES, SPARK)
DEFAULT_SPARK_MASTER = "local[*]"
SPARK_MASTER = re.compile(r"local(\[(\*|[1-9][0-9]*)\])?|(spark|yarn|k8s)(://\S+)?")
SPARK_REMOTE = re.compile(r"sc://[^\s/:]+(:[0-9]{1,5})?(/;\S*)?")
SPARK_FORMATS = ("parquet", "csv")
DEFAULT_SCHEMA = "public"
DEFAULT_POOL_SIZE = 4
DEFAULT_LEDGER_FILE = "ledger.sqlite"
DEFAULT_LEDGER_SCHEMA = "veil_ledger"
DEFAULT_ACCOUNTANT = "basic"
ACCOUNTANTS = tuple(ACCOUNTANT_REGISTRY)  # "basic", "advanced", "zcdp" (budget/accountants.py)
LEDGER_DSN_HINT = 'name the database: dsn = "host=db.internal dbname=veil user=veil" or "postgresql://veil@db.internal/veil"'


class ColumnType(StrEnum):
    INTEGER = "integer"
    REAL = "real"
    TEXT = "text"
    DATE = "date"
    TIMESTAMP = "timestamp"  # without time zone, whole seconds are what a quantile resolves (docs/policy.md)
    BOOLEAN = "boolean"

    @property
    def is_numeric(self) -> bool:
        return self in (ColumnType.INTEGER, ColumnType.REAL)

    @property
    def is_moment(self) -> bool:
        """A date or a timestamp: bounded by a public range of moments, answered by quantiles."""
        return self in (ColumnType.DATE, ColumnType.TIMESTAMP)


@dataclass(frozen=True)
class ColumnPolicy:
    """One column: its type, public clamping bounds (numbers, dates on a date column, timestamps on a
    timestamp column) and, if public, its value domain."""

    name: str
    type: ColumnType
    lower: float | datetime.date | None = None
    upper: float | datetime.date | None = None
    public: bool = False
    values: tuple[str | int | float | bool | datetime.date, ...] | None = None
    # The administrator asserts that each person's value never changes: statements pinned to disjoint
    # values are then charged by parallel composition (proxy/analysis/partitions.py, docs/policy.md).
    partition: bool = False

    @property
    def has_bounds(self) -> bool:
        return self.lower is not None and self.upper is not None


@dataclass(frozen=True)
class TablePolicy:
    """A private table (``privacy_unit`` None when each row is one person), or a public lookup table
    (``public``: its rows are public knowledge, e.g. a code list; ``key`` is its unique lookup column)."""

    name: str
    privacy_unit: str | None
    max_contributions: int  # with auto_contributions: the cap, until a query chooses L with DP
    columns: Mapping[str, ColumnPolicy]
    auto_contributions: bool = False  # max_contributions = "auto": each query picks L with a DP quantile
    contribution_hint: int | None = None  # with auto_contributions: the prior's anchor for L (a guess)
    public: bool = False
    key: str | None = None

    def column(self, name: str) -> ColumnPolicy | None:
        return self.columns.get(name.lower())

    @property
    def partition_column(self) -> str | None:
        """The column whose values split the table's people into partitions (``partition = true``)."""
        return next((column.name for column in self.columns.values() if column.partition), None)

    def with_max_contributions(self, bound: int) -> TablePolicy:
        return dataclasses.replace(self, max_contributions=bound, auto_contributions=False)


@dataclass(frozen=True)
class QueryLimits:
    """The complexity budget of one query on private data, measured on its parsed tree before anything
    runs (proxy/analysis/complexity.py). It bounds how much work a single row can cause, and so how
    much a single row can change a query's running time."""

    max_tokens: int = 10_000  # tokens of any statement's text, counted before it is parsed
    max_literal_chars: int = 1024  # characters of one literal (string or number)
    max_nodes: int = 2000  # nodes of the whole parsed statement
    max_depth: int = 64  # nesting depth of the parsed statement
    max_function_calls: int = 64  # scalar function calls evaluated for each row


LIMIT_KEYS = tuple(field.name for field in dataclasses.fields(QueryLimits))


@dataclass(frozen=True)
class SparkSource:
    """Where a Spark dataset's table reads its rows: a Parquet file or directory, or a CSV file with a
    header line. The format comes from ``format`` or else from the name (``.csv``: CSV)."""

    location: str  # an absolute local path, or a URL Spark reads (s3a://…, hdfs://…) as written
    format: str


@dataclass(frozen=True)
class DatasetPolicy:
    """A dataset is what a client names as its database; it lives in one backend.

    ``backend = "duckdb"`` datasets have a ``path``. ``backend = "postgres"`` datasets have a
    connection string, given either in the file (``dsn``, never with a password) or as the name of
    an environment variable that holds it (``dsn_env``), and the ``schema`` their tables live in.
    ``backend = "spark"`` datasets name a Spark session — ``spark_master`` (a local session,
    ``local[*]`` by default) or ``spark_remote`` (Spark Connect, ``sc://host:port``) — and where each
    table's rows are: ``sources`` maps a table to a Parquet or CSV path; a table without one is read
    by name from the session's catalog, in database ``schema`` (Spark Connect only).
    This module never reads the environment: whoever starts the engine calls ``resolve_dsn``.
    """

    name: str
    backend: str
    path: Path | None
    default_epsilon: float
    max_epsilon: float
    tables: Mapping[str, TablePolicy]
    dsn: str | None = None
    dsn_env: str | None = None
    schema: str = DEFAULT_SCHEMA
    pool_size: int = DEFAULT_POOL_SIZE
    statement_timeout_ms: int = DEFAULT_STATEMENT_TIMEOUT_MS  # every engine query of the dataset
    accountant: str = DEFAULT_ACCOUNTANT  # how the ledger composes this dataset's spends
    answer_cache: bool = True  # a repeated query gets its stored noisy answer, free
    remember_bounds: bool = True  # a DP-chosen max_contributions is stored and reused, free
    min_epsilon: float = DEFAULT_MIN_EPSILON  # the ε floor: SET veil.epsilon below it is refused
    response_deadline_ms: int | None = None  # constant-time release (docs/privacy.md); None: off
    cap_visibility: str = "coarse"  # what analysts see of the dataset cap: "coarse" or "exact"
    research_modes: bool = False  # mechanisms kept for reproducing papers only (veil.ttest_mode = paper)
    spark_master: str | None = None  # spark datasets: a session in this process (local[*], spark://…)
    spark_remote: str | None = None  # spark datasets: a Spark Connect server (sc://host:port)
    sources: Mapping[str, SparkSource] = dataclasses.field(default_factory=lambda: MappingProxyType({}))

    @property
    def cap_step(self) -> float | None:
        """The share of the cap in whose steps analysts see (and are refused by) its use."""
        return COARSE_CAP_STEP if self.cap_visibility == "coarse" else None

    limits: QueryLimits = QueryLimits()

    def table(self, name: str) -> TablePolicy | None:
        return self.tables.get(name.lower())

    def resolve_dsn(self, environ: Mapping[str, str]) -> str:
        """The PostgreSQL connection string: ``dsn``, else the variable ``dsn_env`` names in ``environ``."""
        if self.dsn is not None:
            return self.dsn
        if self.dsn_env is None:
            raise ConfigError(
                f'dataset "{self.name}" has no PostgreSQL connection string (backend = "{self.backend}")'
            )
        return dsn_from_environment(environ, self.dsn_env, key=f"datasets.{self.name}.dsn_env")


def dsn_from_environment(environ: Mapping[str, str], variable: str, *, key: str) -> str:
    """A connection string kept out of the policy file (it may hold a password)."""
    value = environ.get(variable, "")
    if not value.strip():
        raise ConfigError(
            f"{key}: the environment variable {variable} is not set or empty",
            hint=f"export {variable}='postgresql://USER:PASSWORD@HOST:5432/DBNAME' before running veil",
        )
    return value


@dataclass(frozen=True)
class ServerSettings:
    """How ``veil serve`` listens and what it tolerates from a client.

    ``tls_cert``/``tls_key`` are set together (TLS on) or not at all; ``require_tls_for_remote`` needs
    them. ``statement_timeout_ms`` bounds every engine query; a PostgreSQL dataset's own
    ``statement_timeout_ms`` takes precedence for that dataset."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    max_connections: int = 200
    authentication_slots: int = 50  # of max_connections, the most that may still be logging in
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    authentication_timeout_s: float = DEFAULT_AUTHENTICATION_TIMEOUT_S
    statement_timeout_ms: int | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    require_tls_for_remote: bool = False
    shutdown_grace_s: float = 30.0  # SIGTERM: how long running statements may finish
    max_statements_per_analyst: int = DEFAULT_MAX_STATEMENTS_PER_ANALYST
    analysis_processes: int = DEFAULT_ANALYSIS_PROCESSES  # for long statement texts; 0: threads only
    auth_failure_delay_ms: int = DEFAULT_AUTH_FAILURE_DELAY_MS  # the first failed login's delay; doubles
    auth_failure_max_delay_ms: int = DEFAULT_AUTH_FAILURE_MAX_DELAY_MS


@dataclass(frozen=True)
class LedgerSettings:
    """Where the ledger lives: an SQLite file (``path``, one host), or a PostgreSQL database that
    several ``veil serve`` hosts share, named by ``dsn`` (never with a password) or by the
    environment variable ``dsn_env``, with its tables in ``schema``. Exactly one of the three is set.
    This module never reads the environment: whoever opens the ledger calls ``resolve_location``."""

    path: Path | None = None
    dsn: str | None = None
    dsn_env: str | None = None
    schema: str = DEFAULT_LEDGER_SCHEMA
    lock_timeout_s: float = DEFAULT_LEDGER_LOCK_TIMEOUT_S  # waiting for the ledger, then 55P03

    @property
    def shared(self) -> bool:
        """A PostgreSQL ledger (one that several hosts can share)."""
        return self.path is None

    def resolve_location(self, environ: Mapping[str, str]) -> str | Path:
        """The SQLite file, or the PostgreSQL connection string (from ``environ`` with ``dsn_env``)."""
        if self.path is not None:
            return self.path
        if self.dsn is not None:
            return self.dsn
        assert self.dsn_env is not None  # parse_config sets exactly one of path, dsn, dsn_env
        return dsn_from_environment(environ, self.dsn_env, key="ledger.dsn_env")


@dataclass(frozen=True)
class VeilConfig:
    path: Path
    ledger: LedgerSettings
    server: ServerSettings
    datasets: Mapping[str, DatasetPolicy] = field(default_factory=dict)
    federations: Mapping[str, FederationPolicy] = field(default_factory=dict)

    def dataset(self, name: str) -> DatasetPolicy | None:
        return self.datasets.get(name.lower())


@dataclass(frozen=True)
class FederationPolicy:
    """A table held at two Veil sites with the same public group domain, whose joint counts are released only
    where they reach ``threshold`` (proxy/federation/, docs/federation.md).

    Analysts query it under the federation's ``name``; ``peer`` is the other site's federation address (this
    site asks it), ``listen`` the address where this site answers the other's requests, paid from the
    ledger of ``peer_analyst`` at ``epsilon`` per query. The link is authenticated with the shared secret in
    the environment variable ``secret_env`` (never in this file)."""

    name: str
    dataset: str
    table: str
    group_by: tuple[str, ...]
    threshold: int
    secret_env: str
    peer: tuple[str, int] | None = None
    listen: tuple[str, int] | None = None
    peer_analyst: str | None = None
    epsilon: float | None = None
    key_bits: int = 2048
    timeout_s: float = 120.0


FEDERATION_KEY_BITS = (1024, 2048, 3072, 4096)  # 1024 only for reproducing the dissertation's timings


class _Reader:
    """Reads one TOML table, reporting every problem with its full key path."""

    def __init__(self, file: Path, data: Mapping[str, Any], key: str) -> None:
        self.file, self.data, self.key = file, data, key

    def fail(self, key: str | None, problem: str, *, hint: str | None = None) -> ConfigError:
        where = f"{self.key}.{key}" if key and self.key else (key or self.key or "(top level)")
        return ConfigError(f"{self.file}: {where}: {problem}", hint=hint)

    def child(self, key: str) -> _Reader:
        value = self.data.get(key, {})
        if not isinstance(value, Mapping):
            raise self.fail(key, "must be a table ([section])")
        return _Reader(self.file, value, f"{self.key}.{key}" if self.key else key)

    def children(self) -> dict[str, _Reader]:
        """Named entries; names are case-insensitive in SQL, so two that differ only in case clash."""
        seen: dict[str, str] = {}
        for name in self.data:
            if name.lower() in seen:
                raise self.fail(name, f'clashes with "{seen[name.lower()]}": names are case-insensitive')
            seen[name.lower()] = name
        return {name: self.child(name) for name in self.data}

    def get(
        self, key: str, kind: type | tuple[type, ...], default: Any = None, *, required: bool = False
    ) -> Any:
        if key not in self.data:
            if required:
                raise self.fail(key, "is required")
            return default
        value = self.data[key]
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise self.fail(key, f"must be {_kind_name(kind)}, not a boolean")
        if not isinstance(value, kind):
            raise self.fail(key, f"must be {_kind_name(kind)}, got {value!r}")
        return value

    def reject_unknown(self, allowed: set[str]) -> None:
        for key in self.data:
            if key not in allowed:
                raise self.fail(key, f"unknown key; allowed keys are {', '.join(sorted(allowed))}")


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {
        int: "an integer",
        float: "a number",
        str: "a string",
        bool: "true or false",
        list: "a list",
        datetime.date: "a date such as 2024-01-01",
    }
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _identifier(reader: _Reader, name: str, what: str) -> str:
    """``reader`` is the named entry's own reader, so the error shows its full key path."""
    if not IDENTIFIER.match(name):
        raise reader.fail(
            None, f"{what} names must be SQL identifiers (letters, digits, _; not starting with a digit)"
        )
    return name.lower()


def _positive_number(reader: _Reader, key: str, default: float) -> float:
    value = float(reader.get(key, (int, float), default))
    if not math.isfinite(value) or value <= 0:
        raise reader.fail(key, "must be a finite number greater than 0")
    return value


def _column(reader: _Reader, name: str) -> ColumnPolicy:
    reader.reject_unknown({"type", "lower", "upper", "public", "values", "range", "partition"})
    type_name = reader.get("type", str, required=True)
    try:
        column_type = ColumnType(type_name)
    except ValueError:
        raise reader.fail("type", f"must be one of {', '.join(t.value for t in ColumnType)}") from None
    lower, upper = _bounds(reader, column_type)
    public = reader.get("public", bool, False)
    values = reader.get("values", list)
    if "range" in reader.data:
        if values is not None:
            raise reader.fail("range", "give values or range, not both")
        values = _range_values(reader, column_type)
    if public and not values:
        raise reader.fail(
            "values",
            "a public column must list its public values (values = [...]) so that group keys never come from the data",
        )
    if values is not None and not public:
        raise reader.fail(
            "values", "values are only used on public columns; add public = true or remove values"
        )
    if values:
        _check_value_types(reader, column_type, values)
        if len(set(values)) != len(values):
            # a repeated value would release the same group twice with fresh noise for one charge
            raise reader.fail("values", "each public value may appear only once")
    partition = reader.get("partition", bool, False)
    if partition:
        _check_partition(reader, column_type, values if public else None)
    return ColumnPolicy(name, column_type, lower, upper, public, tuple(values) if values else None, partition)


PARTITION_TYPES = (ColumnType.TEXT, ColumnType.INTEGER)


def _check_partition(reader: _Reader, column_type: ColumnType, values: list[Any] | None) -> None:
    """``partition = true``: only where a statement's WHERE can name a partition exactly.

    Text values that a case-, accent- or space-insensitive collation (or ``char(n)`` padding) could take
    for one another are refused: two declared values selecting the same people would be two partitions
    charged apart for one person."""
    if not values:
        raise reader.fail(
            "partition",
            "only a public column with declared values (values or range) can partition a table's people",
            hint="add public = true and values = [...], or remove partition",
        )
    if column_type not in PARTITION_TYPES:
        raise reader.fail(
            "partition",
            f"a partition column must be text or integer, not {column_type.value}: statements pin it with"
            " = or IN, which must match the declared values exactly",
        )
    if column_type is ColumnType.TEXT:
        seen: dict[str, str] = {}
        for value in values:
            folded = _folded(value)
            if folded in seen:
                raise reader.fail(
                    "partition",
                    f"{seen[folded]!r} and {value!r} could be the same value to a case-, accent- or"
                    " space-insensitive comparison, and then one person would be in two partitions",
                    hint="declare one spelling of each value, or remove partition",
                )
            seen[folded] = value


def _folded(text: str) -> str:
    """``text`` as the loosest collation an engine might apply compares it: compatibility-decomposed,
    without accents, case-folded, with runs of white space as one space and none at either end."""
    decomposed = unicodedata.normalize("NFKD", text)
    bare = "".join(character for character in decomposed if not unicodedata.combining(character))
    return " ".join(bare.casefold().split())


def _bounds(reader: _Reader, column_type: ColumnType) -> tuple[Any, Any]:
    """``lower``/``upper``: numbers on integer and real columns, dates (``lower = 2024-01-01``) on date
    columns, timestamps on timestamp columns — the public range their values are clamped to, and for
    dates and timestamps also the days a GROUP BY key of the column ranges over."""
    if column_type is ColumnType.DATE:
        lower, upper = reader.get("lower", datetime.date), reader.get("upper", datetime.date)
        for key, value in (("lower", lower), ("upper", upper)):
            if isinstance(value, datetime.datetime):
                raise reader.fail(key, "a date column's bounds are dates without a time, e.g. 2024-01-01")
    elif column_type is ColumnType.TIMESTAMP:
        lower, upper = (_timestamp_bound(reader, key) for key in ("lower", "upper"))
    else:
        lower, upper = reader.get("lower", (int, float)), reader.get("upper", (int, float))
    if (lower is None) != (upper is None):
        raise reader.fail("lower" if lower is None else "upper", "give both lower and upper, or neither")
    if lower is None:
        return None, None
    if not (column_type.is_numeric or column_type.is_moment):
        raise reader.fail("lower", "bounds are only allowed on integer, real, date and timestamp columns")
    if column_type.is_numeric and not (math.isfinite(lower) and math.isfinite(upper)):
        raise reader.fail("lower", "bounds must be finite numbers")
    if lower >= upper:
        raise reader.fail("upper", "upper must be greater than lower")
    return lower, upper


def _timestamp_bound(reader: _Reader, key: str) -> datetime.datetime | None:
    """A timestamp column's bound: a TOML local date-time (``2024-01-01T00:00:00``), an ISO string
    (``"2024-01-01 00:00:00"``) or a date (its midnight), without a time zone — the column is a
    timestamp without time zone, compared as written. Fractions of a second are dropped: quantiles are
    answered in whole seconds."""
    value = reader.data.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, datetime.date | str)):
        raise reader.fail(key, f"must be a timestamp such as 2024-01-01T00:00:00, got {value!r}")
    if isinstance(value, str):
        try:
            value = datetime.datetime.fromisoformat(value)
        except ValueError:
            raise reader.fail(key, f"{value!r} is not a timestamp such as 2024-01-01T00:00:00") from None
    if value is None:
        return None
    if not isinstance(value, datetime.datetime):
        value = datetime.datetime.combine(value, datetime.time())
    if value.tzinfo is not None:
        raise reader.fail(
            key,
            "a timestamp column is a timestamp without time zone; give its bound without an offset, in UTC"
            " (e.g. 2024-01-01T00:00:00)",
        )
    return value.replace(microsecond=0)


MAX_RANGE_VALUES = 10_000


def _range_values(reader: _Reader, column_type: ColumnType) -> list[int | float]:
    """``range = [start, stop, step]``: the public values start, start + step, … up to stop inclusive —
    a numeric domain without listing it (years, ages, score levels)."""
    bounds = reader.get("range", list)
    numbers = [value for value in bounds if isinstance(value, int | float) and not isinstance(value, bool)]
    if len(bounds) != 3 or len(numbers) != 3 or not column_type.is_numeric:
        raise reader.fail("range", "must be [start, stop, step] with numbers, on an integer or real column")
    start, stop, step = numbers
    if not (math.isfinite(start) and math.isfinite(stop) and step > 0 and stop >= start):
        raise reader.fail("range", "needs finite start <= stop and a step > 0")
    count = math.floor((stop - start) / step + 1e-9) + 1
    if count > MAX_RANGE_VALUES:
        raise reader.fail("range", f"gives {count} values; at most {MAX_RANGE_VALUES} (use a larger step)")
    if column_type is ColumnType.INTEGER and not all(float(v).is_integer() for v in numbers):
        raise reader.fail("range", "an integer column needs whole-number start, stop and step")
    values = [start + i * step for i in range(count)]
    return [int(v) for v in values] if column_type is ColumnType.INTEGER else [round(v, 12) for v in values]


_VALUE_TYPES: dict[ColumnType, tuple[type, ...]] = {
    ColumnType.INTEGER: (int,),
    ColumnType.REAL: (int, float),
    ColumnType.TEXT: (str,),
    ColumnType.DATE: (datetime.date,),
    ColumnType.TIMESTAMP: (datetime.datetime,),
    ColumnType.BOOLEAN: (bool,),
}


def _check_value_types(reader: _Reader, column_type: ColumnType, values: list[Any]) -> None:
    """A public value of the wrong type could never match a row, so its group would always be empty."""
    allowed = _VALUE_TYPES[column_type]
    for value in values:
        wrong_subtype = (
            (isinstance(value, bool) and bool not in allowed)
            or (isinstance(value, datetime.datetime) and column_type is ColumnType.DATE)
            or (isinstance(value, datetime.datetime) and value.tzinfo is not None)  # timestamps are naive
        )
        if not isinstance(value, allowed) or wrong_subtype:
            raise reader.fail("values", f"{value!r} is not a {column_type.value} value")


def _public_table(reader: _Reader, name: str, columns: dict[str, ColumnPolicy]) -> TablePolicy:
    """A public lookup table: anyone may read it, and private rows may be joined to it on its key."""
    for key in ("privacy_unit", "max_contributions", "contribution_cap"):
        if key in reader.data:
            raise reader.fail(key, "a public table has no privacy unit: remove it, or remove public = true")
    key = reader.get("key", str)
    if key is not None and key.lower() not in columns:
        raise reader.fail("key", f"names no declared column; declare columns.{key.lower()}")
    for column in columns.values():
        if column.partition:
            raise reader.fail(f"columns.{column.name}.partition", "a public table has no people to partition")
    return TablePolicy(
        name, None, 1, MappingProxyType(columns), public=True, key=key.lower() if key else None
    )


def _table(reader: _Reader, name: str) -> TablePolicy:
    reader.reject_unknown(
        {"privacy_unit", "max_contributions", "contribution_cap", "contribution_hint", "columns"}
        | {"public", "key"}
    )
    columns = {
        _identifier(col_reader, col, "column"): _column(col_reader, col.lower())
        for col, col_reader in reader.child("columns").children().items()
    }
    if not columns:
        raise reader.fail("columns", "declare at least one column")
    partitions = [column.name for column in columns.values() if column.partition]
    if len(partitions) > 1:
        raise reader.fail(
            None,
            f"only one column may partition a table's people; {', '.join(partitions)} all say partition = true",
            hint="keep partition = true on the column statements are most often pinned to",
        )
    if reader.get("public", bool, False):
        return _public_table(reader, name, columns)
    if "key" in reader.data:
        raise reader.fail("key", "is only used on public lookup tables (public = true)")
    unit = reader.get("privacy_unit", str, required=True).lower()
    if unit == ROW_PRIVACY_UNIT:
        if reader.get("max_contributions", int, 1) != 1:
            raise reader.fail("max_contributions", 'must be 1 (or absent) when privacy_unit = "row"')
        return TablePolicy(name, None, 1, MappingProxyType(columns))
    if unit not in columns:
        raise reader.fail("privacy_unit", f'names no declared column; declare columns.{unit} or use "row"')
    if columns[unit].public:
        raise reader.fail("privacy_unit", "the privacy unit column cannot be public")
    if "max_contributions" not in reader.data:
        raise reader.fail(
            "max_contributions", 'is required with a privacy-unit column: a positive integer or "auto"'
        )
    max_contributions = reader.data["max_contributions"]
    if max_contributions == AUTO:
        cap = reader.get("contribution_cap", int, DEFAULT_CONTRIBUTION_CAP)
        if cap < 1:
            raise reader.fail("contribution_cap", "must be a positive integer (the most rows L may be)")
        hint = reader.get("contribution_hint", int, None)
        if hint is not None and not 1 <= hint <= cap:
            raise reader.fail(
                "contribution_hint", f"must be an integer between 1 and contribution_cap ({cap})"
            )
        return TablePolicy(
            name, unit, cap, MappingProxyType(columns), auto_contributions=True, contribution_hint=hint
        )
    for key in ("contribution_cap", "contribution_hint"):
        if key in reader.data:
            raise reader.fail(key, 'is only used with max_contributions = "auto"')
    if not isinstance(max_contributions, int) or isinstance(max_contributions, bool) or max_contributions < 1:
        raise reader.fail(
            "max_contributions", 'must be a positive integer (rows kept per privacy unit) or "auto"'
        )
    return TablePolicy(name, unit, max_contributions, MappingProxyType(columns))


def _dataset(reader: _Reader, name: str, base: Path, server: ServerSettings) -> DatasetPolicy:
    reader.reject_unknown(
        {"backend", "path", "dsn", "dsn_env", "schema", "pool_size", "statement_timeout_ms"}
        | {"default_epsilon", "max_epsilon", "min_epsilon", "accountant", "answer_cache", "tables"}
        | {"remember_bounds"}
        | {"response_deadline_ms", "cap_visibility", "limits", "research_modes"}
        | {"spark_master", "spark_remote", "sources"}
    )
    backend = reader.get("backend", str, DUCKDB)
    if backend not in BACKENDS:
        raise reader.fail("backend", 'must be "duckdb", "postgres" or "spark"')
    if backend != SPARK:
        for key in ("spark_master", "spark_remote", "sources"):
            if key in reader.data:
                raise reader.fail(key, 'is only used with backend = "spark"')
    default_epsilon = _positive_number(reader, "default_epsilon", DEFAULT_EPSILON)
    max_epsilon = _positive_number(reader, "max_epsilon", DEFAULT_MAX_EPSILON)
    if default_epsilon > max_epsilon:
        raise reader.fail("default_epsilon", "must not exceed max_epsilon")
    min_epsilon = _positive_number(reader, "min_epsilon", min(DEFAULT_MIN_EPSILON, default_epsilon))
    if min_epsilon > default_epsilon:
        raise reader.fail("min_epsilon", "must not exceed default_epsilon")
    tables = {
        _identifier(table_reader, table, "table"): _table(table_reader, table.lower())
        for table, table_reader in reader.child("tables").children().items()
    }
    accountant = reader.get("accountant", str, DEFAULT_ACCOUNTANT)
    if accountant not in ACCOUNTANTS:
        raise reader.fail("accountant", f"must be one of {', '.join(map(_quoted, ACCOUNTANTS))}")
    accounting = {
        "accountant": accountant,
        "answer_cache": reader.get("answer_cache", bool, True),
        "remember_bounds": reader.get("remember_bounds", bool, True),
        "research_modes": reader.get("research_modes", bool, False),
        "min_epsilon": min_epsilon,
        **_side_channel_keys(reader, server),
    }
    common = (name, backend)
    if backend == POSTGRES:
        return DatasetPolicy(
            *common,
            None,
            default_epsilon,
            max_epsilon,
            MappingProxyType(tables),
            **_postgres_keys(reader),
            **accounting,
        )
    if backend == SPARK:
        return DatasetPolicy(
            *common,
            None,
            default_epsilon,
            max_epsilon,
            MappingProxyType(tables),
            **_spark_keys(reader, base, tables),
            **accounting,
        )
    for key in ("dsn", "dsn_env", "schema", "pool_size"):
        if key in reader.data:
            raise reader.fail(key, 'is only used with backend = "postgres"')
    path = base / reader.get("path", str, required=True)
    return DatasetPolicy(*common, path, default_epsilon, max_epsilon, MappingProxyType(tables), **accounting)


def _side_channel_keys(reader: _Reader, server: ServerSettings) -> dict[str, Any]:
    """What bounds a query's running time and what analysts see of the cap (docs/privacy.md)."""
    timeout = _milliseconds(reader, "statement_timeout_ms")
    deadline = _milliseconds(reader, "response_deadline_ms")
    if deadline is not None and timeout is not None and deadline > timeout:
        raise reader.fail("response_deadline_ms", "must not exceed statement_timeout_ms")
    visibility = reader.get("cap_visibility", str, "coarse")
    if visibility not in CAP_VISIBILITIES:
        raise reader.fail("cap_visibility", 'must be "coarse" or "exact"')
    return {
        "statement_timeout_ms": timeout or server.statement_timeout_ms or DEFAULT_STATEMENT_TIMEOUT_MS,
        "response_deadline_ms": deadline,
        "cap_visibility": visibility,
        "limits": _limits(reader.child("limits")),
    }


def _milliseconds(reader: _Reader, key: str) -> int | None:
    value = reader.get(key, int)
    if value is not None and value < 1:
        raise reader.fail(key, "must be a positive integer (milliseconds)")
    return value


def _limits(reader: _Reader) -> QueryLimits:
    reader.reject_unknown(set(LIMIT_KEYS))
    values = {key: reader.get(key, int, getattr(QueryLimits(), key)) for key in LIMIT_KEYS}
    for key, value in values.items():
        if value < 1:
            raise reader.fail(key, "must be a positive integer")
    return QueryLimits(**values)


def _quoted(name: str) -> str:
    return f'"{name}"'


def _postgres_keys(reader: _Reader) -> dict[str, Any]:
    """``dsn`` or ``dsn_env`` (exactly one), ``schema``, and the connection pool's settings."""
    if "path" in reader.data:
        raise reader.fail("path", 'is only used with backend = "duckdb"; name the server with dsn or dsn_env')
    dsn = reader.get("dsn", str)
    dsn_env = reader.get("dsn_env", str)
    if (dsn is None) == (dsn_env is None):
        raise reader.fail(
            "dsn",
            "give exactly one of dsn (a libpq connection string or postgresql:// URL) "
            "and dsn_env (the name of an environment variable holding it)",
        )
    if dsn is not None:
        _check_dsn(reader, dsn)
    _check_dsn_env(reader, dsn_env)
    schema = _schema(reader, DEFAULT_SCHEMA)
    pool_size = reader.get("pool_size", int, DEFAULT_POOL_SIZE)
    if pool_size < 1:
        raise reader.fail("pool_size", "must be a positive integer (connections kept open to PostgreSQL)")
    return {"dsn": dsn, "dsn_env": dsn_env, "schema": schema, "pool_size": pool_size}


def _spark_keys(reader: _Reader, base: Path, tables: Mapping[str, TablePolicy]) -> dict[str, Any]:
    """The session (``spark_master`` or ``spark_remote``, at most one) and each table's ``sources``."""
    for key in ("path", "dsn", "dsn_env", "pool_size"):
        if key in reader.data:
            raise reader.fail(key, 'is not used with backend = "spark"; name each table\'s files in sources')
    master = reader.get("spark_master", str)
    remote = reader.get("spark_remote", str)
    if master is not None and remote is not None:
        raise reader.fail(
            "spark_remote", "give spark_master (a session in this process) or spark_remote, not both"
        )
    if master is not None and not SPARK_MASTER.fullmatch(master):
        raise reader.fail(
            "spark_master", 'must be a Spark master URL such as "local[*]", "local[4]" or "spark://host:7077"'
        )
    if remote is not None and not SPARK_REMOTE.fullmatch(remote):
        raise reader.fail("spark_remote", 'must be a Spark Connect URL such as "sc://host:15002"')
    sources_reader = reader.child("sources")
    sources = {}
    for table in sources_reader.data:
        if not IDENTIFIER.match(table):
            raise sources_reader.fail(
                table, "must be a table name (letters, digits, _; not starting with a digit)"
            )
        sources[table.lower()] = _spark_source(sources_reader, table, base)
    missing = sorted(name for name in tables if name not in sources)
    if missing and remote is None:
        raise reader.fail(
            "sources",
            f"table {missing[0]} has no source; a local Spark session reads every table from files",
            hint=f'add sources.{missing[0]} = "path/to/{missing[0]}.parquet" (a Parquet file or directory, or a .csv)',
        )
    return {
        "spark_master": None if remote is not None else (master or DEFAULT_SPARK_MASTER),
        "spark_remote": remote,
        "sources": MappingProxyType(sources),
        "schema": _spark_schema(reader),
    }


def _spark_source(reader: _Reader, table: str, base: Path) -> SparkSource:
    """``visits = "data/visits.parquet"`` or ``visits = { path = "v.csv", format = "csv" }``."""
    value = reader.data[table]
    if isinstance(value, str):
        entry = {"path": value}
        where = reader
    elif isinstance(value, Mapping):
        where = reader.child(table)
        where.reject_unknown({"path", "format"})
        entry = dict(value)
    else:
        raise reader.fail(table, 'must be a path string or a table { path = "…", format = "parquet" }')
    path_text = entry.get("path")
    if not isinstance(path_text, str) or not path_text.strip():
        raise where.fail("path" if where is not reader else table, "must be a non-empty path string")
    default = "csv" if path_text.lower().endswith(".csv") else "parquet"
    file_format = entry.get("format", default)
    if file_format not in SPARK_FORMATS:
        raise where.fail("format", 'must be "parquet" or "csv"')
    location = path_text if "://" in path_text else str((base / path_text).resolve())
    return SparkSource(location, file_format)


def _spark_schema(reader: _Reader) -> str:
    """The catalog database of tables without a source; Spark's own default is ``default``."""
    schema = reader.get("schema", str, "default")
    if not IDENTIFIER.match(schema):
        raise reader.fail("schema", "must be a database name (letters, digits, _; not starting with a digit)")
    return schema.lower()


def _check_dsn_env(reader: _Reader, dsn_env: str | None) -> None:
    if dsn_env is not None and not ENVIRONMENT_VARIABLE.match(dsn_env):
        raise reader.fail("dsn_env", "must be the name of an environment variable (letters, digits, _)")


def _schema(reader: _Reader, default: str) -> str:
    schema = reader.get("schema", str, default)
    if not IDENTIFIER.match(schema):
        raise reader.fail("schema", "must be a schema name (letters, digits, _; not starting with a digit)")
    return schema.lower()  # as PostgreSQL folds an unquoted name, and as Veil folds table names


def _check_dsn(reader: _Reader, dsn: str) -> None:
    """Parse the connection string now, so a typo is reported with its key path, not at first query.

    Messages never quote the string: it may hold a password despite the rule below."""
    if not dsn.strip():
        raise reader.fail(
            "dsn", "must not be empty", hint='e.g. dsn = "host=db.internal dbname=analytics user=veil"'
        )
    import psycopg  # here, not at the top: importing it costs ~0.15 s that DuckDB-only policies never need
    from psycopg.conninfo import conninfo_to_dict

    try:
        parameters = conninfo_to_dict(dsn)
    except psycopg.Error:
        raise reader.fail("dsn", "is not a valid libpq connection string or postgresql:// URL") from None
    if parameters.get("password"):
        raise reader.fail(
            "dsn",
            "must not contain a password (the policy file is not a place for secrets)",
            hint="put the whole connection string in an environment variable and name it with dsn_env, "
            "or keep the password in ~/.pgpass",
        )


def _ledger(reader: _Reader, base: Path) -> LedgerSettings:
    """``path`` (an SQLite file, the default) or ``dsn`` / ``dsn_env`` (PostgreSQL) with ``schema``."""
    reader.reject_unknown({"path", "dsn", "dsn_env", "schema", "lock_timeout_s"})
    lock_timeout = float(reader.get("lock_timeout_s", (int, float), DEFAULT_LEDGER_LOCK_TIMEOUT_S))
    if not 0 < lock_timeout <= 600:
        raise reader.fail("lock_timeout_s", "must be a number of seconds in (0, 600]")
    given = [key for key in ("path", "dsn", "dsn_env") if key in reader.data]
    if len(given) > 1:
        raise reader.fail(
            given[1],
            "give one of path (an SQLite file on this host) and dsn or dsn_env (a PostgreSQL ledger)",
        )
    if "path" in reader.data or not given:
        if "schema" in reader.data:
            raise reader.fail("schema", "is only used with a PostgreSQL ledger (dsn or dsn_env)")
        path = reader.get("path", str, DEFAULT_LEDGER_FILE)
        if not path.strip():
            raise reader.fail("path", "must not be empty")
        if is_ledger_dsn(path):
            raise reader.fail("path", "looks like a connection string; a PostgreSQL ledger is named with dsn")
        return LedgerSettings(path=base / path, lock_timeout_s=lock_timeout)
    dsn = reader.get("dsn", str)
    dsn_env = reader.get("dsn_env", str)
    if dsn is not None:
        _check_dsn(reader, dsn)
        if not is_ledger_dsn(dsn):
            raise reader.fail(
                "dsn",
                "must name the ledger's database (dbname=…, or a postgresql:// URL)",
                hint=LEDGER_DSN_HINT,
            )
    _check_dsn_env(reader, dsn_env)
    schema = _schema(reader, DEFAULT_LEDGER_SCHEMA)
    return LedgerSettings(dsn=dsn, dsn_env=dsn_env, schema=schema, lock_timeout_s=lock_timeout)


def parse_config(text: str, *, path: Path) -> VeilConfig:
    """Validate a policy document; relative paths are resolved against the file's directory."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    root = _Reader(path, data, "")
    root.reject_unknown({"ledger", "server", "datasets", "federations"})
    base = path.parent
    ledger = _ledger(root.child("ledger"), base)
    server = _server(root.child("server"), base)
    datasets = {
        _identifier(reader, name, "dataset"): _dataset(reader, name.lower(), base, server)
        for name, reader in root.child("datasets").children().items()
    }
    federations = {
        _identifier(reader, name, "federation"): _federation(reader, name.lower(), datasets)
        for name, reader in root.child("federations").children().items()
    }
    return VeilConfig(
        path=path,
        ledger=ledger,
        server=server,
        datasets=MappingProxyType(datasets),
        federations=MappingProxyType(federations),
    )


def _federation(reader: _Reader, name: str, datasets: Mapping[str, DatasetPolicy]) -> FederationPolicy:
    reader.reject_unknown(
        {"dataset", "table", "group_by", "threshold", "secret_env", "peer", "listen", "peer_analyst"}
        | {"epsilon", "key_bits", "timeout_s"}
    )
    dataset = datasets.get(reader.get("dataset", str, required=True).lower())
    if dataset is None:
        raise reader.fail(
            "dataset", f"names no dataset; the datasets are {', '.join(sorted(datasets)) or 'none'}"
        )
    if dataset.tables.get(name) is not None:
        raise reader.fail(None, f"the federation's name clashes with table {name} of dataset {dataset.name}")
    table = dataset.tables.get(reader.get("table", str, required=True).lower())
    if table is None or table.public:
        raise reader.fail("table", f"must name a private table of dataset {dataset.name}")
    group_by = tuple(str(column).lower() for column in reader.get("group_by", list, required=True))
    for column in group_by:
        policy = table.column(column)
        if policy is None or policy.values is None:
            raise reader.fail(
                "group_by",
                f"column {column} must be a column of {table.name} with declared values",
                hint="both sites must publish the same public domain: give the column `values` in the policy",
            )
    if not group_by:
        raise reader.fail("group_by", "needs at least one column")
    threshold = reader.get("threshold", int, required=True)
    if not 1 <= threshold < 2**30:
        raise reader.fail("threshold", "must be an integer from 1 to 2^30 - 1")
    secret_env = reader.get("secret_env", str, required=True)
    if not IDENTIFIER.match(secret_env):
        raise reader.fail("secret_env", "must name an environment variable (letters, digits, _)")
    peer, listen = (_address(reader, key) for key in ("peer", "listen"))
    if peer is None and listen is None:
        raise reader.fail(None, "needs peer (this site asks), listen (this site answers) or both")
    peer_analyst = reader.get("peer_analyst", str)
    if listen is not None and peer_analyst is None:
        raise reader.fail("peer_analyst", "is needed with listen: the ledger account that pays for answers")
    epsilon = reader.get("epsilon", (int, float))
    if epsilon is not None and not (
        math.isfinite(epsilon) and dataset.min_epsilon <= epsilon <= dataset.max_epsilon
    ):
        raise reader.fail("epsilon", "must be within the dataset's [min_epsilon, max_epsilon]")
    key_bits = reader.get("key_bits", int, 2048)
    if key_bits not in FEDERATION_KEY_BITS:
        raise reader.fail("key_bits", f"must be one of {', '.join(map(str, FEDERATION_KEY_BITS))}")
    return FederationPolicy(
        name=name,
        dataset=dataset.name,
        table=table.name,
        group_by=group_by,
        threshold=threshold,
        secret_env=secret_env,
        peer=peer,
        listen=listen,
        peer_analyst=peer_analyst.lower() if peer_analyst else None,
        epsilon=float(epsilon) if epsilon is not None else None,
        key_bits=key_bits,
        timeout_s=_positive_number(reader, "timeout_s", 120.0),
    )


def _address(reader: _Reader, key: str) -> tuple[str, int] | None:
    text = reader.get(key, str)
    if text is None:
        return None
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise reader.fail(key, f"must be HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def _server(reader: _Reader, base: Path) -> ServerSettings:
    reader.reject_unknown(
        {
            "host",
            "port",
            "max_connections",
            "authentication_slots",
            "max_message_size",
            "authentication_timeout_s",
            "statement_timeout_ms",
            "tls_cert",
            "tls_key",
            "require_tls_for_remote",
            "auth_failure_delay_ms",
            "auth_failure_max_delay_ms",
            "shutdown_grace_s",
            "max_statements_per_analyst",
            "analysis_processes",
        }
    )
    port = reader.get("port", int, DEFAULT_PORT)
    if not 0 <= port <= 65535:
        raise reader.fail("port", "must be between 0 and 65535")
    max_connections = reader.get("max_connections", int, 200)
    if max_connections < 1:
        raise reader.fail("max_connections", "must be a positive integer")
    authentication_slots = reader.get("authentication_slots", int, max(1, max_connections // 4))
    if not 1 <= authentication_slots <= max_connections:
        raise reader.fail("authentication_slots", "must be an integer from 1 to max_connections")
    max_message_size = reader.get("max_message_size", int, DEFAULT_MAX_MESSAGE_SIZE)
    if max_message_size < MIN_MAX_MESSAGE_SIZE:
        raise reader.fail("max_message_size", f"must be at least {MIN_MAX_MESSAGE_SIZE} (bytes)")
    authentication_timeout = float(
        reader.get("authentication_timeout_s", (int, float), DEFAULT_AUTHENTICATION_TIMEOUT_S)
    )
    if not 0 < authentication_timeout <= 600:
        raise reader.fail("authentication_timeout_s", "must be a number of seconds in (0, 600]")
    timeout = reader.get("statement_timeout_ms", int)
    if timeout is not None and timeout < 1:
        raise reader.fail(
            "statement_timeout_ms", "must be a positive integer (milliseconds); omit it for none"
        )
    cert, key = (_optional_path(reader, name, base) for name in ("tls_cert", "tls_key"))
    if (cert is None) != (key is None):
        raise reader.fail(
            "tls_key" if key is None else "tls_cert",
            "is needed too: TLS takes a certificate (tls_cert) and its private key (tls_key)",
        )
    require_tls = reader.get("require_tls_for_remote", bool, False)
    if require_tls and cert is None:
        raise reader.fail(
            "require_tls_for_remote", "needs tls_cert and tls_key: clients cannot use TLS without them"
        )
    per_analyst = reader.get("max_statements_per_analyst", int, DEFAULT_MAX_STATEMENTS_PER_ANALYST)
    if per_analyst < 1:
        raise reader.fail("max_statements_per_analyst", "must be a positive integer")
    analysis_processes = reader.get("analysis_processes", int, DEFAULT_ANALYSIS_PROCESSES)
    if not 0 <= analysis_processes <= 64:
        raise reader.fail("analysis_processes", "must be an integer from 0 (analyse in threads) to 64")
    grace = float(reader.get("shutdown_grace_s", (int, float), 30.0))
    if not 0 <= grace <= 3600:
        raise reader.fail("shutdown_grace_s", "must be a number of seconds in [0, 3600]")
    delay = reader.get("auth_failure_delay_ms", int, DEFAULT_AUTH_FAILURE_DELAY_MS)
    ceiling = reader.get("auth_failure_max_delay_ms", int, DEFAULT_AUTH_FAILURE_MAX_DELAY_MS)
    if delay < 0:
        raise reader.fail("auth_failure_delay_ms", "must be an integer >= 0 (milliseconds; 0 turns it off)")
    if ceiling < delay:
        raise reader.fail("auth_failure_max_delay_ms", "must be at least auth_failure_delay_ms")
    return ServerSettings(
        host=reader.get("host", str, "127.0.0.1"),
        port=port,
        max_connections=max_connections,
        authentication_slots=authentication_slots,
        max_message_size=max_message_size,
        authentication_timeout_s=authentication_timeout,
        statement_timeout_ms=timeout,
        tls_cert=cert,
        tls_key=key,
        require_tls_for_remote=require_tls,
        auth_failure_delay_ms=delay,
        auth_failure_max_delay_ms=ceiling,
        shutdown_grace_s=grace,
        max_statements_per_analyst=per_analyst,
        analysis_processes=analysis_processes,
    )


def _optional_path(reader: _Reader, key: str, base: Path) -> Path | None:
    """A file named relative to the policy file's directory, as every path in it is."""
    value = reader.get(key, str)
    if value is None:
        return None
    if not value.strip():
        raise reader.fail(key, "must not be empty")
    return base / value


def load_config(path: Path) -> VeilConfig:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: no such policy file",
            hint="pass --config PATH, set VEIL_CONFIG, or create one with `veil init-demo`",
        ) from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the policy file: {error.strerror}") from None
    return parse_config(text, path=path)


def read_document(path: Path) -> dict[str, Any]:
    """The raw TOML document, for code that rewrites the whole policy (``veil init-demo``, tests)."""
    return tomllib.loads(read_policy_text(path))


def read_policy_text(path: Path) -> str:
    """The policy file's text, checked to be a valid policy first — for commands that edit it in place,
    keeping its comments and layout (``veil import``)."""
    load_config(path)
    return path.read_text(encoding="utf-8")


def write_document(path: Path, document: Mapping[str, Any]) -> VeilConfig:
    """Validate, then replace the file atomically so a failed edit never leaves a broken policy."""
    return write_policy_text(path, tomli_w.dumps(dict(document)))


def write_policy_text(path: Path, text: str) -> VeilConfig:
    """Validate ``text`` as a policy, then replace the file with it atomically (a temporary file in the
    same directory, renamed over it): a failed edit never leaves a broken or half-written policy."""
    config = parse_config(text, path=path)
    try:
        descriptor, temporary_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:
        raise ConfigError(f"{path}: cannot write the policy file: {error.strerror}") from None
    temporary = Path(temporary_name)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        if path.exists():  # mkstemp makes the file private (0600); keep the policy file's own mode
            temporary.chmod(path.stat().st_mode & 0o7777)
        temporary.replace(path)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise ConfigError(f"{path}: cannot write the policy file: {error.strerror}") from None
    return config
