"""What the PostgreSQL error-free rewrite (rewrite/safe_predicates.py) tells the analyst and computes,
pinned by the survivors of a sampled mutation run of proxy/rewrite/ (seed 2102, docs/testing.md)."""

from __future__ import annotations

import pytest
from sqlglot import parse_one

from proxy.errors import PolicyViolationError
from proxy.rewrite.safe_predicates import error_free
from tests.unit.proxy.test_safe_predicates import on_postgres
from tests.unit.proxy.visits_fixture import visits


@pytest.mark.parametrize(
    ("sql", "hint"),
    [
        (
            "CAST(note AS INT) > 1",
            "compare values as they are, or cast to text; numbers may be cast to numeric and integer types",
        ),
        ("age * 1e100000 * 1e100000 > 0", "multiply or divide by fewer or smaller factors"),
    ],
)
def test_a_refused_expression_says_how_to_write_it_instead(sql: str, hint: str) -> None:
    with pytest.raises(PolicyViolationError) as refused:
        on_postgres(sql)
    assert refused.value.hint == hint


def test_a_refused_cast_names_the_type_as_postgresql_writes_it() -> None:
    """The analyst wrote PostgreSQL: the refusal names ``DOUBLE PRECISION``, not sqlglot's ``DOUBLE``."""
    with pytest.raises(PolicyViolationError) as refused:
        on_postgres("CAST(note AS DOUBLE PRECISION) > 1")
    assert str(refused.value).startswith("CAST of a text to DOUBLE PRECISION is not allowed")


def test_an_expression_too_large_for_numeric_is_refused_saying_why() -> None:
    with pytest.raises(PolicyViolationError) as refused:
        on_postgres("age * 1e100000 * 1e100000 > 0")
    assert str(refused.value).startswith("arithmetic whose numbers could exceed NUMERIC's 131,072 digits")


def test_a_spark_filter_cannot_fail_and_keeps_postgresql_s_meaning() -> None:
    """On Spark (no TRY): a cast that could fail is Spark's TRY_CAST — written as such, not as the CAST
    that fails in ANSI mode —, integers divide as in PostgreSQL, and a square root is taken only where it
    is defined (NULL for a negative cost on every engine)."""
    condition = parse_one("CAST(note AS INT) > 1 AND age / 10 = 3 AND sqrt(cost) > 1", dialect="postgres")
    assert error_free(condition, table=visits(), dialect="spark").sql("spark") == (
        "TRY_CAST(note AS INT) > 1 AND (age DIV 10) = 3 AND CASE WHEN cost >= 0 THEN SQRT(cost) END > 1"
    )
