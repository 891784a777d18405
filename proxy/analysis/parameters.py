"""Parameters of the extended query protocol (``$1``, ``$2`` …): counted, typed, bound as literals.

A statement is parsed once, with its placeholders (sqlglot reads ``$1`` as ``exp.Parameter``). At
Bind, :func:`bind_parameters` puts a literal node for each value into a copy of the tree — never
text into the SQL — so the rest of the pipeline sees exactly what it would see had the analyst typed
the value: the same checks, the same refusals, the same price.

>>> tree = sqlglot.parse_one("SELECT COUNT(*) FROM patients WHERE age > $1", dialect="postgres")
>>> bind_parameters(tree, [30]).sql("postgres")
'SELECT COUNT(*) FROM patients WHERE age > 30'

A client may leave parameter types to the server. :func:`infer_parameter_types` then types a
parameter from where it stands, as PostgreSQL does: compared with (or added to, or ``IN``) a column,
it takes the column's type; ``LIMIT $1`` is a bigint; ``$1::date`` a date. Types are named as in
``pg_type`` (``int8``, ``text`` …): this package knows no protocol OIDs.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType
from typing import Final, TypeAlias

from sqlglot import exp

from proxy.config import ColumnType, DatasetPolicy, TablePolicy
from proxy.errors import QuerySyntaxError, UnsupportedQueryError

Tree: TypeAlias = exp.Expression
"""A parsed statement, for the modules that hand trees along without reading them (the session)."""

_TYPE_NAMES: Final[Mapping[exp.DataType.Type, str]] = MappingProxyType(
    {
        exp.DataType.Type.BOOLEAN: "bool",
        exp.DataType.Type.SMALLINT: "int2",
        exp.DataType.Type.INT: "int4",
        exp.DataType.Type.BIGINT: "int8",
        exp.DataType.Type.FLOAT: "float4",
        exp.DataType.Type.DOUBLE: "float8",
        exp.DataType.Type.DECIMAL: "numeric",
        exp.DataType.Type.TEXT: "text",
        exp.DataType.Type.VARCHAR: "varchar",
        exp.DataType.Type.DATE: "date",
        exp.DataType.Type.TIMESTAMP: "timestamp",
        exp.DataType.Type.TIMESTAMPTZ: "timestamptz",
        exp.DataType.Type.VARBINARY: "bytea",
    }
)
_COLUMN_TYPE_NAMES: Final[Mapping[ColumnType, str]] = MappingProxyType(
    {
        ColumnType.INTEGER: "int8",
        ColumnType.REAL: "float8",
        ColumnType.TEXT: "text",
        ColumnType.DATE: "date",
        ColumnType.TIMESTAMP: "timestamp",
        ColumnType.BOOLEAN: "bool",
    }
)
_LIKE_TESTS: Final = (exp.Like, exp.ILike, exp.DPipe)  # text on both sides
_OPERATORS: Final = (exp.Predicate, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)
_IDENTIFIER_PLACES: Final = (exp.Table, exp.Column, exp.Identifier, exp.TableAlias, exp.Dot)


@dataclass(frozen=True)
class ParameterizedStatement:
    """The statement of one Parse message, parsed once and bound at each Bind."""

    tree: exp.Expression | None  # None: the query string held no statement
    parameter_count: int
    inferred_types: Mapping[int, str]  # parameter number → pg_type name, where the statement implies one

    def bind(self, values: Sequence[object]) -> exp.Expression | None:
        return None if self.tree is None else bind_parameters(self.tree, values)


def parameterized_statement(
    trees: Sequence[exp.Expression], dataset: DatasetPolicy
) -> ParameterizedStatement:
    """``trees``: the parse of a Parse message's query string, which may hold one statement at most."""
    if len(trees) > 1:
        raise QuerySyntaxError("cannot insert multiple commands into a prepared statement")
    if not trees:
        return ParameterizedStatement(None, 0, MappingProxyType({}))
    (tree,) = trees
    count = parameter_count(tree)
    return ParameterizedStatement(tree, count, MappingProxyType(infer_parameter_types(tree, dataset)))


def parameters(tree: exp.Expression) -> Iterator[tuple[int, exp.Parameter]]:
    """Each ``$n`` of the statement with its number."""
    for node in tree.find_all(exp.Parameter):
        number = _number_of(node)
        if number is not None:
            yield number, node


def _number_of(node: exp.Parameter) -> int | None:
    inner = node.this
    if isinstance(inner, exp.Literal) and not inner.is_string and inner.this.isdigit():
        return int(inner.this)
    return None


def parameter_count(tree: exp.Expression) -> int:
    """The highest ``$n``: how many values a Bind must supply (PostgreSQL counts the same way), after
    checking that each placeholder stands where a value can."""
    highest = 0
    for number, node in parameters(tree):
        _check_place(number, node)
        highest = max(highest, number)
    return highest


def _check_place(number: int, node: exp.Parameter) -> None:
    if number < 1:
        raise QuerySyntaxError(f"there is no parameter ${number}")
    parent = _outer(node).parent
    if isinstance(node.parent, _IDENTIFIER_PLACES):
        raise QuerySyntaxError(
            f'syntax error at or near "${number}"', hint="a parameter can only stand for a value"
        )
    if isinstance(parent, exp.Group) or (isinstance(parent, exp.Ordered) and parent.this is _outer(node)):
        raise UnsupportedQueryError(
            f"${number} cannot be a GROUP BY or ORDER BY item",
            detail="bound to an integer, it would name an output column by its position",
            hint="group or sort by a column or an expression",
        )


def _outer(node: exp.Expression) -> exp.Expression:
    """``node`` with the parentheses around it."""
    while isinstance(node.parent, exp.Paren):
        node = node.parent
    return node


# --- inference -----------------------------------------------------------------------------------


def infer_parameter_types(tree: exp.Expression, dataset: DatasetPolicy) -> dict[int, str]:
    """The ``pg_type`` name of each parameter whose place in the statement implies a type; the others
    are left out (the caller reports them as text, as PostgreSQL resolves an unknown literal)."""
    tables = _tables(tree, dataset)
    inferred: dict[int, str] = {}
    for number, node in parameters(tree):
        type_name = _context_type(_outer(node), tables)
        if type_name is not None:
            inferred.setdefault(number, type_name)
    return inferred


def _tables(tree: exp.Expression, dataset: DatasetPolicy) -> dict[str, TablePolicy]:
    """The policy of each table the statement reads, by alias and by name."""
    found: dict[str, TablePolicy] = {}
    for table in tree.find_all(exp.Table):
        policy = dataset.table(table.name)
        if policy is not None:
            found.setdefault(table.alias_or_name.lower(), policy)
            found.setdefault(table.name.lower(), policy)
    return found


def _context_type(node: exp.Expression, tables: Mapping[str, TablePolicy]) -> str | None:
    parent = node.parent
    if isinstance(parent, exp.Cast | exp.TryCast) and parent.this is node:
        return _TYPE_NAMES.get(parent.to.this)
    if isinstance(parent, exp.Limit | exp.Offset):
        return "int8"
    if isinstance(parent, exp.PercentileCont | exp.PercentileDisc):
        return "float8"
    if isinstance(parent, _LIKE_TESTS):
        return "text"
    if isinstance(parent, exp.In) and parent.this is not node:
        return _operand_type(parent.this, tables)
    if isinstance(parent, exp.Between):
        other = parent.args["low"] if parent.this is node else parent.this
        return _operand_type(other, tables)
    if isinstance(parent, _OPERATORS) and isinstance(parent, exp.Binary):
        other = parent.expression if parent.this is node else parent.this
        return _operand_type(other, tables)
    return None


def _operand_type(node: exp.Expression, tables: Mapping[str, TablePolicy]) -> str | None:
    if isinstance(node, exp.Paren):
        return _operand_type(node.this, tables)
    if isinstance(node, exp.Column):
        return _column_type(node, tables)
    if isinstance(node, exp.Cast | exp.TryCast):
        return _TYPE_NAMES.get(node.to.this)
    if isinstance(node, exp.Literal) and not node.is_string:
        return "int8" if node.this.isdigit() else "numeric"
    if isinstance(node, exp.Boolean):
        return "bool"
    if isinstance(node, exp.Count):
        return "int8"
    if isinstance(node, exp.AggFunc | exp.Add | exp.Sub | exp.Mul | exp.Div | exp.Mod | exp.Neg):
        return "numeric"  # a number of some kind: numeric takes them all
    return None


def _column_type(column: exp.Column, tables: Mapping[str, TablePolicy]) -> str | None:
    candidates = [tables[column.table.lower()]] if column.table.lower() in tables else list(tables.values())
    for table in candidates:
        policy = table.column(column.name)
        if policy is not None:
            return _COLUMN_TYPE_NAMES[policy.type]
    return None


# --- binding -------------------------------------------------------------------------------------


def bind_parameters(tree: exp.Expression, values: Sequence[object]) -> exp.Expression:
    """A copy of ``tree`` with ``$n`` replaced by a literal of ``values[n - 1]``.

    The caller supplies one value per parameter (see :func:`parameter_count`); a value is what the
    wire decoded — None, bool, int, float, Decimal, str, date, datetime or bytes."""

    def bind(node: exp.Expression) -> exp.Expression:
        number = _number_of(node) if isinstance(node, exp.Parameter) else None
        return node if number is None else literal(values[number - 1])

    return tree.transform(bind)


def literal(value: object) -> exp.Expression:
    """The node sqlglot would parse from the SQL spelling of ``value``: a negative number is a
    negation of its absolute value, a date a cast of its ISO text, as in ``CAST('2024-01-31' AS DATE)``."""
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int):
        return _number(str(value))
    if isinstance(value, float):
        if math.isfinite(value):
            return _number(repr(value))
        return exp.cast(exp.Literal.string(_non_finite(value)), exp.DataType.Type.DOUBLE)
    if isinstance(value, Decimal):
        if value.is_finite():
            return _number(format(value, "f"))
        return exp.cast(exp.Literal.string(str(value)), exp.DataType.Type.DECIMAL)
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, datetime.datetime):
        kind = exp.DataType.Type.TIMESTAMP if value.tzinfo is None else exp.DataType.Type.TIMESTAMPTZ
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), kind)
    if isinstance(value, datetime.date):
        return exp.cast(exp.Literal.string(value.isoformat()), exp.DataType.Type.DATE)
    if isinstance(value, bytes):
        # No column of a dataset holds bytes, and no bytea literal means the same on both engines
        # (DuckDB reads '\x0027' as one escaped byte and three characters).
        raise UnsupportedQueryError(
            "bytea parameters are not supported", hint="declare the parameter as text and send text"
        )
    raise TypeError(f"no SQL literal for a {type(value).__name__}")


def _number(text: str) -> exp.Expression:
    if text.startswith("-"):
        return exp.Neg(this=exp.Literal.number(text[1:]))
    return exp.Literal.number(text)


def _non_finite(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"
