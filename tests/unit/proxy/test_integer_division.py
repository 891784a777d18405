"""Integer division follows PostgreSQL (truncation toward zero) when generated for DuckDB."""

from __future__ import annotations

import duckdb
import pytest
import sqlglot

from proxy.rewrite.integer_division import postgres_integer_division
from tests.unit.proxy.policy_fixture import clinic_policy


def duckdb_value(sql: str, age: int) -> object:
    table = clinic_policy().table("visits")
    assert table is not None
    tree = postgres_integer_division(sqlglot.parse_one(sql, dialect="postgres"), table=table)
    (value,) = (
        duckdb.connect().execute(f"SELECT {tree.sql(dialect='duckdb')} FROM (SELECT {age} AS age)").fetchone()
    )  # type: ignore[misc]
    return value


@pytest.mark.parametrize(("age", "expected"), [(37, 3), (-37, -3), (0, 0), (9, 0), (-9, 0)])
def test_integer_column_divided_by_integer_truncates_toward_zero(age: int, expected: int) -> None:
    assert duckdb_value("age / 10", age) == expected


def test_decades_as_postgres_computes_them() -> None:
    assert duckdb_value("(age / 10) * 10", 37) == 30


def test_division_with_a_real_operand_stays_exact() -> None:
    assert duckdb_value("age / 10.0", 37) == pytest.approx(3.7)


def test_real_column_is_not_rewritten() -> None:
    table = clinic_policy().table("visits")
    assert table is not None
    tree = postgres_integer_division(sqlglot.parse_one("cost / 2", dialect="postgres"), table=table)
    assert tree.sql(dialect="duckdb") == "cost / 2"


@pytest.mark.parametrize(
    ("sql", "expected"), [("(age / 10) / 2", 1), ("100 / (age / 10)", 33), ("age / (age / 10)", 12)]
)
def test_nested_integer_divisions_truncate_too(sql: str, expected: int) -> None:
    assert duckdb_value(sql, 37) == expected
