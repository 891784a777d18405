"""One client connection: the PostgreSQL v3 conversation around the query pipeline.

The session speaks through its ``Connection`` (proxy/server/connection.py) once ``log_in``
(proxy/server/login.py) has authenticated the analyst; the codecs in ``proxy.wire`` do no I/O; the
pipeline in ``proxy.query.service`` knows nothing of the wire. Blocking work (engine, ledger) runs in worker
threads so one slow query never stalls other connections. Any error is turned into an
ErrorResponse here, and only ``ProxyError`` text ever reaches the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import NoReturn, ParamSpec, TypeVar

from proxy.analysis.parameters import Tree
from proxy.analysis.session_commands import (
    CloseCursor,
    DeclareCursor,
    ExecutePrepared,
    FetchCursor,
    PrepareStatement,
    SessionCommand,
    command_of,
)
from proxy.analysis.statements import DeallocateStatement, classify
from proxy.backends.interrupts import RELEASE_AT, SESSION_INTERRUPTER, Interrupter
from proxy.errors import (
    AdminShutdownError,
    AuthenticationFailedError,
    CharacterNotInRepertoireError,
    ProtocolViolationError,
    ProxyError,
    QueryCanceledError,
    UnknownDatabaseError,
    UnsupportedQueryError,
    as_proxy_error,
)
from proxy.query.service import Principal, QueryService, StatementOutcome
from proxy.server import cursors
from proxy.server.analysis_pool import RefusedStatement, parse_accepted
from proxy.server.audit_trail import AuditTrail
from proxy.server.connection import READ_CHUNK, ClientGone, Connection
from proxy.server.context import SessionContext
from proxy.server.extended import FLUSH_THRESHOLD, ExtendedProtocol
from proxy.server.login import log_in
from proxy.server.pings import PingMemory
from proxy.server.prepared import (
    PreparedState,
    bound_execute,
    sql_prepared_statement,
)
from proxy.server.responses import (
    copy_messages,
    error_message,
    outcome_messages,
)
from proxy.server.transaction_block import FAILED, IDLE, IN_BLOCK, TransactionBlock
from proxy.settings import SessionSettings
from proxy.wire import messages as wire
from proxy.wire.errors import InvalidEncodingError, WireProtocolError

log = logging.getLogger("veil.session")

READ_AHEAD = 1 << 18
"""While a statement runs, the session reads on (to notice the client leaving), keeping what arrives
for later; past this many buffered bytes it stops reading, so a client cannot make it buffer without
bound — and a disconnection then goes unnoticed until the statement ends."""
PARSE_ON_LOOP_CHARS = 4096  # longer statement texts are parsed in a worker thread


P = ParamSpec("P")
R = TypeVar("R")


class Session(ExtendedProtocol):
    """One client connection, from the startup message to Terminate (the extended protocol's messages:
    proxy/server/extended.py)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        context: SessionContext,
        *,
        on_login: Callable[[], None] = lambda: None,
    ) -> None:
        """``on_login``: called once the analyst is authenticated (the listener's slot accounting)."""
        self.connection = Connection(reader, writer, max_message_size=context.max_message_size)
        self.context = context
        self.on_login = on_login
        self.authenticated = False
        self.busy = False  # handling a message (not waiting for the next one)
        self.terminating = False  # the server is shutting down: end at the next message
        self.peer = self.connection.peer
        self.settings = SessionSettings()
        self.transaction = TransactionBlock()
        self.prepared = PreparedState()
        self.pending = bytearray()  # extended-protocol output not yet sent (until Sync or Flush)
        self.skipping = False  # after an extended-protocol error, messages are discarded until Sync
        self.pings = PingMemory()  # this session's remembered answers to SELECT 1 and the like

    async def run(self) -> None:
        """Serve the connection to its end. Whatever goes wrong closes this connection only, with one
        log line. Engine queries this session starts (in worker threads, via ``asyncio.to_thread``,
        which carries ``SESSION_INTERRUPTER`` along) can be stopped by a CancelRequest quoting its key."""
        self.interrupter = Interrupter()
        SESSION_INTERRUPTER.set(self.interrupter)
        try:
            await self._converse()
        except ClientGone:
            if not self.connection.left_mid_statement:  # else _in_worker has logged it
                log.info("client disconnected peer=%s", self.peer)
        except OSError as error:  # reset by the peer, a broken TLS record
            log.info("connection lost peer=%s error=%s", self.peer, error)
        except WireProtocolError as error:
            log.warning("protocol violation peer=%s error=%s", self.peer, error)
            await self._send_fatal(ProtocolViolationError(str(error)))
        except asyncio.CancelledError:
            if not self.terminating:
                raise
            await self._send_fatal(AdminShutdownError("terminating connection due to administrator command"))
        except ProxyError as error:
            if not isinstance(error, AuthenticationFailedError):  # _authenticate logged it, with the user
                log.warning(
                    "connection refused peer=%s sqlstate=%s error=%s", self.peer, error.sqlstate, error
                )
            await self._send_fatal(error)
        finally:
            self.context.cancel_keys.revoke(self.interrupter)
            self.connection.writer.close()

    def terminate(self, task: asyncio.Task[None]) -> None:
        """End the session for a shutdown (``task`` runs it): a FATAL 57P01, as PostgreSQL sends. Only
        for a session that is not running a statement: one that is finishes it first."""
        if not self.terminating:
            self.terminating = True
            task.cancel()

    async def _converse(self) -> None:
        try:
            logged_in = await asyncio.wait_for(
                log_in(self.connection, self.context), self.context.authentication_timeout
            )
        except TimeoutError:
            log.warning("authentication timed out peer=%s", self.peer)
            raise QueryCanceledError("canceling authentication due to timeout") from None
        if logged_in is None:
            return
        self.authenticated = True
        self.on_login()
        startup, principal = logged_in.startup, logged_in.principal
        database = startup.parameters.get("database") or startup.parameters["user"]
        service = self.context.services.get(database)
        if service is None:
            raise UnknownDatabaseError(
                f'database "{database}" does not exist',
                hint=f"datasets on this server: {', '.join(sorted(self.context.services)) or '(none)'}",
            )
        self.settings = SessionSettings(startup.parameters)
        self._send_ready_state(principal.name)
        log.info("session started peer=%s analyst=%s dataset=%s", self.peer, principal.name, database)
        await self._query_loop(service, principal)

    def _send_ready_state(self, user: str) -> None:
        """ParameterStatus for every parameter clients read at startup, then the key a CancelRequest
        must quote to stop this session's queries, then ReadyForQuery."""
        parameters = {**self.settings.reported(), "session_authorization": user}
        out = [wire.parameter_status(name, value) for name, value in parameters.items()]
        key = self.context.cancel_keys.issue(self.interrupter)
        out.append(wire.backend_key_data(key.process_id, key.secret_key))
        out.append(wire.ready_for_query("I"))
        self.connection.writer.write(b"".join(out))

    async def _query_loop(self, service: QueryService, principal: Principal) -> None:
        """Serve both protocols until Terminate. After an error in the extended protocol every message
        up to the next Sync is discarded, as PostgreSQL does, so a pipeline stops at its first error."""
        while True:
            self.busy = False
            type_byte, payload = await self.connection.next_message()
            self.busy = True  # until the next read: a shutdown lets this message be answered first
            try:
                message = wire.decode_frontend_message(type_byte, payload)
            except WireProtocolError as error:  # one intact message with bad contents: ERROR, go on
                await self._undecodable(type_byte, error)
                continue
            if isinstance(message, wire.Terminate):
                return
            if isinstance(message, wire.Sync):
                await self._sync()
            elif self.skipping:
                continue
            elif isinstance(message, wire.Query):
                await self._simple_query(message.sql, service, principal)
            elif isinstance(message, wire.Flush):
                await self._flush()
            elif isinstance(message, wire.Parse | wire.Bind | wire.Describe | wire.Execute | wire.Close):
                await self._extended(message, service, principal)
            else:
                raise WireProtocolError(
                    f"unexpected message type {_message_type(message)} after authentication"
                )

    async def _undecodable(self, type_byte: bytes, error: WireProtocolError) -> None:
        """A framed message whose contents cannot be read — a string that is not UTF-8 (22021), a
        missing terminator (08P01) — answered as PostgreSQL answers it: an ERROR, then ReadyForQuery
        for a simple query, or discarding until Sync in the extended protocol. The stream is still in
        step (its length was sound), so the session goes on."""
        log.warning("undecodable message peer=%s type=%r error=%s", self.peer, type_byte, error)
        if self.skipping and type_byte != b"Q":
            return
        invalid = (
            CharacterNotInRepertoireError
            if isinstance(error, InvalidEncodingError)
            else ProtocolViolationError
        )
        self.pending += error_message(invalid(str(error)))
        self.transaction.fail()
        if type_byte == b"Q":
            self.pending += wire.ready_for_query(self.transaction.status)
        else:
            self.skipping = True
        await self._flush()

    async def _simple_query(self, sql: str, service: QueryService, principal: Principal) -> None:
        """Run each statement in turn; the first error ends the batch, as in PostgreSQL. Every
        statement is audited — before the client sees its answer, except pings (``_record``). A
        remembered ping skips the pipeline: same answer, same audit entry."""
        self.prepared.forget_unnamed()
        out: list[bytes | Iterator[bytes]] = []
        audit = AuditTrail(principal=principal.name, client=self.peer, dataset=service.dataset.name)
        ping = self.pings.get(sql)
        if ping is not None and self.transaction.status != FAILED:  # in a failed block it is refused
            audit.answered(ping.statement, ping.outcome, ping=True)
            out.append(ping.messages)
        else:
            await self._statements(sql, service, principal, audit, out)
        if (failure := await self._record(audit)) is not None:
            out = [failure]
        self._end_of_batch()
        out.append(wire.ready_for_query(self.transaction.status))
        await self._send(out)

    async def _send(self, parts: list[bytes | Iterator[bytes]]) -> None:
        """Send a simple query's answer. A COPY's data is an iterator of chunks, encoded as they are
        sent: the client reads the first rows while the next are being encoded, and other sessions get
        the event loop between two chunks (a large COPY would otherwise hold it until its last row)."""
        for part in parts:
            if isinstance(part, bytes):
                self.pending += part
                continue
            for chunk in part:
                self.pending += chunk
                if len(self.pending) > FLUSH_THRESHOLD:
                    await self._flush()
                await asyncio.sleep(0)
        await self._flush()

    async def _statements(
        self,
        sql: str,
        service: QueryService,
        principal: Principal,
        audit: AuditTrail,
        out: list[bytes | Iterator[bytes]],
    ) -> None:
        """Each statement of a simple query in turn, its messages appended to ``out``; the first error
        ends the batch. A lone select list of literals is remembered as a ping (proxy/server/pings.py)."""
        statement = sql
        try:
            trees = await self._parsed(service, sql)
            if not trees:
                out.append(wire.empty_query_response())
            for tree in trees:
                if isinstance(tree, RefusedStatement):
                    statement = tree.text
                    self._refuse_statement(tree)
                statement = service.statement_text(tree)
                outcome = await self._run(tree, statement, service, principal, audit)
                if outcome.copy is not None:
                    out.extend(copy_messages(outcome))
                    continue
                messages = outcome_messages(outcome)
                out.extend(messages)
            if len(trees) == 1 and not audit.urgent and outcome.copy is None:
                self.pings.remember(sql, statement, outcome, b"".join(messages))
        except Exception as error:  # every failure becomes one ErrorResponse; the session lives on
            out.append(self._refusal(error, audit, statement))

    async def _run(
        self,
        tree: Tree,
        statement: str,
        service: QueryService,
        principal: Principal,
        audit: AuditTrail,
        *,
        described: StatementOutcome | None = None,
    ) -> StatementOutcome:
        """One statement through the pipeline, the same for both protocols: refused inside a failed
        transaction block, run in a worker thread (unless Describe already ran it, for free, or it is
        a select list of literals, answered on the event loop: ``SELECT 1`` is a driver's ping, and the
        thread hop would cost more than the answer), audited, and the transaction status moved on."""
        tag = service.transaction_tag(tree)
        self.transaction.check(tag)
        command = command_of(tree)
        literal = service.answer_literals(tree) if command is None else None
        outcome = described if described is not None else literal
        if command is not None:
            outcome = await self._session_command(command, statement, service, principal)
        elif outcome is None:
            outcome = await self._pipeline(tree, statement, service, principal)
        if tag == "COMMIT" and self.transaction.status == FAILED:
            outcome = StatementOutcome("ROLLBACK")  # as PostgreSQL answers COMMIT of a failed block
        self._drop_prepared(tree, outcome, service)
        audit.answered(statement, outcome, ping=literal is not None)
        self._end_transaction(tag)
        self.transaction.advance(tag)
        return outcome

    async def _pipeline(
        self, tree: Tree, statement: str, service: QueryService, principal: Principal
    ) -> StatementOutcome:
        """The query pipeline in a worker thread, within the analyst's share of statement slots."""
        async with self.context.statement_slots.taken(principal.name):
            return await self._in_worker(
                service.run, tree, principal=principal, settings=self.settings, text=statement
            )

    async def _session_command(
        self, command: SessionCommand, statement: str, service: QueryService, principal: Principal
    ) -> StatementOutcome:
        """Cursors and SQL PREPARE/EXECUTE: their state is the session's (proxy/server/cursors.py,
        proxy/server/prepared.py); the queries they hold go through the pipeline like any other."""
        match command:
            case DeclareCursor():
                in_transaction = self.transaction.status == IN_BLOCK
                cursors.check_declare(self.prepared, command, in_transaction=in_transaction)
                query = self._single(service, command.query)
                answer = await self._pipeline(query, statement, service, principal)
                return cursors.declare(self.prepared, command, answer, in_transaction=in_transaction)
            case FetchCursor():
                return cursors.fetch(self.prepared, command)
            case CloseCursor():
                return cursors.close(self.prepared, command)
            case PrepareStatement():
                self.prepared.add_statement(sql_prepared_statement(command, service))
                return StatementOutcome("PREPARE")
            case ExecutePrepared():
                tree = bound_execute(self.prepared.statement(command.name), command)
                return await self._pipeline(tree, service.statement_text(tree), service, principal)

    @staticmethod
    def _single(service: QueryService, query: str) -> Tree:
        trees = service.parse(query)
        if len(trees) != 1 or command_of(trees[0]) is not None:
            raise UnsupportedQueryError(
                "a cursor is declared for one query", hint="DECLARE c CURSOR FOR SELECT …"
            )
        return trees[0]

    def _end_transaction(self, tag: str | None) -> None:
        """Cursors end with their transaction (WITH HOLD ones survive a COMMIT); COMMIT of a failed
        block is a rollback, as in PostgreSQL."""
        if tag == "COMMIT" and self.transaction.status != IDLE:
            self.prepared.end_transaction(committed=self.transaction.status == IN_BLOCK)
        elif tag == "ROLLBACK" and self.transaction.status != IDLE:
            self.prepared.end_transaction(committed=False)

    def _drop_prepared(self, tree: Tree, outcome: StatementOutcome, service: QueryService) -> None:
        """DEALLOCATE and DISCARD ALL are answered by the pipeline; what they drop lives here."""
        if outcome.tag == "DISCARD ALL":
            self.prepared = PreparedState()
        elif outcome.tag.startswith("DEALLOCATE"):
            statement = classify(tree, service.dataset)
            assert isinstance(statement, DeallocateStatement)
            self.prepared.deallocate(statement.name)

    def _refusal(self, error: Exception, audit: AuditTrail, statement: str | None) -> bytes:
        """The ErrorResponse for a failure, audited when it concerns a statement; a transaction block
        it happens in is failed from now on (25P02 until ROLLBACK)."""
        proxy_error = ProtocolViolationError(str(error)) if isinstance(error, WireProtocolError) else None
        proxy_error = proxy_error or as_proxy_error(error)
        if proxy_error.sqlstate == "XX000":
            log.exception("internal error incident=%s", getattr(proxy_error, "incident_id", "?"))
        if statement is not None:
            audit.refused(statement, proxy_error)
        self.transaction.fail()
        return error_message(proxy_error)

    async def _record(self, audit: AuditTrail) -> bytes | None:
        """Commit the message's audit entries before its answer leaves — except when every statement
        was a ping (a select list of literals: nothing read, nothing spent), whose entries are queued
        to the same writer, in order, and committed a moment after the answer.

        When the audit log cannot be written (a locked, full or broken ledger), the answer is withheld
        — nothing leaves unaudited — and the ErrorResponse to send in its place is returned; the
        session goes on. What the statement spent stays spent (a stored answer is free to ask again)."""
        entries = audit.entries(self.context.ledger.now())
        if not entries:
            return None
        if not audit.urgent:
            self.context.audit.post(entries)
            return None
        try:
            await self.context.audit.append(entries)
        except Exception as error:
            log.error("audit append failed peer=%s error=%s", self.peer, error)
            self.transaction.fail()
            return error_message(as_proxy_error(error))
        return None

    def _end_of_batch(self) -> None:
        """Outside a transaction block each batch is its own transaction, and its portals end with it."""
        if self.transaction.status == IDLE:
            self.prepared.end_transaction()

    async def _parsed(self, service: QueryService, sql: str) -> list[Tree | RefusedStatement]:
        """Parsed on the event loop when short (a thread hop would cost more than the parse). A long
        text is analysed first in a worker process (proxy/server/analysis_pool.py), because a parse
        holds the GIL throughout: what it refuses never reaches this process's parser, the rest is
        parsed in a worker thread."""
        if len(sql) <= PARSE_ON_LOOP_CHARS:
            return service.parse(sql)
        pool = self.context.analysis_pool
        verdict = None if pool is None else await pool.verdict(service.dataset, sql)
        if verdict is not None and verdict.refusal is not None:
            raise verdict.refusal
        if verdict is None or not any(s.refusal for s in verdict.statements):
            return await self._in_worker(service.parse, sql)
        return await self._in_worker(parse_accepted, service, sql, verdict)

    def _refuse_statement(self, refused: RefusedStatement) -> NoReturn:
        """What the pipeline would answer this statement: inside a failed block, that the block is
        aborted; otherwise the refusal the analysis worker found."""
        self.transaction.check(None)
        raise refused.refusal

    async def _in_worker(self, function: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run pipeline work in a worker thread, watching the connection meanwhile. If the client closes
        it, the session's engine queries are interrupted the way a CancelRequest stops them (and any
        the statement would start later are refused). The statement is still charged if its engine
        had started: leaving must not take back a slow outcome. The work's outcome — usually 57014 —
        is audited as usual, then the session ends without running what the client had pipelined."""
        release_at: list[float] = []  # a response deadline, handed back by the pipeline
        token = RELEASE_AT.set(release_at)  # copied into the worker's context by to_thread
        work = asyncio.ensure_future(asyncio.to_thread(function, *args, **kwargs))
        RELEASE_AT.reset(token)
        watch = asyncio.ensure_future(self._peer_closed())
        try:
            await asyncio.wait((work, watch), return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            await asyncio.wait((watch,))  # until its read is over: the reader allows one at a time
        if not work.done():
            self.connection.left_mid_statement = True
            log.warning("client disconnected mid-statement peer=%s action=interrupt", self.peer)
            await asyncio.to_thread(self.interrupter.close)
        try:
            return await work
        finally:
            if release_at:  # the answer, or the error, leaves at the deadline: wait here, not in a thread
                await asyncio.sleep(max(0.0, release_at[-1] - time.monotonic()))

    async def _peer_closed(self) -> None:
        """Return when the client closes the connection (EOF, or a reset). Bytes that arrive first —
        pipelined messages — are not a disconnection: they go to the message buffer for the query
        loop, up to READ_AHEAD."""
        while self.connection.buffer.buffered_size < READ_AHEAD:
            try:
                data = await self.connection.reader.read(READ_CHUNK)
            except OSError:
                return
            if not data:
                return
            self.connection.buffer.feed(data)
        await asyncio.get_running_loop().create_future()  # stop reading; cancelled when the work ends

    async def _sync(self) -> None:
        self.skipping = False
        self._end_of_batch()
        self.pending += wire.ready_for_query(self.transaction.status)
        await self._flush()

    async def _flush(self) -> None:
        if self.pending:
            data, self.pending = bytes(self.pending), bytearray()
            await self.connection.send(data)

    async def _send_fatal(self, error: ProxyError) -> None:
        with contextlib.suppress(ClientGone):
            await self.connection.send(error_message(error, severity="FATAL"))


def _message_type(message: wire.FrontendMessage) -> str:
    if isinstance(message, wire.UnsupportedMessage):
        return repr(message.type_byte)
    return type(message).__name__
