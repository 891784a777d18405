"""``veil.budget``: what the connected analyst may still spend, per dataset, answered from the
ledger alone (it reads no data, so it costs nothing). ``SHOW veil.budget`` returns the same table,
and ``SELECT … FROM veil.budget`` may filter, sort or compute over it.

The dataset cap is spent by every analyst together, so its exact remainder would show other analysts'
activity the moment they spend. Unless the policy says ``cap_visibility = "exact"``, the view shows
what is left of it in steps of 5% of the cap — the same steps in which the ledger refuses a query
at the cap (``Ledger.reserve(cap_step=…)``) — and ``cap_binds``: whether the cap, not the analyst's
own grant, is what limits the next answer.

Parallel composition: after the dataset's row come, per partition column the analyst's statements were
charged to, one row per value charged (``partition_value``) and one for every other value
(``partition_value`` NULL) — what statements pinned to that value may still spend. They are computed
from the analyst's own spends only; the cap columns are the dataset's, since the cap counts every
spend in full (budget/ledger.py)."""

from __future__ import annotations

from collections.abc import Callable

from budget.ledger import BASIC, Accountant, DatasetCap, Ledger, coarse_up
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
    ResultColumn("cap_binds", ColumnType.BOOLEAN),
    ResultColumn("partition_column", _TEXT),
    ResultColumn("partition_value", _TEXT),
)


def budget_table(
    ledger: Ledger,
    analyst: str,
    *,
    accountant: Callable[[str], Accountant | None],
    cap_step: Callable[[str], float | None],
) -> ReleasedTable:
    """One row per dataset the analyst holds a grant on; the cap columns are NULL without a cap.
    ``cap_step`` names each dataset's visible step of its cap (None: exact)."""
    rows = []
    for balance in ledger.balances(analyst, accountant=accountant):
        cap = ledger.cap(balance.dataset, accountant=accountant(balance.dataset))
        cap_left = _cap_left(cap, cap_step(balance.dataset))
        binds = None if cap_left is None else cap_left < balance.remaining_epsilon
        period = (balance.accountant, balance.renewal or "never", balance.period_start)
        rows.append(
            (
                balance.dataset,
                balance.granted_epsilon,
                balance.spent_epsilon,
                balance.remaining_epsilon,
                balance.granted_delta,
                balance.spent_delta,
                balance.remaining_delta,
                *period,
                balance.releases,
                cap.cap_epsilon,
                cap_left,
                binds,
                None,
                None,
            )
        )
        partitions = ledger.partition_balances(
            analyst, balance.dataset, accountant=accountant(balance.dataset) or BASIC
        )
        for part in partitions:
            rows.append(
                (
                    balance.dataset,
                    balance.granted_epsilon,
                    part.spent_epsilon,
                    part.remaining_epsilon,
                    balance.granted_delta,
                    part.spent_delta,
                    part.remaining_delta,
                    *period,
                    part.releases,
                    cap.cap_epsilon,
                    cap_left,
                    None if cap_left is None else cap_left < part.remaining_epsilon,
                    part.column,
                    None if part.value is None else str(part.value),
                )
            )
    return ReleasedTable(COLUMNS, rows)


def _cap_left(cap: DatasetCap, step: float | None) -> float | None:
    if cap.cap_epsilon is None:
        return None
    spent = cap.spent_epsilon if step is None else coarse_up(cap.spent_epsilon, cap.cap_epsilon * step)
    return max(0.0, cap.cap_epsilon - spent)
