"""The one small interface every database engine behind a dataset implements.

The query service needs four things from an engine: which SQL dialect to generate (sqlglot's name
for it), a way to run one generated query, a version of the data (for the answer cache), and a way
to let go of its resources. Nothing else — no
transactions, no parameters, no cursors — so an engine can be swapped without touching the pipeline.
"""

from __future__ import annotations

from typing import Any, Protocol

Description = list[tuple[str, str]]
Rows = list[tuple[Any, ...]]


class Backend(Protocol):
    """A read-only engine that runs generated SQL.

    ``execute`` returns the result's ``(column name, engine type name)`` pairs and its rows as
    tuples. Engine values pass through untouched (``Decimal`` included): the release layer converts.
    Any engine failure becomes ``BackendUnavailableError`` with a generic message; the engine's own
    text goes to the server log only, because it can quote private values (a failed cast, an
    overflowing sum). ``execute`` may be called from several threads at once. A running ``execute``
    that the session's CancelRequest or the statement timeout stops raises ``QueryCanceledError``
    (implementations wrap each engine query in ``interrupts.interruptible``).
    """

    dialect: str

    def execute(self, sql: str) -> tuple[Description, Rows]: ...

    def data_version(self) -> str:
        """Changes whenever the data may have changed, so that a cached noisy answer is only
        returned for the data it was computed on (budget/answer_cache.py)."""
        ...

    def close(self) -> None: ...
