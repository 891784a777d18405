"""The one client-facing error hierarchy. Each class declares its PostgreSQL SQLSTATE once.

Domain packages (``budget``, ``mechanisms``) raise their own errors and know nothing of SQLSTATEs;
:func:`as_proxy_error` maps them here, at the edge. Messages follow PostgreSQL's style: the primary
message is lowercase and says what was refused, ``detail`` says why, ``hint`` says how to fix it.
Backend error text is never forwarded: a failed cast can quote a private value.
"""

from __future__ import annotations

import uuid
from typing import ClassVar

from budget import errors as budget_errors
from budget.audit import Charge
from mechanisms.errors import MechanismError


class ProxyError(Exception):
    """Base class: an error with a SQLSTATE, a message, and optional detail, hint and position."""

    sqlstate: ClassVar[str] = "XX000"
    registry: ClassVar[dict[str, type[ProxyError]]] = {}

    def __init_subclass__(cls, *, sqlstate: str | None = None, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if sqlstate is not None:
            cls.sqlstate = sqlstate
        ProxyError.registry[cls.__name__] = cls

    def __init__(
        self,
        message: str,
        *,
        detail: str | None = None,
        hint: str | None = None,
        position: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail
        self.hint = hint
        self.position = position
        self.charge: Charge | None = None  # a statement that failed after the engine read private rows


class QuerySyntaxError(ProxyError, sqlstate="42601"):
    """The SQL text does not parse."""


class UnsupportedQueryError(ProxyError, sqlstate="0A000"):
    """Valid SQL that Veil does not answer (yet)."""


class UnknownTableError(ProxyError, sqlstate="42P01"):
    """A table that the dataset's policy does not declare, or a qualifier that names no table of the FROM clause."""


class UnknownColumnError(ProxyError, sqlstate="42703"):
    """A column that the table's policy does not declare."""


class AmbiguousColumnError(ProxyError, sqlstate="42702"):
    """A bare column name that more than one joined table has."""


class DatatypeMismatchError(ProxyError, sqlstate="42804"):
    """Values of types that cannot be combined, as the columns of two parts of a UNION ALL."""


class UndefinedObjectError(ProxyError, sqlstate="42704"):
    """An unknown setting name in SET/SHOW."""


class InvalidParameterValueError(ProxyError, sqlstate="22023"):
    """A setting given a value outside its legal range."""


class PolicyViolationError(ProxyError, sqlstate="42501"):
    """The query would reveal private rows, or uses private data in a way the policy forbids."""


class BudgetExhaustedError(ProxyError, sqlstate="53Z01"):
    """The answer would take the analyst past the epsilon granted on this dataset."""


class MissingUserError(ProxyError, sqlstate="28000"):
    """The startup packet named no user."""


class NoActiveTransactionError(ProxyError, sqlstate="25P01"):
    """A statement that needs a transaction block (DECLARE CURSOR without HOLD) outside one."""


class InFailedTransactionError(ProxyError, sqlstate="25P02"):
    """A statement after an error inside BEGIN … ROLLBACK, as PostgreSQL refuses it."""


class TlsRequiredError(ProxyError, sqlstate="28000"):
    """A client on another host connected without TLS where ``server.require_tls_for_remote`` is on."""


class CharacterNotInRepertoireError(ProxyError, sqlstate="22021"):
    """A query string that is not UTF-8 or holds a NUL byte; the session goes on."""


class ProgramLimitExceededError(ProxyError, sqlstate="54001"):
    """A query on private data over the dataset's complexity budget (``[datasets.NAME.limits]``)."""


class QueryCanceledError(ProxyError, sqlstate="57014"):
    """The engine query was stopped: the client's CancelRequest, the statement timeout, the response
    deadline or a disconnection. Charged once the engine had started on the statement (docs/privacy.md).
    ``outcome`` says which, in the audit log's words (budget.audit.FAILURE_OUTCOMES)."""

    def __init__(self, message: str, *, outcome: str = "cancelled", **kwargs: object) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.outcome = outcome


class AuthenticationFailedError(ProxyError, sqlstate="28P01"):
    """Wrong password or unknown analyst (indistinguishable on purpose)."""


class UnknownDatabaseError(ProxyError, sqlstate="3D000"):
    """The database name in the connection string names no dataset."""


class TooManyConnectionsError(ProxyError, sqlstate="53300"):
    """More clients than server.max_connections; the connection is refused at once."""


class ProtocolViolationError(ProxyError, sqlstate="08P01"):
    """The client broke the wire protocol."""


class InvalidTextRepresentationError(ProxyError, sqlstate="22P02"):
    """A text-format parameter is not valid input for its type (``'abc'`` for an integer)."""


class InvalidBinaryRepresentationError(ProxyError, sqlstate="22P03"):
    """A binary-format parameter does not have its type's layout."""


class DuplicatePreparedStatementError(ProxyError, sqlstate="42P05"):
    """Parse names a prepared statement that already exists; close it first."""


class UndefinedPreparedStatementError(ProxyError, sqlstate="26000"):
    """Bind or Describe names a prepared statement that does not exist."""


class DuplicatePortalError(ProxyError, sqlstate="42P03"):
    """Bind names a portal that already exists; close it first."""


class UndefinedPortalError(ProxyError, sqlstate="34000"):
    """Describe or Execute names a portal that does not exist (or no longer does, after Sync)."""


class AdminShutdownError(ProxyError, sqlstate="57P01"):
    """The server is shutting down (SIGTERM): the session ends after its running statement."""


class ConfigError(ProxyError, sqlstate="F0000"):
    """The policy file is missing or invalid."""


class BackendUnavailableError(ProxyError, sqlstate="58000"):
    """The database engine behind a dataset failed; its error text stays in the server log."""


class LedgerLockedError(ProxyError, sqlstate="55P03"):
    """The privacy ledger was held by another writer too long; the statement spent nothing more."""


class LedgerDiskFullError(ProxyError, sqlstate="53100"):
    """The privacy ledger's disk is full."""


class LedgerIoError(ProxyError, sqlstate="58030"):
    """The privacy ledger could not be read or written (I/O error, corrupt pages, anything else)."""


class LedgerConnectionError(ProxyError, sqlstate="08006"):
    """The connection to a PostgreSQL ledger broke."""


class FederationPeerError(ProxyError, sqlstate="08001"):
    """The federation peer could not be reached, did not authenticate, refused, or broke the protocol."""


class InternalProxyError(ProxyError, sqlstate="XX000"):
    """A bug in Veil. Carries an incident id that also appears in the server log."""

    def __init__(self, message: str = "internal error in Veil", **kwargs: object) -> None:
        self.incident_id = uuid.uuid4().hex[:12]
        super().__init__(f"{message} (incident {self.incident_id})", **kwargs)  # type: ignore[arg-type]


_BUDGET_ERROR_MAP: dict[type[budget_errors.BudgetError], type[ProxyError]] = {
    budget_errors.BudgetExhaustedError: BudgetExhaustedError,
    budget_errors.InvalidBudgetError: InvalidParameterValueError,
    budget_errors.UnknownAnalystError: AuthenticationFailedError,
}


def as_proxy_error(error: Exception) -> ProxyError:
    """Map any domain error to its client-facing class; unknown errors become internal errors."""
    if isinstance(error, ProxyError):
        return error
    if isinstance(error, budget_errors.LedgerStoreError):
        return ledger_fault(error)
    if isinstance(error, budget_errors.BudgetError):
        target = next(
            (proxy for domain, proxy in _BUDGET_ERROR_MAP.items() if isinstance(error, domain)),
            InternalProxyError,
        )
        if target is InternalProxyError:
            return InternalProxyError()
        return target(error.message, hint=error.hint)
    if isinstance(error, MechanismError):
        return InvalidParameterValueError(str(error), hint=getattr(error, "hint", None))
    return InternalProxyError()


_LEDGER_FAULTS: dict[str, tuple[type[ProxyError], str]] = {
    "locked": (LedgerLockedError, "the privacy ledger is busy: another writer held it too long"),
    "full": (LedgerDiskFullError, "the privacy ledger's disk is full"),
    "io": (LedgerIoError, "the privacy ledger could not be read or written"),
    "lost": (LedgerConnectionError, "the connection to the privacy ledger was lost"),
    "unavailable": (LedgerIoError, "the privacy ledger is unavailable"),
}


def ledger_fault(error: budget_errors.LedgerStoreError) -> ProxyError:
    """A ledger fault as the client sees it: its SQLSTATE and a fixed message (the store's own text,
    with file names and server addresses, goes to the log); whatever the statement had spent stays."""
    kind, message = _LEDGER_FAULTS.get(error.fault, _LEDGER_FAULTS["unavailable"])
    return kind(
        message, hint="try again in a moment; the administrator will find the cause in the server log"
    )
