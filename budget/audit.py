"""The audit log: one append-only row per statement an analyst sent, kept in the ledger's store.

It answers "who asked what, when, from where, and what did it cost" — for refused and failed
statements too, which cost nothing but show intent. Rows are written without waiting for the disk
(``durable=False``): the budget is protected by the spends table, not by the log.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from budget.store import LedgerStore, Transaction


class Decision(StrEnum):
    ANSWERED = "answered"  # released (noisy, or exact on public data), and charged if noisy
    CACHED = "cached"  # the stored noisy answer of the same query, charged nothing
    REFUSED = "refused"  # stopped before any data was read: policy, syntax, budget — charged nothing
    FAILED = "failed"  # an engine error, a timeout, a cancel or a disconnection: charged (epsilon > 0)
    # once the engine had read private rows, and charged nothing if it failed before


@dataclass(frozen=True)
class Charge:
    """What one statement on private data cost, as the audit log records it: nothing when
    ``cached`` (the stored answer of the same query)."""

    epsilon: float
    delta: float
    accountant: str
    mechanisms: str
    cached: bool = False


@dataclass(frozen=True)
class AuditEntry:
    at: datetime
    analyst: str
    client: str  # "host:port" of the client connection
    dataset: str
    statement: str  # the SQL, normalized by the proxy
    decision: Decision
    epsilon: float = 0.0
    delta: float = 0.0
    accountant: str = ""
    mechanisms: str = ""
    sqlstate: str = ""
    error: str = ""
    outcome: str = ""  # what ended a failed statement (FAILURE_OUTCOMES); empty otherwise
    id: int | None = None


# What ended a statement that failed after its engine had started (and was charged), or before it.
FAILURE_OUTCOMES = ("engine error", "timed out", "deadline missed", "cancelled", "disconnected")
# What an administrator decided about a reservation a crash left behind (``veil budget resolve``).
RESOLUTION_OUTCOMES = ("released after a crash", "kept after a crash")

_COLUMNS = (
    "at, analyst, client, dataset, statement, decision, epsilon, delta, accountant, mechanisms, sqlstate, error,"
    " outcome"
)


class AuditLog:
    def __init__(self, store: LedgerStore) -> None:
        self._store = store

    def append(self, *entries: AuditEntry) -> None:
        """One transaction for all of them (a batch of statements sent in one message)."""
        if not entries:
            return
        with self._store.transaction(write=True, durable=False) as tx:
            for entry in entries:
                _insert(tx, entry)

    def entries(
        self, *, analyst: str | None = None, since: datetime | None = None, limit: int | None = None
    ) -> list[AuditEntry]:
        """Oldest first; ``since`` compares timestamps, which are stored as UTC ISO text."""
        with self._store.transaction(write=False) as tx:
            rows = tx.execute(
                f"SELECT id, {_COLUMNS} FROM audit WHERE (? IS NULL OR analyst = ?) AND (? IS NULL OR at >= ?)"
                " ORDER BY id" + (f" LIMIT {int(limit)}" if limit is not None else ""),
                (analyst, analyst, *(2 * [_utc(since).isoformat() if since else None])),
            )
        return [_entry(row) for row in rows]


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _insert(tx: Transaction, entry: AuditEntry) -> None:
    tx.execute(
        f"INSERT INTO audit ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            _utc(entry.at).isoformat(),
            entry.analyst,
            entry.client,
            entry.dataset,
            entry.statement,
            entry.decision.value,
            entry.epsilon,
            entry.delta,
            entry.accountant,
            entry.mechanisms,
            entry.sqlstate,
            entry.error,
            entry.outcome,
        ),
    )


def _entry(row: tuple[object, ...]) -> AuditEntry:
    (
        id_,
        at,
        analyst,
        client,
        dataset,
        statement,
        decision,
        epsilon,
        delta,
        accountant,
        mechanisms,
        sqlstate,
        error,
        outcome,
    ) = row
    return AuditEntry(
        at=datetime.fromisoformat(str(at)),
        analyst=str(analyst),
        client=str(client),
        dataset=str(dataset),
        statement=str(statement),
        decision=Decision(str(decision)),
        epsilon=float(epsilon),  # type: ignore[arg-type]
        delta=float(delta),  # type: ignore[arg-type]
        accountant=str(accountant),
        mechanisms=str(mechanisms),
        sqlstate=str(sqlstate),
        error=str(error),
        outcome=str(outcome),
        id=int(id_),  # type: ignore[call-overload]
    )
