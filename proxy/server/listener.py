"""The asyncio listener: one Session per connection, a cap on concurrent connections, TLS when the
policy (or ``veil serve --tls-cert/--tls-key``) names a certificate."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
import ssl
from collections.abc import Callable, Mapping
from types import MappingProxyType

from mechanisms.random_source import secure_random_source
from proxy.backends import open_backend
from proxy.backends.base import Backend
from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.interrupts import SHUTDOWN
from proxy.backends.priority import at_engine_priority
from proxy.config import DatasetPolicy, ServerSettings, VeilConfig
from proxy.errors import BackendUnavailableError, ConfigError, TooManyConnectionsError
from proxy.federation.exchange import FederationGateway
from proxy.federation.peer import PeerListener
from proxy.ledger_access import accountants, cap_steps, open_ledger
from proxy.query.service import QueryService
from proxy.server.analysis_pool import AnalysisPool
from proxy.server.audit_trail import AuditWriter
from proxy.server.cancel_keys import CancelKeys
from proxy.server.cancel_routing import CancelRouter
from proxy.server.connection import Connection
from proxy.server.context import SessionContext
from proxy.server.login import cancel_session, refuse_when_full
from proxy.server.reload import reload_policy
from proxy.server.session import Session
from proxy.server.statement_slots import StatementSlots
from proxy.server.throttle import FailureStore, LoginThrottle
from proxy.server.workers import WorkerSeat

STOPPED_ANSWER_WAIT_S = 10.0  # after the grace: how long a stopped statement may take to answer 57014
LOGIN_QUEUE_WAIT_S = 1.0  # the longest a new connection (a CancelRequest too) waits for a login slot
log = logging.getLogger("veil.server")
NO_ENVIRONMENT: Mapping[str, str] = MappingProxyType({})


def build_context(config: VeilConfig, *, environ: Mapping[str, str] = NO_ENVIRONMENT) -> SessionContext:
    """Open the ledger and every dataset's engine once; sessions share them.

    ``environ`` resolves postgres datasets' ``dsn_env`` (empty by default, so a ``dsn_env`` is unset).
    An engine that cannot be opened stops the start-up with a message naming the dataset (and, for
    PostgreSQL, the server without its password); the engines opened before it are closed again."""
    tls = tls_context(config.server)  # before anything is opened: a bad certificate stops the start-up
    ledger = open_ledger(config, environ)
    if ledger.upgrade_note is not None:
        log.warning("%s", ledger.upgrade_note)
    ledger.store.check_integrity()  # refuse to serve on a damaged ledger, with one line
    sandbox = at_engine_priority(DuckDBBackend.sandbox)
    rng = secure_random_source()
    backends: dict[str, Backend] = {}
    try:
        for name, dataset in config.datasets.items():
            backends[name] = at_engine_priority(_open_backend, dataset, environ)
    except BaseException:
        for backend in backends.values():
            backend.close()
        sandbox.close()
        raise
    federation = FederationGateway(config.federations, environ) if config.federations else None
    services = {
        name: QueryService(
            dataset,
            backend=backends[name],
            sandbox=sandbox,
            ledger=ledger,
            rng=rng,
            accountant_of=accountants(config),
            cap_step_of=cap_steps(config),
            federation=federation,
            databases=tuple(config.datasets),
        )
        for name, dataset in config.datasets.items()
    }
    return SessionContext(
        ledger=ledger,
        services=services,
        federation=federation,
        audit=AuditWriter(ledger.audit_log),
        max_message_size=config.server.max_message_size,
        authentication_timeout=config.server.authentication_timeout_s,
        tls=tls,
        require_tls_for_remote=config.server.require_tls_for_remote,
        statement_slots=StatementSlots(config.server.max_statements_per_analyst),
        analysis_pool=AnalysisPool(config.server.analysis_processes)
        if config.server.analysis_processes
        else None,
        throttle=login_throttle(config),
    )


def login_throttle(config: VeilConfig, *, store: FailureStore | None = None) -> LoginThrottle:
    """The policy's failed-login delays, counted in ``store`` (this process's memory by default)."""
    return LoginThrottle(
        base=config.server.auth_failure_delay_ms / 1000,
        ceiling=config.server.auth_failure_max_delay_ms / 1000,
        store=store,
    )


def start_peer_listeners(config: VeilConfig, context: SessionContext) -> list[PeerListener]:
    """A listener for every federation this site answers (its ``listen`` address)."""
    if context.federation is None:
        return []
    return [
        PeerListener(context.federation, policy, context.services[policy.dataset].answer_for_peer).start()
        for policy in config.federations.values()
        if policy.listen is not None
    ]


def tls_context(settings: ServerSettings) -> ssl.SSLContext | None:
    """The server side of TLS from ``tls_cert``/``tls_key`` (PEM), or None when they are not set.

    Python's defaults for a server (TLS 1.2 or later, no compression, strong ciphers); clients are
    not asked for certificates, they authenticate with SCRAM inside the encrypted connection."""
    if settings.tls_cert is None or settings.tls_key is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(settings.tls_cert, settings.tls_key)
    except FileNotFoundError as error:
        raise ConfigError(
            f"server.tls_cert/tls_key: no such file: {error.filename}",
            hint="paths in the policy file are relative to its directory; --tls-cert/--tls-key to the "
            "working directory",
        ) from None
    except OSError as error:  # ssl.SSLError included
        raise ConfigError(
            f"server.tls_cert/tls_key: cannot load the certificate {settings.tls_cert} with the key "
            f"{settings.tls_key}: {error.strerror or error}",
            hint="both must be PEM files, the key unencrypted and matching the certificate",
        ) from None
    return context


def _open_backend(dataset: DatasetPolicy, environ: Mapping[str, str]) -> Backend:
    try:
        return open_backend(dataset, environ=environ)
    except BackendUnavailableError as error:
        raise BackendUnavailableError(
            f'dataset "{dataset.name}": {error.message}', detail=error.detail, hint=error.hint
        ) from None


class VeilServer:
    def __init__(self, config: VeilConfig, context: SessionContext) -> None:
        self.config, self.context = config, context
        self.active = 0  # connections served now
        self._login_slots = asyncio.Semaphore(config.server.authentication_slots)  # read at start only
        self._server: asyncio.Server | None = None
        self._more_servers: list[asyncio.Server] = []  # a worker's further addresses (IPv4 and IPv6)
        self._sessions: dict[Session, asyncio.Task[None]] = {}
        self._stopped = asyncio.Event()
        self.peers: list[PeerListener] = []

    async def start(self, host: str, port: int, *, seat: WorkerSeat | None = None) -> int:
        """Listen and return the bound port (useful with port 0); answer the federations' peers too.
        A worker process (``seat``) accepts on the sockets it was given, takes CancelRequests
        forwarded by the other workers, and only the first answers the federations' peers."""
        if seat is None:
            self._server = await asyncio.start_server(self._accept, host, port)
            self.peers = start_peer_listeners(self.config, self.context)
            return int(self._server.sockets[0].getsockname()[1])
        servers = [await asyncio.start_server(self._accept, sock=listening) for listening in seat.sockets]
        self._server = servers[0]
        self._more_servers = servers[1:]
        if self.context.cancel_router is not None:
            await self.context.cancel_router.start(self._cancel_forwarded)
        if seat.index == 0:
            self.peers = start_peer_listeners(self.config, self.context)
        return int(seat.sockets[0].getsockname()[1])

    async def _cancel_forwarded(self, process_id: int, secret_key: int) -> None:
        await cancel_session(self.context, process_id, secret_key, peer="another worker")

    async def serve_forever(self) -> None:
        """Until ``drain`` (SIGTERM) has finished."""
        assert self._server is not None
        async with self._server:
            await self._stopped.wait()
        for more in self._more_servers:
            more.close()

    async def drain(self, grace_s: float) -> None:
        """SIGTERM, as PostgreSQL's smart-then-fast shutdown: accept nobody new; end idle sessions
        (FATAL 57P01) at once; let running statements finish for up to ``grace_s``, then stop their
        engine queries (charged, as any stop after the engine started) and end those sessions too.
        Every reservation is then committed or cancelled: none is left for ``veil budget resolve``."""
        assert self._server is not None
        for server in (self._server, *self._more_servers):
            server.close()
        if self.context.cancel_router is not None:
            self.context.cancel_router.close()
        busy_at_start = sum(session.busy for session in self._sessions)
        log.warning(
            "SIGTERM received: shutting down; %d sessions, %d handling a message (grace %g s)",
            len(self._sessions),
            busy_at_start,
            grace_s,
        )
        await self._end_sessions_when_idle(grace_s)
        stopped = [session for session in self._sessions if session.busy]
        for session in stopped:  # past the grace: stop their engine queries; they answer 57014
            await asyncio.to_thread(session.interrupter.close, SHUTDOWN)
        await self._end_sessions_when_idle(STOPPED_ANSWER_WAIT_S)
        for session, task in list(self._sessions.items()):
            session.terminate(task)
        if self._sessions:
            await asyncio.wait(list(self._sessions.values()), timeout=STOPPED_ANSWER_WAIT_S)
        log.warning(
            "shutdown complete: %d statements finished in the grace period, %d stopped (and charged)",
            busy_at_start - len(stopped),
            len(stopped),
        )
        self._stopped.set()

    async def _end_sessions_when_idle(self, within_s: float) -> None:
        """End each session as soon as it waits for a message, for up to ``within_s``."""
        deadline = asyncio.get_running_loop().time() + within_s
        while True:
            for session, task in list(self._sessions.items()):
                if not session.busy:
                    session.terminate(task)
            if not any(session.busy for session in self._sessions):
                return
            if asyncio.get_running_loop().time() >= deadline:
                return
            await asyncio.sleep(0.05)

    def reload(self, load: Callable[[], VeilConfig]) -> None:
        """SIGHUP: new connections get the reloaded policy (proxy/server/reload.py)."""
        log.warning("SIGHUP received: reloading the policy")
        reloaded = reload_policy(load, self.config, self.context, tls_context=lambda c: tls_context(c.server))
        if reloaded is not None:
            self.config, self.context = reloaded

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One slot per connection, at most ``max_connections``. Clients still logging in also need
        one of ``authentication_slots`` (waiting up to LOGIN_QUEUE_WAIT_S for it, so a burst of logins
        from a pool goes through): sockets that connect and never authenticate can hold only those,
        never the slots of analysts who did log in."""
        settings = self.config.server
        if self.active >= settings.max_connections:
            await self._refuse(reader, writer, "max_connections", settings.max_connections)
            return
        try:
            await asyncio.wait_for(self._login_slots.acquire(), LOGIN_QUEUE_WAIT_S)
        except TimeoutError:
            await self._refuse(reader, writer, "authentication_slots", settings.authentication_slots)
            return
        if self.active >= settings.max_connections:  # filled up while this one waited
            self._login_slots.release()
            await self._refuse(reader, writer, "max_connections", settings.max_connections)
            return
        self.active += 1
        session = Session(reader, writer, self.context, on_login=self._login_slots.release)
        task = asyncio.current_task()
        assert task is not None
        self._sessions[session] = task
        try:
            await session.run()
        except Exception:  # a bug in one session must never take the listener down
            log.exception("session crashed")
            writer.close()
        finally:
            del self._sessions[session]
            self.active -= 1
            if not session.authenticated:
                self._login_slots.release()

    async def _refuse(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, reason: str, limit: int
    ) -> None:
        log.warning(
            "connection refused peer=%s reason=%s limit=%s", writer.get_extra_info("peername"), reason, limit
        )
        error = TooManyConnectionsError(
            f"sorry, too many clients already ({reason} = {limit})",
            hint="try again later; an administrator can raise [server] " + reason,
        )
        connection = Connection(reader, writer, max_message_size=self.context.max_message_size)
        await refuse_when_full(connection, self.context, error)


def run_server(
    config: VeilConfig,
    *,
    host: str,
    port: int,
    on_ready: Callable[[int], None],
    environ: Mapping[str, str],
    reload_config: Callable[[], VeilConfig] | None = None,
    seat: WorkerSeat | None = None,
) -> None:
    """Blocking entry point for ``veil serve``: opens everything, then serves until interrupted.

    ``environ`` holds the variables that postgres datasets' ``dsn_env`` name (read in ``cli.py``);
    ``reload_config`` reads the policy file again when the process gets SIGHUP; ``seat``: this
    process is one of ``veil serve --workers N`` (proxy/server/workers.py)."""
    context = build_context(config, environ=environ)
    if seat is not None:
        router = CancelRouter(seat.cancel_directory, seat.index) if seat.count > 1 else None
        throttle = login_throttle(config, store=seat.login_failures)
        context = dataclasses.replace(
            context,
            cancel_keys=CancelKeys(worker=seat.index),
            cancel_router=router,
            throttle=throttle,
            mock_salt_key=seat.mock_salt_key,
        )
    server = VeilServer(config, context)

    async def main() -> None:
        bound = await server.start(host, port, seat=seat)
        loop = asyncio.get_running_loop()
        if reload_config is not None:
            loop.add_signal_handler(signal.SIGHUP, server.reload, reload_config)
        grace = config.server.shutdown_grace_s
        loop.add_signal_handler(signal.SIGTERM, lambda: loop.create_task(server.drain(grace)))
        on_ready(bound)
        await server.serve_forever()

    try:
        asyncio.run(main())
    finally:
        for peer in server.peers:
            peer.stop()
        if context.analysis_pool is not None:
            context.analysis_pool.close()
