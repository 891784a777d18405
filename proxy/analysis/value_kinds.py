"""The kind of value an expression computes — number, text, date, timestamp, interval, boolean — as
PostgreSQL would type it, from the policy's column types alone.

The rules that make an expression unable to fail on PostgreSQL depend on it: ``d + 30`` moves a date
(its result must stay in the date range), ``age + 30`` adds numbers (its result must stay in
NUMERIC's range), ``EXTRACT(hour FROM d)`` fails on a date but not on a timestamp.

>>> value_kind(sqlglot.parse_one("born + INTERVAL '1' DAY"), table=t)
<Kind.TIMESTAMP: 'timestamp'>
"""

from __future__ import annotations

from enum import StrEnum

from sqlglot import exp

from proxy.config import ColumnType, TablePolicy


class Kind(StrEnum):
    NUMBER = "number"
    TEXT = "text"
    BOOLEAN = "boolean"
    DATE = "date"
    TIMESTAMP = "timestamp"
    INTERVAL = "interval"
    UNKNOWN = "unknown"  # NULL, or a combination the engine refuses when it plans the query

    @property
    def is_moment(self) -> bool:
        """A point in time: the values that date arithmetic can push out of range."""
        return self in (Kind.DATE, Kind.TIMESTAMP)


_COLUMN_KINDS = {
    ColumnType.INTEGER: Kind.NUMBER,
    ColumnType.REAL: Kind.NUMBER,
    ColumnType.TEXT: Kind.TEXT,
    ColumnType.DATE: Kind.DATE,
    ColumnType.TIMESTAMP: Kind.TIMESTAMP,
    ColumnType.BOOLEAN: Kind.BOOLEAN,
}
_CAST_KINDS = (
    (exp.DataType.INTEGER_TYPES | exp.DataType.REAL_TYPES | {exp.DataType.Type.DECIMAL}, Kind.NUMBER),
    (exp.DataType.TEXT_TYPES, Kind.TEXT),
    ({exp.DataType.Type.DATE}, Kind.DATE),
    (exp.DataType.TEMPORAL_TYPES - {exp.DataType.Type.DATE}, Kind.TIMESTAMP),
    ({exp.DataType.Type.INTERVAL}, Kind.INTERVAL),
    ({exp.DataType.Type.BOOLEAN}, Kind.BOOLEAN),
)
_NUMBER_RESULTS = (
    exp.Extract, exp.Length, exp.StrPosition, exp.Sign, exp.Floor, exp.Ceil, exp.Round, exp.Trunc,
    exp.Sqrt, exp.Ln, exp.Log, exp.Exp, exp.Pow, exp.Mod, exp.IntDiv, exp.Abs,
)  # fmt: skip
_TEXT_RESULTS = (exp.Lower, exp.Upper, exp.Substring, exp.Trim, exp.DPipe, exp.Concat)
_BOOLEAN_RESULTS = (exp.Predicate, exp.Connector, exp.Not, exp.Xor, exp.Boolean)
_CHOICES = (exp.Case, exp.If, exp.Coalesce, exp.Nullif, exp.Greatest, exp.Least)


def value_kind(node: exp.Expression, *, table: TablePolicy) -> Kind:
    if isinstance(node, exp.Paren | exp.Neg):
        return value_kind(node.this, table=table)
    if isinstance(node, exp.Column):
        column = table.column(node.name)
        return _COLUMN_KINDS[column.type] if column is not None else Kind.UNKNOWN
    if isinstance(node, exp.Literal):
        return Kind.TEXT if node.is_string else Kind.NUMBER
    if isinstance(node, exp.Cast | exp.TryCast):
        return next((kind for types, kind in _CAST_KINDS if node.to.this in types), Kind.UNKNOWN)
    if isinstance(node, exp.Interval):
        return Kind.INTERVAL
    if isinstance(node, exp.CurrentDate):
        return Kind.DATE
    if isinstance(node, exp.TimestampTrunc | exp.DateTrunc):
        return Kind.TIMESTAMP  # PostgreSQL's date_trunc of a date is a timestamp with time zone
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div):
        return _arithmetic_kind(node, table)
    if isinstance(node, _CHOICES):
        return _choice_kind(node, table)
    for results, kind in ((_NUMBER_RESULTS, Kind.NUMBER), (_TEXT_RESULTS, Kind.TEXT)):
        if isinstance(node, results):
            return kind
    return Kind.BOOLEAN if isinstance(node, _BOOLEAN_RESULTS) else Kind.UNKNOWN


N, D, T, IV = Kind.NUMBER, Kind.DATE, Kind.TIMESTAMP, Kind.INTERVAL
_OPERATORS: dict[type[exp.Expression], dict[tuple[Kind, Kind], Kind]] = {  # PostgreSQL's operator table
    exp.Add: {(N, N): N, (D, N): D, (N, D): D, (D, IV): T, (T, IV): T, (IV, D): T, (IV, T): T, (IV, IV): IV},
    exp.Sub: {
        (N, N): N, (D, N): D, (D, D): N, (D, T): IV, (T, D): IV, (T, T): IV, (D, IV): T, (T, IV): T, (IV, IV): IV,
    },
    exp.Mul: {(N, N): N, (IV, N): IV, (N, IV): IV},
    exp.Div: {(N, N): N, (IV, N): IV},
}  # fmt: skip


def _arithmetic_kind(node: exp.Expression, table: TablePolicy) -> Kind:
    """date ± integer is a date, date − date an integer, a moment ± interval a timestamp, moment −
    moment an interval, an interval scaled an interval; anything else the engine refuses to plan."""
    operands = (value_kind(node.this, table=table), value_kind(node.expression, table=table))
    return _OPERATORS[type(node)].get(operands, Kind.UNKNOWN)


def _choice_kind(node: exp.Expression, table: TablePolicy) -> Kind:
    """CASE, COALESCE, NULLIF, GREATEST, LEAST: the first branch whose kind is known."""
    for branch in choice_values(node):
        kind = value_kind(branch, table=table)
        if kind is not Kind.UNKNOWN:
            return kind
    return Kind.UNKNOWN


def choice_values(node: exp.Expression) -> list[exp.Expression]:
    """The expressions a CASE, IF, COALESCE, NULLIF, GREATEST or LEAST can return (not its conditions)."""
    if isinstance(node, exp.Case):
        branches = [branch.args["true"] for branch in node.args.get("ifs") or []]
        default = node.args.get("default")
        return branches + ([default] if default is not None else [])
    if isinstance(node, exp.If):
        return [part for part in (node.args.get("true"), node.args.get("false")) if part is not None]
    if isinstance(node, exp.Nullif):
        return [node.this]
    return [node.this, *node.expressions]
