"""Filters, keys and aggregate arguments that cannot fail on one row's value, on PostgreSQL."""

from __future__ import annotations

import pytest
from sqlglot import parse_one

from proxy.errors import PolicyViolationError
from proxy.rewrite.safe_predicates import error_free
from tests.unit.proxy.policy_fixture import clinic_policy

TABLE = clinic_policy().table("visits")
assert TABLE is not None


def on_postgres(sql: str) -> str:
    return error_free(parse_one(sql, dialect="postgres"), table=TABLE, dialect="postgres").sql("postgres")


@pytest.mark.parametrize(
    "sql",
    [
        "CAST(note AS INT) > 1",  # text → integer fails on 'abc'
        "CAST(cost AS NUMERIC(3, 1)) > 1",  # a constrained numeric overflows
        "CAST(cost AS SMALLINT) > 1",  # narrowing overflows
        "SQRT(cost) > 1",
        "LN(age) > 1",
    ],
)
def test_what_can_fail_on_one_row_is_refused(sql: str) -> None:
    with pytest.raises(PolicyViolationError, match="can fail on a single row's value"):
        on_postgres(sql)


def test_a_cast_of_a_constant_is_kept() -> None:
    """It fails for every row or for none: it says nothing about one person."""
    assert "CAST('2025-01-01' AS DATE)" in on_postgres(
        "note <> 'x' AND CAST('2025-01-01' AS DATE) IS NOT NULL"
    )


def test_a_cast_to_text_is_kept() -> None:
    assert "CAST(CAST(age AS DECIMAL) AS TEXT)" in on_postgres("CAST(age AS TEXT) = '30'")


@pytest.mark.parametrize("target", ["REAL", "DOUBLE PRECISION", "NUMERIC", "FLOAT"])
def test_a_widening_cast_of_a_number_is_dropped(target: str) -> None:
    """Columns are read as NUMERIC already; the cast could only add an out-of-range failure."""
    sql = on_postgres(f"CAST(cost AS {target}) > 1")
    assert sql == "(CAST(cost AS DECIMAL)) > 1"
