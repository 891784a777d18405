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
