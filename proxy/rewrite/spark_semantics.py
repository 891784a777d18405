"""PostgreSQL's meaning on Spark: where Spark SQL reads the same text differently, rewrite it.

Analysts write PostgreSQL; sqlglot translates the syntax to Spark's, but not what differs in meaning:

- ``a / b`` on integers truncates in PostgreSQL (37 / 10 = 3) and divides exactly in Spark (3.7):
  it becomes Spark's ``a DIV b``, which truncates toward zero as PostgreSQL does (and is NULL for b = 0);
- ``date − date`` is a number of days in PostgreSQL, an interval in Spark: ``DATEDIFF(a, b)``;
- ``NUMERIC``/``DECIMAL`` without a precision is unbounded in PostgreSQL and ``DECIMAL(10,0)`` in
  Spark, which would drop every fraction: it becomes ``DOUBLE``;
- ``EXTRACT``: Spark numbers the days of the week from 1 (PostgreSQL's ``dow`` from 0), names
  ``isodow`` and ``isoyear`` otherwise, and has no ``epoch``, ``julian``, ``decade``, ``century``,
  ``millennium``, ``milliseconds`` or ``microseconds``: each is computed from the parts it has;
- ``date_trunc`` to a decade, century or millennium is NULL in Spark; it is computed from the year,
  and the plural sub-second units get Spark's singular names.

Runs on each filter, key and argument before its casts become ``TRY_CAST`` (rewrite/safe_predicates.py),
with ``spark.sql.ansi.enabled = false`` on the session (backends/spark.py), so nothing here can fail.

>>> spark_semantics(sqlglot.parse_one("EXTRACT(dow FROM day) = 0 AND age / 10 = 3"), table=t).sql("spark")
'(EXTRACT(DAYOFWEEK FROM day) - 1) = 0 AND age DIV 10 = 3'
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from proxy.analysis.argument_checks import canonical_unit
from proxy.analysis.intervals import is_integer
from proxy.analysis.value_kinds import Kind, value_kind
from proxy.config import TablePolicy
from proxy.rewrite.post_order import transform_post_order

UNIX_EPOCH_JULIAN_DAY = 2440588  # the Julian day number of 1970-01-01
SECONDS_PER_DAY = 86400
_RENAMED_PARTS = {"ISODOW": "DAYOFWEEK_ISO", "ISOYEAR": "YEAROFWEEK"}
_SPARK_TRUNC_UNITS = {"MICROSECONDS": "MICROSECOND", "MILLISECONDS": "MILLISECOND"}
_YEAR_SPANS = {"DECADE": 10, "CENTURY": 100, "MILLENNIUM": 1000}


def spark_semantics(expression: exp.Expression, *, table: TablePolicy) -> exp.Expression:
    """``expression`` (rewritten in place: pass a copy) with PostgreSQL's meaning in Spark SQL. What
    is integer, a date or a timestamp is decided on the tree as written, before anything changes."""
    kinds: dict[int, Callable[[exp.Expression], exp.Expression]] = {}
    for node in expression.walk():
        rule = _rule(node, table)
        if rule is not None:
            kinds[id(node)] = rule

    def replace(node: exp.Expression) -> exp.Expression:
        rule = kinds.get(id(node))
        return rule(node) if rule is not None else node

    return transform_post_order(expression, replace)


def _rule(node: exp.Expression, table: TablePolicy) -> Callable[[exp.Expression], exp.Expression] | None:
    if type(node) is exp.Div and is_integer(node.this, table) and is_integer(node.expression, table):
        return _integer_division
    if isinstance(node, exp.Sub):
        kinds = (value_kind(node.this, table=table), value_kind(node.expression, table=table))
        if kinds == (Kind.DATE, Kind.DATE):
            return _days_between
    if isinstance(node, exp.Cast | exp.TryCast) and _unbounded_decimal(node.to):
        return _as_double
    if (
        isinstance(node, exp.Cast | exp.TryCast)
        and node.to.this in exp.DataType.INTEGER_TYPES
        and value_kind(node.this, table=table) is Kind.NUMBER
        and not is_integer(node.this, table)
    ):
        return _rounded
    if isinstance(node, exp.Extract):
        return _extract
    if isinstance(node, exp.TimestampTrunc | exp.DateTrunc):
        return _truncate
    return None


def _integer_division(node: exp.Expression) -> exp.Expression:
    return exp.Paren(this=exp.IntDiv(this=node.this, expression=node.expression))


def _days_between(node: exp.Expression) -> exp.Expression:
    return exp.DateDiff(this=node.this, expression=node.expression)


def _rounded(node: exp.Expression) -> exp.Expression:
    """PostgreSQL rounds a number cast to an integer (9.75 → 10, half away from zero for NUMERIC);
    Spark truncates (9). ROUND first: Spark's rounds half away from zero too."""
    node.set("this", exp.Round(this=node.this))
    return node


def _unbounded_decimal(to: exp.DataType) -> bool:
    return to.this is exp.DataType.Type.DECIMAL and not to.expressions


def _as_double(node: exp.Expression) -> exp.Expression:
    node.set("to", exp.DataType.build("DOUBLE"))
    return node


def _part(name: str, value: exp.Expression) -> exp.Extract:
    return exp.Extract(this=exp.var(name), expression=value.copy())


def _extract(node: exp.Expression) -> exp.Expression:
    part, value = canonical_unit(str(node.this.name)), node.expression
    if part in _RENAMED_PARTS:
        return _part(_RENAMED_PARTS[part], value)
    if part == "DOW":
        return exp.Paren(this=exp.Sub(this=_part("DAYOFWEEK", value), expression=exp.Literal.number(1)))
    if part in ("MILLISECONDS", "MICROSECONDS"):
        scale = 1000 if part == "MILLISECONDS" else 1_000_000
        return exp.Paren(this=exp.Mul(this=_part("SECOND", value), expression=exp.Literal.number(scale)))
    if part == "EPOCH":
        return exp.Paren(this=_seconds_since_1970(value))
    if part == "JULIAN":
        seconds = exp.Paren(this=_seconds_since_1970(value))
        days = exp.Div(this=seconds, expression=exp.Literal.number(SECONDS_PER_DAY))
        return exp.Paren(this=exp.Add(this=days, expression=exp.Literal.number(UNIX_EPOCH_JULIAN_DAY)))
    if part in _YEAR_SPANS:
        return _year_span(_part("YEAR", value), _YEAR_SPANS[part], decade=part == "DECADE")
    return node


def _seconds_since_1970(value: exp.Expression) -> exp.Expression:
    """Days since 1970-01-01 times 86,400, plus the time of day (0 for a date), fractions included."""
    days = exp.DateDiff(this=value.copy(), expression=exp.cast(exp.Literal.string("1970-01-01"), "DATE"))
    seconds: exp.Expression = exp.Mul(this=days, expression=exp.Literal.number(SECONDS_PER_DAY))
    for part, factor in (("HOUR", 3600), ("MINUTE", 60)):
        seconds = exp.Add(
            this=seconds, expression=exp.Mul(this=_part(part, value), expression=exp.Literal.number(factor))
        )
    return exp.Add(this=seconds, expression=_part("SECOND", value))


def _year_span(year: exp.Expression, span: int, *, decade: bool) -> exp.Expression:
    """PostgreSQL's decade is year / 10 (2024 → 202); its century and millennium start at year 1
    (2000 → 20, 2001 → 21): ceil(year / span) for the years Veil reads (1–9999)."""
    quotient = exp.Div(this=year, expression=exp.Literal.number(span))
    rounded = exp.Floor(this=quotient) if decade else exp.Ceil(this=quotient)
    return exp.cast(rounded, "BIGINT")


def _truncate(node: exp.Expression) -> exp.Expression:
    unit = canonical_unit(str(node.args["unit"].name))
    if unit in _SPARK_TRUNC_UNITS:
        node.set("unit", exp.var(_SPARK_TRUNC_UNITS[unit]))
        return node
    if unit not in _YEAR_SPANS:
        return node
    span = _YEAR_SPANS[unit]
    year = _part("YEAR", node.this)
    if unit == "DECADE":  # 2024 → 2020
        first = exp.Mul(
            this=exp.Floor(this=exp.Div(this=year, expression=exp.Literal.number(span))),
            expression=exp.Literal.number(span),
        )
    else:  # 2024 → 2001, 2000 → 1901
        start = exp.Floor(
            this=exp.Div(
                this=exp.Paren(this=exp.Sub(this=year, expression=exp.Literal.number(1))),
                expression=exp.Literal.number(span),
            )
        )
        first = exp.Add(
            this=exp.Mul(this=start, expression=exp.Literal.number(span)), expression=exp.Literal.number(1)
        )
    one = exp.Literal.number(1)
    day = exp.func("make_date", exp.cast(first, "INT"), one, one.copy())
    return exp.cast(day, "TIMESTAMP")
