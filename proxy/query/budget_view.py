"""``veil.budget``: what the connected analyst may still spend, per dataset, answered from the
ledger alone (it reads no data, so it costs nothing). ``SHOW veil.budget`` returns the same table,
and ``SELECT … FROM veil.budget`` may filter, sort or compute over it."""

from __future__ import annotations

from collections.abc import Callable

from budget.ledger import Accountant, Ledger
from proxy.config import ColumnType
from proxy.release.apply import ReleasedTable, ResultColumn

BUDGET_VIEW = ("veil", "budget")
_REAL, _TEXT = ColumnType.REAL, ColumnType.TEXT
COLUMNS = (
    ResultColumn("dataset", _TEXT),
    ResultColumn("granted_epsilon", _REAL),
    ResultColumn("spent_epsilon", _REAL),
    ResultColumn("remaining_epsilon", _REAL),
    ResultColumn("granted_delta", _REAL),
    ResultColumn("spent_delta", _REAL),
    ResultColumn("remaining_delta", _REAL),
    ResultColumn("accountant", _TEXT),
    ResultColumn("renewal", _TEXT),
    ResultColumn("period_start", ColumnType.DATE),
    ResultColumn("releases", ColumnType.INTEGER),
    ResultColumn("cap_epsilon", _REAL),
    ResultColumn("cap_remaining_epsilon", _REAL),
)


def budget_table(
    ledger: Ledger, analyst: str, *, accountant: Callable[[str], Accountant | None]
) -> ReleasedTable:
    """One row per dataset the analyst holds a grant on; the cap columns are NULL without a cap."""
    rows = []
    for balance in ledger.balances(analyst, accountant=accountant):
        cap = ledger.cap(balance.dataset, accountant=accountant(balance.dataset))
        cap_left = None if cap.cap_epsilon is None else max(0.0, cap.cap_epsilon - cap.spent_epsilon)
        rows.append(
            (
                balance.dataset,
                balance.granted_epsilon,
                balance.spent_epsilon,
                balance.remaining_epsilon,
                balance.granted_delta,
                balance.spent_delta,
                balance.remaining_delta,
                balance.accountant,
                balance.renewal or "never",
                balance.period_start,
                balance.releases,
                cap.cap_epsilon,
                cap_left,
            )
        )
    return ReleasedTable(COLUMNS, rows)
