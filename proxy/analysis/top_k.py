"""Top-k queries: the k keys with the largest counts, overall or per partition.

Two shapes are recognised (docs/sql.md, "Top-k"):

* ``SELECT key, COUNT(…) FROM t [WHERE …] GROUP BY key ORDER BY COUNT(…) DESC [, …] LIMIT k [OFFSET m]``
  — the count by itself, its alias or its position; no HAVING or DISTINCT; the count is the only
  aggregate. The k + m best keys are selected.
* per partition, the standard SQL form of "the top k of each group"::

      SELECT … FROM (SELECT p, key, COUNT(…) AS n,
                            ROW_NUMBER() OVER (PARTITION BY p ORDER BY COUNT(…) DESC [, …]) AS r
                     FROM t [WHERE …] GROUP BY p, key) AS ranked
      WHERE r <= k [ORDER BY …]

In both the count is ``COUNT(*)`` or ``COUNT(DISTINCT <privacy unit>)`` and 1 <= k <= ``MAX_K``. The
shape records :class:`TopK` on the ordinary :class:`QueryShape` of the grouped count; whether the answer
then uses a DP top-k selection or noisy counts of every key is the release plan's choice
(proxy/release/top_k.py). The ranking itself is post-processing: the outer query runs over the noisy
table with ``ROW_NUMBER()`` computed from the noisy counts, in the sandbox engine.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sqlglot import exp

from proxy.analysis.aggregates import Aggregate, AggregateKind
from proxy.analysis.checks import SCALAR_NODES
from proxy.analysis.output_names import output_name
from proxy.analysis.refusals import CLAUSE_NAMES, refuse
from proxy.analysis.shape import NOISY_TABLE, QueryShape, aggregate_column, key_column, query_shape
from proxy.config import DatasetPolicy

MAX_K = 100  # a larger LIMIT is answered as an ordinary GROUP BY (noisy counts of every key, then sorted)
COUNTS = (AggregateKind.COUNT_ROWS, AggregateKind.COUNT_UNITS)

_RANKING_HINT = (
    "rank with ROW_NUMBER() OVER (PARTITION BY <group keys> ORDER BY COUNT(*) DESC) in a subquery "
    "grouped by the partition and the ranked keys, and keep rows with WHERE <rank> <= k"
)


@dataclass(frozen=True)
class TopK:
    """The k keys with the largest count are answered, in each partition (the group keys at the
    ``partition`` positions; none: one top-k over all keys)."""

    k: int
    count: int  # the count's index in QueryShape.aggregates
    partition: tuple[int, ...] = ()

    def ranked(self, keys: int) -> tuple[int, ...]:
        """The positions of the group keys that are ranked within a partition."""
        return tuple(i for i in range(keys) if i not in self.partition)


def top_k_query_shape(tree: exp.Expression, dataset: DatasetPolicy) -> QueryShape:
    """The shape of a query on private data, with its :class:`TopK` when it asks for one."""
    partitioned = _partitioned(tree, dataset) if isinstance(tree, exp.Select) else None
    if partitioned is not None:
        return partitioned
    shape = query_shape(tree, dataset)
    top = _ordered_by_count(shape)
    return dataclasses.replace(shape, top_k=top) if top is not None else shape


def _ordered_by_count(shape: QueryShape) -> TopK | None:
    """``ORDER BY <the count> DESC [, …] LIMIT k [OFFSET m]`` over GROUP BY keys, with the count as the
    only aggregate and no HAVING or DISTINCT; anything else is an ordinary query (None)."""
    post = shape.postprocess
    order = post.args.get("order")
    if (
        not shape.group_keys
        or not _ranks_by_count(shape)
        or order is None
        or post.args.get("where") is not None
        or post.args.get("distinct") is not None
    ):
        return None
    first = order.expressions[0]
    if not first.args.get("desc") or not _is_count(_resolved(first.this, post), 0):
        return None
    limit = _literal_integer(post.args.get("limit"))
    offset = _literal_integer(post.args.get("offset")) if post.args.get("offset") else 0
    if limit is None or offset is None or not 1 <= limit + offset <= MAX_K:
        return None
    return TopK(limit + offset, 0)


def _ranks_by_count(shape: QueryShape) -> bool:
    """Whether the shape's one aggregate is a count top-k selects keys by: COUNT(*) or COUNT(DISTINCT
    unit), without a condition — a filtered count (``COUNT(*) FILTER (WHERE …)`` is a COUNT of a CASE) is
    answered as an ordinary query, since the selection counts every row or person of a key."""
    aggregate = _only_aggregate(shape)
    return aggregate is not None and aggregate.kind in COUNTS and aggregate.column is None


def _ranks_by_filtered_count(shape: QueryShape) -> bool:
    """A ranking by ``COUNT(*) FILTER (WHERE c)``: refused with its own reason, since the DP selection
    counts every row or person of a key and WHERE c says the same thing."""
    aggregate = _only_aggregate(shape)
    if aggregate is None or aggregate.column is None or aggregate.column.condition is None:
        return False
    return aggregate.kind in (AggregateKind.COUNT, AggregateKind.COUNT_UNITS)


def _only_aggregate(shape: QueryShape) -> Aggregate | None:
    return shape.aggregates[0] if len(shape.aggregates) == 1 else None


def _resolved(node: exp.Expression, post: exp.Select) -> exp.Expression:
    """An ORDER BY item of the post-processing query as the noisy column it names: an output alias or
    a position stands for its select item."""
    items = post.expressions
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        position = int(node.this)
        if 1 <= position <= len(items):
            node = items[position - 1]
    elif isinstance(node, exp.Column) and not node.table:
        named = [item for item in items if isinstance(item, exp.Alias) and item.alias == node.name]
        if len(named) == 1:
            node = named[0]
    return node.this if isinstance(node, exp.Alias) else node


def _is_count(node: exp.Expression, index: int) -> bool:
    return isinstance(node, exp.Column) and not node.table and node.name == aggregate_column(index)


def _literal_integer(node: exp.Expression | None) -> int | None:
    """LIMIT k / OFFSET m as a whole number, when it is a literal (a bound parameter is one)."""
    value = node.args.get("expression") if isinstance(node, exp.Limit | exp.Offset) else None
    if isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit():
        return int(value.this)
    return None


def _partitioned(select: exp.Select, dataset: DatasetPolicy) -> QueryShape | None:
    """The ROW_NUMBER() form, or None when the query does not rank a subquery."""
    source = select.args.get("from_")
    inner = source.this.this if source is not None and isinstance(source.this, exp.Subquery) else None
    if not isinstance(inner, exp.Select):
        return None
    windows = [item for item in inner.expressions if item.find(exp.Window) is not None]
    if not windows:
        return None
    for clause in ("joins", "group", "having", "distinct", "qualify", "windows"):
        if select.args.get(clause):
            raise refuse(
                f"{CLAUSE_NAMES[clause]} is not supported around a ranking subquery", hint=_RANKING_HINT
            )
    for clause in ("order", "limit", "offset", "having", "distinct", "qualify", "windows"):
        if inner.args.get(clause):
            raise refuse(
                f"{CLAUSE_NAMES[clause]} is not supported inside a ranking subquery",
                hint="sort and filter in the outer query: " + _RANKING_HINT,
            )
    ranking = windows[0]
    window = ranking.this if isinstance(ranking, exp.Alias) else None
    if len(windows) != 1 or not isinstance(window, exp.Window) or window.find(exp.Window) is not window:
        raise refuse(
            "a ranking subquery may have one window item: ROW_NUMBER() OVER (…) AS <rank>", hint=_RANKING_HINT
        )
    if not isinstance(window.this, exp.RowNumber) or window.args.get("spec") or window.args.get("alias"):
        raise refuse(
            f"only ROW_NUMBER() OVER (PARTITION BY … ORDER BY …) ranks private counts, not {window.this.sql(dialect='postgres')}",
            hint=_RANKING_HINT,
        )
    order = window.args.get("order")
    if order is None or not order.expressions or not order.expressions[0].args.get("desc"):
        raise refuse("ROW_NUMBER() must rank by the count, descending", hint=_RANKING_HINT)
    rank = ranking.alias
    partition = list(window.args.get("partition_by") or [])
    orders = [ordered.this for ordered in order.expressions]
    plain = inner.copy()
    plain.set("expressions", [item.copy() for item in inner.expressions if item is not ranking])
    shape = _ranking_shape(plain, [*partition, *orders], dataset)
    mapped = shape.postprocess.expressions
    visible = len(plain.expressions)
    partition_keys = tuple(
        _partition_key(node, item) for node, item in zip(partition, mapped[visible:], strict=False)
    )
    ranked_by = mapped[visible + len(partition) :]
    if _ranks_by_filtered_count(shape):
        raise refuse(
            "ROW_NUMBER() does not rank by a count with a condition (FILTER or CASE)",
            hint="move the condition to WHERE: the keys rank the same, and those without a matching row "
            "rank last either way",
        )
    if not _ranks_by_count(shape) or not _is_count(ranked_by[0], 0):
        raise refuse(
            "ROW_NUMBER() ranks only by COUNT(*) or COUNT(DISTINCT <privacy unit>), the subquery's one aggregate",
            hint=_RANKING_HINT,
        )
    if len(set(partition_keys)) == len(shape.group_keys):
        raise refuse(
            "PARTITION BY leaves no GROUP BY key to rank",
            hint="group by the partition and at least one more key: " + _RANKING_HINT,
        )
    k = _rank_limit(select.args.get("where"), rank)
    ordered = [
        _reordered(original, node) for node, original in zip(ranked_by, order.expressions, strict=True)
    ]
    # ties between noisy counts broken by the keys, so that the ranking is deterministic
    ordered += [exp.Ordered(this=exp.column(key_column(i))) for i in range(len(shape.group_keys))]
    numbered = exp.Window(
        this=exp.RowNumber(),
        partition_by=[exp.column(key_column(i)) for i in partition_keys],
        order=exp.Order(expressions=ordered),
    )
    names = [output_name(item) for item in plain.expressions] + [rank]
    named = [
        item if isinstance(item, exp.Alias) else exp.alias_(item, name, quoted=True)
        for item, name in zip(mapped[:visible], names, strict=False)
    ]
    noisy = exp.Select(expressions=[*named, numbered.as_(rank)]).from_(
        exp.Table(this=exp.to_identifier(NOISY_TABLE)), copy=False
    )
    post = _outer(select, names, noisy.subquery(source.this.alias or "_dp_ranked", copy=False))
    outputs = tuple(output_name(item) for item in post.expressions)
    return dataclasses.replace(
        shape, postprocess=post, output_names=outputs, top_k=TopK(k, 0, tuple(sorted(set(partition_keys))))
    )


def _reordered(original: exp.Ordered, node: exp.Expression) -> exp.Ordered:
    """The window's ORDER BY item (direction, NULLS) over the noisy column it reads."""
    copy = original.copy()
    copy.set("this", node)
    return copy


def _ranking_shape(plain: exp.Select, extra: list[exp.Expression], dataset: DatasetPolicy) -> QueryShape:
    """The shape of the grouped count, with the window's PARTITION BY and ORDER BY items as extra select
    items: the ordinary analysis then maps each to the noisy column it reads (or refuses it)."""
    scratch = plain.copy()
    scratch.set("expressions", [*scratch.expressions, *(node.copy() for node in extra)])
    return query_shape(scratch, dataset)


def _partition_key(node: exp.Expression, mapped: exp.Expression) -> int:
    if isinstance(mapped, exp.Column) and mapped.name.startswith("_dp_key_"):
        return int(mapped.name.removeprefix("_dp_key_"))
    raise refuse(
        f"PARTITION BY {node.sql(dialect='postgres')} must be one of the GROUP BY keys", hint=_RANKING_HINT
    )


def _rank_limit(where: exp.Where | None, rank: str) -> int:
    """k from ``WHERE rank <= k`` (or ``rank < k + 1``, ``k >= rank``, ``k + 1 > rank``)."""
    condition = where.this if where is not None else None
    bound = None
    if isinstance(condition, exp.LTE | exp.LT | exp.GTE | exp.GT):
        left, right = condition.this, condition.expression
        if isinstance(condition, exp.GTE | exp.GT):
            left, right = right, left
        literal = (
            right if isinstance(right, exp.Literal) and not right.is_string and right.this.isdigit() else None
        )
        if isinstance(left, exp.Column) and left.name == rank and not left.table and literal is not None:
            bound = int(literal.this) - (1 if isinstance(condition, exp.LT | exp.GT) else 0)
    if bound is None:
        raise refuse(f"a ranking subquery must be filtered with WHERE {rank} <= k", hint=_RANKING_HINT)
    if not 1 <= bound <= MAX_K:
        raise refuse(f"WHERE {rank} <= {bound}: k must be between 1 and {MAX_K}", hint=_RANKING_HINT)
    return bound


_OUTER_NODES: tuple[type[exp.Expression], ...] = (
    exp.Select, exp.From, exp.Subquery, exp.TableAlias, exp.Identifier, exp.Column, exp.Alias, exp.Where,
    exp.Order, exp.Ordered, exp.Limit, exp.Offset, *SCALAR_NODES,
)  # fmt: skip


def _outer(select: exp.Select, names: list[str], ranked: exp.Subquery) -> exp.Select:
    """The analyst's outer query over the ranked noisy table: its columns must be the subquery's."""
    post = select.copy()
    post.set("from_", exp.From(this=ranked))
    expanded = []
    for item in post.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            expanded += [exp.column(name, quoted=True) for name in names]
        else:
            expanded.append(item)
    post.set("expressions", expanded)
    known = {name.lower() for name in names} | {
        item.alias.lower() for item in expanded if isinstance(item, exp.Alias)
    }
    for node in (
        post.args.get("where"),
        *expanded,
        post.args.get("order"),
        post.args.get("limit"),
        post.args.get("offset"),
    ):
        for part in node.walk() if node is not None else ():
            if isinstance(part, exp.Column) and part.name.lower() not in known:
                raise refuse(
                    f'column "{part.name}" is not an output of the ranking subquery',
                    hint=f"the subquery's columns are {', '.join(names)}",
                )
            if not isinstance(part, _OUTER_NODES):
                label = part.sql_name().lower() + "()" if isinstance(part, exp.Func) else type(part).__name__
                raise refuse(f"{label} is not supported around a ranking subquery", hint=_RANKING_HINT)
    return post
