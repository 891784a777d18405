"""Clamp a value to its declared bounds before it is aggregated.

``CASE WHEN x < lower THEN lower WHEN x > upper THEN upper ELSE x END`` rather than
``GREATEST(lower, LEAST(upper, x))``: both PostgreSQL and DuckDB make LEAST/GREATEST ignore NULLs,
which would turn a NULL into ``upper`` and change COUNT(col). The CASE form keeps NULL as NULL.

>>> clamp_value(exp.column("age"), lower=0, upper=100).sql()
'CASE WHEN age < 0 THEN 0 WHEN age > 100 THEN 100 ELSE age END'
"""

from __future__ import annotations

from sqlglot import exp


def bound_literal(value: float) -> exp.Expression:
    """Integral bounds stay integers so integer columns keep an integer SUM (and exact noise)."""
    number: int | float = int(value) if float(value).is_integer() else float(value)
    return exp.convert(number)


def clamp_value(expression: exp.Expression, *, lower: float, upper: float) -> exp.Expression:
    low, high = bound_literal(lower), bound_literal(upper)
    return exp.Case(
        ifs=[
            exp.If(this=exp.LT(this=expression.copy(), expression=low), true=low.copy()),
            exp.If(this=exp.GT(this=expression.copy(), expression=high), true=high.copy()),
        ],
        default=expression.copy(),
    )
