"""Fixtures of the tests that need a real PostgreSQL server.

* ``postgres_dsn`` — defined in ``tests/conftest.py`` (the client suites need it too): the server named
  by ``VEIL_TEST_POSTGRES_DSN`` (default: the local test server). If it cannot be reached every test here
  is skipped, saying why — unless ``VEIL_REQUIRE_POSTGRES=1``: then they fail.
* ``fresh_schema`` — a uniquely named schema (``veil_test_…``) made for one test and dropped with
  everything in it afterwards; ``new_schema`` makes more of them.
* ``pg`` — an autocommit superuser connection for arranging data and looking behind Veil's back.
* ``postgres_ledgers`` — the ledger contract suites' ``Ledgers`` on PostgreSQL, each ledger in a fresh
  schema; a suite that collects the SQLite tests again overrides their ``ledgers`` with it.

The DSN must name a role that may create schemas; the tests never touch ``public``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.conftest import DEFAULT_POSTGRES_DSN as DEFAULT_DSN
from tests.conftest import POSTGRES_DSN_VARIABLE as DSN_VARIABLE
from tests.conftest import REQUIRE_POSTGRES_VARIABLE as REQUIRE_VARIABLE
from tests.conftest import schema_in
from tests.unit.budget.test_ledger import Ledgers

__all__ = ["DEFAULT_DSN", "DSN_VARIABLE", "REQUIRE_VARIABLE", "in_schema", "schema_in"]


@pytest.fixture
def new_schema(postgres_dsn: str) -> Iterator[Callable[[], str]]:
    with contextlib.ExitStack() as stack:
        yield lambda: stack.enter_context(schema_in(postgres_dsn))


@pytest.fixture
def postgres_ledgers(postgres_dsn: str, new_schema: Callable[[], str]) -> Iterator[Ledgers]:
    """PostgreSQL ledgers, each in a fresh schema of the test server (dropped after the test)."""
    made = Ledgers(lambda: (postgres_dsn, new_schema()))
    yield made
    made.close()


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
