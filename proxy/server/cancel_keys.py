"""The keys handed out in BackendKeyData, and which session each one cancels.

A PostgreSQL client cancels a running query by opening a *new* connection and sending a
CancelRequest that quotes the (process id, secret key) pair its session received at startup. Veil
has no processes: the "process id" is a random number unique among live sessions, and the secret
a second random number that only that client has seen. A request whose secret does not match is
ignored without an answer, as PostgreSQL does, so a stranger who guesses process ids learns
nothing and cancels nothing.

With ``veil serve --workers N`` a CancelRequest may reach any worker process: the low
``WORKER_BITS`` bits of every process id are the index of the worker that issued it, so the one
that receives the request knows which worker owns the session and forwards the request there
(proxy/server/cancel_routing.py). The secret stays a full 32 random bits.

Used only from the event loop's thread (sessions register, unregister and look up there), so it
needs no lock.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass

from proxy.backends.interrupts import Interrupter

_PROCESS_ID_BITS = 31  # psql prints it as a signed int; stay positive
WORKER_BITS = 6  # the low bits of a process id: the index of the worker process that issued it
MAX_WORKERS = 1 << WORKER_BITS
_SECRET_BITS = 32  # the whole field of protocol 3.0's BackendKeyData


@dataclass(frozen=True)
class CancelKey:
    """What a session's BackendKeyData carries."""

    process_id: int
    secret_key: int


class CancelKeys:
    def __init__(self, *, worker: int = 0) -> None:
        if not 0 <= worker < MAX_WORKERS:
            raise ValueError(f"a worker index is below {MAX_WORKERS}, got {worker}")
        self.worker = worker
        self._by_process: dict[int, tuple[CancelKey, Interrupter]] = {}
        self._by_session: dict[Interrupter, CancelKey] = {}

    def issue(self, session: Interrupter) -> CancelKey:
        """A fresh key for a session that has just authenticated."""
        while (process_id := self._new_process_id()) in self._by_process or process_id == 0:
            pass
        key = CancelKey(process_id, secrets.randbits(_SECRET_BITS))
        self._by_process[process_id] = (key, session)
        self._by_session[session] = key
        return key

    def revoke(self, session: Interrupter) -> None:
        """The session has ended: its key cancels nothing any more (and its process id may be reused)."""
        key = self._by_session.pop(session, None)
        if key is not None:
            del self._by_process[key.process_id]

    def find(self, process_id: int, secret_key: int) -> Interrupter | None:
        """The session a CancelRequest names, or None for an unknown id or a wrong secret."""
        entry = self._by_process.get(process_id)
        if entry is None:
            return None
        key, session = entry
        if not hmac.compare_digest(_bytes(key.secret_key), _bytes(secret_key)):
            return None
        return session

    def _new_process_id(self) -> int:
        return secrets.randbits(_PROCESS_ID_BITS - WORKER_BITS) << WORKER_BITS | self.worker

    def __len__(self) -> int:
        return len(self._by_process)


def owner(process_id: int) -> int:
    """The index of the worker process that issued ``process_id``."""
    return process_id & (MAX_WORKERS - 1)


def _bytes(number: int) -> bytes:
    return number.to_bytes(4, "big")
