"""Allow-lists: which sqlglot node types may appear where. Anything not listed is refused.

Deny-by-default is the point: a new sqlglot node type (a file-reading table function, a window
function, a subquery form) must be refused until someone reasons about its privacy.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.errors import PolicyViolationError, UnsupportedQueryError

SCALAR_NODES: tuple[type[exp.Expression], ...] = (
    exp.Literal, exp.Boolean, exp.Null, exp.Paren, exp.Tuple, exp.DataType, exp.Var, exp.Interval,
    exp.And, exp.Or, exp.Not, exp.Xor,
    exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Is, exp.In, exp.Between, exp.Like, exp.ILike,
    exp.NullSafeEQ, exp.NullSafeNEQ,
    exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Neg, exp.Pow,
    exp.Cast, exp.TryCast, exp.Case, exp.If, exp.Coalesce, exp.Nullif, exp.Greatest, exp.Least,
    exp.Lower, exp.Upper, exp.Length, exp.Substring, exp.Trim, exp.DPipe, exp.Concat, exp.StrPosition,
    exp.Abs, exp.Floor, exp.Ceil, exp.Round, exp.Sqrt, exp.Ln, exp.Log, exp.Exp, exp.Sign,
    exp.Extract, exp.TimestampTrunc, exp.DateTrunc, exp.CurrentDate,
)  # fmt: skip

SESSION_INFO_NODES: tuple[type[exp.Expression], ...] = (
    exp.CurrentVersion, exp.CurrentUser, exp.CurrentDatabase, exp.CurrentSchema,
)  # fmt: skip


def _node_label(node: exp.Expression) -> str:
    if isinstance(node, exp.Func):
        return f"function {node.sql_name().lower()}()"
    return node.key.upper() if isinstance(node, exp.Subquery | exp.Select) else type(node).__name__


def check_predicate(expression: exp.Expression, *, clause: str) -> None:
    """A WHERE (or GROUP BY) expression may use columns and deterministic scalar operations only."""
    for node in expression.walk():
        if isinstance(node, (exp.Column, exp.Identifier, *SCALAR_NODES)):
            continue
        if isinstance(node, exp.AggFunc):
            raise PolicyViolationError(
                f"aggregate functions are not allowed in {clause}",
                hint="put aggregates in the select list; HAVING is not supported yet",
            )
        if isinstance(node, exp.Select | exp.Subquery | exp.Exists):
            raise PolicyViolationError(
                f"subqueries are not allowed in {clause} of a query on private data",
                hint="filter with comparisons on the table's own columns",
            )
        raise PolicyViolationError(
            f"{_node_label(node)} is not allowed in {clause} of a query on private data",
            hint="use comparisons, arithmetic, CASE, CAST and common scalar functions",
        )


def check_constant_expression(expression: exp.Expression) -> None:
    """A query without tables may only compute constants and report session information."""
    for node in expression.walk():
        if node is expression:
            continue
        if isinstance(node, (exp.Alias, exp.Identifier, *SCALAR_NODES, *SESSION_INFO_NODES)):
            continue
        raise UnsupportedQueryError(
            f"{_node_label(node)} is not supported in a query without a table",
            hint="Veil answers constant expressions, version(), current_user and current_database()",
        )


PUBLIC_QUERY_NODES: tuple[type[exp.Expression], ...] = (
    exp.Select, exp.From, exp.Join, exp.Where, exp.Group, exp.Having, exp.Order, exp.Ordered, exp.Limit,
    exp.Offset, exp.Distinct, exp.Alias, exp.TableAlias, exp.Table, exp.Column, exp.Identifier, exp.Star,
    exp.Subquery, exp.Union, exp.Intersect, exp.Except, exp.With, exp.CTE,
    exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, *SCALAR_NODES,
)  # fmt: skip


def check_public_query(tree: exp.Expression) -> None:
    """Public tables may be read as they are, but only with SQL that cannot reach outside them."""
    for node in tree.walk():
        if not isinstance(node, PUBLIC_QUERY_NODES):
            raise UnsupportedQueryError(
                f"{_node_label(node)} is not supported in a query on public tables",
                hint="use plain SELECT with joins, filters, grouping and common functions",
            )
