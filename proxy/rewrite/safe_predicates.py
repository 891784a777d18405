"""Make a filter unable to fail on any single row.

If a query's success depended on one private value — ``1 % CASE WHEN id = 42 AND age = 30 THEN 0
ELSE 1 END``, an overflow, a cast of ``'Alice'`` to INTEGER — the error itself would answer a
yes/no question about that person, for free (a failed query spends nothing).

- **DuckDB**: every CAST becomes TRY_CAST and the whole condition runs under ``TRY(…)``, which turns
  any runtime error into NULL: the row is simply not selected, as if the condition were false.
- **PostgreSQL** has no TRY, so the condition is made error-free by construction: divisors become
  ``NULLIF(divisor, 0)``, numeric columns are read as NUMERIC (arbitrary precision: no integer
  overflow), and functions that fail on some inputs (square roots and logarithms of negatives,
  ``exp``/``power`` overflow, negative substring lengths, casts out of text) are refused.

>>> error_free(sqlglot.parse_one("CAST(x AS INT) > 1 / y"), table=t, dialect="duckdb").sql("duckdb")
'TRY(TRY_CAST(x AS INT) > 1 / y)'
"""

from __future__ import annotations

from sqlglot import exp

from proxy.analysis.intervals import is_integer
from proxy.analysis.key_types import expression_type
from proxy.config import TablePolicy
from proxy.errors import PolicyViolationError
from proxy.rewrite.integer_division import postgres_integer_division

POSTGRES_FALLIBLE: tuple[type[exp.Expression], ...] = (
    exp.Sqrt, exp.Ln, exp.Log, exp.Exp, exp.Pow, exp.Substring, exp.Cast, exp.TryCast,
)  # fmt: skip


_NUMBER_TYPES = exp.DataType.REAL_TYPES | {exp.DataType.Type.DECIMAL}


def _without_widening_cast(node: exp.Expression, table: TablePolicy) -> exp.Expression:
    """``CAST(age AS REAL)``: on PostgreSQL Veil reads numeric columns as NUMERIC (exact, no
    overflow), so a cast of a number to a floating or unconstrained numeric type adds nothing but a
    way to fail (an out-of-range float); the value is the same without it."""
    if (
        isinstance(node, exp.Cast | exp.TryCast)
        and node.to.this in _NUMBER_TYPES
        and not node.to.expressions  # NUMERIC(3, 1) can overflow: not a widening
        and expression_type(node.this, table).is_numeric
    ):
        return exp.Paren(this=node.this.copy())
    return node


def _cannot_fail(node: exp.Expression) -> bool:
    """A cast of a constant fails for every row or for none — it reveals nothing about one row;
    anything can be written as text."""
    if isinstance(node, exp.Cast | exp.TryCast):
        return next(node.this.find_all(exp.Column), None) is None or node.to.this in exp.DataType.TEXT_TYPES
    return False


def cast_to_try_cast(expression: exp.Expression) -> exp.Expression:
    def replace(node: exp.Expression) -> exp.Expression:
        if type(node) is exp.Cast:
            return exp.TryCast(this=node.this, to=node.to)
        return node

    return expression.transform(replace)


def error_free(condition: exp.Expression, *, table: TablePolicy, dialect: str) -> exp.Expression:
    if dialect == "duckdb":
        postgres_semantics = postgres_integer_division(condition.copy(), table=table)
        return exp.Try(this=cast_to_try_cast(postgres_semantics))
    return _postgres_error_free(condition.copy(), table)


def _postgres_error_free(condition: exp.Expression, table: TablePolicy) -> exp.Expression:
    condition = condition.transform(lambda node: _without_widening_cast(node, table))
    for node in condition.walk():
        if isinstance(node, POSTGRES_FALLIBLE) and not _cannot_fail(node):
            name = node.sql_name().lower() if isinstance(node, exp.Func) else node.key
            raise PolicyViolationError(
                f"{name} is not allowed on private values of a PostgreSQL dataset: it can fail on a single"
                " row's value",
                detail="a query that fails for one person's value would reveal it without noise",
                hint="compare columns directly, or use CASE to keep values in range",
            )

    def keep_integer_division(node: exp.Expression) -> exp.Expression:
        """Reading columns as NUMERIC would make ``age / 10`` exact; PostgreSQL truncates integers."""
        if type(node) is exp.Div and is_integer(node.this, table) and is_integer(node.expression, table):
            return exp.Trunc(this=exp.Div(this=node.this.copy(), expression=node.expression.copy()))
        return node

    def as_numeric(node: exp.Expression) -> exp.Expression:
        column = table.column(node.name) if isinstance(node, exp.Column) else None
        if column is not None and column.type.is_numeric:
            return exp.Cast(this=node.copy(), to=exp.DataType(this=exp.DataType.Type.DECIMAL))
        return node

    def guard_divisor(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Div | exp.Mod | exp.IntDiv):
            divisor = exp.Nullif(this=node.expression.copy(), expression=exp.Literal.number(0))
            return node.__class__(this=node.this.copy(), expression=divisor)
        return node

    return condition.transform(keep_integer_division).transform(as_numeric).transform(guard_divisor)
