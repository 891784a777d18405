"""Failed logins slow down, per client address and role, as PostgreSQL's ``auth_delay`` and fail2ban
would have it: without this, a client can try hundreds of passwords a second.

The n-th failure in a row from one (address, role) is answered after ``base × 2^(n−1)`` seconds, at
most ``ceiling``; a success, or ``forget_after`` seconds without a failure, starts over. An unknown
role is throttled exactly like a known one, so the delay says nothing about which roles exist.
Connections in parallel gain nothing: every failure counts, and each waits its own delay.

With ``veil serve --workers N`` the kernel spreads one client's connections over every worker, so the
count must not live in one worker's memory — a guesser would get N times the attempts per delay.
Workers then keep it in a :class:`SharedFailures` table the supervisor maps before it forks them."""

from __future__ import annotations

import hashlib
import mmap
import multiprocessing
import secrets
import struct
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

MAX_TRACKED = 10_000  # (address, role) pairs remembered; the oldest is forgotten first


@dataclass
class Failures:
    count: int
    last: float


class FailureStore(Protocol):
    """Where the failures in a row of each (address, role) are kept."""

    def take(self, key: tuple[str, str], update: Callable[[Failures | None], Failures]) -> Failures:
        """Replace the key's record by ``update(record)`` in one step; returns the new record."""
        ...

    def forget(self, key: tuple[str, str]) -> None: ...


class LocalFailures:
    """One process's failures, the oldest forgotten first beyond MAX_TRACKED pairs."""

    def __init__(self) -> None:
        self._failures: OrderedDict[tuple[str, str], Failures] = OrderedDict()

    def take(self, key: tuple[str, str], update: Callable[[Failures | None], Failures]) -> Failures:
        record = self._failures[key] = update(self._failures.pop(key, None))
        if len(self._failures) > MAX_TRACKED:
            self._failures.popitem(last=False)
        return record

    def forget(self, key: tuple[str, str]) -> None:
        self._failures.pop(key, None)


_SLOT = struct.Struct("=Id")  # failures in a row, monotonic time of the last one
SHARED_SLOTS = 1 << 16


class SharedFailures:
    """Failures kept in anonymous shared memory, so that every process forked after it sees them.

    A fixed table of slots, chosen by a keyed hash of (address, role): a slot holds no name, so two
    pairs that fall in one slot share one count — they are throttled together, never less. The key is
    drawn when the table is made, so no client can aim its failures at another client's slot.
    ``time.monotonic`` is the system's CLOCK_MONOTONIC, the same clock in every process."""

    def __init__(self, slots: int = SHARED_SLOTS) -> None:
        self._slots = slots
        self._memory = mmap.mmap(-1, slots * _SLOT.size)  # MAP_SHARED | MAP_ANONYMOUS
        self._lock = multiprocessing.get_context("fork").Lock()
        self._hash_key = secrets.token_bytes(16)

    def take(self, key: tuple[str, str], update: Callable[[Failures | None], Failures]) -> Failures:
        offset = self._offset(key)
        with self._lock:
            count, last = _SLOT.unpack_from(self._memory, offset)
            record = update(Failures(count, last) if count else None)
            _SLOT.pack_into(self._memory, offset, min(record.count, 2**32 - 1), record.last)
        return record

    def forget(self, key: tuple[str, str]) -> None:
        with self._lock:
            _SLOT.pack_into(self._memory, self._offset(key), 0, 0.0)

    def _offset(self, key: tuple[str, str]) -> int:
        digest = hashlib.blake2b("\0".join(key).encode(), key=self._hash_key, digest_size=8).digest()
        return int.from_bytes(digest, "little") % self._slots * _SLOT.size


class LoginThrottle:
    def __init__(
        self,
        *,
        base: float,
        ceiling: float,
        forget_after: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
        store: FailureStore | None = None,
    ) -> None:
        self.base, self.ceiling, self.forget_after, self._clock = base, ceiling, forget_after, clock
        self._store: FailureStore = store if store is not None else LocalFailures()

    def failed(self, address: str, role: str) -> float:
        """Record a failure; the seconds to wait before answering it."""
        now = self._clock()

        def one_more(previous: Failures | None) -> Failures:
            fresh = previous is None or now - previous.last > self.forget_after
            return Failures(1 if fresh else previous.count + 1, now)  # type: ignore[union-attr]

        return self.delay_of(self._store.take((address, role), one_more).count)

    def succeeded(self, address: str, role: str) -> None:
        self._store.forget((address, role))

    def delay_of(self, failures: int) -> float:
        if self.base <= 0:
            return 0.0
        return min(self.ceiling, self.base * 2 ** min(failures - 1, 64))
