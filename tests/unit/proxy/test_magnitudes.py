"""Bounds on the digits of numbers computed on PostgreSQL (analysis/magnitudes.py)."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.analysis.magnitudes import COLUMN_DIGITS, NUMERIC_DIGITS, NUMERIC_SCALE, largest_digits
from tests.unit.proxy.people_fixture import people


def digits(sql: str) -> int:
    return largest_digits(sqlglot.parse_one(sql, dialect="postgres"), table=people())


def test_a_column_is_read_within_a_double_range() -> None:
    assert digits("cost") == COLUMN_DIGITS


def test_a_literal_has_its_own_size() -> None:
    assert digits("12345") == 5
    assert digits("'1e100'") == 101  # a string PostgreSQL reads as a number


def test_a_product_adds_digits_a_sum_one() -> None:
    assert digits("age * 1e100000 * 1e100000") == COLUMN_DIGITS + 2 * 100_001
    assert digits("age + cost") == COLUMN_DIGITS + 1


def test_a_division_by_a_value_that_can_be_tiny_adds_the_whole_scale() -> None:
    assert digits("1 / (cost - age)") == 1 + NUMERIC_SCALE + 1


def test_conditions_count_too() -> None:
    assert digits("CASE WHEN age * 1e100000 * 1e100000 > 0 THEN 1 END") > NUMERIC_DIGITS


@pytest.mark.parametrize(
    "sql", ["EXP(cost * cost)", "POWER(cost, cost)", "LN(cost) * 1e300", "LENGTH(note) * 1e300"]
)
def test_bounded_functions_stay_bounded(sql: str) -> None:
    assert digits(sql) < 1000
