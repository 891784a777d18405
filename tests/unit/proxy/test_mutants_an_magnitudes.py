"""Digit bounds of numbers computed on PostgreSQL through a choice, a product of small numbers, a
remainder and a root (analysis/magnitudes.py): a bound too low would let one person's value overflow
NUMERIC in a query Veil accepted, and the failure would reveal it."""

from __future__ import annotations

from proxy.analysis.magnitudes import COLUMN_DIGITS, NUMERIC_DIGITS
from tests.unit.proxy.test_magnitudes import digits


def test_a_choice_is_as_large_as_its_largest_branch() -> None:
    assert digits("COALESCE(age * 1e100000, 0) * 1e100000") == COLUMN_DIGITS + 2 * 100_001 > NUMERIC_DIGITS


def test_a_remainder_is_as_large_as_the_smaller_operand() -> None:
    assert digits("(age * 1e100000) % 1e100000 * 1e100000") == 100_001 + 100_001


def test_a_root_has_half_the_digits_as_a_whole_number() -> None:
    assert digits("SQRT(cost) * 1e100000") == (COLUMN_DIGITS // 2 + 1) + 100_001


def test_dividing_by_a_product_of_small_numbers_multiplies_by_both() -> None:
    # 1e-5 * 1e-5 can be as small as 10**-10, so 1 divided by it has 1 + 10 + 1 digits at most
    assert digits("1 / (1e-5 * 1e-5)") == 12
