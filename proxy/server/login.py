"""Logging a client in: encryption first (SSLRequest answered 'S' and TLS, or 'N'), a CancelRequest
in place of a login, then the StartupMessage and SCRAM-SHA-256 against the ledger's verifiers.

Apart from the session because nothing here knows a query: the session starts only with an
authenticated analyst, and the whole login is bounded by the authentication timeout."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import ssl
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from proxy.errors import AuthenticationFailedError, MissingUserError, ProxyError, TlsRequiredError
from proxy.query.service import Principal
from proxy.server.cancel_keys import owner
from proxy.server.connection import ClientGone, Connection
from proxy.server.context import SessionContext
from proxy.wire import messages as wire
from proxy.wire.errors import ScramAuthenticationError, WireProtocolError
from proxy.wire.scram import ScramServerExchange

log = logging.getLogger("veil.session")

# Logins and CancelRequests get threads of their own: in the default pool they would queue behind
# every session's statements (engine queries, long analyses) and time out.
LOGIN_THREADS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="veil-login")
FULL_SERVER_WAIT_S = 5.0  # how long a refused client may take to say what it wants


@dataclass(frozen=True)
class LoggedIn:
    startup: wire.StartupMessage
    principal: Principal


async def log_in(connection: Connection, context: SessionContext) -> LoggedIn | None:
    """Startup and SCRAM. None: the connection carried a CancelRequest, or its TLS handshake failed."""
    startup = await negotiate(connection, context)
    if startup is None:
        return None
    user = startup.parameters.get("user", "")
    if not user:
        raise MissingUserError("no PostgreSQL user name specified in startup packet")
    return LoggedIn(startup, await _authenticate(connection, context, user))


async def refuse_when_full(connection: Connection, context: SessionContext, error: ProxyError) -> None:
    """Refuse a connection the server has no slot for — after the encryption negotiation, so that a
    client that asked for TLS reads the error as an error (libpq would otherwise report "server sent
    an error response during SSL exchange"), and never a CancelRequest: a full server must still
    let a runaway query be cancelled. Bounded in time: a silent socket holds no slot and soon goes."""
    try:
        startup = await asyncio.wait_for(negotiate(connection, context), FULL_SERVER_WAIT_S)
        if startup is not None:
            fields = wire.ErrorFields(severity="FATAL", sqlstate=error.sqlstate, message=error.message)
            await connection.send(wire.error_response(fields))
    except (TimeoutError, ClientGone, OSError, WireProtocolError, ProxyError):
        pass  # it goes either way: nothing more is owed to a client the server cannot take
    finally:
        connection.writer.close()


async def negotiate(connection: Connection, context: SessionContext) -> wire.StartupMessage | None:
    """Negotiate encryption, then return the StartupMessage — or None when the connection carried
    a CancelRequest (it says nothing more) or its TLS handshake failed.

    SSLRequest is answered 'S' and the connection wrapped in TLS when the server has a
    certificate, else 'N'; GSSENCRequest always 'N'. Clients then send the StartupMessage."""
    while True:
        packet = wire.decode_startup_packet(await connection.next_startup())
        if isinstance(packet, wire.SSLRequest) and context.tls is not None:
            if not await _start_tls(connection, context.tls):
                return None
        elif isinstance(packet, wire.SSLRequest | wire.GSSENCRequest):
            await connection.send(wire.ssl_refused())
        elif isinstance(packet, wire.CancelRequest):
            await _cancel_other_session(connection, context, packet)
            return None
        else:
            _check_tls_requirement(connection, context)
            return packet


async def _authenticate(connection: Connection, context: SessionContext, user: str) -> Principal:
    """SCRAM-SHA-256; unknown analysts run the same exchange and fail the same way."""
    loop = asyncio.get_running_loop()
    verifier = await loop.run_in_executor(LOGIN_THREADS, context.ledger.verifier, user) if user else None
    exchange = ScramServerExchange(verifier, username=user, mock_salt_key=context.mock_salt_key)
    await connection.send(wire.authentication_sasl(["SCRAM-SHA-256"]))
    try:
        initial = wire.decode_sasl_initial_response(await _password_message(connection))
        if initial.mechanism != "SCRAM-SHA-256":
            raise ScramAuthenticationError(f"unsupported SASL mechanism {initial.mechanism}")
        await connection.send(
            wire.authentication_sasl_continue(exchange.server_first(initial.initial_response))
        )
        final = exchange.server_final(await _password_message(connection))
    except ScramAuthenticationError:
        delay = context.throttle.failed(connection.address, user)
        log.warning("authentication failed peer=%s user=%s delay=%.3gs", connection.peer, user, delay)
        await asyncio.sleep(delay)  # within the authentication timeout, which still applies
        raise AuthenticationFailedError(f'password authentication failed for user "{user}"') from None
    context.throttle.succeeded(connection.address, user)
    await connection.send(wire.authentication_sasl_final(final) + wire.authentication_ok())
    return Principal(user)


async def _password_message(connection: Connection) -> bytes:
    type_byte, payload = await connection.next_message()
    message = wire.decode_frontend_message(type_byte, payload)
    if not isinstance(message, wire.PasswordMessage):
        raise WireProtocolError("expected a SASL response during authentication")
    return message.data


async def _start_tls(connection: Connection, tls: ssl.SSLContext) -> bool:
    """Answer 'S' and run the TLS handshake; False (logged) if the handshake fails.

    Bytes that arrived after the SSLRequest were sent before encryption: taking them as the
    first decrypted bytes would let a man in the middle inject a StartupMessage or a query
    (CVE-2021-23214), so they end the connection instead."""
    if connection.encrypted():
        raise WireProtocolError("SSLRequest received after TLS was already negotiated")
    if connection.buffer.buffered_size or connection.unread_bytes():
        raise WireProtocolError("received unencrypted data after SSL request")
    await connection.send(wire.ssl_accepted())
    try:
        await connection.writer.start_tls(tls)
    except OSError as error:  # ssl.SSLError included
        log.warning("TLS handshake failed peer=%s error=%s", connection.peer, error)
        return False
    return True


def _check_tls_requirement(connection: Connection, context: SessionContext) -> None:
    if not context.require_tls_for_remote or connection.encrypted():
        return
    address = connection.writer.get_extra_info("peername")
    if is_loopback(address):
        return
    raise TlsRequiredError(
        "connections from other hosts must use TLS",
        detail=f"{address[0]} connected without encryption",
        hint='connect with sslmode=require (psql "postgresql://…?sslmode=require")',
    )


async def _cancel_other_session(
    connection: Connection, context: SessionContext, request: wire.CancelRequest
) -> None:
    """Stop the engine queries of the session the request names; a session of another worker
    process gets the request forwarded (proxy/server/cancel_routing.py)."""
    worker = owner(request.process_id)
    if context.cancel_router is not None and worker != context.cancel_keys.worker:
        log.info(
            "cancel request peer=%s process_id=%s: forwarded to worker %d",
            connection.peer,
            request.process_id,
            worker,
        )
        await context.cancel_router.forward(worker, request.process_id, request.secret_key)
        return
    await cancel_session(context, request.process_id, request.secret_key, peer=connection.peer)


async def cancel_session(context: SessionContext, process_id: int, secret_key: int, *, peer: str) -> None:
    """Cancel the session of this process that the key names; a wrong key does nothing and gets no
    answer, as in PostgreSQL."""
    target = context.cancel_keys.find(process_id, secret_key)
    if target is None:
        log.warning("cancel request with an unknown key peer=%s process_id=%s", peer, process_id)
        return
    log.info("cancel request peer=%s process_id=%s", peer, process_id)
    # a PostgreSQL engine is canceled over the network: blocking, but never behind statements' threads
    await asyncio.get_running_loop().run_in_executor(LOGIN_THREADS, target.cancel)


def is_loopback(address: object) -> bool:
    """A TCP peer on this host (IPv4, IPv6 or IPv4-mapped IPv6); anything not TCP counts as local."""
    if not isinstance(address, tuple):
        return True
    try:
        ip = ipaddress.ip_address(address[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback
