"""Where mechanisms get their randomness: an injected ``RandomSource``.

Mechanisms are pure functions of their inputs and of the randomness they are handed, so tests can replay
them with a seeded ``random.Random`` and production can hand them the operating system's CSPRNG. The only
source production code constructs is :func:`secure_random_source`; a predictable (seeded) source would let
anyone who knows the seed subtract the noise again, so seeded sources are created in tests only and no
configuration key can select one.
"""

from __future__ import annotations

import secrets
from typing import Protocol, runtime_checkable


@runtime_checkable
class RandomSource(Protocol):
    """Uniform integers, the only primitive the exact samplers need (no floats, so no Mironov leak)."""

    def randrange(self, stop: int, /) -> int:
        """A uniform integer in ``[0, stop)``; ``stop`` may be arbitrarily large."""
        ...


def secure_random_source() -> RandomSource:
    """The production source: ``secrets.SystemRandom`` reads the OS CSPRNG and cannot be seeded."""
    return secrets.SystemRandom()
