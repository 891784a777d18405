"""Turn CAST into TRY_CAST inside queries on private data.

A cast that fails on one private value ("invalid input syntax for type integer: 'Alice'") would
turn an error into a one-bit side channel — and, in PostgreSQL, quote the value. TRY_CAST yields
NULL instead, so the query's success never depends on a single row.

>>> cast_to_try_cast(sqlglot.parse_one("CAST(x AS INT) > 1")).sql()
'TRY_CAST(x AS INT) > 1'
"""

from __future__ import annotations

from sqlglot import exp


def cast_to_try_cast(expression: exp.Expression) -> exp.Expression:
    def replace(node: exp.Expression) -> exp.Expression:
        if type(node) is exp.Cast:
            return exp.TryCast(this=node.this, to=node.to)
        return node

    return expression.transform(replace)
