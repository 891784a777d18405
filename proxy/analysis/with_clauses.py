"""WITH: each common table expression is inlined where it is read, as the subquery it names.

``WITH per_user AS (SELECT user_id, COUNT(*) AS n FROM ratings GROUP BY user_id) SELECT AVG(n) FROM per_user``
is ``SELECT AVG(n) FROM (SELECT user_id, COUNT(*) AS n FROM ratings GROUP BY user_id) AS per_user`` — the
same query in SQL's semantics: a non-recursive CTE is a named subquery, and ``MATERIALIZED`` only says how
an engine should run it. After inlining, the rules for subqueries in FROM decide (analysis/row_subqueries.py,
analysis/per_person.py), so a CTE is accepted exactly where the subquery it names would be. Each reference
gets its own copy: a CTE read by two parts of a UNION ALL is measured, and priced, in each part. A column
list (``WITH t(a, b) AS …``, ``FROM (…) AS s(a, b)``) renames the subquery's select items.

Scoping follows SQL: a CTE is visible in the statement's body and in the CTEs after it; a WITH of a nested
query shadows an outer one; a qualified name (``public.visits``) is never a CTE.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from proxy.analysis.refusals import refuse, refuse_construct
from proxy.errors import ProgramLimitExceededError


def inline_with(tree: exp.Expression, *, max_nodes: int) -> exp.Expression:
    """A copy of ``tree`` with every CTE inlined and every column list applied (``tree`` itself if it
    has neither); WITH RECURSIVE is refused. A CTE read in several places is copied to each, and CTEs
    that read each other can multiply that: the copies may add at most ``max_nodes`` nodes (the
    dataset's limit on a statement's size, analysis/complexity.py), checked as they are made."""
    if tree.find(exp.With) is None and not any(_column_list(node) for node in tree.find_all(exp.Subquery)):
        return tree
    return _inline(tree, {}, _Inliner(max_nodes))


class _Inliner:
    """Counts the nodes the copies add, and stops at the limit."""

    def __init__(self, max_nodes: int) -> None:
        self.max_nodes = max_nodes
        self.copied = 0

    def copy(self, body: exp.Expression) -> exp.Expression:
        self.copied += sum(1 for _ in body.walk())
        if self.copied > self.max_nodes:
            raise ProgramLimitExceededError(
                f"query too complex: its WITH queries expand to more than this dataset's max_nodes of "
                f"{self.max_nodes} nodes",
                detail="each reference to a WITH query is answered as a copy of it",
                hint="read each WITH query once, or simplify the query",
            )
        return body.copy()


def _inline(node: exp.Expression, scope: Mapping[str, exp.Expression], inliner: _Inliner) -> exp.Expression:
    node = node.copy()
    with_ = node.args.get("with_") if isinstance(node, exp.Query) else None
    if with_ is not None:
        if with_.args.get("recursive"):
            raise refuse_construct("WITH RECURSIVE")
        inner = dict(scope)
        for cte in with_.expressions:
            body = _inline(cte.this, inner, inliner)
            inner[cte.alias_or_name.lower()] = renamed(body, _column_names(cte.args.get("alias")), cte.alias)
        scope = inner
        node.set("with_", None)

    def replace(child: exp.Expression) -> exp.Expression:
        if child is node:
            return child
        if isinstance(child, exp.Query) and child.args.get("with_") is not None:
            return _inline(child, scope, inliner)
        if isinstance(child, exp.Subquery) and _column_list(child):
            return _renamed_subquery(child, scope, inliner)
        if isinstance(child, exp.Table) and _is_reference(child, scope):
            return _subquery(child, inliner.copy(scope[child.name.lower()]))
        return child

    return node.transform(replace, copy=False)


def _is_reference(table: exp.Table, scope: Mapping[str, exp.Expression]) -> bool:
    return isinstance(table.this, exp.Identifier) and not table.db and table.name.lower() in scope


def _subquery(table: exp.Table, body: exp.Expression) -> exp.Subquery:
    """``FROM cte [AS alias [(columns)]]`` → ``FROM (body) AS alias``."""
    alias = table.args.get("alias")
    query = renamed(body, _column_names(alias), table.alias_or_name)
    return exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(table.alias_or_name)))


def _renamed_subquery(
    subquery: exp.Subquery, scope: Mapping[str, exp.Expression], inliner: _Inliner
) -> exp.Subquery:
    """``(SELECT …) AS s(a, b)`` → ``(SELECT … AS a, … AS b) AS s``."""
    alias = subquery.args["alias"]
    query = _inline(subquery.this, scope, inliner)
    query = renamed(query, _column_names(alias), subquery.alias_or_name)
    return exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(subquery.alias_or_name)))


def _column_list(subquery: exp.Subquery) -> bool:
    alias = subquery.args.get("alias")
    return alias is not None and bool(alias.args.get("columns"))


def _column_names(alias: exp.Expression | None) -> list[str]:
    return [column.name for column in alias.args.get("columns") or []] if alias is not None else []


def renamed(query: exp.Expression, names: list[str], relation: str) -> exp.Expression:
    """The select items of ``query`` renamed to ``names``, in order (fewer names rename the first items,
    as in PostgreSQL). A UNION takes its column names from its first part."""
    if not names:
        return query
    first = query
    while isinstance(first, exp.SetOperation):
        first = first.this
    if not isinstance(first, exp.Select):
        return query
    items = first.expressions
    if any(item.is_star for item in items):
        raise refuse(
            f'the column list of "{relation}" cannot rename *',
            hint=f'list the columns of "{relation}" in its SELECT instead of *',
        )
    if len(names) > len(items):
        raise refuse(
            f'"{relation}" has {len(items)} columns available but {len(names)} columns specified',
            hint="give at most as many names as the subquery has columns",
        )
    first.set(
        "expressions",
        [exp.alias_(item.unalias(), name) for item, name in zip(items, names, strict=False)]
        + items[len(names) :],
    )
    return query
