"""``q1 UNION ALL q2 …`` of aggregate queries on private data: each part is a query of its own.

Each part is analysed like any statement (analysis/shape.py) and priced on its own share of the
statement's ε (query/service.py); the rows of the parts follow one another, as UNION ALL says, and an
ORDER BY, LIMIT or OFFSET of the whole statement is post-processing over the noisy rows. UNION (without
ALL), INTERSECT and EXCEPT are refused (analysis/refusals.py).

>>> union_parts(sqlglot.parse_one("SELECT COUNT(*) FROM a UNION ALL SELECT COUNT(*) FROM b"))
[Select(…a…), Select(…b…)]
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from proxy.analysis.refusals import refuse_construct
from proxy.errors import QuerySyntaxError, UnknownColumnError, UnsupportedQueryError

_MODIFIERS = ("order", "limit", "offset")


@dataclass(frozen=True)
class UnionOrder:
    """One ORDER BY item of a UNION ALL: a position in its select list (from 0)."""

    position: int
    descending: bool
    nulls_first: bool


@dataclass(frozen=True)
class UnionModifiers:
    order: tuple[UnionOrder, ...] = ()
    limit: int | None = None
    offset: int | None = None


def union_parts(tree: exp.Expression) -> list[exp.Select]:
    """The SELECTs of a chain of UNION ALL, in order; other set operations are refused."""
    if isinstance(tree, exp.Subquery) and not tree.alias:
        return union_parts(tree.this)
    if isinstance(tree, exp.Select):
        return [tree]
    if isinstance(tree, exp.Intersect):
        raise refuse_construct("INTERSECT")
    if isinstance(tree, exp.Except):
        raise refuse_construct("EXCEPT")
    if isinstance(tree, exp.Union):
        if tree.args.get("distinct"):
            raise refuse_construct("UNION")
        return union_parts(tree.this) + union_parts(tree.expression)
    raise refuse_construct("UNION ALL part")


def nested_modifiers(tree: exp.Union) -> bool:
    """Whether a parenthesized UNION inside the chain has its own ORDER BY, LIMIT or OFFSET."""
    return any(
        node is not tree and any(node.args.get(key) for key in _MODIFIERS)
        for node in tree.find_all(exp.SetOperation)
    )


def union_modifiers(tree: exp.Union, names: tuple[str, ...]) -> UnionModifiers:
    """ORDER BY (output names or positions, as PostgreSQL requires of a UNION), LIMIT and OFFSET of the
    whole statement, checked before anything runs."""
    if nested_modifiers(tree):
        raise refuse_construct("nested UNION ALL")
    order = tree.args.get("order")
    items = tuple(_order_item(item, names) for item in order.expressions) if order is not None else ()
    return UnionModifiers(
        items, _count(tree.args.get("limit"), "LIMIT"), _count(tree.args.get("offset"), "OFFSET")
    )


def _order_item(item: exp.Ordered, names: tuple[str, ...]) -> UnionOrder:
    node = item.this
    descending = bool(item.args.get("desc"))
    nulls_first = bool(item.args.get("nulls_first"))
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        position = int(node.this)
        if not 1 <= position <= len(names):
            raise UnknownColumnError(f"ORDER BY position {position} is not in select list")
        return UnionOrder(position - 1, descending, nulls_first)
    if isinstance(node, exp.Column) and not node.table:
        matches = [i for i, name in enumerate(names) if name.lower() == node.name.lower()]
        if len(matches) == 1:
            return UnionOrder(matches[0], descending, nulls_first)
        if len(matches) > 1:
            raise UnsupportedQueryError(f'ORDER BY "{node.name}" is ambiguous')
    raise UnsupportedQueryError(
        "invalid UNION/INTERSECT/EXCEPT ORDER BY clause",
        detail="Only result column names can be used, not expressions or functions.",
        hint="order by an output column's name or position, e.g. ORDER BY 2 DESC",
    )


def _count(node: exp.Expression | None, clause: str) -> int | None:
    """LIMIT n / OFFSET n with a non-negative integer literal; LIMIT ALL and LIMIT NULL mean none."""
    if node is None:
        return None
    value = node.args.get("expression") if isinstance(node, exp.Limit | exp.Offset) else node
    if (
        value is None
        or isinstance(value, exp.Null)
        or (isinstance(value, exp.Var) and value.name.upper() == "ALL")
    ):
        return None
    if isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit():
        return int(value.this)
    raise QuerySyntaxError(f"{clause} of a UNION ALL must be a non-negative integer constant")
