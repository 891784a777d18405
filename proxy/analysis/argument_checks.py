"""Arguments checked before any engine query — on every engine.

A function whose *argument* is invalid fails only on the rows that evaluate it: ``CASE WHEN id = 42
AND age = 37 THEN date_trunc('nonsense', born) END`` fails exactly when person 42 is 37, and the
failure would answer that question without noise. So the arguments that choose *what* a function
does — a date part, a LIKE pattern, the digits of ROUND, the positions of SUBSTRING, an interval —
must be literals, and are checked here against what both engines accept. A literal that is
accepted cannot make any row fail; one that is refused is refused for every query alike.

A second group of checks needs the columns' types (so it runs when the query is rewritten for its
engine, still before anything runs): a date is moved only by a literal, an interval is never
scaled, EXTRACT and date_trunc take dates and timestamps — the forms that can leave an engine's
date range, or fail, on one row's value.

>>> check_trunc_unit(sqlglot.parse_one("date_trunc('fortnight', born)"))
InvalidParameterValueError: date_trunc unit "fortnight" is not recognized
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from sqlglot import exp

from proxy.analysis.value_kinds import Kind, value_kind
from proxy.config import TablePolicy
from proxy.errors import InvalidParameterValueError, UnsupportedQueryError

MAX_LITERAL = Decimal("1e308")  # a number literal must fit a double, as it does on every engine
MAX_LITERAL_LENGTH = 400
MAX_ROUND_DIGITS = 100
MAX_POSITION = 2**31 - 1  # SUBSTRING's positions are int4 on PostgreSQL
MAX_INTERVAL_DAYS = 2000 * 366  # an interval literal spans at most about 2,000 years
MAX_DAY_OFFSET = 1_000_000  # days a date may be moved by: from years 1–9999, still a date everywhere
DATE_PARTS = (
    "YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "DOW", "ISODOW", "DOY", "ISOYEAR", "DECADE", "CENTURY",
    "MILLENNIUM", "EPOCH", "JULIAN", "HOUR", "MINUTE", "SECOND", "MILLISECONDS", "MICROSECONDS",
)  # fmt: skip
TRUNC_UNITS = (
    "MICROSECONDS", "MILLISECONDS", "SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR",
    "DECADE", "CENTURY", "MILLENNIUM",
)  # fmt: skip
TIME_PARTS = frozenset({"HOUR", "MINUTE", "SECOND", "MILLISECONDS", "MICROSECONDS"})  # none of a date
INTERVAL_DAYS = {
    "YEAR": 366,
    "MONTH": 31,
    "WEEK": 7,
    "DAY": 1,
    "HOUR": 1 / 24,
    "MINUTE": 1 / 1440,
    "SECOND": 1 / 86400,
}
_PLURALS = {"YEARS": "YEAR", "MONTHS": "MONTH", "WEEKS": "WEEK", "DAYS": "DAY", "HOURS": "HOUR", "MINUTES": "MINUTE", "SECONDS": "SECOND"}  # fmt: skip
_ROW_DEPENDENT = "an argument computed from a row could be invalid for one person's row only"


def canonical_unit(name: str) -> str:
    """``years`` and ``YEAR`` are one unit on both engines."""
    upper = name.upper()
    return _PLURALS.get(upper, upper)


def integer_literal(node: exp.Expression | None) -> int | None:
    """The value of ``5``, ``-5`` or ``(5)``; None for anything else."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Neg):
        inner = integer_literal(node.this)
        return None if inner is None else -inner
    if isinstance(node, exp.Literal) and not node.is_string and node.is_int:
        return int(node.this)
    return None


def check_number_literal(node: exp.Expression) -> None:
    """Numbers beyond a double's range mean different things on the two engines (DuckDB makes them
    infinite, or fails to convert ``'1e400'``), and a huge one brings NUMERIC on PostgreSQL closer to
    overflowing. A string that spells such a number is refused too: either engine may read it as one."""
    assert isinstance(node, exp.Literal)
    text = str(node.this)
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        if node.is_string:
            return  # text, not a number
        value = Decimal("NaN")
    if node.is_string and not value.is_finite():
        return  # 'Infinity' and 'NaN' are values of both engines' floating types
    if len(text) > MAX_LITERAL_LENGTH or not value.is_finite() or abs(value) > MAX_LITERAL:
        raise UnsupportedQueryError(
            f"the number {text[:40]}{'…' if len(text) > 40 else ''} is out of the range Veil computes with",
            hint=f"write numbers of at most {MAX_LITERAL_LENGTH} characters and magnitude at most 1e308",
        )


_T = exp.DataType.Type
CAST_TARGETS = frozenset({
    _T.SMALLINT, _T.INT, _T.BIGINT, _T.FLOAT, _T.DOUBLE, _T.DECIMAL, _T.TEXT, _T.VARCHAR, _T.CHAR, _T.DATE,
    _T.TIMESTAMP, _T.TIMESTAMPTZ, _T.BOOLEAN, _T.INTERVAL,
})  # fmt: skip


def check_cast_target(node: exp.Expression) -> None:
    """A cast to a type only one engine has (``regclass``, an enum) fails there, or looks things up."""
    target = node.to
    if target.this not in CAST_TARGETS:
        raise UnsupportedQueryError(
            f"CAST to {target.sql(dialect='postgres').lower()} is not supported in a query on private data",
            hint="cast to smallint, integer, bigint, real, double precision, numeric, text, varchar, date, "
            "timestamp, boolean or interval",
        )


def check_like_pattern(node: exp.Expression) -> None:
    """PostgreSQL fails on a pattern that ends with its escape character (a backslash), and only when
    a row's text gets that far in the pattern; so the pattern must be a literal, and a valid one."""
    pattern = node.expression
    while isinstance(pattern, exp.Paren):
        pattern = pattern.this
    keyword = "ILIKE" if isinstance(node, exp.ILike) else "LIKE"
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        raise UnsupportedQueryError(
            f"the pattern of {keyword} must be a string literal in a query on private data",
            detail=_ROW_DEPENDENT,
            hint=f"write the pattern itself: name {keyword} 'A%'",
        )
    text = str(pattern.this)
    if (len(text) - len(text.rstrip("\\"))) % 2 == 1:
        raise InvalidParameterValueError(
            f"{keyword} pattern must not end with escape character",
            hint="double the final backslash to match a backslash: '…\\\\'",
        )


def check_round_digits(node: exp.Expression) -> None:
    decimals = node.args.get("decimals")
    if decimals is None:
        return
    digits = integer_literal(decimals)
    if digits is None:
        raise UnsupportedQueryError(
            "the digits of ROUND must be an integer literal in a query on private data",
            detail=_ROW_DEPENDENT,
            hint="write them as a number: ROUND(x, 2)",
        )
    if abs(digits) > MAX_ROUND_DIGITS:
        raise InvalidParameterValueError(
            f"ROUND to {digits} digits is out of range",
            hint=f"round to between -{MAX_ROUND_DIGITS} and {MAX_ROUND_DIGITS} digits",
        )


def check_substring_positions(node: exp.Expression) -> None:
    """``SUBSTRING(s, start, length)``: a negative length fails on PostgreSQL, and ``SUBSTRING(s FROM
    'regex')`` compiles its pattern only on the rows that reach it."""
    start, length = integer_literal(node.args.get("start")), node.args.get("length")
    count = integer_literal(length) if length is not None else 0
    if start is None or count is None:
        raise UnsupportedQueryError(
            "the start and length of SUBSTRING must be integer literals in a query on private data",
            detail=_ROW_DEPENDENT,
            hint="write them as numbers: SUBSTRING(name, 1, 3); patterns (FROM 'regex') are not supported",
        )
    if count < 0 or max(abs(start), count) > MAX_POSITION:
        raise InvalidParameterValueError(
            f"SUBSTRING length {count} or start {start} is out of range",
            hint="use a length of at least 0 and positions below 2147483648",
        )


def _unit_name(node: exp.Expression | None) -> str | None:
    """A unit written as a keyword (``year``) or a string (``'year'``); None if computed."""
    if isinstance(node, exp.Var) or (isinstance(node, exp.Literal) and node.is_string):
        return canonical_unit(str(node.this))
    return None


def check_date_part(node: exp.Expression) -> None:
    """``EXTRACT(part FROM x)`` and ``date_part('part', x)``: a part both engines know for dates and
    timestamps (``date_part(name, born)`` reads the column as the part's *name*, and fails)."""
    part = _unit_name(node.this)
    if part not in DATE_PARTS:
        raise InvalidParameterValueError(
            f'EXTRACT field "{str(node.this.name or node.this.sql()).lower()}" is not recognized',
            hint=f"use one of: {', '.join(p.lower() for p in DATE_PARTS)}",
        )


def check_trunc_unit(node: exp.Expression) -> None:
    unit = _unit_name(node.args.get("unit"))
    if unit not in TRUNC_UNITS:
        written = node.args["unit"].name if node.args.get("unit") is not None else ""
        raise InvalidParameterValueError(
            f'date_trunc unit "{written.lower()}" is not recognized',
            hint=f"use one of: {', '.join(u.lower() for u in TRUNC_UNITS)}",
        )
    if node.args.get("zone") is not None:
        raise UnsupportedQueryError(
            "date_trunc with a time zone is not supported in a query on private data",
            hint="truncate in the session's time zone: date_trunc('day', born)",
        )


def check_interval(node: exp.Expression) -> None:
    """``INTERVAL '3' DAY`` or ``INTERVAL '3 days'``: one integer and one unit, at most about 2,000
    years — so that a date from year 1 to 9999 moved by it stays in every engine's range."""
    value = node.this
    amount = _integer_text(value)
    unit = _unit_name(node.args.get("unit"))
    if amount is None or unit not in INTERVAL_DAYS:
        raise UnsupportedQueryError(
            f"interval {node.sql(dialect='postgres')} is not supported in a query on private data",
            hint="write one whole number and one unit: INTERVAL '90 days', INTERVAL '3' MONTH",
        )
    if abs(amount) * INTERVAL_DAYS[unit] > MAX_INTERVAL_DAYS:
        raise InvalidParameterValueError(
            f"interval {node.sql(dialect='postgres')} is out of range",
            hint="use intervals of at most 2000 years",
        )


def _integer_text(node: exp.Expression | None) -> int | None:
    if not isinstance(node, exp.Literal):
        return None
    text = str(node.this).strip()
    digits = text[1:] if text[:1] in "+-" else text
    return int(text) if digits.isdigit() and len(digits) <= 20 else None


def check_moved(node: exp.Expression, table: TablePolicy) -> None:
    """``born + 30``, ``born - INTERVAL '1' YEAR``: a date moves by a literal, so that from any year
    between 1 and 9999 it stays a valid date on both engines; a computed interval is not added."""
    operands = (node.this, node.expression)
    kinds = [value_kind(operand, table=table) for operand in operands]
    for operand, kind in zip(operands, kinds, strict=True):
        if kind is Kind.INTERVAL and not _interval_literal(operand):
            raise UnsupportedQueryError(
                "arithmetic on a computed interval is not supported in a query on private data",
                detail="its result could leave the timestamp range for one person's value only",
                hint="move dates by an interval literal: born + INTERVAL '30' DAY",
            )
        offset = integer_literal(operand)
        if kind is Kind.NUMBER and Kind.DATE in kinds and (offset is None or abs(offset) > MAX_DAY_OFFSET):
            raise UnsupportedQueryError(
                "moving a date by a computed or out-of-range number of days is not supported in a query on "
                "private data",
                detail="a number of days computed from a row could leave the date range for that row only",
                hint=f"add a literal of at most {MAX_DAY_OFFSET} days (born + 30), or an interval literal",
            )


def _interval_literal(node: exp.Expression) -> bool:
    while isinstance(node, exp.Paren | exp.Neg):
        node = node.this
    return isinstance(node, exp.Interval)


def check_not_scaling_an_interval(node: exp.Expression, table: TablePolicy) -> None:
    """PostgreSQL multiplies an interval in floating point, which overflows on a large factor."""
    if Kind.INTERVAL in (value_kind(node.this, table=table), value_kind(node.expression, table=table)):
        raise UnsupportedQueryError(
            "multiplying or dividing an interval is not supported in a query on private data",
            detail="the result could leave the interval range for one person's value only",
            hint="write the interval itself: INTERVAL '90' DAY",
        )


def check_moment_argument(node: exp.Expression, table: TablePolicy) -> None:
    """EXTRACT and date_trunc of an interval fail for some parts (week, dow…) on the rows they reach."""
    argument = node.expression if isinstance(node, exp.Extract) else node.this
    kind = value_kind(argument, table=table)
    if not kind.is_moment:
        function = "EXTRACT" if isinstance(node, exp.Extract) else "date_trunc"
        raise UnsupportedQueryError(
            f"{function} of a {kind.value} is not supported in a query on private data",
            hint=f"use {function} on dates and timestamps",
        )
