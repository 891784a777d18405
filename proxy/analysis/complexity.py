"""The complexity budget of a query on private data, measured on its parsed tree — never by running it.

Why: a query's running time is a value derived from private rows. An expensive expression in a CASE
branch that only one person's rows reach (deep string-function nesting over a large literal) makes
the query measurably slower exactly when that person has the value guessed. Bounding the size of
literals, the number of nodes, the nesting depth and the scalar function calls evaluated per row
bounds how much time one row can add, before any engine sees the query (docs/privacy.md, "Side
channels"). Refusals here read no data, so they spend nothing.

>>> check_complexity(sqlglot.parse_one("SELECT COUNT(*) FROM t WHERE upper(lower(name)) = 'A'"), QueryLimits())
"""

from __future__ import annotations

from sqlglot import exp

from proxy.config import QueryLimits
from proxy.errors import ProgramLimitExceededError

_HINT = "simplify the query; an administrator can raise [datasets.NAME.limits] in the policy"


def check_complexity(tree: exp.Expression, limits: QueryLimits) -> None:
    """Refuse (54001) a statement over any of ``limits``."""
    nodes = 0
    calls = 0
    deepest = 0
    stack: list[tuple[exp.Expression, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        deepest = max(deepest, depth)
        if isinstance(node, exp.Func) and not isinstance(node, exp.AggFunc):
            calls += 1
        if isinstance(node, exp.Literal) and len(str(node.this)) > limits.max_literal_chars:
            _refuse(f"a literal of {len(str(node.this))} characters", "max_literal_chars", limits)
        stack.extend((child, depth + 1) for child in node.iter_expressions())
    if nodes > limits.max_nodes:
        _refuse(f"{nodes} nodes", "max_nodes", limits)
    if deepest > limits.max_depth:
        _refuse(f"expressions nested {deepest} deep", "max_depth", limits)
    if calls > limits.max_function_calls:
        _refuse(f"{calls} scalar function calls", "max_function_calls", limits)


def _refuse(what: str, key: str, limits: QueryLimits) -> None:
    raise ProgramLimitExceededError(
        f"query too complex: {what}, more than this dataset's {key} of {getattr(limits, key)}",
        detail="a query on private data must be small enough that no single row can change how long "
        "it runs by much",
        hint=_HINT,
    )
