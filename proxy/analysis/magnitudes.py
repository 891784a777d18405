"""How many decimal digits a number computed on PostgreSQL can have — so that NUMERIC cannot overflow.

On PostgreSQL Veil computes with NUMERIC (rewrite/safe_predicates.py): no integer or float overflow,
but NUMERIC itself ends at 131,072 digits before the decimal point, and ``age * 1e100000 * 1e100000``
fails with "value overflows numeric format" — on the rows that reach it, so a CASE that reaches it for
one person only would reveal that person's value. The scale never overflows: PostgreSQL rounds it
to 16,383 digits, so a nonzero result is never below 10⁻¹⁶³⁸³.

Each expression gets a bound ``Digits(high, low)``: ``|x| < 10**high``, and ``x ≠ 0 ⇒ |x| ≥ 10**low``
(what a division by ``x`` can multiply by). Numeric columns are read saturated at ±1e308; literals are
bounded by their own text; anything else by the rules below. The bounds are loose on purpose: a query
is refused only if some intermediate result could come near the limit, which takes hundreds of
multiplications or several divisions by unbounded values — never an ordinary query.

>>> largest_digits(sqlglot.parse_one("age * 1e100000 * 1e100000"), table=t)
200311
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from proxy.analysis.value_kinds import Kind, choice_values, value_kind
from proxy.config import TablePolicy

NUMERIC_DIGITS = 131_072  # PostgreSQL's NUMERIC: digits before the decimal point
NUMERIC_SCALE = 16_383  # and after it: results are rounded there
COLUMN_DIGITS = 309  # numeric columns are read saturated at ±1e308
SMALL_DIGITS = 20  # an integer result (a length, a day count, a date part): int8 at most


@dataclass(frozen=True)
class Digits:
    high: int  # |x| < 10**high
    low: int = -NUMERIC_SCALE  # x ≠ 0 ⇒ |x| ≥ 10**low

    def __post_init__(self) -> None:
        object.__setattr__(self, "low", max(self.low, -NUMERIC_SCALE))


SMALL = Digits(SMALL_DIGITS, 0)


def largest_digits(expression: exp.Expression, *, table: TablePolicy) -> int:
    """The most digits any intermediate number of ``expression`` can have (conditions included)."""
    known: dict[int, Digits] = {}
    return max(_digits(node, table, known).high for node in expression.walk())


def _digits(node: exp.Expression, table: TablePolicy, known: dict[int, Digits]) -> Digits:
    if id(node) not in known:
        rule = _RULES.get(type(node))
        known[id(node)] = rule(node, lambda child: _digits(child, table, known), table) if rule else SMALL
    return known[id(node)]


Of = Callable[[exp.Expression], Digits]


def _number(text: str) -> Digits:
    """A literal's own size; text that is not a number fails when the query is planned, not per row."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        return SMALL
    if not value.is_finite() or value == 0:
        return Digits(1, 0)
    return Digits(value.adjusted() + 1, value.adjusted())


def _literal(node: exp.Expression, of: Of, table: TablePolicy) -> Digits:
    return _number(str(node.this))


def _column(node: exp.Expression, of: Of, table: TablePolicy) -> Digits:
    return Digits(COLUMN_DIGITS) if value_kind(node, table=table) is Kind.NUMBER else SMALL


def _inner(node: exp.Expression, of: Of, table: TablePolicy) -> Digits:
    return of(node.this)


def _sum(node: exp.Expression, of: Of, table: TablePolicy) -> Digits:
    """A sum carries one digit more; a difference can be as small as the scale allows."""
    return Digits(max(of(node.this).high, of(node.expression).high) + 1)


def _product(node: exp.Expression, of: Of, table: TablePolicy) -> Digits:
    left, right = of(node.this), of(node.expression)
    return Digits(left.high + right.high, left.low + right.low)


def _quotient(node: exp.Expression, of: Of, table: TablePolicy) -> Digits:
    left, right = of(node.this), of(node.expression)
    return Digits(left.high - right.low + 1, left.low - right.high)


def _integer_quotient(node: exp.Expression, of: Of, table: TablePolicy) -> Digits:
    return Digits(_quotient(node, of, table).high, 0)


def _remainder(node: exp.Expression, of: Of, table: TablePolicy) -> Digits:
    return Digits(min(of(node.this).high, of(node.expression).high))


def _choice(node: exp.Expression, of: Of, table: TablePolicy) -> Digits:
    branches = [of(branch) for branch in choice_values(node)] or [SMALL]
    return Digits(max(b.high for b in branches), min(b.low for b in branches))


def _rounded(node: exp.Expression, of: Of, table: TablePolicy) -> Digits:
    return Digits(of(node.this).high + 1)


def _root(node: exp.Expression, of: Of, table: TablePolicy) -> Digits:
    return Digits(of(node.this).high // 2 + 1)


def _logarithm(node: exp.Expression, of: Of, table: TablePolicy) -> Digits:
    return Digits(7)  # |ln x| < 10⁶ for any NUMERIC x


def _bounded_power(node: exp.Expression, of: Of, table: TablePolicy) -> Digits:
    return Digits(COLUMN_DIGITS)  # exp(x) and power(a, b) are computed only up to e^709 on PostgreSQL


_RULES: dict[type[exp.Expression], Callable[[exp.Expression, Of, TablePolicy], Digits]] = {
    exp.Literal: _literal,
    exp.Column: _column,
    exp.Paren: _inner,
    exp.Neg: _inner,
    exp.Abs: _inner,
    exp.Cast: _inner,
    exp.TryCast: _inner,
    exp.Add: _sum,
    exp.Sub: _sum,
    exp.Mul: _product,
    exp.Div: _quotient,
    exp.IntDiv: _integer_quotient,
    exp.Mod: _remainder,
    exp.Case: _choice,
    exp.If: _choice,
    exp.Coalesce: _choice,
    exp.Nullif: _choice,
    exp.Greatest: _choice,
    exp.Least: _choice,
    exp.Floor: _rounded,
    exp.Ceil: _rounded,
    exp.Round: _rounded,
    exp.Sqrt: _root,
    exp.Ln: _logarithm,
    exp.Log: _logarithm,
    exp.Exp: _bounded_power,
    exp.Pow: _bounded_power,
}
