"""Digit bounds of an integer division, a zero or infinite literal, and a number below PostgreSQL's scale
(analysis/magnitudes.py). A bound too low lets a query through whose NUMERIC overflows for one person's
value only (the failure reveals it); one too high refuses an ordinary query."""

from __future__ import annotations

from proxy.analysis.magnitudes import COLUMN_DIGITS, NUMERIC_SCALE
from tests.unit.proxy.test_magnitudes import digits


def test_an_integer_division_is_as_large_as_the_division() -> None:
    """DIV(cost, 0.001) is at most cost · 1000: the column's digits and three more (and one for rounding)."""
    assert digits("DIV(cost, 0.001)") == COLUMN_DIGITS + 3 + 1


def test_a_nonzero_integer_quotient_is_at_least_one() -> None:
    """DIV's result is an integer: dividing by it multiplies by at most 1, not by 10**16383."""
    assert digits("1 / DIV(age, 1) * 1e200000") == 2 + 200_001


def test_a_zero_or_infinite_literal_is_no_tiny_divisor() -> None:
    """0 and 'Infinity' are one digit wide, and are never a nonzero number close to zero."""
    assert digits("1 / 0") == 2
    assert digits("1 / 'Infinity'") == 2


def test_a_literal_below_the_scale_is_rounded_to_the_scale() -> None:
    """PostgreSQL rounds a result to 16,383 decimal places, so no nonzero value is smaller than
    10**-16383 — even a literal written smaller: dividing by it multiplies by at most 10**16384."""
    assert digits("1 / 1e-20000") == 1 + NUMERIC_SCALE + 1
