"""The epsilon ledger: who may spend how much privacy loss on which dataset, and what they spent.

One SQLite file (stdlib ``sqlite3``, no ORM) holds analysts (name and SCRAM verifier), grants and
spends. The proxy calls :meth:`Ledger.reserve` *before* a query runs, :meth:`Ledger.commit` once the
noisy answer has been released and :meth:`Ledger.cancel` when the query failed before any noisy value
left the process (spec dp-mechanisms §6.2). Budget is fixed up front per (analyst, dataset), so a
reservation that would take the analyst past the grant is refused before anything is computed —
the opposite of recording a spend after the noise, with no cap.

Concurrency: every operation opens its own connection (so one ``Ledger`` may be shared by any number
of threads, and any number of processes may open the same file), the file is in WAL mode with a
busy timeout, and every check-and-debit runs inside one ``BEGIN IMMEDIATE`` transaction, which takes
SQLite's single write lock before reading the balance; two reservations can therefore never both see
the same remaining budget.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from pathlib import Path

from budget.errors import (
    AnalystExistsError,
    BudgetExhaustedError,
    InvalidBudgetError,
    InvalidNameError,
    InvalidVerifierError,
    LedgerStoreError,
    UnknownAnalystError,
    UnknownReservationError,
)
from budget.loss import PrivacyLoss

SCHEMA_VERSION = 1
APPLICATION = "veil-ledger"
BUSY_TIMEOUT_SECONDS = 30.0

_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,63}")
_SCRAM_VERIFIER = re.compile(r"SCRAM-SHA-256\$[1-9][0-9]*:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+")
_EXHAUSTED_HINT = "ask an administrator for more budget (veil budget grant) or lower veil.epsilon"
_CREATE_HINT = "run `veil init-demo`, or set ledger.path in veil.toml to an existing ledger"

# Grants and spends are append-only: triggers refuse deletes, and the only update a spend accepts is
# its one state change out of 'reserved'. The amounts of a reservation can never be edited downwards.
_SCHEMA: tuple[str, ...] = (
    """CREATE TABLE schema_version (
        application TEXT NOT NULL,
        version INTEGER NOT NULL
    )""",
    """CREATE TABLE analysts (
        name TEXT PRIMARY KEY,
        verifier TEXT NOT NULL,
        created_at TEXT NOT NULL
    )""",
    """CREATE TABLE grants (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        analyst TEXT NOT NULL,
        dataset TEXT NOT NULL,
        epsilon REAL NOT NULL CHECK (epsilon > 0),
        delta REAL NOT NULL CHECK (delta >= 0 AND delta < 1),
        created_at TEXT NOT NULL
    )""",
    "CREATE INDEX grants_by_pair ON grants (analyst, dataset)",
    """CREATE TABLE spends (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        analyst TEXT NOT NULL,
        dataset TEXT NOT NULL,
        epsilon REAL NOT NULL CHECK (epsilon > 0),
        delta REAL NOT NULL CHECK (delta >= 0 AND delta < 1),
        statement TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('reserved', 'committed', 'cancelled')),
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )""",
    "CREATE INDEX spends_by_pair ON spends (analyst, dataset, state)",
    """CREATE TRIGGER grants_no_update BEFORE UPDATE ON grants
       BEGIN SELECT RAISE(ABORT, 'grants are append-only'); END""",
    """CREATE TRIGGER grants_no_delete BEFORE DELETE ON grants
       BEGIN SELECT RAISE(ABORT, 'grants are append-only'); END""",
    """CREATE TRIGGER spends_no_delete BEFORE DELETE ON spends
       BEGIN SELECT RAISE(ABORT, 'spends are append-only'); END""",
    """CREATE TRIGGER spends_only_close BEFORE UPDATE ON spends
       WHEN OLD.state <> 'reserved' OR NEW.state = 'reserved'
         OR NEW.id IS NOT OLD.id OR NEW.analyst IS NOT OLD.analyst OR NEW.dataset IS NOT OLD.dataset
         OR NEW.epsilon IS NOT OLD.epsilon OR NEW.delta IS NOT OLD.delta
         OR NEW.statement IS NOT OLD.statement OR NEW.created_at IS NOT OLD.created_at
       BEGIN SELECT RAISE(ABORT, 'only a reserved spend may change, and only its state'); END""",
)


class SpendState(StrEnum):
    """Where a spend is in its life; see :class:`Ledger`."""

    RESERVED = "reserved"
    COMMITTED = "committed"
    CANCELLED = "cancelled"


_COUNTING_STATES = (SpendState.RESERVED.value, SpendState.COMMITTED.value)


@dataclass(frozen=True)
class Analyst:
    """A principal that may be granted budget. Its verifier is deliberately not part of it."""

    name: str
    created_at: datetime


@dataclass(frozen=True)
class Balance:
    """Granted, spent and remaining privacy loss of one analyst on one dataset.

    ``spent`` counts reserved and committed spends. ``remaining`` is never negative, and a
    reservation of exactly ``(remaining_epsilon, remaining_delta)`` is always accepted.
    """

    analyst: str
    dataset: str
    granted_epsilon: float
    spent_epsilon: float
    remaining_epsilon: float
    granted_delta: float
    spent_delta: float
    remaining_delta: float


@dataclass(frozen=True)
class Spend:
    """One row of the append-only spends table."""

    id: int
    analyst: str
    dataset: str
    epsilon: float
    delta: float
    statement: str
    state: SpendState
    created_at: datetime
    updated_at: datetime


def _utc_now() -> datetime:
    return datetime.now(UTC)


class Ledger:
    """The epsilon ledger of the proxy, stored in one SQLite file.

    A spend is a row of the append-only ``spends`` table and is in exactly one state:

    * ``reserved`` — :meth:`reserve` found room for it and debited it; the query may run. It
      **counts as spent**: if the proxy crashes between reserve and commit, the noisy answer may
      have left the process, so the ledger fails closed and keeps the charge.
    * ``committed`` — :meth:`commit`: the answer was released. Counts as spent, forever.
    * ``cancelled`` — :meth:`cancel`: the query failed before any noisy value was released, so
      the loss no longer counts.

    Only ``reserved -> committed`` and ``reserved -> cancelled`` exist; anything else raises
    :class:`UnknownReservationError` (and triggers in the file refuse it too).

    Arithmetic: ``granted`` is the ``math.fsum`` of the grant rows and ``spent`` the ``fsum`` of the
    reserved and committed rows, each correctly rounded once. A reservation of ``loss`` is accepted
    iff ``fsum(spent rows + [loss]) <= fsum(grant rows)`` for epsilon *and* for delta — no
    tolerance. The amounts handed to :meth:`reserve` are already rounded up by composition
    (:func:`budget.loss.compose_sequential`), so floating point can only overcharge the analyst.

    Removing an analyst deletes their credentials but not their grants or spends; an analyst
    re-added under the same name therefore inherits the same balances (spending is never forgotten).

    ``clock`` is a seam for tests; it should return aware datetimes (naive ones are taken as UTC).
    """

    def __init__(self, path: Path, *, clock: Callable[[], datetime] = _utc_now) -> None:
        self._path = Path(path)
        self._uri = f"{self._path.resolve().as_uri()}?mode=rw"
        self._clock = clock
        self._check_store()

    @classmethod
    def create(cls, path: Path, *, clock: Callable[[], datetime] = _utc_now) -> Ledger:
        """Create a ledger at ``path``, or open the one already there (idempotent)."""
        path = Path(path)
        try:
            conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
        except sqlite3.Error as exc:
            raise _store_error(path, exc) from exc
        try:
            _make_schema(conn, path)
        except sqlite3.DatabaseError as exc:
            raise _store_error(path, exc) from exc
        finally:
            conn.close()
        return cls(path, clock=clock)

    @classmethod
    def open(cls, path: Path, *, clock: Callable[[], datetime] = _utc_now) -> Ledger:
        """Open an existing ledger; unlike :meth:`create` it never makes a file."""
        return cls(path, clock=clock)

    @property
    def path(self) -> Path:
        return self._path

    # -- analysts -------------------------------------------------------------------------------

    def add_analyst(self, name: str, verifier: str) -> Analyst:
        """Add an analyst with a SCRAM-SHA-256 verifier (never a plaintext password)."""
        _check_name(name, "analyst")
        _check_verifier(verifier)
        created_at = self._now()
        with self._transaction(write=True) as conn:
            if _analyst_exists(conn, name):
                raise AnalystExistsError(
                    f'analyst "{name}" already exists',
                    hint=f"choose another name, or run `veil analyst remove {name}` first",
                )
            conn.execute(
                "INSERT INTO analysts (name, verifier, created_at) VALUES (?, ?, ?)",
                (name, verifier, created_at.isoformat()),
            )
        return Analyst(name, created_at)

    def remove_analyst(self, name: str) -> None:
        """Remove an analyst's credentials; their grants and spends stay on record."""
        with self._transaction(write=True) as conn:
            _require_analyst(conn, name)
            conn.execute("DELETE FROM analysts WHERE name = ?", (name,))

    def set_verifier(self, name: str, verifier: str) -> None:
        """Replace an analyst's SCRAM verifier (a password change)."""
        _check_verifier(verifier)
        with self._transaction(write=True) as conn:
            _require_analyst(conn, name)
            conn.execute("UPDATE analysts SET verifier = ? WHERE name = ?", (verifier, name))

    def verifier(self, name: str) -> str | None:
        """The stored SCRAM verifier, or None for an unknown analyst.

        None rather than an error so that authentication can run a dummy exchange and fail the
        same way for unknown analysts as for wrong passwords.
        """
        with self._transaction(write=False) as conn:
            row = conn.execute("SELECT verifier FROM analysts WHERE name = ?", (name,)).fetchone()
        return None if row is None else str(row[0])

    def list_analysts(self) -> list[Analyst]:
        """All current analysts, ordered by name."""
        with self._transaction(write=False) as conn:
            rows = conn.execute("SELECT name, created_at FROM analysts ORDER BY name").fetchall()
        return [Analyst(name, datetime.fromisoformat(created)) for name, created in rows]

    # -- grants and balances --------------------------------------------------------------------

    def grant(self, analyst: str, dataset: str, loss: PrivacyLoss) -> Balance:
        """Add ``loss`` to what ``analyst`` may spend on ``dataset``; returns the new balance."""
        _check_name(dataset, "dataset")
        if not loss.epsilon > 0:
            raise InvalidBudgetError(
                f"a grant needs epsilon > 0, got {loss.epsilon!r}", hint="pass a positive epsilon"
            )
        with self._transaction(write=True) as conn:
            _require_analyst(conn, analyst)
            conn.execute(
                "INSERT INTO grants (analyst, dataset, epsilon, delta, created_at) VALUES (?, ?, ?, ?, ?)",
                (analyst, dataset, loss.epsilon, loss.delta, self._now().isoformat()),
            )
            return _Account.read(conn, analyst, dataset).balance()

    def balance(self, analyst: str, dataset: str) -> Balance:
        """The balance of one analyst on one dataset (all zero when nothing was granted)."""
        with self._transaction(write=False) as conn:
            _require_analyst(conn, analyst)
            return _Account.read(conn, analyst, dataset).balance()

    def balances(self, analyst: str | None = None) -> list[Balance]:
        """Balances of every (analyst, dataset) pair with a grant, or of one analyst's pairs."""
        with self._transaction(write=False) as conn:
            if analyst is not None:
                _require_analyst(conn, analyst)
            pairs = conn.execute(
                "SELECT DISTINCT g.analyst, g.dataset FROM grants g JOIN analysts a ON a.name = g.analyst"
                " WHERE ? IS NULL OR g.analyst = ? ORDER BY g.analyst, g.dataset",
                (analyst, analyst),
            ).fetchall()
            return [_Account.read(conn, name, dataset).balance() for name, dataset in pairs]

    # -- spending ------------------------------------------------------------------------------

    def reserve(self, analyst: str, dataset: str, loss: PrivacyLoss, *, statement: str) -> int:
        """Debit ``loss`` before a query runs; returns the reservation id.

        Check and debit are one ``BEGIN IMMEDIATE`` transaction, so concurrent reservations —
        from threads or processes — are serialised and can never overspend.
        """
        _check_name(dataset, "dataset")
        if not loss.epsilon > 0:
            raise InvalidBudgetError(
                f"a reservation needs epsilon > 0, got {loss.epsilon!r}",
                hint="a release that costs nothing needs no reservation",
            )
        now = self._now().isoformat()
        with self._transaction(write=True) as conn:
            _require_analyst(conn, analyst)
            account = _Account.read(conn, analyst, dataset)
            if not account.affords(loss):
                raise _exhausted(account.balance(), loss)
            cursor = conn.execute(
                "INSERT INTO spends (analyst, dataset, epsilon, delta, statement, state, created_at,"
                " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (analyst, dataset, loss.epsilon, loss.delta, statement, SpendState.RESERVED.value, now, now),
            )
            reservation_id = cursor.lastrowid
        assert reservation_id is not None  # an INSERT into a rowid table always sets it
        return reservation_id

    def commit(self, reservation_id: int) -> None:
        """Mark a reservation committed: its answer was released and the loss is final."""
        self._close(reservation_id, SpendState.COMMITTED)

    def cancel(self, reservation_id: int) -> None:
        """Mark a reservation cancelled: nothing was released, so its loss stops counting."""
        self._close(reservation_id, SpendState.CANCELLED)

    def history(self, analyst: str, dataset: str | None = None) -> list[Spend]:
        """An analyst's spends in every state, oldest first (by id)."""
        with self._transaction(write=False) as conn:
            _require_analyst(conn, analyst)
            rows = conn.execute(
                "SELECT id, analyst, dataset, epsilon, delta, statement, state, created_at, updated_at"
                " FROM spends WHERE analyst = ? AND (? IS NULL OR dataset = ?) ORDER BY id",
                (analyst, dataset, dataset),
            ).fetchall()
        return [_spend(row) for row in rows]

    # -- plumbing ------------------------------------------------------------------------------

    def _close(self, reservation_id: int, state: SpendState) -> None:
        with self._transaction(write=True, durable=False) as conn:
            row = conn.execute("SELECT state FROM spends WHERE id = ?", (reservation_id,)).fetchone()
            if row is None or row[0] != SpendState.RESERVED:
                raise _not_open(reservation_id, None if row is None else str(row[0]))
            conn.execute(
                "UPDATE spends SET state = ?, updated_at = ? WHERE id = ?",
                (state.value, self._now().isoformat(), reservation_id),
            )

    def _now(self) -> datetime:
        now = self._clock()
        return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)

    def _check_store(self) -> None:
        """Fail at open, with a message saying what to do, rather than at the first query."""
        if not self._path.is_file():
            raise LedgerStoreError(f"no ledger at {self._path}; {_CREATE_HINT}", hint=_CREATE_HINT)
        with self._transaction(write=False) as conn:
            _check_version(conn, self._path)

    @contextmanager
    def _transaction(self, *, write: bool, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """One connection and one transaction; writers take the write lock before reading.

        ``durable=False`` skips the fsync at commit (WAL, synchronous = NORMAL): the write survives a
        crash of Veil but may be lost with the machine's power. Only state changes that are safe to
        lose use it — a lost commit or cancel leaves a reservation, which still counts as spent."""
        try:
            conn = sqlite3.connect(self._uri, uri=True, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
        except sqlite3.Error as exc:
            raise _store_error(self._path, exc) from exc
        try:
            if not durable:
                conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn
            except BaseException:
                conn.rollback()
                raise
            conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise _store_error(self._path, exc) from exc
        finally:
            conn.close()


@dataclass(frozen=True)
class _Account:
    """The counting grant and spend amounts of one (analyst, dataset), read in one transaction."""

    analyst: str
    dataset: str
    grants: tuple[tuple[float, float], ...]
    spends: tuple[tuple[float, float], ...]

    @classmethod
    def read(cls, conn: sqlite3.Connection, analyst: str, dataset: str) -> _Account:
        grants = conn.execute(
            "SELECT epsilon, delta FROM grants WHERE analyst = ? AND dataset = ?", (analyst, dataset)
        ).fetchall()
        spends = conn.execute(
            "SELECT epsilon, delta FROM spends WHERE analyst = ? AND dataset = ? AND state IN (?, ?)",
            (analyst, dataset, *_COUNTING_STATES),
        ).fetchall()
        return cls(analyst, dataset, tuple(grants), tuple(spends))

    def affords(self, loss: PrivacyLoss) -> bool:
        return _fits(self._column(0), self._column(0, spent=True), loss.epsilon) and _fits(
            self._column(1), self._column(1, spent=True), loss.delta
        )

    def balance(self) -> Balance:
        granted_eps, spent_eps = self._column(0), self._column(0, spent=True)
        granted_delta, spent_delta = self._column(1), self._column(1, spent=True)
        return Balance(
            analyst=self.analyst,
            dataset=self.dataset,
            granted_epsilon=math.fsum(granted_eps),
            spent_epsilon=math.fsum(spent_eps),
            remaining_epsilon=_remaining(granted_eps, spent_eps),
            granted_delta=math.fsum(granted_delta),
            spent_delta=math.fsum(spent_delta),
            remaining_delta=_remaining(granted_delta, spent_delta),
        )

    def _column(self, index: int, *, spent: bool = False) -> list[float]:
        return [float(row[index]) for row in (self.spends if spent else self.grants)]


def as_decimal(amount: float) -> Decimal:
    """The decimal a person typed: a float read back through its shortest repr (0.1 → 0.1).

    Budgets are accounted in exact decimal arithmetic on these values, so a grant of 0.3 pays for
    exactly three queries of 0.1 — binary float sums would refuse the third. Mechanisms calibrate
    their noise to shares whose exact sum is at most this decimal, so the charge is never too low.
    """
    return Decimal(repr(float(amount)))


def _total(amounts: Sequence[float]) -> Decimal:
    return sum((as_decimal(amount) for amount in amounts), Decimal(0))


def _fits(granted: Sequence[float], spent: Sequence[float], asked: float) -> bool:
    """The one budget comparison: exact decimal sums, no tolerance."""
    return _total([*spent, asked]) <= _total(granted)


def _remaining(granted: Sequence[float], spent: Sequence[float]) -> float:
    """granted - spent, stepped down until a reservation of exactly that much is accepted."""
    remaining = float(max(Decimal(0), _total(granted) - _total(spent)))
    while remaining > 0 and not _fits(granted, spent, remaining):
        remaining = math.nextafter(remaining, 0.0)
    return remaining


def _make_schema(conn: sqlite3.Connection, path: Path) -> None:
    """Create the tables in an empty database; leave a Veil ledger alone; refuse anything else."""
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN IMMEDIATE")
    tables = _tables(conn)
    if "schema_version" in tables:
        conn.execute("COMMIT")
        return
    if tables:
        conn.rollback()
        raise _not_a_ledger(path, "it already holds other tables")
    for statement in _SCHEMA:
        conn.execute(statement)
    conn.execute("INSERT INTO schema_version VALUES (?, ?)", (APPLICATION, SCHEMA_VERSION))
    conn.execute("COMMIT")


def _tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {str(row[0]) for row in rows}


def _check_version(conn: sqlite3.Connection, path: Path) -> None:
    if not _tables(conn) >= {"schema_version", "analysts", "grants", "spends"}:
        raise _not_a_ledger(path, "it lacks Veil's tables")
    row = conn.execute("SELECT application, version FROM schema_version").fetchone()
    if row is None or row[0] != APPLICATION:
        raise _not_a_ledger(path, "its schema_version table is not Veil's")
    if row[1] > SCHEMA_VERSION:
        raise LedgerStoreError(
            f"the ledger at {path} has schema version {row[1]}; this Veil reads up to {SCHEMA_VERSION}",
            hint="upgrade Veil",
        )


def _check_name(name: str, kind: str) -> None:
    if not _NAME.fullmatch(name):
        raise InvalidNameError(
            f"{kind} name {name!r} is not allowed",
            hint='use 1 to 63 ASCII letters, digits, "_", "-" or "."',
        )


def _check_verifier(verifier: str) -> None:
    """Refuse anything but a PostgreSQL-format SCRAM verifier, so a plaintext password is never stored."""
    if not _SCRAM_VERIFIER.fullmatch(verifier):
        raise InvalidVerifierError(
            "the password verifier is not a SCRAM-SHA-256 verifier",
            hint="pass SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>, never a plaintext password",
        )


def _analyst_exists(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM analysts WHERE name = ?", (name,)).fetchone() is not None


def _require_analyst(conn: sqlite3.Connection, name: str) -> None:
    if not _analyst_exists(conn, name):
        command = f"veil analyst add {name}"
        raise UnknownAnalystError(f'analyst "{name}" does not exist', hint=f"run `{command}` to create it")


def _spend(row: tuple[int, str, str, float, float, str, str, str, str]) -> Spend:
    id_, analyst, dataset, epsilon, delta, statement, state, created_at, updated_at = row
    return Spend(
        id=id_,
        analyst=analyst,
        dataset=dataset,
        epsilon=epsilon,
        delta=delta,
        statement=statement,
        state=SpendState(state),
        created_at=datetime.fromisoformat(created_at),
        updated_at=datetime.fromisoformat(updated_at),
    )


def _describe(epsilon: float, delta: float) -> str:
    text = f"epsilon {as_decimal(epsilon):f}"
    return text if delta == 0 else f"{text} and delta {as_decimal(delta):f}"


def _exhausted(balance: Balance, asked: PrivacyLoss) -> BudgetExhaustedError:
    return BudgetExhaustedError(
        f'privacy budget exhausted: analyst "{balance.analyst}" asked for '
        f'{_describe(asked.epsilon, asked.delta)} on dataset "{balance.dataset}", but only '
        f"{_describe(balance.remaining_epsilon, balance.remaining_delta)} remains",
        hint=_EXHAUSTED_HINT,
    )


def _not_open(reservation_id: int, state: str | None) -> UnknownReservationError:
    if state is None:
        return UnknownReservationError(f"there is no reservation {reservation_id}")
    return UnknownReservationError(
        f"reservation {reservation_id} is not open: it is already {state}",
        hint="only a reserved spend can be committed or cancelled, and only once",
    )


def _not_a_ledger(path: Path, why: str) -> LedgerStoreError:
    return LedgerStoreError(
        f"{path} is not a Veil ledger ({why})",
        hint="set ledger.path in veil.toml to another file, or move this one aside and run `veil init-demo`",
    )


def _store_error(path: Path, exc: sqlite3.Error) -> LedgerStoreError:
    if getattr(exc, "sqlite_errorname", None) == "SQLITE_NOTADB":
        return _not_a_ledger(path, "it is not an SQLite database")
    return LedgerStoreError(
        f"cannot use the ledger at {path}: {exc}",
        hint="check that the file and its directory are readable and writable and not on a network share",
    )
