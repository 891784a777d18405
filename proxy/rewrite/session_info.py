"""Replace session-information functions with literals before a constant query runs.

The sandbox engine that evaluates ``SELECT 1``-style queries knows nothing of the session, so
``version()``, ``current_user`` and ``current_database()`` are answered from the session itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp


@dataclass(frozen=True)
class SessionInfo:
    version: str
    user: str
    database: str
    schema: str = "public"


def substitute_session_info(expression: exp.Expression, *, info: SessionInfo) -> exp.Expression:
    values = {
        exp.CurrentVersion: info.version,
        exp.CurrentUser: info.user,
        exp.CurrentDatabase: info.database,
        exp.CurrentSchema: info.schema,
    }

    def replace(node: exp.Expression) -> exp.Expression:
        value = values.get(type(node))
        return exp.Literal.string(value) if value is not None else node

    return expression.copy().transform(replace)


def constant_query(select: exp.Select, *, info: SessionInfo) -> exp.Select:
    """Session functions as literals, and positional aliases (``_c0``…) so engine column names
    never matter: the client sees the PostgreSQL names computed during analysis."""
    tree = substitute_session_info(select, info=info)
    aliased = [
        (item.this if isinstance(item, exp.Alias) else item).as_(f"_c{i}")
        for i, item in enumerate(tree.expressions)
    ]
    return tree.select(*aliased, append=False)
