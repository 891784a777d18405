"""Fixtures of the tests that need a real PostgreSQL server.

* ``postgres_dsn`` — the server named by ``VEIL_TEST_POSTGRES_DSN`` (default: the local test server,
  ``host=127.0.0.1 port=5432 user=postgres dbname=test``). If it cannot be reached every test here is
  skipped, saying why — unless ``VEIL_REQUIRE_POSTGRES=1``: then they fail, so that a CI job meant to
  exercise PostgreSQL cannot pass by skipping.
* ``fresh_schema`` — a uniquely named schema (``veil_test_…``) made for one test and dropped with
  everything in it afterwards; ``new_schema`` makes more of them.
* ``pg`` — an autocommit superuser connection for arranging data and looking behind Veil's back.

The DSN must name a role that may create schemas; the tests never touch ``public``.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

DEFAULT_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test"
REQUIRE_VARIABLE = "VEIL_REQUIRE_POSTGRES"
DSN_VARIABLE = "VEIL_TEST_POSTGRES_DSN"


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    dsn = os.environ.get(DSN_VARIABLE) or DEFAULT_DSN
    try:
        with psycopg.connect(dsn, connect_timeout=3, autocommit=True) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as error:
        reason = f"PostgreSQL is not reachable at {dsn!r} ({type(error).__name__}: {str(error).strip()})"
        if os.environ.get(REQUIRE_VARIABLE) == "1":
            pytest.fail(f"{REQUIRE_VARIABLE}=1 but {reason}", pytrace=False)
        pytest.skip(f"{reason}; set {DSN_VARIABLE}, or {REQUIRE_VARIABLE}=1 to make this an error")
    return dsn


@contextlib.contextmanager
def schema_in(dsn: str) -> Iterator[str]:
    """A new, uniquely named schema, dropped (CASCADE) when the block ends."""
    name = f"veil_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def new_schema(postgres_dsn: str) -> Iterator[Callable[[], str]]:
    with contextlib.ExitStack() as stack:
        yield lambda: stack.enter_context(schema_in(postgres_dsn))


@pytest.fixture
def fresh_schema(new_schema: Callable[[], str]) -> str:
    return new_schema()


@pytest.fixture
def pg(postgres_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(postgres_dsn, autocommit=True) as connection:
        yield connection


def in_schema(pg: psycopg.Connection[Any], schema: str, statement: str) -> psycopg.Cursor[Any]:
    """Run a statement (or several, without results) of the test with ``search_path`` = ``schema``."""
    pg.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    return pg.execute(statement)  # type: ignore[call-overload]
