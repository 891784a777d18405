"""Checks the table-driven SQL tests share: a shape's price agrees in the NOTICE, the ledger and
``veil explain``, and its noisy rows lie within each column's tolerance of the exact ones."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

import pytest

from budget.ledger import Ledger
from proxy.query.explain import Explanation
from proxy.query.service import StatementOutcome


def close(noisy: Any, exact: Any, tolerance: float) -> bool:
    """Within ``tolerance``: seconds for timestamps, days for dates, units for numbers."""
    if isinstance(exact, datetime.datetime):
        return isinstance(noisy, datetime.datetime) and abs((noisy - exact).total_seconds()) <= tolerance
    if isinstance(exact, datetime.date):
        return type(noisy) is datetime.date and abs((noisy - exact).days) <= tolerance
    return noisy is not None and abs(float(noisy) - float(exact)) <= tolerance


def assert_priced_as_split(
    outcome: StatementOutcome,
    explained: Explanation,
    *,
    ledger: Ledger,
    dataset: str,
    split: Sequence[tuple[str, float]],
    epsilon: float,
) -> None:
    """ε shared equally by the quantities of ``split``, in the NOTICE, the ledger (alice's spend, no δ)
    and ``veil explain`` alike."""
    share = f"{epsilon / len(split):.4g}"
    named = ", ".join(f"{quantity} ε={share}" for quantity, _ in split)
    assert f"ε={epsilon:g} ({named})" in outcome.notices[0], outcome.notices[0]
    balance = ledger.balance("alice", dataset)
    assert (balance.spent_epsilon, balance.spent_delta) == (pytest.approx(epsilon), 0.0)
    assert [(m.quantity, m.sensitivity) for m in explained.measurements] == list(split)


def assert_rows_close(
    rows: Sequence[Sequence[Any]], expected: Sequence[Sequence[Any]], tolerances: Sequence[float]
) -> None:
    """Row by row: equal where the tolerance is 0 (an integer count equals its exact integer), else
    :func:`close`."""
    assert len(rows) == len(expected)
    for noisy_row, exact_row in zip(rows, expected, strict=True):
        for noisy, exact, tolerance in zip(noisy_row, exact_row, tolerances, strict=True):
            if tolerance == 0 and not isinstance(exact, datetime.date):
                assert noisy == (int(exact) if isinstance(noisy, int) else exact), (noisy_row, exact_row)
            else:
                assert close(noisy, exact, tolerance), (noisy_row, exact_row)
