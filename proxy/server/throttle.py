"""Failed logins slow down, per client address and role, as PostgreSQL's ``auth_delay`` and fail2ban
would have it: without this, a client can try hundreds of passwords a second.

The n-th failure in a row from one (address, role) is answered after ``base × 2^(n−1)`` seconds, at
most ``ceiling``; a success, or ``forget_after`` seconds without a failure, starts over. An unknown
role is throttled exactly like a known one, so the delay says nothing about which roles exist.
Connections in parallel gain nothing: every failure counts, and each waits its own delay."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

MAX_TRACKED = 10_000  # (address, role) pairs remembered; the oldest is forgotten first


@dataclass
class _Failures:
    count: int
    last: float


class LoginThrottle:
    def __init__(
        self,
        *,
        base: float,
        ceiling: float,
        forget_after: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base, self.ceiling, self.forget_after, self._clock = base, ceiling, forget_after, clock
        self._failures: OrderedDict[tuple[str, str], _Failures] = OrderedDict()

    def failed(self, address: str, role: str) -> float:
        """Record a failure; the seconds to wait before answering it."""
        now = self._clock()
        key = (address, role)
        previous = self._failures.pop(key, None)
        count = 1 if previous is None or now - previous.last > self.forget_after else previous.count + 1
        self._failures[key] = _Failures(count, now)
        if len(self._failures) > MAX_TRACKED:
            self._failures.popitem(last=False)
        return self.delay_of(count)

    def succeeded(self, address: str, role: str) -> None:
        self._failures.pop((address, role), None)

    def delay_of(self, failures: int) -> float:
        if self.base <= 0:
            return 0.0
        return min(self.ceiling, self.base * 2 ** min(failures - 1, 64))
