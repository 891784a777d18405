"""The extended query protocol's messages (Parse, Bind, Describe, Execute, Close) for a ``Session``.

Kept apart from proxy/server/session.py, which serves the connection, logs in and runs simple queries:
this is the part of the conversation that holds prepared statements and portals between messages. It is
a mixin rather than an object of its own because both protocols share one session state — the pending
output, the transaction block, the prepared state, the ping memory — and one pipeline entry (``_run``),
and a statement must be charged, audited and answered the same way whichever protocol sent it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from proxy.analysis.parameters import Tree, parameterized_statement
from proxy.analysis.session_commands import ExecutePrepared, FetchCursor, command_of
from proxy.query.service import Description, Principal, QueryService
from proxy.server import cursors
from proxy.server.analysis_pool import RefusedStatement
from proxy.server.audit_trail import AuditTrail
from proxy.server.pings import Ping
from proxy.server.prepared import Portal, PreparedStatement, bound_execute, parameter_types
from proxy.server.responses import outcome_messages, portal_messages, row_description
from proxy.server.transaction_block import FAILED
from proxy.wire import messages as wire

if TYPE_CHECKING:
    from proxy.server.session import Session

FLUSH_THRESHOLD = 1 << 18
"""Extended-protocol output waits for Sync or Flush, as PostgreSQL's does, unless it grows past this."""


@dataclass
class _Attempt:
    """One extended-protocol message: its audit trail, and the statement it concerns once known (a
    failure before that — an unknown portal, say — concerns no statement and is not audited)."""

    audit: AuditTrail
    statement: str | None = None


class ExtendedProtocol:
    """Parse, Bind, Describe, Execute and Close, answered into the session's ``pending`` output."""

    async def _extended(
        self: Session,
        message: wire.Parse | wire.Bind | wire.Describe | wire.Execute | wire.Close,
        service: QueryService,
        principal: Principal,
    ) -> None:
        """One Parse, Bind, Describe, Execute or Close. Its answer waits in ``pending`` for Sync or
        Flush; an error is sent at once, in its place, and starts discarding until Sync."""
        attempt = _Attempt(
            AuditTrail(principal=principal.name, client=self.peer, dataset=service.dataset.name)
        )
        mark = len(self.pending)
        try:
            match message:
                case wire.Parse():
                    await self._parse(message, service, attempt)
                case wire.Bind():
                    self._bind(message, service, attempt)
                case wire.Describe():
                    await self._describe(message, service, principal, attempt)
                case wire.Execute():
                    await self._execute(message, service, principal, attempt)
                case wire.Close():
                    self.prepared.close(message.kind, message.name)
                    self.pending += wire.close_complete()
        except Exception as error:  # the session lives on; the rest of the batch is discarded
            self.pending += self._refusal(error, attempt.audit, attempt.statement)
            self.skipping = True
        if (failure := await self._record(attempt.audit)) is not None:
            del self.pending[mark:]
            self.pending += failure
            self.skipping = True
        if self.skipping or len(self.pending) > FLUSH_THRESHOLD:
            await self._flush()  # an error goes out at once, as PostgreSQL's does: clients wait for it

    async def _parse(self: Session, message: wire.Parse, service: QueryService, attempt: _Attempt) -> None:
        attempt.statement = message.query
        trees = await self._parsed(service, message.query)
        for tree in trees:
            if isinstance(tree, RefusedStatement):
                self._refuse_statement(tree)
        statement = parameterized_statement(trees, service.dataset)  # type: ignore[arg-type]
        if statement.tree is not None:
            self.transaction.check(service.transaction_tag(statement.tree))
        types = parameter_types(message.param_type_oids, statement)
        self.prepared.add_statement(PreparedStatement(message.statement, message.query, statement, types))
        self.pending += wire.parse_complete()

    def _bind(self: Session, message: wire.Bind, service: QueryService, attempt: _Attempt) -> None:
        prepared = self.prepared.statement(message.statement)
        attempt.statement = prepared.query
        if prepared.statement.tree is not None:
            self.transaction.check(service.transaction_tag(prepared.statement.tree))
        values = prepared.decode(message.param_formats, message.params)
        self.prepared.add_portal(message.portal, Portal(prepared, values, message.result_formats))
        self.pending += wire.bind_complete()

    async def _describe(
        self: Session, message: wire.Describe, service: QueryService, principal: Principal, attempt: _Attempt
    ) -> None:
        """A statement is described with stand-in values for its parameters and text result formats;
        a portal with its own values and formats, and it keeps what it learned for its Execute."""
        if message.kind == "S":
            prepared = self.prepared.statement(message.name)
            attempt.statement = prepared.query
            tree = prepared.statement.bind(prepared.probes())
            description = await self._description(tree, service, principal)
            self.pending += wire.parameter_description(prepared.parameter_types)
            self.pending += row_description(description.columns, None)
            return
        portal = self.prepared.portal(message.name)
        attempt.statement = portal.statement.query
        ping = self._remembered_ping(portal, service)
        if portal.description is None and ping is not None:
            portal.description = Description(
                ping.outcome.table.columns if ping.outcome.table else None, ping.outcome
            )
        if portal.description is None:
            tree = portal.statement.statement.bind(portal.values)
            attempt.statement = service.statement_text(tree) if tree is not None else attempt.statement
            portal.description = await self._description(tree, service, principal)
        columns = portal.description.columns
        self.pending += row_description(columns, portal.formats(columns) if columns is not None else None)

    def _remembered_ping(self: Session, portal: Portal, service: QueryService) -> Ping | None:
        """The remembered answer of a portal's statement when it is a ping without parameters; never
        in a failed transaction block, where the pipeline refuses it."""
        if portal.values or self.transaction.status == FAILED:
            return None
        return self.pings.get(portal.statement.query)

    async def _description(
        self: Session, tree: Tree | None, service: QueryService, principal: Principal
    ) -> Description:
        if tree is None:
            return Description(None)
        self.transaction.check(service.transaction_tag(tree))
        command = command_of(tree)
        if isinstance(command, FetchCursor):
            return Description(None if command.move else cursors.columns(self.prepared, command.name))
        if isinstance(command, ExecutePrepared):
            tree = bound_execute(self.prepared.statement(command.name), command)
        elif command is not None:
            return Description(None)  # DECLARE, CLOSE, PREPARE: no rows
        literals = service.answer_literals(tree)  # a driver's ping, described and answered on the loop
        if literals is not None and literals.table is not None:
            return Description(literals.table.columns, literals)
        return await self._in_worker(service.describe, tree, principal=principal, settings=self.settings)

    async def _execute(
        self: Session, message: wire.Execute, service: QueryService, principal: Principal, attempt: _Attempt
    ) -> None:
        """The first Execute of a portal runs its statement — once: later ones send the rows left."""
        portal = self.prepared.portal(message.portal)
        first = portal.outcome is None
        if first:
            query = portal.statement.query
            ping = self._remembered_ping(portal, service)
            if ping is not None:  # a remembered select list of literals: no pipeline (proxy/server/pings.py)
                attempt.statement = ping.statement
                attempt.audit.answered(ping.statement, ping.outcome, ping=True)
                portal.outcome = ping.outcome
            else:
                tree = portal.statement.statement.bind(portal.values)
                if tree is None:
                    self.pending += wire.empty_query_response()
                    return
                attempt.statement = service.statement_text(tree)
                described = portal.description.outcome if portal.description is not None else None
                portal.outcome = await self._run(
                    tree, attempt.statement, service, principal, attempt.audit, described=described
                )
                if not portal.values and not attempt.audit.urgent:
                    messages = b"".join(outcome_messages(portal.outcome))
                    self.pings.remember(query, attempt.statement, portal.outcome, messages)
        self.pending += b"".join(portal_messages(portal, message.max_rows, first=first))
