"""The one small interface every database engine behind a dataset implements.

The query service needs five things from an engine: which SQL dialect to generate (sqlglot's name
for it), a way to run one generated query — row by row, or column by column for a large public answer
that goes out as COPY data —, a version of the data (for the answer cache), and a way to let go of its
resources. Nothing else — no transactions, no parameters, no cursors — so an engine can be swapped
without touching the pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

Description = list[tuple[str, str]]
Rows = list[tuple[Any, ...]]


@dataclass(frozen=True)
class Columns:
    """A result column by column: ``values[i]`` holds column i's values — the same Python values, in the
    same order, as ``execute`` would give in its rows — and ``count`` the number of rows (a result may
    have no columns: PostgreSQL's ``SELECT FROM t``)."""

    description: Description
    values: list[list[Any]]
    count: int

    @classmethod
    def of_rows(cls, description: Description, rows: Rows) -> Columns:
        """The columns of a row-by-row result (an engine without a faster way to fetch them)."""
        values = [list(column) for column in zip(*rows, strict=True)] if rows else [[] for _ in description]
        return cls(description, values, len(rows))


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

    def execute_columns(self, sql: str) -> Columns:
        """``execute``, the result column by column: the same values, errors and interruption. An engine
        that can fetch columns without building a tuple per row (DuckDB) makes a 100,000-row COPY of a
        public table several times cheaper; others transpose their rows (``Columns.of_rows``)."""
        ...

    def data_version(self) -> str:
        """Changes whenever the data may have changed, so that a cached noisy answer is only
        returned for the data it was computed on (budget/answer_cache.py)."""
        ...

    def close(self) -> None: ...
