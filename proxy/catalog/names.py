"""Which names in a query belong to the system catalog, and what PostgreSQL calls a query's columns.

Pure functions over the sqlglot tree: the classifier (``proxy.analysis.statements``) uses them to tell a
catalog query from one on the dataset, and the shadow database to answer it.
"""

from __future__ import annotations

import re

from sqlglot import exp

from proxy.analysis.output_names import output_name
from proxy.catalog.relations import MACROS, PG_CATALOG, SHADOW_SCHEMAS

SESSION_FUNCTIONS = frozenset(
    {"version", "current_user", "session_user", "current_database", "current_schema", "current_schemas"}
)
CATALOG_FUNCTIONS = frozenset(re.findall(r"CREATE MACRO veil_pg_catalog\.(\w+)", MACROS)) | SESSION_FUNCTIONS
"""Functions that only a catalog query calls: the shadow's macros and the session's identity."""


def cte_names(tree: exp.Expression) -> frozenset[str]:
    return frozenset(cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE))


def relations(tree: exp.Expression) -> list[exp.Table]:
    """The tables a query reads by name: not its CTEs, not table functions (``generate_series(…)``)."""
    ctes = cte_names(tree)
    return [
        table
        for table in tree.find_all(exp.Table)
        if isinstance(table.this, exp.Identifier) and not (not table.db and table.name.lower() in ctes)
    ]


def catalog_schema(table: exp.Table) -> str | None:
    """``pg_catalog`` or ``information_schema`` if ``table`` names a catalog relation, else None.

    Unqualified ``pg_*`` names are catalog relations, as in PostgreSQL, where ``pg_catalog`` is searched
    first whatever the search_path says."""
    schema = table.db.lower()
    if schema in SHADOW_SCHEMAS:
        return schema
    if not schema and table.name.lower().startswith("pg_"):
        return PG_CATALOG
    return None


def is_catalog_table_function(table: exp.Table) -> bool:
    """``FROM pg_catalog.pg_get_keywords()`` (DBeaver), ``FROM pg_catalog.generate_series(…)`` (psql)."""
    if not isinstance(table.this, exp.Func):
        return False
    name = function_name(table.this)
    return table.db.lower() == PG_CATALOG or name.startswith("pg_") or name in CATALOG_FUNCTIONS


def function_name(node: exp.Func) -> str:
    return str(node.this).lower() if isinstance(node, exp.Anonymous) else node.sql_name().lower()


OBJECT_TYPES = frozenset({"regclass", "regtype", "regnamespace", "regrole", "regproc", "regprocedure"})


def calls_catalog_function(tree: exp.Expression) -> bool:
    """Whether a query without tables asks the catalog: ``pg_catalog.version()``, ``format_type(…)``,
    ``'visits'::regclass`` …"""
    for node in tree.find_all(exp.Func, exp.Dot):
        if isinstance(node, exp.Dot) and node.this.name.lower() == PG_CATALOG:
            return True
        if isinstance(node, exp.CurrentSchemas | exp.SessionUser) or (
            isinstance(node, exp.Anonymous) and function_name(node) in CATALOG_FUNCTIONS
        ):
            return True
        if isinstance(node, exp.Cast) and type_name(node.to) in OBJECT_TYPES:
            return True
    return False


def column_names(tree: exp.Query) -> tuple[str, ...] | None:
    """The names PostgreSQL gives the result columns, or None when a ``*`` leaves them to the engine."""
    select = tree if isinstance(tree, exp.Select) else next(tree.find_all(exp.Select), None)
    if select is None or any(isinstance(item, exp.Star) or item.is_star for item in select.expressions):
        return None
    return tuple(column_name(item) for item in select.expressions)


def column_name(item: exp.Expression) -> str:
    """PostgreSQL's FigureColname: a cast or a qualified call is named after what it wraps."""
    if isinstance(item, exp.Dot) and isinstance(item.expression, exp.Func):
        return column_name(item.expression)
    if isinstance(item, exp.Cast):
        # the name of a column or call inside the cast wins; a type's name yields to an outer type's
        return column_name(item.this) if _named_by_value(item.this) else type_name(item.to)
    if isinstance(item, exp.Anonymous):
        return function_name(item)
    if isinstance(item, exp.Case):
        return "case"
    if isinstance(item, exp.Array):
        return "array"
    if isinstance(item, exp.Exists):
        return "exists"
    if isinstance(item, exp.Subquery) and isinstance(item.this, exp.Select) and item.this.expressions:
        return column_name(item.this.expressions[0])
    if isinstance(item, exp.Literal | exp.Null | exp.Boolean):
        return "?column?"
    if isinstance(item, exp.GroupConcat):  # sqlglot's node for string_agg
        return "string_agg"
    return output_name(item)


def _named_by_value(node: exp.Expression) -> bool:
    while isinstance(node, exp.Cast):
        node = node.this
    return column_name(node) != "?column?"


def type_name(to: exp.Expression) -> str:
    """``pg_catalog.regclass`` → ``regclass``; standard types keep sqlglot's name (``text``, ``int``)."""
    if isinstance(to, exp.DataType):
        kind = to.args.get("kind")
        if to.this == exp.DataType.Type.USERDEFINED and kind is not None:
            return kind.name.lower()
        if to.this == exp.DataType.Type.NAME:
            return "name"
    return to.sql(dialect="postgres").lower()
