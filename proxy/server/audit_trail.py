"""The audit entries of one message from a client: what each statement was and what became of it.

Refusals are audited too — they cost nothing but show what an analyst tried. A statement is
"refused" when Veil stopped it before any engine saw it (policy, syntax, budget, settings, complexity:
SQLSTATE classes 0A, 22, 25, 28, 42, 53, 54) and "failed" when it did not end in an answer after that
(engine error, statement timeout, response deadline, cancel, disconnection, internals). Neither
released anything; a failure after the engine read private rows is charged all the same, and its
entry carries the ε and δ charged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from budget.audit import AuditEntry, AuditLog, Decision
from proxy.errors import ProxyError, QueryCanceledError
from proxy.query.service import StatementOutcome

log = logging.getLogger("veil.audit")

MAX_STATEMENT_CHARS = 10_000
_REFUSING_CLASSES = ("0A", "22", "25", "28", "42", "53", "54")
_UNSTAMPED = datetime.min.replace(tzinfo=UTC)


@dataclass
class AuditTrail:
    principal: str
    client: str
    dataset: str
    _pending: list[AuditEntry] = field(default_factory=list)
    urgent: bool = False  # some entry must be committed before the answer leaves

    def answered(self, statement: str, outcome: StatementOutcome, *, ping: bool = False) -> None:
        """``ping``: a select list of literals answered without reading anything."""
        self.urgent |= not ping
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
        self.urgent = True
        refused = error.sqlstate.startswith(_REFUSING_CLASSES) and error.charge is None
        decision = Decision.REFUSED if refused else Decision.FAILED
        charge = error.charge
        self._add(
            statement,
            decision,
            epsilon=charge.epsilon if charge else 0.0,
            delta=charge.delta if charge else 0.0,
            accountant=charge.accountant if charge else "",
            mechanisms=charge.mechanisms if charge else "",
            sqlstate=error.sqlstate,
            error=error.message,
            outcome=_outcome(error),
        )

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
        outcome: str = "",
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
                outcome=outcome,
            )
        )


def _outcome(error: ProxyError) -> str:
    """What ended a statement that failed once its engine had started: a stop says which, anything
    else was the engine's error; a refusal has no outcome."""
    if isinstance(error, QueryCanceledError):
        return error.outcome
    return "engine error" if error.charge is not None else ""


_MAX_BATCH = 256  # messages written in one transaction at most
_Request = tuple[Sequence[AuditEntry], asyncio.AbstractEventLoop, "asyncio.Future[None]"]


class AuditWriter:
    """Appends each message's audit entries on a thread of its own; the session awaits the write, so
    the rows are still committed before the client gets its answer.

    ``asyncio.to_thread`` did the same, but its executor's bookkeeping made the hop a good part of a
    ``SELECT 1``; a dedicated thread fed by a ``SimpleQueue``, answering with
    ``call_soon_threadsafe``, is cheaper. The messages queued while a write runs are written together
    in the next transaction (one write lock taken instead of one per message, which mattered with
    many connections and worker processes on one ledger); a failed write fails each of them."""

    def __init__(self, audit_log: AuditLog) -> None:
        self._log = audit_log
        self._requests: queue.SimpleQueue[_Request] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="veil-audit", daemon=True).start()

    async def append(self, entries: Sequence[AuditEntry]) -> None:
        """Write ``entries`` in one transaction; raises what the write raised."""
        await self._queue(entries)

    def post(self, entries: Sequence[AuditEntry]) -> None:
        """Queue ``entries`` behind the writes already queued, without waiting: a failure is logged."""
        self._queue(entries).add_done_callback(_log_failure)

    def _queue(self, entries: Sequence[AuditEntry]) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        written: asyncio.Future[None] = loop.create_future()
        self._requests.put((entries, loop, written))
        return written

    def _serve(self) -> None:
        while True:
            batch = [self._requests.get()]
            with contextlib.suppress(queue.Empty):
                while len(batch) < _MAX_BATCH:
                    batch.append(self._requests.get_nowait())
            error: BaseException | None = None
            try:
                self._log.append(*(entry for entries, _, _ in batch for entry in entries))
            except Exception as failure:  # handed to the sessions, which report it as before
                error = failure
            for _, loop, written in batch:
                with contextlib.suppress(RuntimeError):  # the loop is closed: the server stopped
                    loop.call_soon_threadsafe(_settle, written, error)


def _log_failure(written: asyncio.Future[None]) -> None:
    if not written.cancelled() and written.exception() is not None:
        log.error("audit append failed: %s", written.exception())


def _settle(written: asyncio.Future[None], error: BaseException | None) -> None:
    if written.cancelled():
        return
    if error is not None:
        written.set_exception(error)
    else:
        written.set_result(None)
