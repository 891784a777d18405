"""Errors of the budget package. They carry user-facing messages but know nothing of SQLSTATEs;
``proxy/errors.py`` maps them to the wire."""

from __future__ import annotations


class BudgetError(Exception):
    """Base class: something about budgets, analysts or the ledger store was refused."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class InvalidBudgetError(BudgetError):
    """An epsilon or delta outside its legal range."""


class BudgetExhaustedError(BudgetError):
    """A reservation would take an analyst past the budget granted on a dataset."""


class UnknownAnalystError(BudgetError):
    """No analyst of that name exists in the ledger."""


class AnalystExistsError(BudgetError):
    """An analyst of that name already exists."""


class UnknownReservationError(BudgetError):
    """A commit or cancel named a reservation that is not open."""


class LedgerStoreError(BudgetError):
    """The ledger cannot be used: not opened, not a Veil ledger, or a fault while writing or reading.

    ``fault`` says which kind, so that the proxy can give each its SQLSTATE: ``locked`` (another writer
    held it too long), ``full`` (no space left), ``io`` (an I/O error or corrupt pages), ``lost`` (the
    connection to a PostgreSQL ledger broke), ``unavailable`` (anything else)."""

    def __init__(self, message: str, *, hint: str | None = None, fault: str = "unavailable") -> None:
        super().__init__(message, hint=hint)
        self.fault = fault


class InvalidNameError(BudgetError):
    """An analyst or dataset name the ledger will not store."""


class InvalidVerifierError(BudgetError):
    """A password verifier that is not a SCRAM-SHA-256 verifier (perhaps a plaintext password)."""


class UnknownAccountantError(BudgetError):
    """A composition accountant that does not exist was named (budget/accountants.py)."""
