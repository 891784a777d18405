"""Rewrite a tree from the leaves up.

sqlglot's ``Expression.transform`` replaces nodes top-down and does not descend into a node it has
replaced, so a rewrite of nested nodes misses the inner ones: in ``1 / (age / (cost - 1))`` only the
outer division would get its guard. Rewriting the children first cannot miss any.

>>> transform_post_order(sqlglot.parse_one("(a / 2) / 3"), halve_divisions)  # both divisions seen
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp


def transform_post_order(
    expression: exp.Expression, fun: Callable[[exp.Expression], exp.Expression]
) -> exp.Expression:
    """``fun`` of every node, children first; ``expression`` is changed in place (pass a copy)."""
    for key, value in list(expression.args.items()):
        if isinstance(value, exp.Expression):
            expression.set(key, transform_post_order(value, fun))
        elif isinstance(value, list):
            children = [transform_post_order(v, fun) if isinstance(v, exp.Expression) else v for v in value]
            expression.set(key, children)
    return fun(expression)
