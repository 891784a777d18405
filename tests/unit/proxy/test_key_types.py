"""The type of a GROUP BY key computed from a column (analysis/key_types.py): the result description a
client reads is typed before any value exists, so a key typed wrongly is a wrong answer (a date read as
text, a count of days as a date) whatever the data."""

from __future__ import annotations

import pytest
from sqlglot import parse_one

from proxy.analysis.key_types import expression_type
from proxy.config import ColumnType
from tests.unit.proxy.visits_fixture import visits


def type_of(sql: str) -> ColumnType:
    return expression_type(parse_one(sql, dialect="postgres"), visits())


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("note", ColumnType.TEXT),
        ("born", ColumnType.DATE),
        ("seen", ColumnType.TIMESTAMP),
        ("cost", ColumnType.REAL),
        ("smoker", ColumnType.BOOLEAN),
        ("no_such_column", ColumnType.TEXT),
        ("(note)", ColumnType.TEXT),
        ("((born))", ColumnType.DATE),
        ("(seen)", ColumnType.TIMESTAMP),
    ],
)
def test_a_column_keeps_its_declared_type_in_parentheses_too(sql: str, expected: ColumnType) -> None:
    assert type_of(sql) is expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("age + 1", ColumnType.INTEGER),
        ("age / 10", ColumnType.INTEGER),
        ("42", ColumnType.INTEGER),
        ("cost * 2", ColumnType.REAL),
        ("age * 1.5", ColumnType.REAL),
        ("cost - 1", ColumnType.REAL),
        ("cost / 3", ColumnType.REAL),
        ("cost % 7", ColumnType.REAL),
        ("ROUND(cost)", ColumnType.REAL),
        ("FLOOR(cost)", ColumnType.REAL),
        ("CEIL(cost)", ColumnType.REAL),
        ("ABS(cost)", ColumnType.REAL),
        ("1.5", ColumnType.REAL),
        ("'1.5'", ColumnType.TEXT),
        ("UPPER(note)", ColumnType.TEXT),
        ("note || 'x'", ColumnType.TEXT),
    ],
)
def test_arithmetic_on_numbers_is_a_number_and_the_rest_text(sql: str, expected: ColumnType) -> None:
    assert type_of(sql) is expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("EXTRACT(year FROM born)", ColumnType.INTEGER),
        ("EXTRACT(YEAR FROM seen)", ColumnType.INTEGER),
        ("EXTRACT(hour FROM seen)", ColumnType.INTEGER),
        ("EXTRACT(epoch FROM seen)", ColumnType.REAL),
        ("EXTRACT(second FROM seen)", ColumnType.REAL),
        ("EXTRACT(JULIAN FROM born)", ColumnType.REAL),
        ("EXTRACT(milliseconds FROM seen)", ColumnType.REAL),
        ("EXTRACT(microseconds FROM seen)", ColumnType.REAL),
        ("date_trunc('month', born)", ColumnType.DATE),
        ("date_trunc('month', seen)", ColumnType.TIMESTAMP),
        ("date_trunc('year', (seen))", ColumnType.TIMESTAMP),
        ("born - born", ColumnType.INTEGER),  # a number of days
        ("born + 30", ColumnType.DATE),
        ("30 + born", ColumnType.DATE),
        ("born - 7", ColumnType.DATE),
        ("seen + INTERVAL '1 hour'", ColumnType.TIMESTAMP),
        ("seen - seen", ColumnType.TEXT),  # an interval
        ("born - seen", ColumnType.TEXT),
    ],
)
def test_a_moment_s_parts_are_numbers_and_moved_moments_stay_moments(sql: str, expected: ColumnType) -> None:
    """``EXTRACT(year …)`` is an integer, not the column's date; seconds and epochs have fractions."""
    assert type_of(sql) is expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("CAST(cost AS INT)", ColumnType.INTEGER),
        ("CAST(note AS BIGINT)", ColumnType.INTEGER),
        ("CAST(note AS DOUBLE PRECISION)", ColumnType.REAL),
        ("CAST(note AS NUMERIC)", ColumnType.REAL),
        ("CAST(note AS DATE)", ColumnType.DATE),
        ("CAST(note AS TIMESTAMP)", ColumnType.TIMESTAMP),
        ("CAST(age AS BOOLEAN)", ColumnType.BOOLEAN),
        ("CAST(age AS TEXT)", ColumnType.TEXT),
        ("CAST(born AS VARCHAR)", ColumnType.TEXT),
    ],
)
def test_a_cast_is_typed_by_its_target(sql: str, expected: ColumnType) -> None:
    assert type_of(sql) is expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("age > 30", ColumnType.BOOLEAN),
        ("note IS NULL", ColumnType.BOOLEAN),
        ("NOT smoker", ColumnType.BOOLEAN),
        ("age > 30 AND smoker", ColumnType.BOOLEAN),
        ("age > 30 OR cost < 2", ColumnType.BOOLEAN),
        ("CASE WHEN age > 30 THEN born END", ColumnType.DATE),
        ("CASE WHEN age > 30 THEN seen ELSE seen END", ColumnType.TIMESTAMP),
        ("CASE WHEN age > 30 THEN 'old' ELSE 'young' END", ColumnType.TEXT),
        ("CASE WHEN smoker THEN cost * 2 WHEN age > 3 THEN 1 END", ColumnType.REAL),
    ],
)
def test_a_condition_is_boolean_and_a_case_takes_its_first_branch_s_type(
    sql: str, expected: ColumnType
) -> None:
    assert type_of(sql) is expected
