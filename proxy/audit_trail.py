"""The audit entries of one message from a client: what each statement was and what became of it.

Refusals are audited too — they cost nothing but show what an analyst tried. A statement is
"refused" when Veil stopped it (policy, syntax, budget, settings: SQLSTATE classes 0A, 22, 25, 28,
42, 53) and "failed" when something broke (engine, internals); neither released anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from budget.audit import AuditEntry, Decision
from proxy.errors import ProxyError
from proxy.query_service import StatementOutcome

MAX_STATEMENT_CHARS = 10_000
_REFUSING_CLASSES = ("0A", "22", "25", "28", "42", "53")
_UNSTAMPED = datetime.min.replace(tzinfo=UTC)


@dataclass
class AuditTrail:
    principal: str
    client: str
    dataset: str
    _pending: list[AuditEntry] = field(default_factory=list)

    def answered(self, statement: str, outcome: StatementOutcome) -> None:
        charge = outcome.charge
        if charge is None:
            self._add(statement, Decision.ANSWERED)
        elif charge.cached:
            self._add(statement, Decision.CACHED, accountant=charge.accountant, mechanisms=charge.mechanisms)
        else:
            self._add(
                statement,
                Decision.ANSWERED,
                epsilon=charge.epsilon,
                delta=charge.delta,
                accountant=charge.accountant,
                mechanisms=charge.mechanisms,
            )

    def refused(self, statement: str, error: ProxyError) -> None:
        refused = error.sqlstate.startswith(_REFUSING_CLASSES)
        decision = Decision.REFUSED if refused else Decision.FAILED
        self._add(statement, decision, sqlstate=error.sqlstate, error=error.message)

    def entries(self, at: datetime) -> list[AuditEntry]:
        """Stamped when the message is done: its statements share one time."""
        return [replace(entry, at=at) for entry in self._pending]

    def _add(
        self,
        statement: str,
        decision: Decision,
        *,
        epsilon: float = 0.0,
        delta: float = 0.0,
        accountant: str = "",
        mechanisms: str = "",
        sqlstate: str = "",
        error: str = "",
    ) -> None:
        self._pending.append(
            AuditEntry(
                at=_UNSTAMPED,
                analyst=self.principal,
                client=self.client,
                dataset=self.dataset,
                statement=statement[:MAX_STATEMENT_CHARS],
                decision=decision,
                epsilon=epsilon,
                delta=delta,
                accountant=accountant,
                mechanisms=mechanisms,
                sqlstate=sqlstate,
                error=error,
            )
        )
