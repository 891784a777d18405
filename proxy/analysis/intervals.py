"""Interval analysis: the range an aggregate's input expression can take, from the policy's bounds.

``SUM(price * qty)`` with price in [0, 100] and qty in [1, 10] sums values in [0, 1000]; that range
is the input's bounds, so its sensitivity follows. The engine still clamps every value to the derived
bounds, so privacy never depends on this analysis being tight or even right — only accuracy does.
An input whose range cannot be derived is refused with a hint to clamp it explicitly:
``veil_clamp(expr, lower, upper)``.

>>> interval(sqlglot.parse_one("price * qty"), table=t)
(0.0, 1000.0)
"""

from __future__ import annotations

import math
from collections.abc import Callable

from sqlglot import exp

from proxy.config import ColumnType, TablePolicy

Interval = tuple[float, float]
UNBOUNDED: Interval = (-math.inf, math.inf)


def interval(node: exp.Expression, *, table: TablePolicy) -> Interval:
    """Bounds of a numeric expression; infinite ends where nothing bounds it."""
    rule = _RULES.get(type(node))
    return rule(node, table) if rule is not None else UNBOUNDED


def _column(node: exp.Expression, table: TablePolicy) -> Interval:
    column = table.column(node.name)
    if column is None or not column.type.is_numeric or column.lower is None or column.upper is None:
        return UNBOUNDED  # a date column's bounds are dates, not numbers
    return (float(column.lower), float(column.upper))


def _literal(node: exp.Expression, table: TablePolicy) -> Interval:
    assert isinstance(node, exp.Literal)
    if node.is_string:
        return UNBOUNDED
    value = float(node.this)
    return (value, value)


def _inner(node: exp.Expression, table: TablePolicy) -> Interval:
    return interval(node.this, table=table)


def _neg(node: exp.Expression, table: TablePolicy) -> Interval:
    low, high = interval(node.this, table=table)
    return (-high, -low)


def _abs(node: exp.Expression, table: TablePolicy) -> Interval:
    low, high = interval(node.this, table=table)
    if low >= 0:
        return (low, high)
    if high <= 0:
        return (-high, -low)
    return (0.0, max(-low, high))


def _operands(node: exp.Expression, table: TablePolicy) -> tuple[Interval, Interval]:
    return interval(node.this, table=table), interval(node.expression, table=table)


def _add(node: exp.Expression, table: TablePolicy) -> Interval:
    (a, b), (c, d) = _operands(node, table)
    return (a + c, b + d)


def _sub(node: exp.Expression, table: TablePolicy) -> Interval:
    (a, b), (c, d) = _operands(node, table)
    return (a - d, b - c)


def _span(values: list[float]) -> Interval:
    """Endpoint products or quotients; an undefined one (0·∞) means no bound."""
    if any(math.isnan(value) for value in values):
        return UNBOUNDED
    return (min(values), max(values))


def _mul(node: exp.Expression, table: TablePolicy) -> Interval:
    (a, b), (c, d) = _operands(node, table)
    return _span([a * c, a * d, b * c, b * d])


def _div(node: exp.Expression, table: TablePolicy) -> Interval:
    """A divisor range containing 0 bounds nothing. Integer division truncates, so widen by one."""
    (a, b), (c, d) = _operands(node, table)
    if c <= 0 <= d or math.isinf(c) or math.isinf(d):
        return UNBOUNDED
    low, high = _span([a / c, a / d, b / c, b / d])
    return (low - 1, high + 1)


def _mod(node: exp.Expression, table: TablePolicy) -> Interval:
    _, (c, d) = _operands(node, table)
    largest = max(abs(c), abs(d))
    return (-largest, largest)


def _union(intervals: list[Interval]) -> Interval:
    return (min(i[0] for i in intervals), max(i[1] for i in intervals)) if intervals else UNBOUNDED


def _case(node: exp.Expression, table: TablePolicy) -> Interval:
    """The union of every THEN and the ELSE; no ELSE means NULL, which aggregates skip."""
    branches = [interval(branch.args["true"], table=table) for branch in node.args.get("ifs") or []]
    default = node.args.get("default")
    if default is not None:
        branches.append(interval(default, table=table))
    return _union(branches)


def _coalesce(node: exp.Expression, table: TablePolicy) -> Interval:
    return _union([interval(part, table=table) for part in [node.this, *node.expressions]])


def _least(node: exp.Expression, table: TablePolicy) -> Interval:
    parts = [interval(part, table=table) for part in [node.this, *node.expressions]]
    return (min(p[0] for p in parts), min(p[1] for p in parts))


def _greatest(node: exp.Expression, table: TablePolicy) -> Interval:
    parts = [interval(part, table=table) for part in [node.this, *node.expressions]]
    return (max(p[0] for p in parts), max(p[1] for p in parts))


def _rounding(node: exp.Expression, table: TablePolicy) -> Interval:
    low, high = interval(node.this, table=table)
    return (low - 1, high + 1)


_RULES: dict[type[exp.Expression], Callable[[exp.Expression, TablePolicy], Interval]] = {
    exp.Column: _column,
    exp.Literal: _literal,
    exp.Paren: _inner,
    exp.Cast: _inner,
    exp.TryCast: _inner,
    exp.Neg: _neg,
    exp.Abs: _abs,
    exp.Add: _add,
    exp.Sub: _sub,
    exp.Mul: _mul,
    exp.Div: _div,
    exp.IntDiv: _div,
    exp.Mod: _mod,
    exp.Case: _case,
    exp.If: _case,
    exp.Coalesce: _coalesce,
    exp.Least: _least,
    exp.Greatest: _greatest,
    exp.Floor: _rounding,
    exp.Ceil: _rounding,
    exp.Round: _rounding,
}


_INTEGER_ARITHMETIC = (
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Mod,
    exp.IntDiv,
    exp.Div,
)  # PostgreSQL: int / int is int


def is_integer(node: exp.Expression, table: TablePolicy) -> bool:
    """Integer-typed: integer columns and literals, and arithmetic that keeps integers integer."""
    if isinstance(node, exp.Paren | exp.Neg | exp.Abs):
        return is_integer(node.this, table)
    if isinstance(node, exp.Literal):
        return not node.is_string and node.this.lstrip("-").isdigit()
    if isinstance(node, exp.Column):
        column = table.column(node.name)
        return column is not None and column.type is ColumnType.INTEGER
    if isinstance(node, exp.Cast | exp.TryCast):
        return node.to.is_type(*exp.DataType.INTEGER_TYPES)
    if isinstance(node, exp.Trunc):
        return True
    if isinstance(node, _INTEGER_ARITHMETIC):
        return is_integer(node.this, table) and is_integer(node.expression, table)
    return False
