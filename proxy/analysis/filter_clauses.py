"""``FILTER (WHERE …)`` on aggregates, as the CASE form the rest of the analysis already understands.

An aggregate skips NULLs, so ``agg(x) FILTER (WHERE c)`` is ``agg(CASE WHEN c THEN x END)`` in SQL's own
semantics, and ``COUNT(*) FILTER (WHERE c)`` is ``COUNT(CASE WHEN c THEN 1 END)``. After this rewrite the
condition is an ordinary part of the aggregate's argument: checked against the allow-list and made
error-free like any expression on private values (analysis/checks.py, rewrite/safe_predicates.py), and
bounded by interval analysis (a CASE without ELSE has its THEN's range; analysis/intervals.py).

Each CASE made here remembers, in its ``meta[FILTERED]``, the aggregate's argument and condition as the
analyst wrote them (``*`` and ``cost IS NULL``), so that NOTICEs and ``veil explain`` name the aggregate
as written — ``count(*) FILTER (WHERE cost IS NULL)`` — not by this rewrite (analysis/aggregates.py). The
rewritten aggregate remembers the whole call as written (:func:`as_written`), for the refusals that name it.

>>> filters_as_case(sqlglot.parse_one("SELECT COUNT(*) FILTER (WHERE cost IS NULL) FROM visits")).sql()
'SELECT COUNT(CASE WHEN cost IS NULL THEN 1 END) FROM visits'
"""

from __future__ import annotations

from sqlglot import exp

FILTERED = "veil_filter"
"""The meta key of a CASE made from a FILTER clause: (the argument, the condition), as written."""
_CALL = "veil_filter_call"
"""The meta key of an aggregate rewritten here: the call with its FILTER clause, as written."""


def filters_as_case(tree: exp.Expression) -> exp.Expression:
    """A copy of ``tree`` without FILTER clauses (``tree`` itself when it has none)."""
    if tree.find(exp.Filter) is None:
        return tree
    return tree.transform(_rewrite)


def _rewrite(node: exp.Expression) -> exp.Expression:
    if not isinstance(node, exp.Filter) or not isinstance(node.expression, exp.Where):
        return node
    aggregate = node.this  # never a Filter itself: a second FILTER clause is a syntax error
    condition = node.expression.this
    rewritten = _conditional(aggregate.copy(), condition)
    rewritten.meta[_CALL] = f"{as_written(aggregate)} FILTER (WHERE {_written(condition)})"
    return rewritten


def as_written(aggregate: exp.Expression) -> str:
    """An aggregate call as the analyst wrote it, so that a refusal names what the analyst can find in
    the query: ``median(age)`` (not the ``percentile_cont(0.5)`` sqlglot writes for PostgreSQL), and
    ``min(ts) FILTER (WHERE region = 'north')`` for a call rewritten here, not the CASE it became."""
    if _CALL in aggregate.meta:
        return str(aggregate.meta[_CALL])
    if isinstance(aggregate, exp.Median):
        return f"median({_written(aggregate.this)})"
    return _written(aggregate)


def filter_case(argument: exp.Expression) -> tuple[exp.Expression, exp.Expression] | None:
    """The condition and the value of a CASE made here from a FILTER clause (None for any other
    expression, a CASE the analyst wrote included): the value is ``1`` for ``COUNT(*)``."""
    if not isinstance(argument, exp.Case) or FILTERED not in argument.meta:
        return None
    (branch,) = argument.args["ifs"]
    return branch.this, branch.args["true"]


def _conditional(aggregate: exp.Expression, condition: exp.Expression) -> exp.Expression:
    """The aggregate with its argument replaced by ``CASE WHEN condition THEN argument END``."""
    if isinstance(aggregate, exp.WithinGroup):  # PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY x), MODE()
        order = aggregate.expression
        if isinstance(order, exp.Order):
            for ordered in order.expressions:
                ordered.set("this", _case(condition, ordered.this))
        return aggregate
    argument = aggregate.this
    if isinstance(aggregate, exp.Count) and isinstance(argument, exp.Star):
        aggregate.set("this", _case(condition, exp.Literal.number(1), shown="*"))
    elif isinstance(argument, exp.Distinct):
        argument.set("expressions", [_case(condition, part) for part in argument.expressions])
    elif argument is not None:
        aggregate.set("this", _case(condition, argument))
    return aggregate


def _case(condition: exp.Expression, value: exp.Expression, *, shown: str | None = None) -> exp.Case:
    case = exp.Case(ifs=[exp.If(this=condition.copy(), true=value)])
    case.meta[FILTERED] = (shown or _written(value), _written(condition))
    return case


def _written(node: exp.Expression) -> str:
    return node.sql(dialect="postgres", normalize_functions="lower")
