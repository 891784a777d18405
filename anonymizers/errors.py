"""Errors of the anonymizers package. They carry user-facing messages but know nothing of SQLSTATEs or
click; ``proxy/cli/main.py`` turns them into one-line errors at its edge."""

from __future__ import annotations


class AnonymizationError(Exception):
    """Base class: an anonymization, risk or utility computation was refused.

    The message says what was wrong; ``hint`` says what to do about it.
    """

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class HierarchyError(AnonymizationError):
    """A generalization hierarchy is malformed or does not cover the column's values."""


class InfeasibleError(AnonymizationError):
    """No transformation meets the privacy model within the suppression limit."""
