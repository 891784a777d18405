"""Make a filter, a group key or an aggregate's argument unable to fail on any single row.

If a query's success depended on one private value — ``1 % CASE WHEN id = 42 AND age = 30 THEN 0
ELSE 1 END``, an overflow, a cast of ``'Alice'`` to INTEGER — the error itself would answer a
yes/no question about that person, for free. Which functions are accepted, and how each is made
safe on each engine, is declared once in analysis/function_safety.py; this module does the rewrites.

- **DuckDB**: every CAST becomes TRY_CAST and the whole expression runs under ``TRY(…)``, which turns
  any runtime error into NULL: the row is simply not selected, as if the condition were false.
- **Spark** has no TRY either, but with ANSI mode off (``spark.sql.ansi.enabled = false``, set on every
  session by backends/spark.py) a division by zero, a failed cast, a domain error or a decimal
  overflow is NULL, not an error (an integer overflow wraps around). Casts become TRY_CAST, and
  rewrite/spark_semantics.py gives PostgreSQL's meaning where Spark's differs (integer division,
  date − date, EXTRACT's parts, date_trunc to decades).
- **PostgreSQL** has no TRY, so the expression is made error-free by construction, node by node from
  the leaves up: every number is NUMERIC (columns saturated at ±1e308 where they feed arithmetic,
  integer literals and integer results cast), so nothing overflows short of NUMERIC's own 131,072
  digits — and an expression that could reach those is refused (analysis/magnitudes.py); divisors become ``NULLIF(divisor, 0)``;
  square roots, logarithms, exponentials and powers are computed only where defined; dates and
  timestamps that are moved or truncated are read only within years 1–9999; casts are kept only
  where they cannot fail. What cannot be made safe is refused before any engine query runs
  (:func:`refuse_what_could_fail`).

>>> error_free(sqlglot.parse_one("CAST(x AS INT) > 1 / y"), table=t, dialect="duckdb").sql("duckdb")
'TRY(TRY_CAST(x AS INT) > 1 / y)'
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from sqlglot import exp

from proxy.analysis.argument_checks import TIME_PARTS, canonical_unit, integer_literal
from proxy.analysis.function_safety import check_argument_kinds
from proxy.analysis.intervals import is_integer
from proxy.analysis.magnitudes import NUMERIC_DIGITS, largest_digits
from proxy.analysis.shape import QueryShape
from proxy.analysis.value_kinds import Kind, value_kind
from proxy.config import TablePolicy
from proxy.errors import PolicyViolationError
from proxy.rewrite.integer_division import postgres_integer_division
from proxy.rewrite.post_order import transform_post_order
from proxy.rewrite.spark_semantics import spark_semantics

SATURATION = "1e308"  # numeric columns are read within ±1e308, a double's range
FIRST_DAY, DAY_AFTER_LAST = "0001-01-01", "10000-01-01"  # moved or truncated moments: years 1–9999
MAX_EXPONENT = "709"  # e^709 is about the largest double
INTEGER_RANGES = {
    exp.DataType.Type.SMALLINT: 2**15,
    exp.DataType.Type.INT: 2**31,
    exp.DataType.Type.BIGINT: 2**63,
}
_WIDENING = exp.DataType.REAL_TYPES | {exp.DataType.Type.DECIMAL}

Rule = Callable[[exp.Expression, exp.Expression, TablePolicy], exp.Expression]


def error_free(condition: exp.Expression, *, table: TablePolicy, dialect: str) -> exp.Expression:
    """``condition`` made unable to fail on any row of ``table`` in ``dialect``, or refused."""
    check_argument_kinds(condition, table=table)
    if dialect == "duckdb":
        postgres_semantics = postgres_integer_division(condition.copy(), table=table)
        return exp.Try(this=cast_to_try_cast(_postgres_domains(postgres_semantics, table)))
    if dialect == "spark":  # no TRY in Spark: ANSI mode off (backends/spark.py) answers NULL instead
        tried = cast_to_try_cast(_postgres_domains(spark_semantics(condition.copy(), table=table), table))
        for node in tried.find_all(exp.TryCast):
            node.set("safe", True)  # sqlglot writes an unsafe TRY_CAST as Spark's (ANSI-dependent) CAST
        return tried
    return _postgres_error_free(condition, table)


def _postgres_domains(expression: exp.Expression, table: TablePolicy) -> exp.Expression:
    """DuckDB and Spark answer NaN or ±Infinity where PostgreSQL fails — and TRY does not catch them, since
    nothing failed: square roots, logarithms, exponentials and powers are computed only where defined, as
    for PostgreSQL, so that a row is NULL there on every engine. Without it DuckDB counted
    ``WHERE sqrt(x) > 1`` true for every negative x (NaN sorts above every number in DuckDB), and
    ``power(a, 200) > 1`` true where PostgreSQL's value overflows."""

    def guard(node: exp.Expression) -> exp.Expression:
        rule = _DOMAIN_RULES.get(type(node))
        return rule(node, node, table) if rule is not None else node

    return transform_post_order(expression, guard)


def cast_to_try_cast(expression: exp.Expression) -> exp.Expression:
    """Every CAST, nested ones included (``expression`` is rewritten in place)."""

    def replace(node: exp.Expression) -> exp.Expression:
        return exp.TryCast(this=node.this, to=node.to) if type(node) is exp.Cast else node

    return transform_post_order(expression, replace)


def refuse_what_could_fail(shape: QueryShape, *, dialect: str) -> None:
    """Rewrite every expression of a query once before its first engine query — even one over public
    values — so that a refusal never comes after anything has run."""
    for expression, table in _engine_expressions(shape):
        error_free(expression, table=table, dialect=dialect)


def _engine_expressions(shape: QueryShape) -> Iterator[tuple[exp.Expression, TablePolicy]]:
    """What rewrite/bound_contributions.py makes error-free: filters, key and value expressions."""
    if shape.where is not None:
        yield shape.where, shape.table
    if shape.source is not None and (where := shape.source.select.args.get("where")) is not None:
        yield where.this, shape.source.table
    if shape.source is not None:  # a per-person subquery's aggregate arguments
        for aggregate in shape.source.select.find_all(exp.AggFunc):
            argument = aggregate.this
            for part in argument.expressions if isinstance(argument, exp.Distinct) else [argument]:
                if part is not None and not isinstance(part, exp.Star):
                    yield part, shape.source.table
    for key in shape.group_keys:
        if not key.is_column:
            yield key.expression, shape.table
    for aggregate in shape.aggregates:
        for source in aggregate.inputs:
            if not isinstance(source.expression, exp.Column):
                yield source.expression, shape.table


def _refusal(what: str, *, hint: str) -> PolicyViolationError:
    return PolicyViolationError(
        f"{what} is not allowed on private values of a PostgreSQL dataset: it can fail on a single row's value",
        detail="a query that fails for one person's value would reveal it without noise",
        hint=hint,
    )


def _postgres_error_free(expression: exp.Expression, table: TablePolicy) -> exp.Expression:
    if largest_digits(expression, table=table) >= NUMERIC_DIGITS:
        raise _refusal(
            "arithmetic whose numbers could exceed NUMERIC's 131,072 digits",
            hint="multiply or divide by fewer or smaller factors",
        )
    return _safe(expression, table, integer=False, operand=False)


def _safe(node: exp.Expression, table: TablePolicy, *, integer: bool, operand: bool) -> exp.Expression:
    """``node`` made unable to fail, children first. ``integer``: PostgreSQL needs this argument as an
    integer (ROUND's digits, SUBSTRING's positions, a date's day offset), so a literal stays one.
    ``operand``: the value may feed arithmetic, so a column is read saturated (a comparison needs not)."""
    if integer and integer_literal(node) is not None:
        return node.copy()
    if isinstance(node, exp.Column):
        return _read_column(node, table, saturated=operand)
    safe = _with_safe_children(node, table)
    rule = POSTGRES_RULES.get(type(node))
    return rule(node, safe, table) if rule is not None else safe


def _with_safe_children(node: exp.Expression, table: TablePolicy) -> exp.Expression:
    """A new node of the same type (and flags: a PostgreSQL division stays ``typed``), children safe.
    The children of a condition (a comparison, AND, NOT…) are compared, not computed with."""
    integers = _integer_arguments(node, table)
    operand = not isinstance(node, exp.Predicate | exp.Connector | exp.Not)
    args: dict[str, object] = {}
    for key, value in node.args.items():
        if isinstance(value, exp.Expression):
            args[key] = _safe(value, table, integer=key in integers, operand=operand)
        elif isinstance(value, list):
            args[key] = [
                _safe(v, table, integer=False, operand=operand) if isinstance(v, exp.Expression) else v
                for v in value
            ]
        else:
            args[key] = value
    return node.__class__(**args)


def _integer_arguments(node: exp.Expression, table: TablePolicy) -> frozenset[str]:
    if isinstance(node, exp.Round):
        return frozenset({"decimals"})
    if isinstance(node, exp.Substring):
        return frozenset({"start", "length"})
    if isinstance(node, exp.Add | exp.Sub):
        kinds = {
            "this": value_kind(node.this, table=table),
            "expression": value_kind(node.expression, table=table),
        }
        if Kind.DATE in kinds.values():
            return frozenset(key for key, kind in kinds.items() if kind is Kind.NUMBER)
    return frozenset()


def _numeric(node: exp.Expression) -> exp.Cast:
    return exp.Cast(this=node, to=exp.DataType.build("DECIMAL"))


def _read_column(node: exp.Expression, table: TablePolicy, *, saturated: bool) -> exp.Expression:
    """A numeric column as NUMERIC (exact: no integer or float overflow). Where it feeds arithmetic, it
    is saturated at ±1e308, so that a value no double could hold cannot push the result past NUMERIC's
    range (analysis/magnitudes.py counts on it); only values beyond a double's range (and NaN) read
    differently there."""
    if value_kind(node, table=table) is not Kind.NUMBER:
        return node.copy()
    number = _numeric(node.copy())
    if not saturated:
        return number
    limit = exp.Literal.number(SATURATION)
    return exp.Case(
        ifs=[
            exp.If(this=exp.GT(this=number.copy(), expression=limit.copy()), true=limit.copy()),
            exp.If(
                this=exp.LT(this=number.copy(), expression=exp.Neg(this=limit.copy())),
                true=exp.Neg(this=limit),
            ),
        ],
        default=number,
    )


def _only_if(condition: exp.Expression, value: exp.Expression) -> exp.Case:
    """``CASE WHEN condition THEN value END``: PostgreSQL evaluates the branch only when it is taken."""
    return exp.Case(ifs=[exp.If(this=condition, true=value)])


def _within_years(moment: exp.Expression) -> exp.Expression:
    """A date or timestamp outside years 1–9999 reads as NULL: moved by at most 1,000,000 days or
    2,000 years, or truncated, it stays inside every range PostgreSQL has (and 'infinity' is never
    subtracted from)."""
    first = exp.cast(exp.Literal.string(FIRST_DAY), exp.DataType.Type.DATE)
    after = exp.cast(exp.Literal.string(DAY_AFTER_LAST), exp.DataType.Type.DATE)
    inside = exp.and_(
        exp.GTE(this=moment.copy(), expression=first), exp.LT(this=moment.copy(), expression=after)
    )
    return _only_if(inside, moment)


def _literal(original: exp.Expression, safe: exp.Expression, table: TablePolicy) -> exp.Expression:
    """``2000000000`` is an int4 on PostgreSQL: in ``CASE … THEN 2000000000 END * 2`` it would overflow."""
    text = str(original.this)
    if original.is_string or any(mark in text for mark in ".eE"):
        return safe
    return _numeric(safe)


def _integer_result(original: exp.Expression, safe: exp.Expression, table: TablePolicy) -> exp.Expression:
    """``length(s)`` and ``strpos(s, t)`` are int4: as NUMERIC they cannot overflow what follows."""
    return _numeric(safe)


def _moved(original: exp.Expression, safe: exp.Expression, table: TablePolicy) -> exp.Expression:
    """Addition and subtraction: numbers need nothing more; a date or timestamp is read within years
    1–9999, so that moved by a literal (argument_checks.check_moved) it stays in range; date − date
    (int4 days) becomes NUMERIC."""
    kinds = {key: value_kind(original.args[key], table=table) for key in ("this", "expression")}
    for key, kind in kinds.items():
        if kind.is_moment:
            safe.set(key, _within_years(safe.args[key]))
    return _numeric(safe) if set(kinds.values()) == {Kind.DATE} else safe


def _divided(original: exp.Expression, safe: exp.Expression, table: TablePolicy) -> exp.Expression:
    """``a / NULLIF(b, 0)``; two integers still divide as integers (NUMERIC would make 37 / 10 exact)."""
    safe.set("expression", exp.Nullif(this=safe.expression, expression=exp.Literal.number(0)))
    if (
        type(original) is exp.Div
        and is_integer(original.this, table)
        and is_integer(original.expression, table)
    ):
        return exp.Trunc(this=safe)
    return safe


def _square_root(original: exp.Expression, safe: exp.Expression, table: TablePolicy) -> exp.Expression:
    zero = exp.Literal.number(0)
    return _only_if(exp.GTE(this=safe.this.copy(), expression=zero), safe)


def _logarithm(original: exp.Expression, safe: exp.Expression, table: TablePolicy) -> exp.Expression:
    """``ln(x)``, ``log(x)``: x > 0; ``log(b, x)``: also b > 0 and b ≠ 1 (log base 1 divides by zero)."""
    zero, one = exp.Literal.number(0), exp.Literal.number(1)
    if safe.expression is None:
        return _only_if(exp.GT(this=safe.this.copy(), expression=zero), safe)
    base, value = safe.this, safe.expression
    defined = exp.and_(
        exp.GT(this=base.copy(), expression=zero),
        exp.NEQ(this=base.copy(), expression=one),
        exp.GT(this=value.copy(), expression=zero.copy()),
    )
    return _only_if(defined, safe)


def _exponential(original: exp.Expression, safe: exp.Expression, table: TablePolicy) -> exp.Expression:
    limit = exp.Literal.number(MAX_EXPONENT)
    return _only_if(exp.LTE(this=safe.this.copy(), expression=limit), safe)


def _power(original: exp.Expression, safe: exp.Expression, table: TablePolicy) -> exp.Expression:
    """``power(a, b)`` where it is defined and at most e^709: 0 to a power ≥ 0; otherwise a positive
    base or an integer exponent, with b·ln|a| ≤ 709. Nested CASEs, because SQL may evaluate both sides
    of an AND: ln|a| is computed only once a ≠ 0 is known."""
    base, exponent = safe.this, safe.expression
    zero = exp.Literal.number(0)
    growth = exp.Mul(this=exponent.copy(), expression=exp.Ln(this=exp.Abs(this=base.copy())))
    bounded = _only_if(exp.LTE(this=growth, expression=exp.Literal.number(MAX_EXPONENT)), safe.copy())
    real = exp.or_(
        exp.GT(this=base.copy(), expression=zero.copy()),
        exp.EQ(this=exponent.copy(), expression=exp.Trunc(this=exponent.copy())),
    )
    return exp.Case(
        ifs=[
            exp.If(
                this=exp.EQ(this=base.copy(), expression=zero.copy()),
                true=_only_if(exp.GTE(this=exponent.copy(), expression=zero.copy()), safe),
            ),
            exp.If(this=real, true=bounded),
        ]
    )


def _cast(original: exp.Expression, safe: exp.Expression, table: TablePolicy) -> exp.Expression:
    """Kept where it cannot fail; a number to a wider type dropped (it is NUMERIC already); a number to
    an integer type NULL outside its range; a moment to a timestamp within years 1–9999."""
    target, source = original.to, value_kind(original.this, table=table)
    widening = target.this in _WIDENING and not target.expressions
    if widening and source is Kind.NUMBER:
        return exp.Paren(this=safe.this)
    if widening and _is_literal(original.this):
        return exp.Cast(this=safe.this, to=exp.DataType.build("DECIMAL"))  # '1e400'::float would overflow
    if _is_literal(original.this) or target.this in exp.DataType.TEXT_TYPES:
        return exp.Cast(this=safe.this, to=safe.to)  # a literal converts when the query is planned
    if target.this in INTEGER_RANGES and source is Kind.NUMBER:
        return _integer_cast(safe, INTEGER_RANGES[target.this])
    moment = value_kind(original, table=table)
    if moment in (Kind.DATE, Kind.TIMESTAMP) and source.is_moment:
        return exp.Cast(this=_within_years(safe.this), to=safe.to)
    if moment is Kind.BOOLEAN and source is Kind.BOOLEAN:
        return exp.Cast(this=safe.this, to=safe.to)
    raise _refusal(
        f"CAST of a {source.value} to {target.sql(dialect='postgres')}",
        hint="compare values as they are, or cast to text; numbers may be cast to numeric and integer types",
    )


def _is_literal(node: exp.Expression) -> bool:
    while isinstance(node, exp.Paren | exp.Neg):
        node = node.this
    return isinstance(node, exp.Literal | exp.Null | exp.Boolean)


def _integer_cast(safe: exp.Expression, bound: int) -> exp.Expression:
    """PostgreSQL rounds half away from zero, so the values that fit are those within ±(bound − ½)."""
    value = safe.this
    inside = exp.and_(
        exp.GT(this=value.copy(), expression=exp.Neg(this=exp.Literal.number(f"{bound}.5"))),
        exp.LT(this=value.copy(), expression=exp.Literal.number(f"{bound - 1}.5")),
    )
    return _only_if(inside, exp.Cast(this=value, to=safe.to))


def _date_part(original: exp.Expression, safe: exp.Expression, table: TablePolicy) -> exp.Expression:
    """PostgreSQL has no hour of a date (DuckDB says 0): read the date as a timestamp for a time part."""
    kind = value_kind(original.expression, table=table)
    if kind is Kind.DATE and canonical_unit(str(original.this.this)) in TIME_PARTS:
        timestamp = exp.DataType.build("TIMESTAMP")
        safe.set("expression", exp.Cast(this=_within_years(safe.expression), to=timestamp))
    return safe


def _truncated(original: exp.Expression, safe: exp.Expression, table: TablePolicy) -> exp.Expression:
    """A date becomes a timestamp with time zone first (a range error past year 294276), and truncating
    near the first year can fall before it: only years 1–9999 are truncated."""
    safe.set("this", _within_years(safe.this))
    return safe


POSTGRES_RULES: dict[type[exp.Expression], Rule] = {  # one per REWRITTEN entry of function_safety.py
    exp.Literal: _literal,
    exp.Length: _integer_result,
    exp.StrPosition: _integer_result,
    exp.Add: _moved,
    exp.Sub: _moved,
    exp.Div: _divided,
    exp.IntDiv: _divided,
    exp.Mod: _divided,
    exp.Sqrt: _square_root,
    exp.Ln: _logarithm,
    exp.Log: _logarithm,
    exp.Exp: _exponential,
    exp.Pow: _power,
    exp.Cast: _cast,
    exp.TryCast: _cast,
    exp.Extract: _date_part,
    exp.TimestampTrunc: _truncated,
    exp.DateTrunc: _truncated,
}

_DOMAIN_RULES: dict[type[exp.Expression], Rule] = {
    exp.Sqrt: _square_root,
    exp.Ln: _logarithm,
    exp.Log: _logarithm,
    exp.Exp: _exponential,
    exp.Pow: _power,
}
