"""The epsilon ledger: who may spend how much privacy loss on which dataset, and what they spent.

The proxy calls :meth:`Ledger.reserve` *before* a query runs, :meth:`Ledger.commit` once the noisy
answer has been released and :meth:`Ledger.cancel` when the query failed before any noisy value left
the process (spec dp-mechanisms §6.2). Budget is fixed up front per (analyst, dataset) — and
optionally capped per dataset across all analysts, so that colluding analysts cannot together
exceed it — and a reservation that would go past either is refused before anything is computed.

The check and the debit are one transaction that holds the dataset's lock (budget/store.py): two
reservations — from threads, processes or hosts sharing a PostgreSQL ledger — can never both see
the same remaining budget. Balances come from running totals (budget/totals.py) kept in the same
transactions, so a reservation reads a few rows however long the history is.

Parallel composition across statements: a spend may be charged to a *partition* — the rows where one
column holds given values (budget/partitions.py). Its totals are kept per value, and an analyst's
spending is the ordinary spends plus, per partition column, the largest value's — not the sum.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum
from pathlib import Path

from budget.accountants import ACCOUNTANTS, Accountant
from budget.amounts import (
    ZERO_TEXT,
    as_decimal,
    exact_units,
    float_down,
    float_up,
    from_text,
    to_text,
    units_down,
)
from budget.answer_cache import AnswerCache
from budget.audit import AuditLog
from budget.errors import (
    AnalystExistsError,
    BudgetExhaustedError,
    InvalidBudgetError,
    InvalidNameError,
    InvalidVerifierError,
    UnknownAnalystError,
    UnknownReservationError,
)
from budget.group_commit import GroupCommitter
from budget.loss import ZERO_LOSS, PrivacyLoss
from budget.partitions import Partition, PartitionBalance, PartitionValue, order, value_of
from budget.renewals import RENEWALS
from budget.schema import SCHEMA_VERSION, check_version, ensure_schema, upgrade_note
from budget.store import BUSY_TIMEOUT_SECONDS, LedgerStore, Transaction, open_store
from budget.totals import Charge, Release, Totals

_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,63}")
_SCRAM_VERIFIER = re.compile(r"SCRAM-SHA-256\$[1-9][0-9]*:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+")
_EXHAUSTED_HINT = "ask an administrator for more budget (veil budget grant) or lower veil.epsilon"
_DELTA_EXHAUSTED_HINT = (
    "the δ is what is short: ask an administrator for a δ grant (veil budget grant … --delta 1e-5), "
    "or lower veil.delta (0 refuses keys taken from the data and Gaussian noise)"
)
ALL_ANALYSTS = ""  # the analyst of a dataset-wide totals row (no analyst may be named "")
NO_PERIOD = ""  # the period of a grant that never renews
BASIC = ACCOUNTANTS["basic"]


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
    """Granted, spent and remaining privacy loss of one analyst on one dataset (in the current
    period when the grant renews). ``spent`` counts reserved and committed spends, composed by
    ``accountant``; ``remaining`` is never negative."""

    analyst: str
    dataset: str
    granted_epsilon: float
    spent_epsilon: float
    remaining_epsilon: float
    granted_delta: float
    spent_delta: float
    remaining_delta: float
    accountant: str = "basic"
    renewal: str | None = None  # "day", "week", "month", or None: the grant never renews
    period_start: date | None = None
    releases: int = 0


@dataclass(frozen=True)
class DatasetCap:
    """What all analysts together may spend on a dataset, and have spent (never renews)."""

    dataset: str
    cap_epsilon: float | None  # None: no cap
    cap_delta: float | None
    spent_epsilon: float
    spent_delta: float
    accountant: str = "basic"


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
    rho: float | None = None
    rho_delta: float = 0.0
    period: str = NO_PERIOD
    partition: Partition | None = None  # None: an ordinary spend, over all of the dataset's people
    charge: Charge | None = None  # what was debited, in quanta; epsilon and delta show it as floats

    @property
    def release(self) -> Release:
        return Release(self.epsilon, self.delta, self.rho, self.rho_delta, charged=self.charge)


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class _Grant:
    """The sum of a pair's grant and revoke rows (in quanta), and its renewal (the latest grant's)."""

    epsilon: int
    delta: int
    renewal: str | None

    @property
    def loss(self) -> PrivacyLoss:
        """The grant as the floats accountants compare with: the largest whose decimals are not above
        it, so a comparison is never in the analyst's favour (and exact for any grant that is a float's
        decimal, as every total of grants of up to 15 significant digits is)."""
        return PrivacyLoss(float_down(self.epsilon), _below_one(self.delta))


@dataclass(frozen=True)
class _Account:
    """An analyst's counting spends on a dataset in one period: the ordinary ones (``base``) and, per
    partition column, the statistic-by-statistic widest of its values' totals (``envelopes``, whose
    ``releases`` is the number of the column's spends)."""

    base: Totals
    envelopes: Mapping[str, Totals]

    def total(self) -> Totals:
        """What the person who lost most may have lost: every ordinary spend, and the worst value of
        every partition column (for all we know, one person holds them all)."""
        return self.holding(None, Totals())

    def holding(self, column: str | None, value: Totals) -> Totals:
        """What a person holding a value of ``column`` whose spends are ``value`` may have lost."""
        totals = self.base
        for name in sorted(self.envelopes.keys() | ({column} if column is not None else set())):
            totals = totals.combined(value if name == column else self.envelopes[name])
        return totals


class Ledger:
    """The epsilon ledger, in an SQLite file or a PostgreSQL database (budget/store.py).

    A spend is a row of the append-only ``spends`` table and is in exactly one state:

    * ``reserved`` — :meth:`reserve` found room for it and debited it; the query may run. It
      **counts as spent**: if the proxy dies between reserve and commit, the noisy answer may
      have left the process, so the ledger fails closed and keeps the charge.
    * ``committed`` — :meth:`commit`: the answer was released. Counts as spent, forever.
    * ``cancelled`` — :meth:`cancel`: the query failed before any noisy value was released, so
      the loss no longer counts.

    Only ``reserved -> committed`` and ``reserved -> cancelled`` exist; anything else raises
    :class:`UnknownReservationError` (and triggers in the store refuse it too).

    Arithmetic: every ε and δ is an integer of the quantum 10⁻³⁰ (budget/amounts.py). A spend is
    charged its decimal rounded up to the quantum (one below a quantum is refused); grants and caps
    must be whole quanta. Under basic composition a reservation is accepted iff the exact sums of the
    counting spends plus the new one stay within the grant's, for ε *and* δ — no tolerance and no
    rounding, so a grant of 0.3 pays for three queries of 0.1 and not for a 10⁻³⁰ more. Another
    accountant is asked for the composed loss of the totals; a reservation that fits under basic
    composition always fits.

    Partitions: a spend reserved with a :class:`~budget.partitions.Partition` counts only for the
    people who hold one of its values. The balance is the ordinary spends plus, per partition column,
    the largest value's spends (for accountants other than basic: statistic by statistic), so that no
    value's people lose more than the grant. The dataset's cap counts every spend in full.

    Renewal: a grant made with ``renewal="month"`` (or day, week) grants its amount per calendar
    period (UTC); spends count against the period in which they were reserved. Removing an
    analyst deletes their credentials but not their grants or spends; an analyst re-added under the
    same name inherits the same balances (spending is never forgotten).

    ``clock`` is a seam for tests; it should return aware datetimes (naive ones are taken as UTC).
    """

    def __init__(self, store: LedgerStore, *, clock: Callable[[], datetime] = _utc_now) -> None:
        self._store = store
        self._clock = clock
        self.upgraded_from: int | None = None  # the schema version :meth:`create` upgraded from
        self._reservations = GroupCommitter(store)  # reservations arriving together share one flush
        with _closed_on_error(store), store.transaction(write=False) as transaction:
            check_version(store, transaction)

    @classmethod
    def create(
        cls,
        location: str | Path,
        *,
        clock: Callable[[], datetime] = _utc_now,
        schema: str | None = None,
        lock_timeout: float = BUSY_TIMEOUT_SECONDS,
    ) -> Ledger:
        """Create a ledger at ``location`` (a file path, or a PostgreSQL DSN with the ledger's
        ``schema``), or open and upgrade the one already there (idempotent). ``lock_timeout``: how long
        a transaction waits for a lock another holds before it fails as locked (55P03)."""
        store = open_store(location, create=True, schema=schema, lock_timeout=lock_timeout)
        with _closed_on_error(store):
            # An upgrade rebuilds the totals in the same transaction: a process that opened the
            # ledger in between would otherwise see no spending at all.
            upgraded_from = ensure_schema(store, after_upgrade=_rebuild_totals)
        ledger = cls(store, clock=clock)
        ledger.upgraded_from = upgraded_from
        return ledger

    @property
    def upgrade_note(self) -> str | None:
        """What opening this ledger upgraded, in a sentence (None: nothing)."""
        if self.upgraded_from is None:
            return None
        return upgrade_note(self._store.description, self.upgraded_from)

    @classmethod
    def open(
        cls,
        location: str | Path,
        *,
        clock: Callable[[], datetime] = _utc_now,
        schema: str | None = None,
        lock_timeout: float = BUSY_TIMEOUT_SECONDS,
    ) -> Ledger:
        """Open an existing ledger; unlike :meth:`create` it never makes a file or tables (but it
        upgrades an older ledger in place)."""
        store = open_store(location, schema=schema, lock_timeout=lock_timeout)
        with _closed_on_error(store), store.transaction(write=False) as transaction:
            outdated = check_version(store, transaction) < SCHEMA_VERSION
        if outdated:
            store.close()
            return cls.create(location, clock=clock, schema=schema, lock_timeout=lock_timeout)
        return cls(store, clock=clock)

    @property
    def path(self) -> Path:
        """The SQLite file (for tools that look behind the ledger's back)."""
        return Path(self._store.location)

    @property
    def location(self) -> str:
        return self._store.location

    @property
    def store(self) -> LedgerStore:
        return self._store

    @property
    def audit_log(self) -> AuditLog:
        return AuditLog(self._store)

    @property
    def answer_cache(self) -> AnswerCache:
        return AnswerCache(self._store, clock=self.now)

    def close(self) -> None:
        self._store.close()

    def now(self) -> datetime:
        now = self._clock()
        return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)

    # -- analysts -------------------------------------------------------------------------------

    def add_analyst(self, name: str, verifier: str) -> Analyst:
        """Add an analyst with a SCRAM-SHA-256 verifier (never a plaintext password)."""
        check_name(name, "analyst")
        _check_verifier(verifier)
        created_at = self.now()
        with self._store.transaction(write=True) as tx:
            if _analyst_exists(tx, name):
                raise AnalystExistsError(
                    f'analyst "{name}" already exists',
                    hint=f"choose another name, or run `veil analyst remove {name}` first",
                )
            tx.execute(
                "INSERT INTO analysts (name, verifier, created_at) VALUES (?, ?, ?)",
                (name, verifier, created_at.isoformat()),
            )
        return Analyst(name, created_at)

    def remove_analyst(self, name: str) -> None:
        """Remove an analyst's credentials; their grants and spends stay on record."""
        with self._store.transaction(write=True) as tx:
            require_analyst(tx, name)
            tx.execute("DELETE FROM analysts WHERE name = ?", (name,))

    def set_verifier(self, name: str, verifier: str) -> None:
        """Replace an analyst's SCRAM verifier (a password change)."""
        _check_verifier(verifier)
        with self._store.transaction(write=True) as tx:
            require_analyst(tx, name)
            tx.execute("UPDATE analysts SET verifier = ? WHERE name = ?", (verifier, name))

    def verifier(self, name: str) -> str | None:
        """The stored SCRAM verifier, or None for an unknown analyst — so that authentication can run
        a dummy exchange and fail the same way for unknown analysts as for wrong passwords."""
        with self._store.transaction(write=False) as tx:
            rows = tx.execute("SELECT verifier FROM analysts WHERE name = ?", (name,))
        return str(rows[0][0]) if rows else None

    def list_analysts(self) -> list[Analyst]:
        """All current analysts, ordered by name."""
        with self._store.transaction(write=False) as tx:
            rows = tx.execute("SELECT name, created_at FROM analysts ORDER BY name")
        return [Analyst(name, datetime.fromisoformat(created)) for name, created in rows]

    # -- grants, caps and balances --------------------------------------------------------------

    def grant(
        self,
        analyst: str,
        dataset: str,
        loss: PrivacyLoss,
        *,
        renewal: str | None = None,
        accountant: Accountant = BASIC,
    ) -> Balance:
        """Add ``loss`` to what ``analyst`` may spend on ``dataset`` (per period with ``renewal``)."""
        check_name(dataset, "dataset")
        if not loss.epsilon > 0:
            raise InvalidBudgetError(
                f"a grant needs epsilon > 0, got {loss.epsilon!r}", hint="pass a positive epsilon"
            )
        if renewal is not None and renewal not in RENEWALS:
            raise InvalidBudgetError(
                f"unknown renewal period {renewal!r}", hint=f"use one of {', '.join(RENEWALS)}, or none"
            )
        epsilon, delta = exact_units(loss.epsilon), exact_units(loss.delta, name="delta")
        with self._store.transaction(write=True) as tx:
            require_analyst(tx, analyst)
            self._lock_dataset(tx, dataset)
            self._insert_grant(tx, analyst, dataset, "grant", epsilon, delta, renewal)
            return self._balance(tx, analyst, dataset, accountant)

    def revoke(
        self,
        analyst: str,
        dataset: str,
        loss: PrivacyLoss | None = None,
        *,
        accountant: Accountant = BASIC,
    ) -> Balance:
        """Take back ``loss`` from a grant — or, with None, everything not yet spent. What was spent
        stays spent; a grant cannot go below it."""
        asked = None if loss is None else (exact_units(loss.epsilon), exact_units(loss.delta, name="delta"))
        with self._store.transaction(write=True) as tx:
            require_analyst(tx, analyst)
            self._lock_dataset(tx, dataset)
            epsilon, delta = self._revocable(tx, analyst, dataset, accountant, asked)
            if epsilon > 0 or delta > 0:
                self._insert_grant(tx, analyst, dataset, "revoke", epsilon, delta, None)
            return self._balance(tx, analyst, dataset, accountant)

    def set_cap(self, dataset: str, loss: PrivacyLoss | None) -> None:
        """Cap what all analysts together may spend on ``dataset`` (None removes the cap). A cap
        below what was already spent simply refuses every further reservation."""
        check_name(dataset, "dataset")
        if loss is not None and not loss.epsilon > 0:
            raise InvalidBudgetError(f"a cap needs epsilon > 0, got {loss.epsilon!r}")
        amounts = (None, None)
        if loss is not None:
            amounts = (to_text(exact_units(loss.epsilon)), to_text(exact_units(loss.delta, name="delta")))
        with self._store.transaction(write=True) as tx:
            self._lock_dataset(tx, dataset)
            tx.execute(
                "INSERT INTO caps (dataset, epsilon, delta, created_at) VALUES (?, ?, ?, ?)",
                (dataset, *amounts, self.now().isoformat()),
            )

    def cap(self, dataset: str, *, accountant: Accountant = BASIC) -> DatasetCap:
        with self._store.transaction(write=False) as tx:
            cap = _cap(tx, dataset)
            spent = _spent(_read_totals(tx, ALL_ANALYSTS, dataset, NO_PERIOD), cap, accountant)
        return DatasetCap(
            dataset,
            cap_epsilon=None if cap is None else cap.epsilon,
            cap_delta=None if cap is None else cap.delta,
            spent_epsilon=spent.epsilon,
            spent_delta=spent.delta,
            accountant=accountant.name,
        )

    def caps(self, *, accountant: Accountant = BASIC) -> list[DatasetCap]:
        with self._store.transaction(write=False) as tx:
            datasets = [row[0] for row in tx.execute("SELECT DISTINCT dataset FROM caps ORDER BY dataset")]
        return [self.cap(dataset, accountant=accountant) for dataset in datasets]

    def balance(self, analyst: str, dataset: str, *, accountant: Accountant = BASIC) -> Balance:
        """The balance of one analyst on one dataset (all zero when nothing was granted)."""
        with self._store.transaction(write=False) as tx:
            require_analyst(tx, analyst)
            return self._balance(tx, analyst, dataset, accountant)

    def balances(
        self, analyst: str | None = None, *, accountant: Callable[[str], Accountant] | None = None
    ) -> list[Balance]:
        """Balances of every (analyst, dataset) pair with a grant, or of one analyst's pairs.
        ``accountant`` names each dataset's accountant (the policy's choice)."""
        with self._store.transaction(write=False) as tx:
            if analyst is not None:
                require_analyst(tx, analyst)
            pairs = tx.execute(
                "SELECT DISTINCT g.analyst, g.dataset FROM grants g JOIN analysts a ON a.name = g.analyst"
                " WHERE ? IS NULL OR g.analyst = ? ORDER BY g.analyst, g.dataset",
                (analyst, analyst),
            )
            return [
                self._balance(tx, name, dataset, accountant(dataset) if accountant else BASIC)
                for name, dataset in pairs
            ]

    def partition_balances(
        self, analyst: str, dataset: str, *, accountant: Accountant = BASIC
    ) -> list[PartitionBalance]:
        """Per partition column the analyst's spends were charged to in this period: one row per value
        charged (what statements pinned to it may still spend), then one for every other value
        (``value`` None). Empty without partition spends."""
        with self._store.transaction(write=False) as tx:
            require_analyst(tx, analyst)
            grant = _grant(tx, analyst, dataset)
            period = period_start(grant.renewal, self.now())
            account = _read_account(tx, analyst, dataset, period)
            values = _read_values(tx, analyst, dataset, period)
        rows = []
        for column in sorted(account.envelopes):
            charged = sorted(values.get(column, {}).items(), key=lambda item: order(item[0]))
            for value, totals in [*charged, (None, Totals())]:
                spent, left = _spent_and_left(account.holding(column, totals), grant, accountant)
                rows.append(
                    PartitionBalance(
                        analyst=analyst,
                        dataset=dataset,
                        column=column,
                        value=value,
                        spent_epsilon=spent.epsilon,
                        remaining_epsilon=left.epsilon,
                        spent_delta=spent.delta,
                        remaining_delta=left.delta,
                        accountant=accountant.name,
                        releases=account.holding(column, totals).releases,
                    )
                )
        return rows

    # -- spending ------------------------------------------------------------------------------

    def reserve(
        self,
        analyst: str,
        dataset: str,
        cost: PrivacyLoss | Release,
        *,
        statement: str,
        accountant: Accountant = BASIC,
        cap_step: float | None = None,
        partition: Partition | None = None,
    ) -> int:
        """Debit ``cost`` before a query runs; returns the reservation id. Refused, spending
        nothing, if it would take the analyst past the grant or the dataset past its cap.

        ``partition``: the query read only people holding one of its values (parallel composition):
        it must fit beside the ordinary spends and those of each of its values, not of every value.

        ``cap_step`` (a share of the cap's ε, e.g. 0.05): the cap is checked against what all analysts
        have spent *rounded up to a multiple of that share*, so whether a query is refused by the cap
        changes only when the dataset's spending crosses a step — a single spend by another analyst
        cannot be found by probing with different ε. The cap is never exceeded; up to one step of it
        may go unused.

        The check and debit may share one durable commit with other threads' reservations
        (budget/group_commit.py); this returns only once that commit is on disk."""
        check_name(dataset, "dataset")
        release = cost if isinstance(cost, Release) else Release(cost.epsilon, cost.delta)
        now = self.now()
        with self._reservations.transaction() as tx:
            require_analyst(tx, analyst)
            dataset_totals = self._lock_dataset(tx, dataset)
            grant = _grant(tx, analyst, dataset)
            period = period_start(grant.renewal, now)
            account = _read_account(tx, analyst, dataset, period)
            if partition is None:
                after = _Account(account.base.plus(release), account.envelopes)
                if not accountant.allows(after.total(), grant=grant.loss):
                    raise _exhausted(self._balance(tx, analyst, dataset, accountant), release.loss)
            else:
                grown, widened = _charge_partition(tx, analyst, dataset, period, account, release, partition)
                after = _Account(account.base, {**account.envelopes, partition.column: widened})
                if not accountant.allows(after.total(), grant=grant.loss):
                    left = _left_in(tx, analyst, dataset, period, account, partition, grant, accountant)
                    raise _exhausted_in(analyst, dataset, partition, release.loss, left)
            cap = _cap(tx, dataset)
            if cap is not None and not _fits_cap(accountant, dataset_totals, release, cap, cap_step):
                raise _capped(dataset, cap, release.loss)
            rows = tx.execute(
                "INSERT INTO spends (analyst, dataset, period, epsilon, delta, rho, rho_delta, statement,"
                " state, created_at, updated_at, partition_column, partition_values)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    analyst,
                    dataset,
                    period,
                    *_stored_release(release),
                    statement,
                    SpendState.RESERVED.value,
                    now.isoformat(),
                    now.isoformat(),
                    partition.column if partition is not None else "",
                    partition.to_json() if partition is not None else "",
                ),
            )
            if partition is None:
                _write_totals(tx, analyst, dataset, period, after.base)
            else:
                for key, total in grown.items():
                    _write_value(tx, analyst, dataset, period, partition.column, key, total)
                _write_value(tx, analyst, dataset, period, partition.column, "", widened)
            _write_totals(tx, ALL_ANALYSTS, dataset, NO_PERIOD, dataset_totals.plus(release))
        return int(rows[0][0])

    def commit(self, reservation_id: int) -> None:
        """Mark a reservation committed: its answer was released and the loss is final."""
        with self._store.transaction(write=True, durable=False) as tx:
            self._close(tx, reservation_id, SpendState.COMMITTED)

    def cancel(self, reservation_id: int) -> None:
        """Mark a reservation cancelled: nothing was released, so its loss stops counting."""
        with self._store.transaction(write=True, durable=False) as tx:
            spend = self._close(tx, reservation_id, SpendState.CANCELLED, lock=True)
            release = spend.release
            if spend.partition is None:
                account = _read_totals(tx, spend.analyst, spend.dataset, spend.period)
                _write_totals(tx, spend.analyst, spend.dataset, spend.period, account.minus(release))
            else:
                _take_back(tx, spend, spend.partition)
            dataset_totals = _read_totals(tx, ALL_ANALYSTS, spend.dataset, NO_PERIOD)
            _write_totals(tx, ALL_ANALYSTS, spend.dataset, NO_PERIOD, dataset_totals.minus(release))

    def reservations(self, dataset: str | None = None) -> list[Spend]:
        """Spends still ``reserved``, oldest first: the statements running now — or, after a crash,
        those in flight when it happened, which count as spent until an administrator resolves them."""
        with self._store.transaction(write=False) as tx:
            rows = tx.execute(
                f"SELECT {_SPEND_COLUMNS} FROM spends WHERE state = ? AND (? IS NULL OR dataset = ?) ORDER BY id",
                (SpendState.RESERVED.value, dataset, dataset),
            )
        return [_spend(row) for row in rows]

    def resolve(self, reservation_id: int, *, release: bool) -> Spend:
        """An administrator's decision on a reservation left by a crash: ``release`` gives its budget
        back (cancelled: nothing was delivered), else it is kept (committed: an answer may have left).
        Refused for a spend that is not reserved any more."""
        if release:
            self.cancel(reservation_id)
        else:
            self.commit(reservation_id)
        with self._store.transaction(write=False) as tx:
            (row,) = tx.execute(f"SELECT {_SPEND_COLUMNS} FROM spends WHERE id = ?", (reservation_id,))
        return _spend(row)

    def history(self, analyst: str, dataset: str | None = None) -> list[Spend]:
        """An analyst's spends in every state, oldest first (by id)."""
        with self._store.transaction(write=False) as tx:
            require_analyst(tx, analyst)
            rows = tx.execute(
                f"SELECT {_SPEND_COLUMNS} FROM spends WHERE analyst = ? AND (? IS NULL OR dataset = ?) ORDER BY id",
                (analyst, dataset, dataset),
            )
        return [_spend(row) for row in rows]

    # -- consistency ---------------------------------------------------------------------------

    def verify(self) -> list[str]:
        """Recompute every running total from the spends; describe each row that disagrees (an
        empty list means the ledger is consistent)."""
        with self._store.transaction(write=False) as tx:
            ordinary, partitions = _totals_from_spends(tx)
            expected = {**ordinary, **partitions}
            stored = {
                (row[0], row[1], row[2]): _totals(row[3:])
                for row in tx.execute(f"SELECT analyst, dataset, period, {_TOTALS_COLUMNS} FROM totals")
            }
            stored.update(
                {
                    (row[0], row[1], row[2], row[3], row[4]): _totals(row[5:])
                    for row in tx.execute(
                        "SELECT analyst, dataset, period, partition_column, partition_value,"
                        f" {_TOTALS_COLUMNS} FROM partition_totals"
                    )
                }
            )
        problems = []
        for key in sorted(set(expected) | set(stored)):
            want, have = expected.get(key, Totals()), stored.get(key, Totals())
            if (want.releases, want.epsilon, want.delta) != (have.releases, have.epsilon, have.delta):
                problems.append(f"totals of {key}: stored {have}, spends say {want}")
        return problems

    def rebuild_totals(self) -> None:
        """Recompute the running totals from the spends (as after every upgrade)."""
        with self._store.transaction(write=True) as tx:
            _rebuild_totals(tx)

    # -- plumbing ------------------------------------------------------------------------------

    def _lock_dataset(self, tx: Transaction, dataset: str) -> Totals:
        """Every transaction that changes a dataset's balances takes this row's lock first."""
        tx.execute(
            f"INSERT INTO totals (analyst, dataset, period, {_TOTALS_COLUMNS})"
            " VALUES (?, ?, ?, 0, ?, ?, 0, 0, 0, ?) ON CONFLICT DO NOTHING",
            (ALL_ANALYSTS, dataset, NO_PERIOD, ZERO_TEXT, ZERO_TEXT, ZERO_TEXT),
        )
        rows = tx.execute(
            f"SELECT {_TOTALS_COLUMNS} FROM totals WHERE analyst = ? AND dataset = ? AND period = ?"
            + self._store.lock_suffix,
            (ALL_ANALYSTS, dataset, NO_PERIOD),
        )
        return _totals(rows[0])

    def _insert_grant(
        self,
        tx: Transaction,
        analyst: str,
        dataset: str,
        kind: str,
        epsilon: int,
        delta: int,
        renewal: str | None,
    ) -> None:
        """A grant or revoke row of ``epsilon`` and ``delta`` quanta."""
        tx.execute(
            "INSERT INTO grants (analyst, dataset, kind, epsilon, delta, renewal, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (analyst, dataset, kind, to_text(epsilon), to_text(delta), renewal, self.now().isoformat()),
        )

    def _revocable(
        self,
        tx: Transaction,
        analyst: str,
        dataset: str,
        accountant: Accountant,
        asked: tuple[int, int] | None,
    ) -> tuple[int, int]:
        """What a revoke takes back, in quanta: at most what was ``asked`` (None: everything) and what is
        left. Under basic composition that is exactly the grant less the spends. Under another accountant
        the ε spent depends on the grant's δ (a share of it pays for the conversion from ρ, or for
        advanced composition): taking δ back raises the ε spent. So δ is taken first, only as far as the
        ε spent stays within the grant, and the ε left is read at the δ that remains — a balance never
        shows more spent than granted."""
        grant = _grant(tx, analyst, dataset)
        totals = _read_account(tx, analyst, dataset, period_start(grant.renewal, self.now())).total()
        if accountant is BASIC:
            left = max(0, grant.epsilon - totals.epsilon), max(0, grant.delta - totals.delta)
        else:
            delta_left = units_down(_spent_and_left(totals, grant, accountant)[1].delta)
            most = delta_left if asked is None else min(asked[1], delta_left)
            delta = _largest_keeping(
                most, lambda take: _within(totals, replace(grant, delta=grant.delta - take), accountant)
            )
            reduced = replace(grant, delta=grant.delta - delta)
            left = units_down(_spent_and_left(totals, reduced, accountant)[1].epsilon), delta
        return left if asked is None else (min(asked[0], left[0]), min(asked[1], left[1]))

    def _balance(self, tx: Transaction, analyst: str, dataset: str, accountant: Accountant) -> Balance:
        grant = _grant(tx, analyst, dataset)
        period = period_start(grant.renewal, self.now())
        totals = _read_account(tx, analyst, dataset, period).total()
        spent, remains = _spent_and_left(totals, grant, accountant)
        left = (remains.epsilon, remains.delta)
        return Balance(
            analyst=analyst,
            dataset=dataset,
            granted_epsilon=float_up(grant.epsilon),
            spent_epsilon=spent.epsilon,
            remaining_epsilon=left[0],
            granted_delta=float_up(grant.delta),
            spent_delta=spent.delta,
            remaining_delta=left[1],
            accountant=accountant.name,
            renewal=grant.renewal,
            period_start=date.fromisoformat(period) if period else None,
            releases=totals.releases,
        )

    def _close(self, tx: Transaction, reservation_id: int, state: SpendState, *, lock: bool = False) -> Spend:
        # Locked (PostgreSQL), so that of two concurrent closes the second sees the first's state.
        rows = tx.execute(
            f"SELECT {_SPEND_COLUMNS} FROM spends WHERE id = ?" + self._store.lock_suffix, (reservation_id,)
        )
        if not rows or rows[0][6] != SpendState.RESERVED:
            raise _not_open(reservation_id, str(rows[0][6]) if rows else None)
        spend = _spend(rows[0])
        if lock:
            self._lock_dataset(tx, spend.dataset)
        tx.execute(
            "UPDATE spends SET state = ?, updated_at = ? WHERE id = ?",
            (state.value, self.now().isoformat(), reservation_id),
        )
        return spend


_TOTALS_COLUMNS = "releases, epsilon, delta, epsilon_squares, epsilon_expm1, rho, zcdp_delta"
_SPEND_COLUMNS = (
    "id, analyst, dataset, epsilon, delta, statement, state, created_at, updated_at, rho, rho_delta, period,"
    " partition_column, partition_values"
)


def period_start(renewal: str | None, now: datetime) -> str:
    """The first day (UTC) of the period ``now`` falls in, as ISO text; "" when nothing renews."""
    day = now.astimezone(UTC).date()
    match renewal:
        case None:
            return NO_PERIOD
        case "day":
            return day.isoformat()
        case "week":
            return (day - timedelta(days=day.weekday())).isoformat()
        case _:
            return day.replace(day=1).isoformat()


def _within(totals: Totals, grant: _Grant, accountant: Accountant) -> bool:
    """Whether what ``totals`` spent of ``grant`` fits in it, ε and δ."""
    spent = _spent(totals, grant.loss, accountant)
    return spent.epsilon <= grant.loss.epsilon and spent.delta <= grant.loss.delta


def _largest_keeping(most: int, holds: Callable[[int], bool]) -> int:
    """The largest t in [0, most] for which ``holds(t)``, where it holds up to some t and not after
    (0 when it never holds): a bisection, about log2(most) ≤ 110 calls for any amount of quanta."""
    if most <= 0 or not holds(0):
        return 0
    low, high = 0, most  # holds(low); the answer is in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if holds(middle) else (low, middle - 1)
    return low


def _spent_and_left(totals: Totals, grant: _Grant, accountant: Accountant) -> tuple[PrivacyLoss, PrivacyLoss]:
    """What ``totals`` spent of ``grant``, and what a reservation may still ask for."""
    spent = _spent(totals, grant.loss, accountant)
    if accountant is BASIC:  # exact: a reservation of exactly what remains fits
        left = PrivacyLoss(
            float_down(max(0, grant.epsilon - totals.epsilon)),
            _below_one(max(0, grant.delta - totals.delta)),
        )
    else:
        left = PrivacyLoss(
            max(0.0, grant.loss.epsilon - spent.epsilon), max(0.0, grant.loss.delta - spent.delta)
        )
    return spent, left


def _spent(totals: Totals, grant: PrivacyLoss | None, accountant: Accountant) -> PrivacyLoss:
    """Without a grant or cap there is no δ slack to take: basic composition describes it."""
    return (
        accountant.spent(totals, grant=grant) if grant is not None else BASIC.spent(totals, grant=ZERO_LOSS)
    )


def _below_one(delta: int) -> float:
    """δ sums (in quanta) can reach 1 on paper (several grants); PrivacyLoss holds δ < 1, and so does
    any use. Rounded down, like a grant."""
    return min(float_down(delta), math.nextafter(1.0, 0.0))


def _grant(tx: Transaction, analyst: str, dataset: str) -> _Grant:
    rows = tx.execute(
        "SELECT kind, epsilon, delta, renewal FROM grants WHERE analyst = ? AND dataset = ? ORDER BY id",
        (analyst, dataset),
    )
    epsilon, delta, renewal = 0, 0, None
    for kind, row_epsilon, row_delta, row_renewal in rows:
        sign = 1 if kind == "grant" else -1
        epsilon += sign * from_text(row_epsilon)
        delta += sign * from_text(row_delta)
        if kind == "grant":
            renewal = row_renewal
    return _Grant(max(epsilon, 0), max(delta, 0), renewal)


def _cap(tx: Transaction, dataset: str) -> PrivacyLoss | None:
    rows = tx.execute(
        "SELECT epsilon, delta FROM caps WHERE dataset = ? ORDER BY id DESC LIMIT 1", (dataset,)
    )
    if not rows or rows[0][0] is None:
        return None
    return PrivacyLoss(float_down(from_text(rows[0][0])), _below_one(from_text(rows[0][1])))


def _read_totals(tx: Transaction, analyst: str, dataset: str, period: str) -> Totals:
    rows = tx.execute(
        f"SELECT {_TOTALS_COLUMNS} FROM totals WHERE analyst = ? AND dataset = ? AND period = ?",
        (analyst, dataset, period),
    )
    return _totals(rows[0]) if rows else Totals()


def _write_totals(tx: Transaction, analyst: str, dataset: str, period: str, totals: Totals) -> None:
    tx.execute(
        f"INSERT INTO totals (analyst, dataset, period, {_TOTALS_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (analyst, dataset, period) DO UPDATE SET releases = excluded.releases,"
        " epsilon = excluded.epsilon, delta = excluded.delta, epsilon_squares = excluded.epsilon_squares,"
        " epsilon_expm1 = excluded.epsilon_expm1, rho = excluded.rho, zcdp_delta = excluded.zcdp_delta",
        (analyst, dataset, period, *_totals_row(totals)),
    )


def _read_account(tx: Transaction, analyst: str, dataset: str, period: str) -> _Account:
    rows = tx.execute(
        f"SELECT partition_column, {_TOTALS_COLUMNS} FROM partition_totals"
        " WHERE analyst = ? AND dataset = ? AND period = ? AND partition_value = ''",
        (analyst, dataset, period),
    )
    envelopes = {str(row[0]): _totals(row[1:]) for row in rows if int(row[1]) > 0}
    return _Account(_read_totals(tx, analyst, dataset, period), envelopes)


def _read_values(
    tx: Transaction, analyst: str, dataset: str, period: str
) -> dict[str, dict[PartitionValue, Totals]]:
    """Per partition column, the totals of each value that counting spends were charged to."""
    values: dict[str, dict[PartitionValue, Totals]] = {}
    rows = tx.execute(
        f"SELECT partition_column, partition_value, {_TOTALS_COLUMNS} FROM partition_totals"
        " WHERE analyst = ? AND dataset = ? AND period = ? AND partition_value <> ''",
        (analyst, dataset, period),
    )
    for column, key, *totals in rows:
        if int(totals[0]) > 0:
            values.setdefault(str(column), {})[value_of(str(key))] = _totals(tuple(totals))
    return values


def _read_value(tx: Transaction, analyst: str, dataset: str, period: str, column: str, key: str) -> Totals:
    rows = tx.execute(
        f"SELECT {_TOTALS_COLUMNS} FROM partition_totals WHERE analyst = ? AND dataset = ? AND period = ?"
        " AND partition_column = ? AND partition_value = ?",
        (analyst, dataset, period, column, key),
    )
    return _totals(rows[0]) if rows else Totals()


def _write_value(
    tx: Transaction, analyst: str, dataset: str, period: str, column: str, key: str, totals: Totals
) -> None:
    """One value's totals (``key`` as JSON), or with ``key`` "" the column's widest."""
    tx.execute(
        "INSERT INTO partition_totals (analyst, dataset, period, partition_column, partition_value,"
        f" {_TOTALS_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (analyst, dataset, period, partition_column, partition_value) DO UPDATE SET"
        " releases = excluded.releases, epsilon = excluded.epsilon, delta = excluded.delta,"
        " epsilon_squares = excluded.epsilon_squares, epsilon_expm1 = excluded.epsilon_expm1,"
        " rho = excluded.rho, zcdp_delta = excluded.zcdp_delta",
        (analyst, dataset, period, column, key, *_totals_row(totals)),
    )


def _widest(start: Totals, totals: Iterable[Totals], *, releases: int) -> Totals:
    widest = start
    for total in totals:
        widest = widest.widest(total)
    return replace(widest, releases=releases)


def _charge_partition(
    tx: Transaction,
    analyst: str,
    dataset: str,
    period: str,
    account: _Account,
    release: Release,
    partition: Partition,
) -> tuple[dict[str, Totals], Totals]:
    """Each of the partition's values' totals with ``release`` added (by stored value), and its
    column's widest totals then (one more spend of the column)."""
    grown = {
        key: _read_value(tx, analyst, dataset, period, partition.column, key).plus(release)
        for key in partition.stored_values()
    }
    envelope = account.envelopes.get(partition.column, Totals())
    return grown, _widest(envelope, grown.values(), releases=envelope.releases + 1)


def _left_in(
    tx: Transaction,
    analyst: str,
    dataset: str,
    period: str,
    account: _Account,
    partition: Partition,
    grant: _Grant,
    accountant: Accountant,
) -> PrivacyLoss:
    """What statements pinned to every value of ``partition`` may still spend: the least of its values'."""
    column = partition.column
    lefts = [
        _spent_and_left(
            account.holding(column, _read_value(tx, analyst, dataset, period, column, key)), grant, accountant
        )[1]
        for key in partition.stored_values()
    ]
    return min(lefts, key=lambda loss: (loss.epsilon, loss.delta))


def _take_back(tx: Transaction, spend: Spend, partition: Partition) -> None:
    """Cancel a partition spend: out of each of its values, and the column's widest recomputed."""
    analyst, dataset, period, column = spend.analyst, spend.dataset, spend.period, partition.column
    for key in partition.stored_values():
        total = _read_value(tx, analyst, dataset, period, column, key).minus(spend.release)
        _write_value(tx, analyst, dataset, period, column, key, total)
    count = _read_value(tx, analyst, dataset, period, column, "").releases - 1
    remaining_values = _read_values(tx, analyst, dataset, period).get(column, {}).values()
    _write_value(
        tx, analyst, dataset, period, column, "", _widest(Totals(), remaining_values, releases=count)
    )


def _totals_row(totals: Totals) -> tuple[object, ...]:
    return (
        totals.releases,
        to_text(totals.epsilon),
        to_text(totals.delta),
        totals.epsilon_squares,
        totals.epsilon_expm1,
        totals.rho,
        to_text(totals.zcdp_delta),
    )


def _totals(row: tuple[object, ...]) -> Totals:
    releases, epsilon, delta, squares, expm1, rho, zcdp_delta = row
    return Totals(
        releases=int(releases),  # type: ignore[call-overload]
        epsilon=from_text(epsilon),
        delta=from_text(delta),
        epsilon_squares=float(squares),  # type: ignore[arg-type]
        epsilon_expm1=float(expm1),  # type: ignore[arg-type]
        rho=float(rho),  # type: ignore[arg-type]
        zcdp_delta=from_text(zcdp_delta),
    )


def _rebuild_totals(tx: Transaction) -> None:
    tx.execute("DELETE FROM totals")
    tx.execute("DELETE FROM partition_totals")
    ordinary, partitions = _totals_from_spends(tx)
    for (analyst, dataset, period), totals in ordinary.items():
        _write_totals(tx, analyst, dataset, period, totals)
    for (analyst, dataset, period, column, key), totals in partitions.items():
        _write_value(tx, analyst, dataset, period, column, key, totals)


@contextmanager
def _closed_on_error(store: LedgerStore) -> Iterator[None]:
    """A store that never became a Ledger must not leave its connections open."""
    try:
        yield
    except BaseException:
        store.close()
        raise


def _totals_from_spends(
    tx: Transaction,
) -> tuple[dict[tuple[str, str, str], Totals], dict[tuple[str, str, str, str, str], Totals]]:
    """Every running total as the counting spends say: the ordinary and dataset rows of ``totals``,
    and the value and widest rows of ``partition_totals``."""
    totals: dict[tuple[str, str, str], Totals] = {}
    values: dict[tuple[str, str, str, str, str], Totals] = {}
    counts: dict[tuple[str, str, str, str, str], int] = {}
    rows = tx.execute(
        "SELECT analyst, dataset, period, epsilon, delta, rho, rho_delta, partition_column, partition_values"
        " FROM spends WHERE state IN (?, ?) ORDER BY id",
        _COUNTING_STATES,
    )
    for analyst, dataset, period, epsilon, delta, rho, rho_delta, column, stored in rows:
        release = _release(epsilon, delta, rho, rho_delta)
        partition = Partition.from_stored(str(column), str(stored))
        keys = [(ALL_ANALYSTS, dataset, NO_PERIOD)]
        if partition is None:
            keys.append((analyst, dataset, period))
        else:
            widest = (analyst, dataset, period, partition.column, "")
            counts[widest] = counts.get(widest, 0) + 1
            for value in partition.stored_values():
                key = (analyst, dataset, period, partition.column, value)
                values[key] = values.get(key, Totals()).plus(release)
        for key in keys:
            totals[key] = totals.get(key, Totals()).plus(release)
    partitions = dict(values)
    for widest, count in counts.items():
        same_column = (total for key, total in values.items() if key[:4] == widest[:4])
        partitions[widest] = _widest(Totals(), same_column, releases=count)
    return totals, partitions


def check_name(name: str, kind: str) -> None:
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


def _analyst_exists(tx: Transaction, name: str) -> bool:
    return bool(tx.execute("SELECT 1 FROM analysts WHERE name = ?", (name,)))


def require_analyst(tx: Transaction, name: str) -> None:
    if not _analyst_exists(tx, name):
        raise UnknownAnalystError(
            f'analyst "{name}" does not exist', hint=f"run `veil analyst add {name}` to create it"
        )


def _spend(row: tuple[object, ...]) -> Spend:
    (
        id_,
        analyst,
        dataset,
        epsilon,
        delta,
        statement,
        state,
        created_at,
        updated_at,
        rho,
        rho_delta,
        period,
        partition_column,
        partition_values,
    ) = row
    release = _release(epsilon, delta, rho, rho_delta)
    return Spend(
        id=int(id_),  # type: ignore[call-overload]
        analyst=str(analyst),
        dataset=str(dataset),
        epsilon=release.epsilon,
        delta=release.delta,
        statement=str(statement),
        state=SpendState(state),
        created_at=datetime.fromisoformat(str(created_at)),
        updated_at=datetime.fromisoformat(str(updated_at)),
        rho=release.rho,
        rho_delta=release.rho_delta,
        period=str(period),
        partition=Partition.from_stored(str(partition_column), str(partition_values)),
        charge=release.charge,
    )


def _stored_release(release: Release) -> tuple[object, ...]:
    """A release's epsilon, delta, rho and rho_delta as a spends row holds them: its charge."""
    charge = release.charge
    return to_text(charge.epsilon), to_text(charge.delta), release.rho, to_text(charge.rho_delta)


def _release(epsilon: object, delta: object, rho: object, rho_delta: object) -> Release:
    """A spends row's release: its stored charge, shown as the floats :func:`float_up` rounds it to."""
    charge = Charge(from_text(epsilon), from_text(delta), from_text(rho_delta))
    return Release(
        float_up(charge.epsilon),
        float_up(charge.delta),
        None if rho is None else float(rho),  # type: ignore[arg-type]
        float_up(charge.rho_delta),
        charged=charge,
    )


def _describe(loss: PrivacyLoss) -> str:
    text = f"epsilon {as_decimal(loss.epsilon):f}"
    return text if loss.delta == 0 else f"{text} and delta {as_decimal(loss.delta):f}"


def _exhausted(balance: Balance, asked: PrivacyLoss) -> BudgetExhaustedError:
    left = PrivacyLoss(balance.remaining_epsilon, balance.remaining_delta)
    return BudgetExhaustedError(
        f'privacy budget exhausted: analyst "{balance.analyst}" asked for {_describe(asked)} on '
        f'dataset "{balance.dataset}", but only {_describe(left)} remains',
        hint=_DELTA_EXHAUSTED_HINT if asked.delta > balance.remaining_delta else _EXHAUSTED_HINT,
    )


def _exhausted_in(
    analyst: str, dataset: str, partition: Partition, asked: PrivacyLoss, left: PrivacyLoss
) -> BudgetExhaustedError:
    return BudgetExhaustedError(
        f'privacy budget exhausted: analyst "{analyst}" asked for {_describe(asked)} on dataset "{dataset}"'
        f" in partition {partition.describe()}, but only {_describe(left)} remains there",
        hint=_EXHAUSTED_HINT,
    )


def _fits_cap(
    accountant: Accountant, totals: Totals, release: Release, cap: PrivacyLoss, step: float | None
) -> bool:
    """Whether ``release`` fits under ``cap``, the dataset's spending so far seen in steps of
    ``step`` × the cap's ε (exactly when ``step`` is None)."""
    if step is None:
        return accountant.fits(totals, release, grant=cap)
    before = accountant.spent(totals, grant=cap)
    after = accountant.spent(totals.plus(release), grant=cap)
    coarse = coarse_up(before.epsilon, cap.epsilon * step)
    return coarse + (after.epsilon - before.epsilon) <= cap.epsilon and after.delta <= cap.delta


def coarse_up(amount: float, step: float) -> float:
    """``amount`` rounded up to a multiple of ``step`` (a hair of float error is not a step)."""
    return math.ceil(amount / step - 1e-9) * step


def _capped(dataset: str, cap: PrivacyLoss, asked: PrivacyLoss) -> BudgetExhaustedError:
    return BudgetExhaustedError(
        f'privacy budget exhausted: dataset "{dataset}" is capped at {_describe(cap)} across all '
        f"analysts, and {_describe(asked)} more would exceed it",
        hint="an administrator can raise the cap (veil budget cap); no analyst can spend more on this dataset",
    )


def _not_open(reservation_id: int, state: str | None) -> UnknownReservationError:
    if state is None:
        return UnknownReservationError(f"there is no reservation {reservation_id}")
    return UnknownReservationError(
        f"reservation {reservation_id} is not open: it is already {state}",
        hint="only a reserved spend can be committed or cancelled, and only once",
    )
