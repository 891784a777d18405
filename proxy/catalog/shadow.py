"""The shadow database: an in-memory DuckDB that knows the dataset's schema and nothing of its rows.

It is built from the policy alone — never from the backend — so no catalog query can read, count or
estimate a private row, whatever it asks: the dataset's tables exist here **empty**, with the columns
and types the policy declares (in schema ``public``, the schema Veil's own SQL accepts), their privacy
annotations as comments, and beside them a PostgreSQL-shaped ``pg_catalog`` and ``information_schema``
(:mod:`proxy.catalog.relations`). Like the sandbox, the engine cannot reach files or change its
configuration. It is built on the first catalog query and shared by every session of the dataset
(cursors are safe across threads); what differs between sessions (the analyst, the settings) enters each
query as literals (:mod:`proxy.catalog.translate`).
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import duckdb
from sqlglot import exp

from proxy.backends.duckdb import SANDBOX_CONFIG
from proxy.catalog import relations as catalog
from proxy.catalog.comments import column_comment, table_comment
from proxy.catalog.keywords import keyword_rows
from proxy.catalog.names import column_names
from proxy.catalog.translate import Setting, UnansweredCatalogQuery, shadow_query
from proxy.config import ColumnType, DatasetPolicy, TablePolicy
from proxy.errors import UnsupportedQueryError
from proxy.release.apply import ReleasedTable, ResultColumn
from proxy.rewrite.session_info import SessionInfo
from proxy.settings import SERVER_PARAMETERS, SETTINGS

log = logging.getLogger("veil.catalog")

DATASET_SCHEMA = "public"
SHADOW_TYPES = {
    ColumnType.INTEGER: "BIGINT",
    ColumnType.REAL: "DOUBLE",
    ColumnType.TEXT: "VARCHAR",
    ColumnType.DATE: "DATE",
    ColumnType.TIMESTAMP: "TIMESTAMP",
    ColumnType.BOOLEAN: "BOOLEAN",
}
_RESULT_TYPES = {
    "BOOLEAN": ColumnType.BOOLEAN,
    "TINYINT": ColumnType.INTEGER,
    "SMALLINT": ColumnType.INTEGER,
    "INTEGER": ColumnType.INTEGER,
    "BIGINT": ColumnType.INTEGER,
    "HUGEINT": ColumnType.INTEGER,
    "UTINYINT": ColumnType.INTEGER,
    "USMALLINT": ColumnType.INTEGER,
    "UINTEGER": ColumnType.INTEGER,
    "FLOAT": ColumnType.REAL,
    "DOUBLE": ColumnType.REAL,
    "DATE": ColumnType.DATE,
    "TIMESTAMP": ColumnType.TIMESTAMP,
}
_MAJOR, _MINOR = SERVER_PARAMETERS["server_version"].split(".")
READ_ONLY_PARAMETERS: Mapping[str, str] = MappingProxyType(
    {
        **SERVER_PARAMETERS,
        "server_version_num": str(int(_MAJOR) * 10000 + int(_MINOR)),
        "max_identifier_length": "63",
        "max_index_keys": "32",  # pgjdbc reads it before getImportedKeys
        "transaction_isolation": "read committed",
        "default_transaction_isolation": "read committed",
        "transaction_read_only": "on",
    }
)
"""What ``SHOW`` and ``current_setting()`` answer besides the session settings: facts of the server."""
MAX_REMEMBERED_GAPS = 1000  # distinct unanswered relations/functions logged once each, up to this many


class ShadowCatalog:
    """Answers catalog queries of one dataset from its shadow database."""

    def __init__(self, dataset: DatasetPolicy, databases: Sequence[str] = ()) -> None:
        """``databases``: every dataset the server serves, which pg_database lists (psql's \\l)."""
        self.dataset = dataset
        self.databases = tuple(databases)
        self._lock = threading.Lock()
        self._connection: duckdb.DuckDBPyConnection | None = None
        self._known: frozenset[tuple[str, str]] = frozenset()
        self._gaps_logged: set[str] = set()

    def answer(self, tree: exp.Query, *, info: SessionInfo, setting: Setting) -> ReleasedTable:
        """The query's result from the shadow; an empty one with the query's columns if the shadow lacks
        a relation or function it needs (psql, JDBC … carry on with an empty list rather than fail)."""
        connection = self._shadow()
        try:
            sql = shadow_query(tree, info=info, setting=setting, known=self._known).sql(dialect="duckdb")
            cursor = connection.cursor()
            try:
                cursor.execute("SET VARIABLE veil_user = ?", [info.user])  # pg_authid shows this analyst
                cursor.execute(sql)
                description = [(column[0], str(column[1])) for column in cursor.description or []]
                rows = cursor.fetchall()
            finally:
                cursor.close()
        except (UnansweredCatalogQuery, duckdb.Error) as gap:
            return self._empty(tree, gap)
        names = column_names(tree) or tuple(name for name, _ in description)
        return _result(names, description, rows)

    def _shadow(self) -> duckdb.DuckDBPyConnection:
        """The shadow, built on first use."""
        with self._lock:
            if self._connection is None:
                self._connection, self._known = build_shadow(self.dataset, self.databases)
            return self._connection

    def _empty(self, tree: exp.Query, gap: Exception) -> ReleasedTable:
        names = column_names(tree)
        reason = str(gap).splitlines()[0] if str(gap) else type(gap).__name__
        self._log_once(reason, tree)
        if names is None:
            missing = reason if isinstance(gap, UnansweredCatalogQuery) else "see the server log"
            raise UnsupportedQueryError(
                "this catalog query is not supported",
                detail=f"Veil's catalog cannot answer it ({missing})",
                hint="name the columns instead of *",
            )
        return ReleasedTable(tuple(ResultColumn(name, ColumnType.TEXT) for name in names), [])

    def _log_once(self, reason: str, tree: exp.Query) -> None:
        with self._lock:
            if reason in self._gaps_logged or len(self._gaps_logged) >= MAX_REMEMBERED_GAPS:
                return
            self._gaps_logged.add(reason)
        log.warning(
            "catalog query answered with no rows dataset=%s reason=%s statement=%s",
            self.dataset.name,
            reason,
            tree.sql(dialect="postgres")[:500],
        )


def build_shadow(
    dataset: DatasetPolicy, databases: Sequence[str] = ()
) -> tuple[duckdb.DuckDBPyConnection, frozenset[tuple[str, str]]]:
    """The shadow of ``dataset`` and its (schema, relation) pairs; nothing here reads the backend."""
    connection = duckdb.connect(":memory:", config=dict(SANDBOX_CONFIG))
    connection.execute(catalog.INTERNAL_DDL)
    connection.execute(catalog.PG_CATALOG_TABLES)
    _fill_fixed_rows(connection, dataset, databases)
    _create_dataset_tables(connection, dataset)
    connection.execute(catalog.PG_CATALOG_VIEWS)
    connection.execute(catalog.MACROS)
    connection.execute(catalog.INFORMATION_SCHEMA_VIEWS)
    known = _register_relations(connection, dataset)
    return connection, known


def _insert(connection: duckdb.DuckDBPyConnection, table: str, rows: list[tuple[Any, ...]]) -> None:
    """``table`` is one of the shadow's own names; the values travel as parameters."""
    if rows:  # one statement for all rows: executemany costs a round through the parser per row
        marks = [exp.Tuple(expressions=[exp.Placeholder() for _ in row]) for row in rows]
        statement = exp.insert(exp.Values(expressions=marks), table)
        connection.execute(statement.sql(dialect="duckdb"), [value for row in rows for value in row])


def _fill_fixed_rows(
    connection: duckdb.DuckDBPyConnection, dataset: DatasetPolicy, databases: Sequence[str]
) -> None:
    types = _type_rows()
    _insert(connection, "veil_pg_catalog.pg_type", [row[:-1] for row in types])
    _insert(connection, "veil_shadow.type_names", [(row[0], row[-1]) for row in types])
    _insert(connection, "veil_shadow.duckdb_types", list(catalog.DUCKDB_TYPES.items()))
    owner, nsp_acl = catalog.OWNER_OID, None
    _insert(
        connection,
        "veil_pg_catalog.pg_namespace",
        [
            (catalog.PG_CATALOG_OID, catalog.PG_CATALOG, owner, nsp_acl),
            (catalog.DATASET_SCHEMA_OID, DATASET_SCHEMA, owner, nsp_acl),
            (catalog.INFORMATION_SCHEMA_OID, catalog.INFORMATION_SCHEMA, owner, nsp_acl),
        ],
    )
    description = f"dataset {dataset.name}: private tables answer differentially private aggregates only"
    _insert(connection, "veil_shadow.schema_descriptions", [(catalog.DATASET_SCHEMA_OID, description)])
    _insert(connection, "veil_pg_catalog.pg_shdescription", [(catalog.DATABASE_OID, 1262, description)])
    others = [name for name in databases if name != dataset.name]
    _insert(
        connection,
        "veil_pg_catalog.pg_database",
        [(catalog.DATABASE_OID + i, name, owner, catalog.UTF8_ENCODING, "c", False, True, -1, 0, 0,
          1663, "C", "C", None, None, None, None) for i, name in enumerate([dataset.name, *others])],
    )  # fmt: skip
    _insert(
        connection,
        "veil_shadow.roles",
        [(owner, catalog.OWNER, False, True, False, False, False, False, False, -1, None, None)],
    )
    _insert(connection, "veil_shadow.keywords", keyword_rows())
    _insert(
        connection,
        "veil_pg_catalog.pg_am",
        [(catalog.HEAP_AM_OID, "heap", "heap_tableam_handler", "t"), (403, "btree", "bthandler", "i")],
    )
    _insert(connection, "veil_pg_catalog.pg_tablespace", [(1663, "pg_default", owner, None, None)])
    _insert(
        connection,
        "veil_pg_catalog.pg_collation",
        [(oid, name, catalog.PG_CATALOG_OID, owner, provider, True, -1, collate, collate, None, None, None)
         for oid, name, provider, collate in ((100, "default", "d", None), (950, "C", "c", "C"),
                                              (951, "POSIX", "c", "POSIX"))],
    )  # fmt: skip
    _insert(connection, "veil_pg_catalog.pg_settings", _setting_rows())


def _type_rows() -> list[tuple[Any, ...]]:
    """pg_type rows with each base type's array type, and the name format_type prints for each."""
    rows = []
    for (
        oid,
        name,
        length,
        by_value,
        kind,
        category,
        element,
        array,
        collation,
        align,
        storage,
        display,
    ) in catalog.BASE_TYPES:
        rows.append(_type_row(oid, name, length, by_value, kind, category, element, array, collation,
                              align, storage, display))  # fmt: skip
        if array:
            rows.append(_type_row(array, f"_{name}", -1, False, "b", "A", oid, 0, collation,
                                  "d" if align == "d" else "i", "x", f"{display}[]"))  # fmt: skip
    return rows


def _type_row(
    oid: int,
    name: str,
    length: int,
    by_value: bool,
    kind: str,
    category: str,
    element: int,
    array: int,
    collation: int,
    align: str,
    storage: str,
    display: str,
) -> tuple[Any, ...]:
    io = "array" if category == "A" and element else name
    return (
        oid, name, catalog.PG_CATALOG_OID, catalog.OWNER_OID, length, by_value, kind, category, False,
        True, ",", 0, None, element, array, f"{io}_in", f"{io}_out", f"{io}_recv", f"{io}_send", None,
        None, None, align, storage, False, 0, -1, 0, collation, None, None, None, display,
    )  # fmt: skip


def _setting_rows() -> list[tuple[Any, ...]]:
    """The defaults of Veil's session settings and the server's parameters (a session's own values
    reach ``current_setting(…)`` as literals)."""
    rows = [(s.name, s.default, s.help, "user") for s in SETTINGS]
    rows += [
        (name, value, "A fact of the server.", "internal") for name, value in READ_ONLY_PARAMETERS.items()
    ]
    return [
        (name, value, None, "Veil", help_text, None, context, "string", "default", None, None, None,
         value, value, None, None, False)
        for name, value, help_text, context in rows
    ]  # fmt: skip


def _create_dataset_tables(connection: duckdb.DuckDBPyConnection, dataset: DatasetPolicy) -> None:
    """Each table of the policy, empty, with its privacy annotations as comments (built with sqlglot:
    the names and comments come from the policy file)."""
    connection.execute(exp.Create(kind="SCHEMA", this=exp.Table(db=exp.to_identifier(DATASET_SCHEMA)),
                                  exists=True).sql(dialect="duckdb"))  # fmt: skip
    for table in dataset.tables.values():
        for statement in _table_statements(table):
            connection.execute(statement.sql(dialect="duckdb"))


def _table_statements(table: TablePolicy) -> list[exp.Expression]:
    name = exp.table_(table.name, db=DATASET_SCHEMA)
    columns = [
        exp.ColumnDef(this=exp.to_identifier(column.name), kind=exp.DataType.build(SHADOW_TYPES[column.type]))
        for column in table.columns.values()
    ]
    statements: list[exp.Expression] = [
        exp.Create(kind="TABLE", this=exp.Schema(this=name, expressions=columns)),
        exp.Comment(this=name.copy(), kind="TABLE", expression=exp.Literal.string(table_comment(table))),
    ]
    statements += [
        exp.Comment(
            this=exp.column(column.name, table.name, DATASET_SCHEMA),
            kind="COLUMN",
            expression=exp.Literal.string(column_comment(table, column)),
        )
        for column in table.columns.values()
    ]
    return statements


def _register_relations(
    connection: duckdb.DuckDBPyConnection, dataset: DatasetPolicy
) -> frozenset[tuple[str, str]]:
    """OIDs for every relation: PostgreSQL's own for well-known catalogs, the rest in name order."""
    schemas = list(catalog.SHADOW_SCHEMAS.values())
    found = connection.execute(
        "SELECT schema_name, table_name, 'r' FROM duckdb_tables() WHERE schema_name IN (?, ?) "
        "UNION ALL SELECT schema_name, view_name, 'v' FROM duckdb_views() WHERE schema_name IN (?, ?) "
        "ORDER BY 1, 2",
        [*schemas, *schemas],
    ).fetchall()
    namespaces = {
        catalog.SHADOW_SCHEMAS[catalog.PG_CATALOG]: catalog.PG_CATALOG_OID,
        catalog.SHADOW_SCHEMAS[catalog.INFORMATION_SCHEMA]: catalog.INFORMATION_SCHEMA_OID,
    }
    rows = []
    for position, (schema, name, kind) in enumerate(found):
        oid = catalog.WELL_KNOWN_OIDS.get(name) if namespaces[schema] == catalog.PG_CATALOG_OID else None
        rows.append((oid or catalog.FIRST_CATALOG_OID + position, namespaces[schema], schema, name, kind))
    rows += [
        (catalog.FIRST_TABLE_OID + position, catalog.DATASET_SCHEMA_OID, DATASET_SCHEMA, name, "r")
        for position, name in enumerate(sorted(dataset.tables))
    ]
    _insert(connection, "veil_shadow.relations", rows)
    return frozenset((schema, name) for _, _, schema, name, _ in rows)


def _result(
    names: tuple[str, ...], description: list[tuple[str, str]], rows: list[tuple[Any, ...]]
) -> ReleasedTable:
    """DuckDB's result as the wire sends it. A text column holds only strings (lists in PostgreSQL's
    array text), since a client may ask for any column in binary."""
    if len(names) != len(description):  # a star the names could not see through
        names = tuple(name for name, _ in description)
    types = [_column_type(type_name) for _, type_name in description]
    columns = tuple(ResultColumn(name, kind) for name, kind in zip(names, types, strict=True))
    return ReleasedTable(columns, [tuple(map(_value, row, types)) for row in rows])


def _column_type(type_name: str) -> ColumnType:
    if type_name.startswith("DECIMAL"):
        return ColumnType.REAL
    return _RESULT_TYPES.get(type_name, ColumnType.TEXT)


def _value(value: Any, kind: ColumnType) -> Any:
    if value is None:
        return None
    if kind is ColumnType.REAL:
        return float(value)
    if kind is not ColumnType.TEXT or isinstance(value, str):
        return value
    return array_text(value) if isinstance(value, list) else _text(value)


def array_text(values: list[Any]) -> str:
    """PostgreSQL's text form of an array: ``{a,"b c",NULL}``."""
    return "{" + ",".join(_element_text(value) for value in values) + "}"


def _element_text(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, list):
        return array_text(value)
    text = _text(value)
    if text == "" or text.upper() == "NULL" or any(char in text for char in ' ,{}"\\'):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def _text(value: Any) -> str:
    """A scalar in PostgreSQL's text form (booleans ``t``/``f``, timestamps with a space)."""
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    return str(value)
