"""Column types of ``veil import``: the policy type of each file (DuckDB) type, and the type each
column is stored as in the dataset's engine.

=========================================  ===========  ==============  =================================
file (DuckDB) type                         policy type  stored (DuckDB)  stored (PostgreSQL)
=========================================  ===========  ==============  =================================
TINYINT, SMALLINT, UTINYINT                integer      BIGINT          smallint
INTEGER, USMALLINT                         integer      BIGINT          integer
BIGINT, UINTEGER                           integer      BIGINT          bigint
UBIGINT, HUGEINT, UHUGEINT                 integer      BIGINT          narrowest that holds the values
an integer column of a CSV file            integer      BIGINT          narrowest that holds the values
FLOAT                                      real         DOUBLE          real
DOUBLE                                     real         DOUBLE          double precision
DECIMAL(p, s)                              real         DOUBLE          numeric(p, s)
VARCHAR, UUID, ENUM                        text         VARCHAR         text
DATE                                       date         DATE            date
TIMESTAMP (any precision)                  timestamp    TIMESTAMP       timestamp
TIMESTAMP WITH TIME ZONE                   timestamp    TIMESTAMP, UTC  timestamp, in UTC
BOOLEAN                                    boolean      BOOLEAN         boolean
=========================================  ===========  ==============  =================================

A PostgreSQL dataset keeps the width the file declares (a Parquet file's INT32 stays ``integer``, its
FLOAT ``real``, its DECIMAL ``numeric``), so ``\\d`` in psql on the server shows what the source said.
A CSV file declares no width (DuckDB's sniffer calls every integer BIGINT), so its integer columns get
the narrowest of smallint, integer, bigint that holds their values. Veil reads PostgreSQL's numeric
columns as ``numeric`` (docs/sql.md, "Functions on private values"), so no width can overflow there.

A DuckDB dataset stores the canonical types instead: DuckDB computes integer arithmetic in the
operands' type, and Veil squares clamped values for VAR and STDDEV (``SUM(x * x)``), which overflows a
SMALLINT from 182 on and an INTEGER from 46,341. Values beyond BIGINT's range are refused on either.

The width chosen from a CSV file's values is visible to whoever can read the engine's schema, never to
analysts: Veil's catalog is built from the policy alone (where every integer is ``bigint``).

Timestamps stay timestamps, without time zone: one with a time zone is stored as its UTC time (the
policy's ``timestamp`` is compared as written, so one zone for all rows), and nanoseconds become
microseconds (TIMESTAMP_NS). Other types (BLOB, LIST, STRUCT, TIME, INTERVAL …) are refused: drop or
convert those columns before importing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from proxy.cli.import_source import quote_identifier
from proxy.config import DUCKDB, POSTGRES, ColumnType
from proxy.errors import ConfigError


@dataclass(frozen=True)
class Storage:
    """How a column is stored: ``name`` as the engine shows it, ``cast`` the DuckDB type its values are
    converted to on the way in, ``copy`` its PostgreSQL type name for a binary COPY."""

    name: str
    cast: str
    copy: str = ""


@dataclass(frozen=True)
class FileColumn:
    """A column of the file: its name and type there, its policy name (lowercase) and type."""

    source_name: str
    source_type: str
    name: str
    type: ColumnType


@dataclass(frozen=True)
class ImportColumn(FileColumn):
    """A column of the file and how the dataset's engine stores it."""

    storage: Storage

    def select_item(self) -> str:
        """The DuckDB SQL that reads this column under its policy name, converted to its storage."""
        column = quote_identifier(self.source_name)
        if self.source_type == "TIMESTAMP WITH TIME ZONE":
            column = f"timezone('UTC', {column})"
        return f"CAST({column} AS {self.storage.cast}) AS {quote_identifier(self.name)}"


INTEGER_TYPES = frozenset(
    {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT"}
    | {"UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT"}
)
_DECLARED_WIDTH = {  # the PostgreSQL integer that holds every value of a declared type
    "TINYINT": "smallint",
    "UTINYINT": "smallint",
    "SMALLINT": "smallint",
    "USMALLINT": "integer",
    "INTEGER": "integer",
    "UINTEGER": "bigint",
    "BIGINT": "bigint",
}
_INTEGERS = (  # PostgreSQL name, DuckDB name, COPY name, least and greatest value
    ("smallint", "SMALLINT", "int2", -(2**15), 2**15 - 1),
    ("integer", "INTEGER", "int4", -(2**31), 2**31 - 1),
    ("bigint", "BIGINT", "int8", -(2**63), 2**63 - 1),
)
_REAL_TYPES = frozenset({"FLOAT", "DOUBLE"})
_TEXT_TYPES = frozenset({"VARCHAR", "UUID"})
_TIMESTAMP_TYPES = frozenset({"TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS"})
_DECIMAL = re.compile(r"^DECIMAL\((\d+),\s*(\d+)\)$")
_CANONICAL = {  # DuckDB datasets
    ColumnType.INTEGER: "BIGINT",
    ColumnType.REAL: "DOUBLE",
    ColumnType.TEXT: "VARCHAR",
    ColumnType.DATE: "DATE",
    ColumnType.TIMESTAMP: "TIMESTAMP",
    ColumnType.BOOLEAN: "BOOLEAN",
}
_POSTGRES_REAL = {  # PostgreSQL datasets: a file's FLOAT stays real
    "FLOAT": Storage("real", "FLOAT", "float4"),
    "DOUBLE": Storage("double precision", "DOUBLE", "float8"),
}
_POSTGRES = {  # PostgreSQL datasets, the types whose storage does not depend on the file
    ColumnType.TEXT: Storage("text", "VARCHAR", "text"),
    ColumnType.DATE: Storage("date", "DATE", "date"),
    ColumnType.TIMESTAMP: Storage("timestamp", "TIMESTAMP", "timestamp"),
    ColumnType.BOOLEAN: Storage("boolean", "BOOLEAN", "bool"),
}


def policy_type(source_type: str) -> ColumnType | None:
    """The policy type of a DuckDB type, or None when a policy cannot declare it."""
    if source_type in INTEGER_TYPES:
        return ColumnType.INTEGER
    if source_type in _REAL_TYPES or source_type.startswith("DECIMAL"):
        return ColumnType.REAL
    if source_type in _TEXT_TYPES or source_type.startswith("ENUM("):
        return ColumnType.TEXT
    if source_type == "DATE":
        return ColumnType.DATE
    if source_type in _TIMESTAMP_TYPES or source_type == "TIMESTAMP WITH TIME ZONE":
        return ColumnType.TIMESTAMP
    if source_type == "BOOLEAN":
        return ColumnType.BOOLEAN
    return None


def needs_range(source_type: str, *, backend: str, declared: bool) -> bool:
    """Whether choosing the column's storage needs its least and greatest value."""
    if source_type not in INTEGER_TYPES:
        return False
    if source_type not in _DECLARED_WIDTH:  # may hold values beyond BIGINT
        return True
    return backend == POSTGRES and not declared


def storage(
    name: str,
    source_type: str,
    column_type: ColumnType,
    *,
    backend: str,
    declared: bool,
    value_range: tuple[object, object] | None = None,
) -> Storage:
    """The storage of a column in ``backend``; ``declared``: the file declares its types (Parquet), so
    they are kept; ``value_range``: the column's least and greatest value, when ``needs_range``."""
    if column_type is ColumnType.INTEGER:
        width = _integer_width(name, source_type, backend=backend, declared=declared, value_range=value_range)
        return width if backend == POSTGRES else Storage("BIGINT", "BIGINT")
    if backend == DUCKDB:
        return Storage(_CANONICAL[column_type], _CANONICAL[column_type])
    if column_type is ColumnType.REAL:
        decimal = _DECIMAL.match(source_type)
        if decimal is not None:
            precision, scale = int(decimal.group(1)), int(decimal.group(2))
            return Storage(f"numeric({precision},{scale})", f"DECIMAL({precision},{scale})", "numeric")
        return _POSTGRES_REAL.get(source_type, _POSTGRES_REAL["DOUBLE"])
    return _POSTGRES[column_type]


def _integer_width(
    name: str,
    source_type: str,
    *,
    backend: str,
    declared: bool,
    value_range: tuple[object, object] | None,
) -> Storage:
    if not needs_range(source_type, backend=backend, declared=declared):
        kept = _DECLARED_WIDTH[source_type] if backend == POSTGRES else "bigint"
        return next(Storage(pg, duck, copy) for pg, duck, copy, _, _ in _INTEGERS if pg == kept)
    if value_range is None:  # no value at all: any width holds it
        return Storage("integer", "INTEGER", "int4")
    low, high = int(value_range[0]), int(value_range[1])  # type: ignore[call-overload]
    for pg, duck, copy, least, greatest in _INTEGERS:
        if least <= low and high <= greatest:
            return Storage(pg, duck, copy)
    raise ConfigError(
        f'column "{name}" holds integers beyond the 64-bit range ({low} to {high})',
        detail="a policy integer is stored as a 64-bit integer at most",
        hint="convert the column to text or to a floating-point number before importing",
    )
