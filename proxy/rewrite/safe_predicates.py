"""Make a filter unable to fail on any single row.

If a query's success depended on one private value — ``1 % CASE WHEN id = 42 AND age = 30 THEN 0
ELSE 1 END``, an overflow, a cast of ``'Alice'`` to INTEGER — the error itself would answer a
yes/no question about that person, for free (a failed query spends nothing). So every CAST becomes
TRY_CAST and the whole condition is evaluated under ``TRY(…)``, which turns any runtime error
into NULL: the row is simply not selected, exactly as if the condition were false.

>>> error_free(sqlglot.parse_one("CAST(x AS INT) > 1 / y")).sql(dialect="duckdb")
'TRY(TRY_CAST(x AS INT) > 1 / y)'
"""

from __future__ import annotations

from sqlglot import exp


def cast_to_try_cast(expression: exp.Expression) -> exp.Expression:
    def replace(node: exp.Expression) -> exp.Expression:
        if type(node) is exp.Cast:
            return exp.TryCast(this=node.this, to=node.to)
        return node

    return expression.transform(replace)


def error_free(condition: exp.Expression) -> exp.Expression:
    return exp.Try(this=cast_to_try_cast(condition.copy()))
