"""The PostgreSQL error-free rewrite (rewrite/safe_predicates.py) run on a real server: an expression that
fails on one person's row only would answer a question about that row. Pinned by the survivors of a
sampled mutation run of proxy/rewrite/ (seed 2102, docs/testing.md)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from sqlglot import parse_one

from proxy.rewrite.safe_predicates import error_free
from tests.postgres.test_error_free_postgres import pg_people, values
from tests.unit.proxy.people_fixture import people

pytestmark = pytest.mark.postgres
__all__ = ["pg_people"]  # the fixture, shared with test_error_free_postgres


def test_an_integer_literal_among_a_function_s_arguments_cannot_overflow_on_one_row(
    pg_people: psycopg.Connection[Any],
) -> None:
    """As written, ``COALESCE(NULL, 2000000000) * COALESCE(NULL, 2)`` is int4 × int4 and overflows —
    only on the row of person 3 here, so the error would say that person 3 exists. Literals in an
    argument list are NUMERIC like any other: every row answers."""
    expression = "CASE WHEN id = 3 THEN COALESCE(NULL, 2000000000) END * COALESCE(NULL, 2)"
    with pytest.raises(psycopg.errors.NumericValueOutOfRange):
        values(pg_people, expression)
    pg_people.rollback()
    safe = error_free(parse_one(expression, dialect="postgres"), table=people(), dialect="postgres")
    assert values(pg_people, safe.sql(dialect="postgres")) == [None, None, 4_000_000_000, None]
