"""Checks the table-driven SQL tests share: a shape's price agrees in the NOTICE, the ledger and
``veil explain``, and its noisy rows lie within each column's tolerance of the exact ones; a refusal says
what is wrong and spends nothing."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from budget.ledger import Ledger
from proxy.config import ColumnType
from proxy.errors import PolicyViolationError
from proxy.query.explain import Explanation, explain_query
from proxy.query.service import QueryService, StatementOutcome
from tests.sql.engines import EPSILON, Engine, run


@dataclass(frozen=True)
class Shape:
    """An accepted query, the engine SQL of its exact answer (same columns, same row order; per engine
    where the engines' SQL differs), the NOTICE's split (``(quantity, sensitivity)`` in order; each gets
    EPSILON / len), each column's tolerance (seconds for a timestamp, days for a date, units otherwise)
    and type."""

    sql: str
    exact: str
    split: tuple[tuple[str, float], ...]
    tolerances: tuple[float, ...]
    types: tuple[ColumnType, ...]
    rows: int = 1
    exact_by_engine: dict[str, str] = field(default_factory=dict)


def assert_answered(shape: Shape, *, engine: Engine, service: QueryService, ledger: Ledger) -> None:
    """The shape answered at EPSILON: priced as its split, typed as its types, as many rows as the exact
    answer's and each value within its column's tolerance of the exact one."""
    outcome = run(service, shape.sql)
    assert outcome.table is not None
    explained = explain_query(engine.dataset, shape.sql, backend=service.backend, epsilon=EPSILON)
    assert_priced_as_split(
        outcome, explained, ledger=ledger, dataset=engine.dataset.name, split=shape.split, epsilon=EPSILON
    )
    assert [column.type for column in outcome.table.columns] == list(shape.types)
    expected = engine.exact(service, shape.exact_by_engine.get(engine.name, shape.exact))
    assert len(outcome.table.rows) == shape.rows
    assert_rows_close(outcome.table.rows, expected, shape.tolerances)


def assert_refused(sql: str, message: str, hint: str, *, service: QueryService, ledger: Ledger) -> None:
    """42501 with ``message`` and ``hint`` in the error's, and nothing spent."""
    with pytest.raises(PolicyViolationError) as raised:
        run(service, sql)
    assert raised.value.sqlstate == "42501"
    assert message in raised.value.message, raised.value.message
    assert hint in (raised.value.hint or ""), raised.value.hint
    assert ledger.history("alice") == []


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
