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
