"""Errors of the mechanisms package. They carry user-facing messages but know nothing of SQLSTATEs;
``proxy/errors.py`` maps them to the wire."""

from __future__ import annotations


class MechanismError(Exception):
    """A mechanism was called with parameters it cannot honour (epsilon <= 0, infinite sensitivity, ...).

    The message says what was wrong and what to pass instead; ``hint`` adds how to fix it upstream.
    """

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class SecureProtocolError(MechanismError):
    """A two-party protocol (``mechanisms.secure``) cannot go on: the peer's message was malformed, arrived
    out of order, or failed a check an honest peer always passes (two zeros among Protocol 1's tests).

    The semi-honest model assumes no deviation, so this is an abort, not a retry: the run's randomness
    must not be reused, and the caller should treat the peer link as broken.
    """
