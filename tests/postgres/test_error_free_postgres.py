"""The PostgreSQL rewrites of rewrite/safe_predicates.py keep every value of a valid row: on rows where
the expression as written does not fail, the error-free expression computes the same thing; on the
rows where it would fail, the error-free one gives NULL instead of an error."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import psycopg
import pytest
from sqlglot import parse_one

from proxy.rewrite.safe_predicates import error_free
from tests.postgres.conftest import in_schema
from tests.unit.proxy.people_fixture import people

pytestmark = pytest.mark.postgres

ROWS = """
CREATE TABLE people (id bigint, age bigint, cost double precision, note text, born date, smoker boolean);
INSERT INTO people VALUES
    (1, 37, 52.25, 'Ann', '1987-05-05', true),
    (2, 1, 0.75, 'b', '2000-02-29', false),
    (3, 90, 499.75, 'Charlotte', '1950-12-31', NULL),
    (4, NULL, NULL, NULL, NULL, NULL);
"""
SAME_VALUES = [
    "age / 10",
    "age % 7",
    "div(age, 7)",
    "cost / 4",
    "(age / 10) / 2",
    "CASE WHEN age > 50 THEN 2000 ELSE 0 END * 2",
    "length(note) * 2",
    "strpos(note, 'n')",
    "abs(age - 50)",
    "round(CAST(cost AS NUMERIC), 1)",  # PostgreSQL has no round(double precision, int)
    "floor(cost)",
    "substring(note, 2, 3)",
    "sqrt(cost)",
    "ln(cost)",
    "log(cost)",
    "log(2, CAST(cost AS NUMERIC))",
    "exp(age / 10.0)",
    "power(cost, 2)",
    "power(age, 0.5)",
    "power(age - 50, 3)",  # a negative base to an integer power is defined: -2197 for the first row
    "power(-cost, 2.0)",
    "CAST(cost AS INT)",
    "CAST(age AS SMALLINT)",
    "CAST(cost AS REAL)",
    "CAST(age AS TEXT)",
    "CAST(born AS TIMESTAMP)",
    "born + 30",
    "30 + born",
    "born - born",
    "born - INTERVAL '1' YEAR",
    "date_trunc('month', born)",
    "EXTRACT(year FROM born)",
    "EXTRACT(epoch FROM born)",
    "current_date - born",
    "note LIKE 'A%'",
    "smoker AND age > 3",
]


@pytest.fixture
def pg_people(pg: psycopg.Connection[Any], fresh_schema: str) -> psycopg.Connection[Any]:
    in_schema(pg, fresh_schema, ROWS)
    return pg


def values(pg: psycopg.Connection[Any], expression: str) -> list[Any]:
    return [row[0] for row in pg.execute(f"SELECT {expression} FROM people ORDER BY id").fetchall()]  # type: ignore[arg-type]


def same(a: Any, b: Any) -> bool:
    """NUMERIC where PostgreSQL had an integer or a double: equal as numbers (to a double's precision)."""
    if isinstance(a, int | float | Decimal) and isinstance(b, int | float | Decimal):
        return float(a) == pytest.approx(float(b), rel=1e-12)
    return bool(a == b)


@pytest.mark.parametrize("expression", SAME_VALUES)
def test_a_valid_row_keeps_its_value(pg_people: psycopg.Connection[Any], expression: str) -> None:
    safe = error_free(parse_one(expression, dialect="postgres"), table=people(), dialect="postgres")
    written, rewritten = values(pg_people, expression), values(pg_people, safe.sql(dialect="postgres"))
    assert all(same(a, b) for a, b in zip(written, rewritten, strict=True)), (written, rewritten)


NULL_INSTEAD_OF_FAILING = [
    "sqrt(-cost)",
    "ln(cost - cost)",
    "log(1 + 0 * CAST(cost AS NUMERIC), CAST(cost AS NUMERIC))",
    "exp(age * 1000)",
    "power(-cost, 0.5)",
    "power(cost - cost, -1)",
    "age / (age - age)",
    "1 / (age / (cost - cost))",
    "CAST(cost * 1e10 AS INT)",
    "CAST(age * 1000 AS SMALLINT)",
]


@pytest.mark.parametrize("expression", NULL_INSTEAD_OF_FAILING)
def test_a_row_the_expression_fails_on_gets_null(pg_people: psycopg.Connection[Any], expression: str) -> None:
    with pytest.raises(psycopg.DataError):
        values(pg_people, expression)
    pg_people.rollback()
    safe = error_free(parse_one(expression, dialect="postgres"), table=people(), dialect="postgres")
    assert values(pg_people, safe.sql(dialect="postgres"))[0] is None


def test_an_infinite_date_is_read_as_null_where_it_is_moved(pg_people: psycopg.Connection[Any]) -> None:
    pg_people.execute("UPDATE people SET born = 'infinity' WHERE id = 1")
    safe = error_free(parse_one("born - born", dialect="postgres"), table=people(), dialect="postgres")
    assert values(pg_people, safe.sql(dialect="postgres"))[:2] == [None, 0]
