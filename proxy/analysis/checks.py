"""Allow-lists: which sqlglot node types may appear where. Anything not listed is refused.

Deny-by-default is the point: a new sqlglot node type (a file-reading table function, a window
function, a subquery form) must be refused until someone reasons about its privacy. The scalar
functions and operators come from analysis/function_safety.py, which says for each how no engine can
fail on one row's value; their constant arguments are checked here, before any engine query.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.analysis.function_safety import FUNCTIONS, SCALAR_NODES, check_constant_arguments
from proxy.errors import PolicyViolationError, UnsupportedQueryError

__all__ = ["SCALAR_NODES", "check_constant_expression", "check_predicate", "check_public_query"]

SESSION_INFO_NODES: tuple[type[exp.Expression], ...] = (
    exp.CurrentVersion, exp.CurrentUser, exp.CurrentDatabase, exp.CurrentSchema,
)  # fmt: skip


def _node_label(node: exp.Expression) -> str:
    if isinstance(node, exp.Func):
        return f"function {node.sql_name().lower()}()"
    return node.key.upper() if isinstance(node, exp.Subquery | exp.Select) else type(node).__name__


def check_predicate(expression: exp.Expression, *, clause: str) -> None:
    """A WHERE (or GROUP BY) expression may use columns and deterministic scalar operations only, each
    with the constant arguments its family requires (a failure on one row would reveal that row).
    Node types match exactly: a subclass sqlglot adds (``JSONCast`` is a Cast, ``Pseudocolumn`` a
    Column) has no declared treatment until it is listed."""
    for node in expression.walk():
        if type(node) in FUNCTIONS or type(node) in (exp.Column, exp.Identifier):
            check_constant_arguments(node)
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
