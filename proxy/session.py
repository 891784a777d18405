"""One client connection: the PostgreSQL v3 conversation around the query pipeline.

The session owns the socket; the codecs in ``proxy.wire`` do no I/O; the pipeline in
``proxy.query_service`` knows nothing of the wire. Blocking work (engine, ledger) runs in worker
threads so one slow query never stalls other connections. Any error is turned into an
ErrorResponse here, and only ``ProxyError`` text ever reaches the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

from budget.ledger import Ledger
from proxy.audit_trail import AuditTrail
from proxy.config import ColumnType
from proxy.errors import (
    AuthenticationFailedError,
    InFailedTransactionError,
    MissingUserError,
    ProtocolViolationError,
    ProxyError,
    UnknownDatabaseError,
    UnsupportedQueryError,
    as_proxy_error,
)
from proxy.query_service import Principal, QueryService, StatementOutcome
from proxy.release.apply import ReleasedTable
from proxy.settings import SessionSettings
from proxy.wire import messages as wire
from proxy.wire import types as pgtypes
from proxy.wire.errors import ScramAuthenticationError, WireProtocolError
from proxy.wire.scram import ScramServerExchange

log = logging.getLogger("veil.session")

READ_CHUNK = 65536
TYPE_OIDS = {
    ColumnType.INTEGER: pgtypes.INT8,
    ColumnType.REAL: pgtypes.FLOAT8,
    ColumnType.TEXT: pgtypes.TEXT,
    ColumnType.DATE: pgtypes.DATE,
    ColumnType.BOOLEAN: pgtypes.BOOL,
}


EXTENDED_PROTOCOL_UNSUPPORTED = UnsupportedQueryError(
    "the extended query protocol is not supported yet",
    hint="send queries without parameters over the simple query protocol (psycopg: prepare_threshold=None)",
)


class ClientGone(Exception):
    """The peer closed the connection; nothing more can be sent."""


@dataclass(frozen=True)
class SessionContext:
    """What every session shares: the ledger and one query service per dataset."""

    ledger: Ledger
    services: Mapping[str, QueryService]
    max_message_size: int = 1 << 20
    # Fixed for the server's lifetime: an unknown analyst gets the same fake salt on every attempt,
    # so retrying cannot tell a missing name from a wrong password.
    mock_salt_key: bytes = field(default_factory=lambda: secrets.token_bytes(32))


class Session:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, context: SessionContext
    ) -> None:
        self.reader, self.writer, self.context = reader, writer, context
        self.buffer = wire.MessageReader(max_message_size=context.max_message_size)
        self.peer = _peer(writer)
        self.settings = SessionSettings()
        self.transaction_status = "I"  # ReadyForQuery status: idle, in a transaction block, or failed

    async def run(self) -> None:
        try:
            await self._converse()
        except ClientGone:
            log.info("client disconnected peer=%s", self.peer)
        except WireProtocolError as error:
            log.warning("protocol violation peer=%s error=%s", self.peer, error)
            await self._send_fatal(ProtocolViolationError(str(error)))
        except ProxyError as error:
            await self._send_fatal(error)
        finally:
            self.writer.close()

    async def _converse(self) -> None:
        startup = await self._startup()
        if startup is None:
            return
        user = startup.parameters.get("user", "")
        if not user:
            raise MissingUserError("no PostgreSQL user name specified in startup packet")
        principal = await self._authenticate(user)
        database = startup.parameters.get("database") or user
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

    async def _startup(self) -> wire.StartupMessage | None:
        """Answer SSL/GSS probes with 'N' until the real StartupMessage arrives."""
        while True:
            packet = wire.decode_startup_packet(await self._next_startup())
            if isinstance(packet, wire.SSLRequest | wire.GSSENCRequest):
                await self._send(wire.ssl_refused())
            elif isinstance(packet, wire.CancelRequest):
                return None  # query cancellation arrives in a later version; the request is dropped
            else:
                return packet

    async def _authenticate(self, user: str) -> Principal:
        """SCRAM-SHA-256; unknown analysts run the same exchange and fail the same way."""
        verifier = await asyncio.to_thread(self.context.ledger.verifier, user) if user else None
        exchange = ScramServerExchange(verifier, username=user, mock_salt_key=self.context.mock_salt_key)
        await self._send(wire.authentication_sasl(["SCRAM-SHA-256"]))
        try:
            initial = wire.decode_sasl_initial_response(await self._password_message())
            if initial.mechanism != "SCRAM-SHA-256":
                raise ScramAuthenticationError(f"unsupported SASL mechanism {initial.mechanism}")
            await self._send(
                wire.authentication_sasl_continue(exchange.server_first(initial.initial_response))
            )
            final = exchange.server_final(await self._password_message())
        except ScramAuthenticationError:
            log.warning("authentication failed peer=%s user=%s", self.peer, user)
            raise AuthenticationFailedError(f'password authentication failed for user "{user}"') from None
        await self._send(wire.authentication_sasl_final(final) + wire.authentication_ok())
        return Principal(user)

    async def _password_message(self) -> bytes:
        type_byte, payload = await self._next_message()
        message = wire.decode_frontend_message(type_byte, payload)
        if not isinstance(message, wire.PasswordMessage):
            raise WireProtocolError("expected a SASL response during authentication")
        return message.data

    def _send_ready_state(self, user: str) -> None:
        parameters = {**self.settings.reported(), "session_authorization": user}
        out = [wire.parameter_status(name, value) for name, value in parameters.items()]
        out.append(wire.backend_key_data(secrets.randbits(31), secrets.randbits(31)))
        out.append(wire.ready_for_query("I"))
        self.writer.write(b"".join(out))

    async def _query_loop(self, service: QueryService, principal: Principal) -> None:
        failed_extended = False  # after an error, extended-protocol messages are skipped until Sync
        while True:
            message = wire.decode_frontend_message(*await self._next_message())
            if isinstance(message, wire.Terminate):
                return
            if isinstance(message, wire.Query):
                await self._simple_query(message.sql, service, principal)
            elif isinstance(message, wire.Sync):
                failed_extended = False
                await self._send(wire.ready_for_query("I"))
            elif not failed_extended and not isinstance(message, wire.Flush):
                failed_extended = True
                await self._send(_error(EXTENDED_PROTOCOL_UNSUPPORTED))

    async def _simple_query(self, sql: str, service: QueryService, principal: Principal) -> None:
        """Run each statement in turn; the first error ends the batch, as in PostgreSQL. Every
        statement is audited — before the client sees its answer."""
        out: list[bytes] = []
        audit = AuditTrail(principal=principal.name, client=self.peer, dataset=service.dataset.name)
        statement = sql
        try:
            trees = service.parse(sql)
            if not trees:
                out.append(wire.empty_query_response())
            for tree in trees:
                statement = service.statement_text(tree)
                tag = service.transaction_tag(tree)
                if self.transaction_status == "E" and tag not in ("COMMIT", "ROLLBACK"):
                    raise InFailedTransactionError(
                        "current transaction is aborted, commands ignored until end of transaction block",
                        hint="send ROLLBACK",
                    )
                outcome = await asyncio.to_thread(
                    service.run, tree, principal=principal, settings=self.settings, text=statement
                )
                audit.answered(statement, outcome)
                self.transaction_status = {"BEGIN": "T", "COMMIT": "I", "ROLLBACK": "I"}.get(
                    tag or "", self.transaction_status
                )
                out.extend(_outcome_messages(outcome))
        except Exception as error:  # every failure becomes one ErrorResponse; the session lives on
            proxy_error = as_proxy_error(error)
            if proxy_error.sqlstate == "XX000":
                log.exception("internal error incident=%s", getattr(proxy_error, "incident_id", "?"))
            audit.refused(statement, proxy_error)
            out.append(_error(proxy_error))
            if self.transaction_status == "T":
                self.transaction_status = "E"
        await asyncio.to_thread(
            self.context.ledger.audit_log.append, *audit.entries(self.context.ledger.now())
        )
        out.append(wire.ready_for_query(self.transaction_status))
        await self._send(b"".join(out))

    async def _fill(self) -> None:
        data = await self.reader.read(READ_CHUNK)
        if not data:
            raise ClientGone
        self.buffer.feed(data)

    async def _next_startup(self) -> bytes:
        while (payload := self.buffer.next_startup()) is None:
            await self._fill()
        return payload

    async def _next_message(self) -> tuple[bytes, bytes]:
        while (message := self.buffer.next_message()) is None:
            await self._fill()
        return message

    async def _send(self, data: bytes) -> None:
        try:
            self.writer.write(data)
            await self.writer.drain()
        except (ConnectionError, RuntimeError):
            raise ClientGone from None

    async def _send_fatal(self, error: ProxyError) -> None:
        with contextlib.suppress(ClientGone):
            await self._send(_error(error, severity="FATAL"))


def _peer(writer: asyncio.StreamWriter) -> str:
    address = writer.get_extra_info("peername")
    return f"{address[0]}:{address[1]}" if isinstance(address, tuple) else str(address)


def _error(error: ProxyError, *, severity: str = "ERROR") -> bytes:
    fields = wire.ErrorFields(
        severity=severity,
        sqlstate=error.sqlstate,
        message=error.message,
        detail=error.detail,
        hint=error.hint,
        position=error.position,
    )
    return wire.error_response(fields)


def _notice(text: str) -> bytes:
    return wire.notice_response(wire.ErrorFields(severity="NOTICE", sqlstate="00000", message=text))


def _outcome_messages(outcome: StatementOutcome) -> list[bytes]:
    out: list[bytes] = []
    if outcome.table is not None:
        out.extend(_table_messages(outcome.table))
    out.extend(_notice(text) for text in outcome.notices)
    if outcome.parameter_changed is not None:
        out.append(wire.parameter_status(*outcome.parameter_changed))
    out.append(wire.command_complete(outcome.tag))
    return out


def _table_messages(table: ReleasedTable) -> list[bytes]:
    fields = [
        wire.FieldDescription(name=column.name, type_oid=TYPE_OIDS[column.type]) for column in table.columns
    ]
    rows = [wire.data_row([pgtypes.encode_text_value(value) for value in row]) for row in table.rows]
    return [wire.row_description(fields), *rows]
