"""Result columns carry the type PostgreSQL would give them, so drivers decode them the same way
(node-postgres returns int8 as a string but int4 as a number)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

INT2, INT4, INT8 = 21, 23, 20


@pytest.mark.parametrize(
    ("sql", "oid"),
    [
        ("SELECT 1", INT4),
        ("SELECT 1 + 1", INT4),
        ("SELECT 1::smallint", INT2),
        ("SELECT 3000000000", INT8),
        ("SELECT COUNT(*) FROM visits", INT8),  # count(*) is bigint in PostgreSQL too
    ],
)
def test_integer_columns_have_postgresql_widths(
    connect: Callable[..., psycopg.Connection[Any]], sql: str, oid: int
) -> None:
    cursor = connect().execute(sql)
    assert cursor.description is not None and cursor.description[0].type_code == oid
    assert isinstance(cursor.fetchone()[0], int)  # type: ignore[index]
