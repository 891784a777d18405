"""Budget amounts as the decimals people type, so that accounting is exact.

A grant of 0.3 must pay for exactly three queries of 0.1; binary floating point would refuse the
third (0.1 + 0.1 + 0.1 > 0.3). Every ε and δ is therefore read back through its shortest repr and
summed in :class:`decimal.Decimal`, and the ledger stores those sums as decimal text.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import Decimal

ZERO = Decimal(0)


def as_decimal(amount: float) -> Decimal:
    """The decimal a person typed: a float read back through its shortest repr (0.1 → 0.1).

    Mechanisms calibrate their noise to shares whose exact sum is at most this decimal, so the
    charge is never too low."""
    return Decimal(repr(float(amount)))


def decimal_up(amount: Decimal) -> float:
    """The smallest float whose decimal (:func:`as_decimal`) is at least ``amount``.

    ``as_decimal`` is increasing, so ``decimal_up(x) <= g`` holds exactly when ``x <= as_decimal(g)``:
    comparing the result with a float grant is the ledger's exact decimal comparison. Grants and
    spends are both shown rounded this way, so a balance never shows more spent than granted."""
    if amount <= 0:
        return 0.0
    result = float(amount)
    while as_decimal(result) < amount:
        result = math.nextafter(result, math.inf)
    return result


def decimal_sum(amounts: Iterable[float]) -> Decimal:
    return sum((as_decimal(amount) for amount in amounts), ZERO)


def remaining(granted: Decimal, spent: Decimal) -> float:
    """granted − spent as the largest float that a reservation may still ask for: stepped down until
    ``spent + as_decimal(remaining) <= granted`` holds exactly."""
    left = float(max(ZERO, granted - spent))
    while left > 0 and spent + as_decimal(left) > granted:
        left = math.nextafter(left, 0.0)
    return left


def add_up(total: float, amount: float) -> float:
    """A running float sum that stays an upper bound of the exact one: every step rounds up."""
    return math.nextafter(total + amount, math.inf) if amount else total


def subtract_up(total: float, amount: float) -> float:
    """Take back an amount added with :func:`add_up`, still rounding up and never below zero."""
    return max(0.0, math.nextafter(total - amount, math.inf)) if amount else total
