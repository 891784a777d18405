"""Result columns carry the type PostgreSQL would give them, so drivers decode them the same way
(node-postgres returns int8 as a string but int4 as a number)."""

from __future__ import annotations

import datetime
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


TIMESTAMPTZ = 1184


@pytest.mark.parametrize("binary", [False, True])
def test_a_timestamp_with_time_zone_is_a_timestamptz_in_utc(
    connect: Callable[..., psycopg.Connection[Any]], binary: bool
) -> None:
    """As PostgreSQL answers with TimeZone = UTC: typed timestamptz and sent with its offset, so a driver
    reads an aware value (it was typed text, and read as a string)."""
    cursor = connect().cursor(binary=binary)
    cursor.execute("SELECT TIMESTAMPTZ '2026-01-02 03:04:05.25+02' AS moment")
    assert cursor.description is not None and cursor.description[0].type_code == TIMESTAMPTZ
    assert cursor.fetchone() == (datetime.datetime(2026, 1, 2, 1, 4, 5, 250000, tzinfo=datetime.UTC),)


def test_copy_sends_a_timestamptz_as_postgresql_writes_it(
    connect: Callable[..., psycopg.Connection[Any]],
) -> None:
    """PostgreSQL 15 with TimeZone = UTC writes ``2026-01-02 01:04:05.25+00``."""
    cursor = connect().cursor()
    with cursor.copy("COPY (SELECT TIMESTAMPTZ '2026-01-02 03:04:05.25+02' AS moment) TO STDOUT") as copy:
        data = b"".join(bytes(chunk) for chunk in copy)
    assert data == b"2026-01-02 01:04:05.25+00\n"
