"""Which statements read a federation, and whether they are the one shape a federation answers: a count of
rows per cell of the federation's public group domain (docs/federation.md).

A federation is queried under its own name (``SELECT region, COUNT(*) FROM hospitals GROUP BY region``);
each site answers the statement over its own table, so the statement is rewritten to that table before the
ordinary analysis runs. Anything else that names a federation is refused here, before any spend: a
federation releases joint counts and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from proxy.analysis.aggregates import AggregateKind
from proxy.analysis.shape import QueryShape
from proxy.config import FederationPolicy
from proxy.errors import UnsupportedQueryError

SHAPE_HINT = (
    "a federation answers SELECT <its group columns>, COUNT(*) FROM <federation> [WHERE …] GROUP BY <them>"
)


def federation_read(
    tree: exp.Expression, federations: Mapping[str, FederationPolicy]
) -> FederationPolicy | None:
    """The federation a statement reads, if any (None for every statement that names none)."""
    if not federations:
        return None
    named = [
        table for table in tree.find_all(exp.Table) if table.name.lower() in federations and not table.db
    ]
    if not named:
        return None
    reason = _why_not_alone(tree)
    if reason:
        raise UnsupportedQueryError(f"federation {named[0].name} {reason}", hint=SHAPE_HINT)
    return federations[named[0].name.lower()]


def _why_not_alone(tree: exp.Expression) -> str | None:
    """Why a statement naming a federation is not one SELECT over the federation alone (None if it is):
    each case has its own message, so the analyst knows what to take away."""
    if isinstance(tree, exp.Copy):
        return "cannot be read by COPY: send its count as a SELECT statement of its own"
    if isinstance(tree, exp.SetOperation):
        return f"cannot be combined by {tree.key.upper()}: send its count as a SELECT statement of its own"
    if not isinstance(tree, exp.Select):
        return f"can only be read by SELECT, not by {tree.key.upper()}"
    if tree.args.get("with_"):  # sqlglot's key for a WITH clause ("with" is never set)
        return "cannot be read beside a WITH query"
    if tree.args.get("joins"):
        return "cannot be joined"
    if len(list(tree.find_all(exp.Table))) != 1:
        return "cannot be read with other tables or subqueries"
    return None


def local_statement(tree: exp.Select, federation: FederationPolicy) -> exp.Select:
    """The statement over this site's own table (keeping any alias the analyst gave the federation)."""
    local = tree.copy()
    table = next(local.find_all(exp.Table))
    alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(table.name))
    table.replace(exp.Table(this=exp.to_identifier(federation.table), alias=alias))
    return local


def count_column(shape: QueryShape, federation: FederationPolicy) -> int:
    """The output position of the count, after checking the shape (see the module docstring)."""
    keys = {key.source.name.lower() for key in shape.group_keys if isinstance(key.expression, exp.Column)}
    plain = all(isinstance(key.expression, exp.Column) for key in shape.group_keys)
    if not plain or keys != set(federation.group_by) or len(shape.group_keys) != len(federation.group_by):
        raise UnsupportedQueryError(
            f"federation {federation.name} is grouped by {', '.join(federation.group_by)}, exactly",
            hint=SHAPE_HINT,
        )
    if len(shape.aggregates) != 1 or shape.aggregates[0].kind is not AggregateKind.COUNT_ROWS:
        raise UnsupportedQueryError(f"federation {federation.name} answers COUNT(*) only", hint=SHAPE_HINT)
    columns = shape.passthrough_columns
    if columns is None or len(columns) != len(federation.group_by) + 1:
        raise UnsupportedQueryError(
            "a federated count is answered as it is: no HAVING, ORDER BY, LIMIT or arithmetic on it",
            hint="sort or filter the answer on the client",
        )
    keyed = [index for index, name in enumerate(columns) if not name.startswith("_dp_key_")]
    return keyed[0]
