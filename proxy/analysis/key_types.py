"""The type of a GROUP BY key computed from a column, as PostgreSQL would type it — needed before
any value exists, because keys from the data (τ-thresholding) are typed in the result description
that the client reads, and values from either engine are converted to it.

``EXTRACT(year FROM d)`` is an integer (not a date, the column's type); ``date_trunc('month', d)``
a date, of a timestamp a timestamp; arithmetic on numbers a number; anything else text unless it is plainly a column, a cast
or a comparison.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.analysis.intervals import is_integer
from proxy.analysis.value_kinds import Kind, value_kind
from proxy.config import ColumnType, TablePolicy

_FRACTIONAL_UNITS = frozenset({"EPOCH", "SECOND", "SECONDS", "JULIAN", "MILLISECONDS", "MICROSECONDS"})
_NUMERIC_FUNCTIONS = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Floor, exp.Ceil, exp.Round, exp.Abs)
_CAST_TYPES = (
    (exp.DataType.INTEGER_TYPES, ColumnType.INTEGER),
    (exp.DataType.REAL_TYPES | {exp.DataType.Type.DECIMAL}, ColumnType.REAL),
    ({exp.DataType.Type.DATE}, ColumnType.DATE),
    ({exp.DataType.Type.TIMESTAMP}, ColumnType.TIMESTAMP),
    ({exp.DataType.Type.BOOLEAN}, ColumnType.BOOLEAN),
)


def expression_type(node: exp.Expression, table: TablePolicy) -> ColumnType:
    if isinstance(node, exp.Paren):
        return expression_type(node.this, table)
    if isinstance(node, exp.Column):
        column = table.column(node.name)
        return column.type if column is not None else ColumnType.TEXT
    if is_integer(node, table):
        return ColumnType.INTEGER
    if isinstance(node, exp.Extract):
        return ColumnType.REAL if node.this.name.upper() in _FRACTIONAL_UNITS else ColumnType.INTEGER
    if isinstance(node, exp.TimestampTrunc | exp.DateTrunc):  # of a date: a date; of a timestamp: one
        truncated = value_kind(node.this, table=table)
        return ColumnType.TIMESTAMP if truncated is Kind.TIMESTAMP else ColumnType.DATE
    if isinstance(node, exp.Cast | exp.TryCast):
        return next((type_ for kinds, type_ in _CAST_TYPES if node.to.this in kinds), ColumnType.TEXT)
    if isinstance(node, exp.Predicate | exp.Not | exp.Connector):
        return ColumnType.BOOLEAN
    if isinstance(node, exp.Case):  # sqlglot parses no CASE without a WHEN
        return expression_type(node.args["ifs"][0].args["true"], table)
    if isinstance(node, exp.Sub) and all(
        value_kind(side, table=table) is Kind.DATE for side in (node.this, node.expression)
    ):
        return ColumnType.INTEGER  # date − date: a number of days
    kind = value_kind(node, table=table)
    if kind is Kind.DATE:
        return ColumnType.DATE  # born + 30: a date, not the number arithmetic would suggest
    if kind is Kind.TIMESTAMP:
        return ColumnType.TIMESTAMP
    if kind is Kind.INTERVAL:
        return ColumnType.TEXT
    if isinstance(node, _NUMERIC_FUNCTIONS):
        return ColumnType.REAL
    if isinstance(node, exp.Literal):
        return ColumnType.TEXT if node.is_string else ColumnType.REAL
    return ColumnType.TEXT
