"""Digit bounds of a rounded value and of a zero or infinite literal as a factor (analysis/magnitudes.py).
PostgreSQL refuses nothing below NUMERIC's 131,072 digits, and Veil refuses a query whose bound reaches
them: a bound looser than its rule refuses, at the limit, a query that cannot overflow."""

from __future__ import annotations

from proxy.analysis.magnitudes import COLUMN_DIGITS
from tests.unit.proxy.test_magnitudes import digits


def test_rounding_adds_one_digit_at_most() -> None:
    """ROUND(9.6) is 10: one digit more, never two."""
    assert digits("ROUND(cost)") == COLUMN_DIGITS + 1
    assert digits("FLOOR(cost) * 1e100000") == COLUMN_DIGITS + 1 + 100_001
    assert digits("CEIL(12345)") == 6


def test_a_zero_or_infinite_factor_has_one_digit() -> None:
    """0 and 'Infinity' count as one digit in a product (Infinity is no NUMERIC PostgreSQL multiplies
    into a larger one: it stays infinite)."""
    assert digits("cost * 0") == COLUMN_DIGITS + 1
    assert digits("0") == 1
    assert digits("cost * 'Infinity'") == COLUMN_DIGITS + 1
