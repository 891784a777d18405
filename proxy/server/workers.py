"""``veil serve --workers N``: N processes answering on one port.

One process is one Python interpreter: its event loop, the parsing and rewriting of every query and
the noise all share one GIL, so a single process uses about one core however many clients it has.
Workers are forked from a supervisor that opens nothing itself; each builds its own engines and
ledger connections (proxy/server/listener.py) and shares with the others only what is in the ledger
database: budgets (every reservation is checked and debited under the ledger's lock, across
processes as across threads), the answer cache and the audit log.

Sockets: on Linux each worker listens on its own socket bound with ``SO_REUSEPORT`` to the same
address, and the kernel spreads new connections evenly over them — a single shared socket would
wake every worker for each connection and let whichever runs first take a whole burst. The
supervisor binds the address first (without listening) so that ``--port 0`` picks one port for all
and the port stays held while a worker restarts. Elsewhere the workers accept on one socket the
supervisor listens on. TLS is negotiated inside each connection (SSLRequest), so either works.

Signals go to the supervisor: SIGTERM and SIGINT stop every worker gracefully (each drains its
sessions, proxy/server/listener.py), SIGHUP makes each reload the policy. A worker that dies while
the server runs is restarted (its reservations in flight stay reserved: they count as spent, fail
closed); more than ``MAX_RESTARTS`` deaths within ``RESTART_WINDOW_S`` stop the server instead, as a
crash loop would only keep failing clients.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from budget.errors import BudgetError
from proxy.errors import ConfigError, ProxyError
from proxy.server.cancel_keys import MAX_WORKERS
from proxy.server.throttle import SharedFailures

DEFAULT_WORKERS_CAP = 8  # beyond this the ledger's one write lock, not the CPU, is what limits
MAX_RESTARTS = 5
RESTART_WINDOW_S = 60.0
READY = b"ready\n"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
log = logging.getLogger("veil.server")


def default_workers() -> int:
    """One worker per core, at most DEFAULT_WORKERS_CAP."""
    return max(1, min(os.cpu_count() or 1, DEFAULT_WORKERS_CAP, MAX_WORKERS))


@dataclass(frozen=True)
class WorkerSeat:
    """What a worker process is given: its index (in its cancel keys), how many there are, the
    sockets it accepts on, the directory of the workers' cancel sockets, and what the workers must
    share so that the one server they make up behaves as one: the failed-login counts (or a guesser
    gets N times the attempts, proxy/server/throttle.py) and the key of the fake salts that unknown
    roles get (or two workers would give one unknown name two salts, telling it from a real one)."""

    index: int
    count: int
    sockets: tuple[socket.socket, ...]
    cancel_directory: Path
    login_failures: SharedFailures
    mock_salt_key: bytes


class _Addresses:
    """The listening address, held by the supervisor for the server's lifetime."""

    def __init__(self, host: str, port: int) -> None:
        self.reuse_port = sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        self._held: list[socket.socket] = []
        self.addresses: list[tuple[int, tuple[object, ...]]] = []
        try:
            for family, address in dict.fromkeys((info[0], info[4]) for info in infos):
                bound = self._bind(family, (address[0], port, *address[2:]))
                port = port or bound.getsockname()[1]  # --port 0: the first address picks it for all
                self.addresses.append((family, bound.getsockname()))
                if not self.reuse_port:
                    bound.listen(socket.SOMAXCONN)
                self._held.append(bound)
        except BaseException:
            self.close()
            raise
        self.port = port

    def for_worker(self) -> tuple[socket.socket, ...]:
        """Sockets a new worker accepts on: its own (SO_REUSEPORT) or the shared listening ones.
        A replacement worker's own socket joins only when it listens, once it has started."""
        if not self.reuse_port:
            return tuple(self._held)
        # bound, not listening: the kernel sends it connections only once the worker, ready, listens
        return tuple(self._bind(family, address) for family, address in self.addresses)

    def _bind(self, family: int, address: tuple[object, ...]) -> socket.socket:
        bound = socket.socket(family, socket.SOCK_STREAM)
        try:
            bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if self.reuse_port:
                bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                bound.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            bound.bind(address)
        except BaseException:
            bound.close()
            raise
        return bound

    def close(self) -> None:
        for held in self._held:
            held.close()


@dataclass
class _Worker:
    index: int
    pid: int
    started: float


class Supervisor:
    """Forks the workers, waits until all are ready, restarts those that die and relays signals."""

    def __init__(self, count: int, run_worker: Callable[[WorkerSeat, Callable[[int], None]], None]) -> None:
        if not 1 <= count <= MAX_WORKERS:
            raise ConfigError(f"--workers must be between 1 and {MAX_WORKERS}, got {count}")
        self.count = count
        self._run_worker = run_worker
        self._workers: dict[int, _Worker] = {}  # by pid
        self._stopping = False
        self._interrupted = False
        self._deaths: list[float] = []
        self._directory = Path(tempfile.mkdtemp(prefix="veil-workers-"))  # 0700: the server's user only
        self._login_failures = SharedFailures()  # mapped before any fork, so every worker shares it
        self._mock_salt_key = secrets.token_bytes(32)

    def serve(self, host: str, port: int, on_ready: Callable[[int], None]) -> bool:
        """Serve until SIGTERM/SIGINT; True when it was SIGINT (Ctrl+C). ``on_ready(port)`` once
        every worker listens."""
        addresses = _Addresses(host, port)
        previous = {
            number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
        }
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        signal.signal(signal.SIGHUP, self._relay)
        try:
            for index in range(self.count):
                self._start(index, addresses)
            if not self._stopping:
                on_ready(addresses.port)
            self._supervise(addresses)
        finally:
            self._stop_all()
            for number, handler in previous.items():
                signal.signal(number, handler)
            addresses.close()
            shutil.rmtree(self._directory, ignore_errors=True)
        return self._interrupted

    def _start(self, index: int, addresses: _Addresses) -> None:
        """Fork worker ``index`` and wait until it listens; its start-up error is raised here."""
        reader, writer = os.pipe()
        sockets = addresses.for_worker()
        supervisor = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker
            os.close(reader)
            seat = WorkerSeat(
                index, self.count, sockets, self._directory, self._login_failures, self._mock_salt_key
            )
            _worker_main(seat, writer, self._run_worker, supervisor=supervisor)
        os.close(writer)
        if addresses.reuse_port:
            for own in sockets:
                own.close()
        self._workers[pid] = _Worker(index, pid, time.monotonic())
        with os.fdopen(reader, "rb") as report:
            answer = report.read(len(READY))
            if answer != READY:
                answer += report.read()
                self._reap(pid)
                if not self._stopping:
                    raise _startup_error(answer)

    def _supervise(self, addresses: _Addresses) -> None:
        while self._workers:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                return
            worker = self._workers.pop(pid, None)
            if worker is None or self._stopping:
                continue
            now = time.monotonic()
            self._deaths = [death for death in self._deaths if now - death < RESTART_WINDOW_S] + [now]
            log.error("worker %d (pid %d) died (%s); restarting it", worker.index, pid, _describe(status))
            if len(self._deaths) > MAX_RESTARTS:
                log.error("%d worker deaths within %g s: stopping", len(self._deaths), RESTART_WINDOW_S)
                raise ConfigError(
                    f"worker processes kept dying ({len(self._deaths)} within {RESTART_WINDOW_S:g} s)",
                    hint="the server log has the reason; fix it and start veil serve again",
                )
            self._start(worker.index, addresses)

    def _stop(self, number: int, frame: FrameType | None) -> None:
        """SIGTERM/SIGINT: every worker drains and stops (the workers ignore SIGINT themselves)."""
        self._stopping = True
        self._interrupted = self._interrupted or number == signal.SIGINT
        self._signal_all(signal.SIGTERM)

    def _relay(self, number: int, frame: FrameType | None) -> None:
        self._signal_all(number)

    def _signal_all(self, number: int) -> None:
        for pid in list(self._workers):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, number)

    def _stop_all(self) -> None:
        """Stop and reap every worker still running (after a start-up error or a crash loop)."""
        self._stopping = True
        self._signal_all(signal.SIGTERM)
        for pid in list(self._workers):
            self._reap(pid)

    def _reap(self, pid: int) -> None:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        self._workers.pop(pid, None)


def _worker_main(
    seat: WorkerSeat,
    ready: int,
    run_worker: Callable[[WorkerSeat, Callable[[int], None]], None],
    *,
    supervisor: int,
) -> None:
    """The body of a forked worker; never returns. Its start-up error goes to the supervisor."""
    _die_with(supervisor)
    _tag_log_records(seat.index)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C reaches the supervisor, which stops us
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # until the event loop handles it
    status = 0
    reported = False

    def on_ready(port: int) -> None:
        nonlocal reported
        os.write(ready, READY)
        os.close(ready)
        reported = True

    try:
        run_worker(seat, on_ready)
    except (ProxyError, BudgetError) as error:
        status = 1
        if not reported:
            fields = {"message": error.message, "detail": getattr(error, "detail", None), "hint": error.hint}
            os.write(ready, json.dumps(fields).encode())
        else:
            log.error("worker %d stopped: %s", seat.index, error.message)
    except BaseException:
        status = 1
        text = traceback.format_exc()
        if not reported:
            os.write(
                ready,
                json.dumps({"message": f"worker {seat.index} failed to start", "detail": text}).encode(),
            )
        else:
            sys.stderr.write(text)
    finally:
        logging.shutdown()
        sys.stderr.flush()
        os._exit(status)


def _tag_log_records(index: int) -> None:
    """Every log line of a worker names it: ``veil.server[worker 1]``."""
    make_record = logging.getLogRecordFactory()

    def tagged(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        record.name = f"{record.name}[worker {index}]"
        return record

    logging.setLogRecordFactory(tagged)


def _die_with(supervisor: int) -> None:
    """``kill -9`` of the supervisor kills the workers too (Linux: PR_SET_PDEATHSIG), as it would a
    single-process server: orphaned workers would go on answering on a port nobody manages."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != supervisor:  # it died before the request was made
        os._exit(1)


def _startup_error(report: bytes) -> ConfigError:
    """A worker's start-up error, raised again in the supervisor (so it is printed once)."""
    try:
        fields = json.loads(report)
    except ValueError:
        return ConfigError("a worker process died while starting", hint="the server log has the reason")
    return ConfigError(fields["message"], detail=fields.get("detail"), hint=fields.get("hint"))


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"
