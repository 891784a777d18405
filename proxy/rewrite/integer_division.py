"""PostgreSQL's integer division on DuckDB.

Analysts write PostgreSQL: ``age / 10`` on integers truncates (``37 / 10 = 3``), while DuckDB's
``/`` always divides exactly (3.7). So a division whose two sides are integers — integer columns of
the policy, integer literals, and arithmetic of those — becomes truncating division on DuckDB:
``sign(a)·sign(b)·(|a| // |b|)``, which truncates toward zero like PostgreSQL (DuckDB's ``//`` alone
floors, which differs for negative operands).

>>> postgres_integer_division(sqlglot.parse_one("FLOOR(age / 10) * 10"), table=t).sql("duckdb")
'FLOOR(SIGN(age) * SIGN(10) * (ABS(age) // ABS(10))) * 10'
"""

from __future__ import annotations

from sqlglot import exp

from proxy.analysis.intervals import is_integer
from proxy.config import TablePolicy


def postgres_integer_division(expression: exp.Expression, *, table: TablePolicy) -> exp.Expression:
    def replace(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Div) and is_integer(node.this, table) and is_integer(node.expression, table):
            left, right = node.this.copy(), node.expression.copy()
            sign = exp.Mul(this=exp.Sign(this=left), expression=exp.Sign(this=right))
            magnitude = exp.IntDiv(this=exp.Abs(this=left.copy()), expression=exp.Abs(this=right.copy()))
            return exp.Paren(this=exp.Mul(this=sign, expression=exp.Paren(this=magnitude)))
        return node

    return expression.transform(replace)
