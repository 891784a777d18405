"""A noisy table as text, so the answer cache can hand the very same noisy values out again.

Only the noisy table is stored — before the query's own post-processing — so a repeat that differs
in aliases, ORDER BY, LIMIT or arithmetic on the aggregates is served from it too.
"""

from __future__ import annotations

import datetime
import decimal
import json
from typing import Any

from proxy.config import ColumnType
from proxy.release.apply import ReleasedTable, ResultColumn


def encode_table(table: ReleasedTable) -> str:
    return json.dumps(
        {
            "columns": [[column.name, column.type.value] for column in table.columns],
            "rows": [[_plain(value) for value in row] for row in table.rows],
        },
        separators=(",", ":"),
    )


def decode_table(text: str) -> ReleasedTable:
    document = json.loads(text)
    columns = tuple(ResultColumn(name, ColumnType(type_)) for name, type_ in document["columns"])
    rows = [
        tuple(_typed(value, column.type) for value, column in zip(row, columns, strict=True))
        for row in document["rows"]
    ]
    return ReleasedTable(columns, rows)


def _plain(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return float(value)
    return value.isoformat() if isinstance(value, datetime.date) else value


def _typed(value: Any, type_: ColumnType) -> Any:
    if value is None:
        return None
    if type_ is ColumnType.DATE and isinstance(value, str) and value[:1].isdigit():
        return datetime.date.fromisoformat(value)  # a key column may also hold "(other)"
    if type_ is ColumnType.TIMESTAMP and isinstance(value, str) and value[:1].isdigit():
        return datetime.datetime.fromisoformat(value)
    if type_ is ColumnType.REAL and isinstance(value, int):
        return float(value)
    return value
