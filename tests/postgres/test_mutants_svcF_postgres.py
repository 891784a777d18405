"""Survivors of a random sample of proxy/query/service.py's mutants (seed 2116, docs/testing.md) that only
PostgreSQL tells apart: a public column of type ``numeric(p, s)``, which psycopg describes as
``numeric(10,2)`` — not ``numeric`` — and likewise ``timestamp(3)`` and ``timestamptz(3)``. Skips without a
server unless ``VEIL_REQUIRE_POSTGRES=1``."""

from __future__ import annotations

import datetime

import psycopg
import pytest
from psycopg import sql

from proxy.config import ColumnType
from proxy.query.service import QueryService
from proxy.release.apply import ReleasedTable
from proxy.wire import types as pgtypes
from tests.postgres import test_mutants_query_postgres as clinic
from tests.postgres.test_query_dialect_postgres import run, spent

pytestmark = pytest.mark.postgres

service = clinic.service  # the clinic in a fresh PostgreSQL schema; alice holds ε = 10, δ = 1e-5

PRICED = "SELECT code, zone AS price FROM zones ORDER BY code"


def priced(service: QueryService) -> None:
    """zones.zone made a ``numeric(10, 2)`` column holding 1.25 (the policy's type is not checked by a
    public query: it is read as the engine has it)."""
    assert service.dataset.dsn is not None
    with psycopg.connect(service.dataset.dsn, autocommit=True) as connection:
        connection.execute(
            sql.SQL("ALTER TABLE {}.zones ALTER COLUMN zone TYPE numeric(10,2) USING 1.25").format(
                sql.Identifier(service.dataset.schema)
            )
        )


def test_a_public_numeric_with_a_scale_is_a_real_column_of_floats(service: QueryService) -> None:
    """As plain ``numeric`` is: typed real and sent as floats, not as text holding Python decimals."""
    priced(service)
    outcome = run(service, PRICED)
    assert outcome.table is not None
    assert [(c.name, c.type) for c in outcome.table.columns] == [
        ("code", ColumnType.TEXT),
        ("price", ColumnType.REAL),
    ]
    assert [type(price) for _, price in outcome.table.rows] == [float, float, float]
    assert outcome.table.rows[0][1] == 1.25
    assert spent(service) == (0.0, 0.0)


def test_copy_of_a_public_numeric_with_a_scale_sends_floats(service: QueryService) -> None:
    """COPY sends the same values as the SELECT: floats, the decimals of every numeric type converted."""
    priced(service)
    outcome = run(service, f"COPY ({PRICED}) TO STDOUT")
    assert outcome.copy is not None and outcome.tag == "COPY 3"
    assert outcome.copy.values[1] == [1.25, 1.25, 1.25]
    assert [type(price) for price in outcome.copy.values[1]] == [float, float, float]


def retyped_zone(service: QueryService, column_type: str, value: str) -> ReleasedTable:
    """zones.zone made a ``column_type`` column holding ``value``; the answer to reading it back."""
    assert service.dataset.dsn is not None
    with psycopg.connect(service.dataset.dsn, autocommit=True) as connection:
        connection.execute(
            sql.SQL("ALTER TABLE {}.zones ALTER COLUMN zone TYPE " + column_type + " USING {}").format(
                sql.Identifier(service.dataset.schema), sql.Literal(value)
            )
        )
    outcome = run(service, "SELECT zone FROM zones LIMIT 1")
    assert outcome.table is not None
    return outcome.table


def test_a_public_timestamp_with_a_precision_is_a_timestamp_column(service: QueryService) -> None:
    """psycopg describes ``timestamp(3)`` with its precision; without it stripped, the column was typed text
    and a client read its values as strings."""
    table = retyped_zone(service, "timestamp(3)", "2026-01-02 03:04:05")
    assert [(c.name, c.type) for c in table.columns] == [("zone", ColumnType.TIMESTAMP)]


def test_a_public_timestamptz_is_a_timestamptz_column_in_utc(service: QueryService) -> None:
    """``timestamptz(3)`` read in UTC, whatever the server's TimeZone, and typed timestamptz — it was text."""
    table = retyped_zone(service, "timestamptz(3)", "2026-01-02 03:04:05.125+02")
    assert [(c.name, c.type, c.type_oid) for c in table.columns] == [
        ("zone", ColumnType.TIMESTAMP, pgtypes.TIMESTAMPTZ)
    ]
    assert table.rows == [(datetime.datetime(2026, 1, 2, 1, 4, 5, 125000, tzinfo=datetime.UTC),)]
