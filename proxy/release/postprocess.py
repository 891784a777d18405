"""Run a query's post-processing (arithmetic, HAVING, ORDER BY, LIMIT) over its noisy table.

Post-processing of a differentially private output costs no privacy, so it may run any SQL the
allow-list accepts — but only over the noisy values: the engine is an empty in-memory DuckDB,
with external access disabled, into which the noisy table alone is registered, per call.
"""

from __future__ import annotations

import duckdb
import pandas as pd

from proxy.analysis.shape import NOISY_TABLE
from proxy.config import ColumnType
from proxy.release.apply import ReleasedTable

SANDBOX_CONFIG = {"enable_external_access": False, "lock_configuration": True}
_PANDAS_TYPES = {
    ColumnType.INTEGER: "Int64",
    ColumnType.REAL: "Float64",
    ColumnType.TEXT: "string",
    ColumnType.BOOLEAN: "boolean",
    ColumnType.DATE: "object",
    ColumnType.TIMESTAMP: "object",
}


class PostprocessEngine:
    def __init__(self) -> None:
        self._connection = duckdb.connect(":memory:", config=dict(SANDBOX_CONFIG))

    def run(
        self, sql: str, table: ReleasedTable, *, name: str = NOISY_TABLE
    ) -> tuple[list[tuple[str, str]], list[tuple[object, ...]]]:
        """→ (name, DuckDB type) pairs and rows. The registration lives only on this call's cursor."""
        cursor = self._connection.cursor()
        try:
            cursor.register(name, _frame(table))
            cursor.execute(sql)
            description = [(column[0], str(column[1])) for column in cursor.description or []]
            return description, cursor.fetchall()
        finally:
            cursor.close()


def _frame(table: ReleasedTable) -> pd.DataFrame:
    """Nullable pandas dtypes, so a NULL (an AVG of no rows) stays NULL instead of becoming NaN."""
    return pd.DataFrame(
        {
            column.name: pd.array([row[i] for row in table.rows], dtype=_PANDAS_TYPES[column.type])
            for i, column in enumerate(table.columns)
        }
    )
