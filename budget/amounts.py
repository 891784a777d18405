"""Budget amounts as whole numbers of a fixed quantum, so that accounting is exact.

Every ε and δ the ledger holds — grants, revokes, caps, spends and the running totals — is an
integer count of quanta, ``QUANTUM`` = 10⁻³⁰, and is added and compared as a Python integer. Nothing
rounds away: the ledger this replaces summed :class:`decimal.Decimal` in its default 28-digit context,
so once a grant of 1 was spent, 1 + 10⁻³⁰ rounded back to 1 and the spend was accepted (issue 21).
Now that spend is one quantum, and 1 + 10⁻³⁰ > 1.

Why integers of a *decimal* quantum:

* people type decimals, and a grant of 0.3 must pay for exactly three queries of 0.1 — binary floats
  would refuse the third (0.1 + 0.1 + 0.1 > 0.3). A float is therefore read as the decimal its
  shortest repr shows (:func:`as_decimal`: 0.1 means 0.1), which is a whole number of quanta whenever
  it has at most 30 decimals — every float of at least 10⁻¹⁴ with all of its 17 significant digits
  (every ε down to any sensible floor, every δ a policy uses, and the sums and shares of them that a
  UNION or a τ-threshold charges), and 10⁻¹⁵ … 10⁻³⁰ with fewer;
* exact rationals would need no quantum, but the totals' text would grow with every odd-sized spend
  (one of 5e-324 alone has over 300 digits) and nothing would bound what a probe may cost to store;
  a fixed quantum keeps every amount one integer of bounded size, compared with ``<=``, identical in
  SQLite and PostgreSQL;
* binary quanta (2⁻ᵏ) would make 0.1 inexact.

Stores hold amounts as text (:func:`to_text`): the integer of quanta with the decimal point written in
and exactly 30 decimals (``0.100000000000000000000000000000``), so a person reading the table sees ε,
and neither SQLite's 64-bit INTEGER (at most 9.2·10⁻¹² of ε at this quantum) nor a float or
``numeric`` column ever does arithmetic on them.

Rounding, always against the analyst:

* a spend's ε and δ are charged *rounded up* to the quantum (:func:`charge_units`): the ledger may
  overcharge by less than 10⁻³⁰, never undercharge, and the noise is calibrated to the spend's own ε,
  which is at most its charge. A positive amount below one quantum is refused: charging it as 10⁻³⁰
  would bill more than was asked, perhaps far more, and it is either a mistake or a probe;
* grants, revokes and caps are an administrator's exact decisions, so one that is not a whole number
  of quanta is refused rather than rounded (:func:`exact_units`).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction

from budget.errors import InvalidBudgetError

QUANTUM_DIGITS = 30
SCALE = 10**QUANTUM_DIGITS  # quanta per unit of ε or δ
QUANTUM = Decimal(1).scaleb(-QUANTUM_DIGITS)
ZERO_TEXT = f"0.{'0' * QUANTUM_DIGITS}"
_TEXT = re.compile(rf"(0|[1-9][0-9]*)\.([0-9]{{{QUANTUM_DIGITS}}})")


def as_decimal(amount: float) -> Decimal:
    """The decimal a person typed: a float read back through its shortest repr (0.1 → 0.1).

    Mechanisms calibrate their noise to shares whose exact sum is at most this decimal, so the
    charge is never too low."""
    return Decimal(repr(float(amount)))


def charge_units(amount: float, *, name: str = "epsilon") -> int:
    """What the ledger charges for ``amount`` of ε or δ: its decimal rounded up to the quantum.

    Refused (:class:`InvalidBudgetError`) when positive but below one quantum."""
    scaled = _scaled(amount, name=name)
    if 0 < scaled < 1:
        raise InvalidBudgetError(
            f"{name} {amount!r} is below the ledger's quantum of {QUANTUM:.0e}, the smallest amount it charges",
            hint=f"ask for a {name} of at least {QUANTUM:.0e}: the ledger counts whole multiples of it",
        )
    return math.ceil(scaled)


def units_up(amount: float, *, name: str = "delta") -> int:
    """``amount`` rounded up to whole quanta, never refused (a part of a charged δ: at most its whole)."""
    return math.ceil(_scaled(amount, name=name))


def exact_units(amount: float, *, name: str = "epsilon") -> int:
    """``amount`` in quanta, refused unless it is a whole number of them (grants, revokes, caps)."""
    scaled = _scaled(amount, name=name)
    if scaled.denominator != 1:
        raise InvalidBudgetError(
            f"{name} {amount!r} is finer than the ledger's quantum of {QUANTUM:.0e}",
            hint=f"round it to at most {QUANTUM_DIGITS} decimal places",
        )
    return int(scaled)


def _scaled(amount: float, *, name: str) -> Fraction:
    if not (math.isfinite(amount) and amount >= 0):
        raise InvalidBudgetError(f"{name} must be a finite number >= 0, got {amount!r}")
    return Fraction(as_decimal(amount)) * SCALE


def to_text(units: int) -> str:
    """An amount as stores hold it: fixed-point decimal text with exactly 30 decimals."""
    if units < 0:
        raise InvalidBudgetError(f"an amount cannot be negative, got {units} quanta")
    whole, fraction = divmod(units, SCALE)
    return f"{whole}.{fraction:0{QUANTUM_DIGITS}d}"


def from_text(text: object) -> int:
    """An amount read back from a store (the inverse of :func:`to_text`; strict, so that a value
    written behind the ledger's back in another form is noticed rather than misread)."""
    match = _TEXT.fullmatch(str(text))
    if match is None:
        raise InvalidBudgetError(f"the ledger holds {text!r} where an amount of ε or δ belongs")
    return int(match[1]) * SCALE + int(match[2])


def float_up(units: int) -> float:
    """The smallest float whose decimal (:func:`as_decimal`) is at least ``units`` quanta.

    ``as_decimal`` is increasing, so ``float_up(s) <= g`` holds exactly when ``s`` quanta are at most
    ``as_decimal(g)``: comparing it with a float grant is the ledger's exact comparison. Spends and
    grants are shown rounded this way, so a balance never shows more spent than granted."""
    target = Fraction(units, SCALE)
    result = float(target)
    while Fraction(as_decimal(result)) < target:
        result = math.nextafter(result, math.inf)
    while result > 0 and Fraction(as_decimal(below := math.nextafter(result, 0.0))) >= target:
        result = below
    return result


def float_down(units: int) -> float:
    """The largest float whose decimal is at most ``units`` quanta: what may still be spent of
    ``units`` (a spend of it is charged at most ``units``), or a grant as the float it compares with."""
    target = Fraction(units, SCALE)
    result = float(target)
    while result > 0 and Fraction(as_decimal(result)) > target:
        result = math.nextafter(result, 0.0)
    while Fraction(as_decimal(above := math.nextafter(result, math.inf))) <= target:
        result = above
    return result


def units_down(amount: float) -> int:
    """Whole quanta in ``amount``'s decimal, rounded down (what a revoke may take of a float balance)."""
    return math.floor(_scaled(amount, name="amount"))


def add_up(total: float, amount: float) -> float:
    """A running float sum that stays an upper bound of the exact one: every step rounds up."""
    return math.nextafter(total + amount, math.inf) if amount else total


def subtract_up(total: float, amount: float) -> float:
    """Take back an amount added with :func:`add_up`, still rounding up and never below zero."""
    return max(0.0, math.nextafter(total - amount, math.inf)) if amount else total
