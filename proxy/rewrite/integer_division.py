"""PostgreSQL's integer division on DuckDB.

Analysts write PostgreSQL: ``age / 10`` on integers truncates (``37 / 10 = 3``), while DuckDB's
``/`` always divides exactly (3.7). So a division whose two sides are integers — integer columns of
the policy, integer literals, and arithmetic of those — becomes truncating division on DuckDB:
``sign(a)·sign(b)·(|a| // |b|)``, which truncates toward zero like PostgreSQL (DuckDB's ``//`` alone
floors, which differs for negative operands). Nested divisions are rewritten from the inside out.

>>> postgres_integer_division(sqlglot.parse_one("FLOOR(age / 10) * 10"), table=t).sql("duckdb")
'FLOOR(SIGN(age) * SIGN(10) * (ABS(age) // ABS(10))) * 10'
"""

from __future__ import annotations

from sqlglot import exp

from proxy.analysis.intervals import is_integer
from proxy.config import TablePolicy
from proxy.rewrite.post_order import transform_post_order


def postgres_integer_division(expression: exp.Expression, *, table: TablePolicy) -> exp.Expression:
    """``expression`` is rewritten in place (pass a copy). Which divisions are integer is decided on
    the tree as written, before any is rewritten."""
    integer = {
        id(node)
        for node in expression.find_all(exp.Div)
        if type(node) is exp.Div and is_integer(node.this, table) and is_integer(node.expression, table)
    }

    def replace(node: exp.Expression) -> exp.Expression:
        if id(node) in integer:
            left, right = node.this, node.expression
            sign = exp.Mul(this=exp.Sign(this=left.copy()), expression=exp.Sign(this=right.copy()))
            magnitude = exp.IntDiv(this=exp.Abs(this=left), expression=exp.Abs(this=right))
            return exp.Paren(this=exp.Mul(this=sign, expression=exp.Paren(this=magnitude)))
        return node

    return transform_post_order(expression, replace)
