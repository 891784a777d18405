"""The epsilon ledger's contract: analysts, grants, revokes, caps, renewal, reserve/commit/cancel,
consistency of the running totals, and no overspending under concurrency.

Every test here takes its ledgers from the ``ledgers`` fixture and runs on SQLite;
tests/postgres/test_ledger_postgres.py imports them all and runs them again on PostgreSQL, so the
two stores are held to one contract. What only one store has (files, WAL, the version-1 upgrade,
schemas, reconnecting) is tested in tests/unit/budget/test_stores.py and in that module.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget.accountants import get_accountant
from budget.amounts import as_decimal, charge_units, float_up, to_text
from budget.audit import AuditEntry, Decision
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
from budget.ledger import Analyst, Balance, Ledger, SpendState, period_start
from budget.loss import PrivacyLoss
from budget.schema import SCHEMA_VERSION
from budget.store import open_store
from budget.totals import Release
from tests.unit.budget.ledger_v4 import make_version_4_ledger

VERIFIER = "SCRAM-SHA-256$4096:c2FsdHNhbHQ=$c3RvcmVka2V5:c2VydmVya2V5"
OTHER_VERIFIER = "SCRAM-SHA-256$8192:b3RoZXJzYWx0$b3RoZXJzdG9yZWQ=:b3RoZXJzZXJ2ZXI="
REPO_ROOT = Path(__file__).resolve().parents[3]


class Clock:
    """A clock the test sets by hand (``clock.now = …``), for renewal periods."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def fixed_clock(start: datetime) -> Callable[[], datetime]:
    """A clock that ticks one second per call, so timestamps are predictable."""
    ticks = iter(range(1_000_000))
    return lambda: start + timedelta(seconds=next(ticks))


def _real_clock() -> datetime:
    return datetime.now(UTC)


@dataclass
class Ledgers:
    """Makes fresh, empty ledgers in one store, and opens them again as another process would.

    ``place`` returns a new (location, schema) each call: a file path and None for SQLite, the test
    server's DSN and a fresh schema for PostgreSQL. Every ledger made here is closed after the test.
    """

    place: Callable[[], tuple[str, str | None]]
    opened: list[Ledger] = field(default_factory=list)

    def new(self, *, clock: Callable[[], datetime] = _real_clock) -> Ledger:
        location, schema = self.place()
        return self._keep(Ledger.create(location, clock=clock, schema=schema))

    def reopen(self, ledger: Ledger, *, clock: Callable[[], datetime] = _real_clock) -> Ledger:
        return self._keep(Ledger.open(ledger.location, clock=clock, schema=schema_of(ledger)))

    def create_again(self, ledger: Ledger) -> Ledger:
        return self._keep(Ledger.create(ledger.location, schema=schema_of(ledger)))

    def version_4(self) -> tuple[str, str | None]:
        """A new place holding the version-4 ledger of tests/unit/budget/ledger_v4.py (not opened)."""
        location, schema = self.place()
        make_version_4_ledger(location, schema)
        return location, schema

    def open(
        self, location: str, schema: str | None, *, clock: Callable[[], datetime] = _real_clock
    ) -> Ledger:
        return self._keep(Ledger.open(location, clock=clock, schema=schema))

    def close(self) -> None:
        for ledger in self.opened:
            ledger.close()

    def _keep(self, ledger: Ledger) -> Ledger:
        self.opened.append(ledger)
        return ledger


def schema_of(ledger: Ledger) -> str | None:
    """The PostgreSQL schema of a ledger; None for an SQLite file."""
    schema: str | None = getattr(ledger.store, "schema", None)
    return schema


@pytest.fixture
def ledgers(tmp_path: Path) -> Iterator[Ledgers]:
    """SQLite ledgers, one file each (tests/postgres/test_ledger_postgres.py overrides this)."""
    numbers = itertools.count()
    made = Ledgers(lambda: (str(tmp_path / f"ledger-{next(numbers)}.sqlite"), None))
    yield made
    made.close()


@pytest.fixture
def ledger(ledgers: Ledgers) -> Ledger:
    """A ledger where alice holds epsilon 1.0 and delta 1e-5 on dataset demo."""
    ledger = ledgers.new()
    ledger.add_analyst("alice", VERIFIER)
    ledger.grant("alice", "demo", PrivacyLoss(1.0, 1e-5))
    return ledger


def spend(
    ledger: Ledger, epsilon: float, delta: float = 0.0, *, dataset: str = "demo", analyst: str = "alice"
) -> int:
    return ledger.reserve(analyst, dataset, PrivacyLoss(epsilon, delta), statement="SELECT COUNT(*) FROM t")


def behind_the_back(ledger: Ledger, sql: str) -> None:
    """Run SQL in the ledger's store as a careless administrator would, bypassing the Ledger."""
    with ledger.store.transaction(write=True) as tx:
        tx.execute(sql)


def in_store(location: str, schema: str | None, *statements: str) -> None:
    """Run SQL in a ledger's store that no Ledger has opened (an old version's, say)."""
    store = open_store(location, schema=schema)
    try:
        with store.transaction(write=True) as tx:
            for statement in statements:
                tx.execute(statement)
    finally:
        store.close()


def downgrade_to_version_3(location: str, schema: str | None) -> None:
    """Make a version-4 ledger (:meth:`Ledgers.version_4`) look as Veil's version-3 schema left it: no
    partition columns or totals."""
    in_store(
        location,
        schema,
        *(["DROP TRIGGER spends_only_close"] if schema is None else []),
        "DROP TABLE partition_totals",
        "ALTER TABLE spends DROP COLUMN partition_values",
        "ALTER TABLE spends DROP COLUMN partition_column",
        "UPDATE schema_version SET version = 3",
    )


# -- the store ------------------------------------------------------------------------------------


def test_create_is_idempotent_and_keeps_data(ledgers: Ledgers, ledger: Ledger) -> None:
    again = ledgers.create_again(ledger)
    assert again.balance("alice", "demo").granted_epsilon == 1.0


def test_open_finds_an_existing_ledger(ledgers: Ledgers, ledger: Ledger) -> None:
    assert ledgers.reopen(ledger).verifier("alice") == VERIFIER


def test_open_refuses_a_newer_schema(ledgers: Ledgers, ledger: Ledger) -> None:
    behind_the_back(ledger, "UPDATE schema_version SET version = 99")
    with pytest.raises(
        LedgerStoreError, match=f"schema version 99; this Veil reads up to {SCHEMA_VERSION}"
    ) as raised:
        ledgers.reopen(ledger)
    assert raised.value.hint == "upgrade Veil"  # a newer Veil wrote it: an older one must not touch it


def test_open_upgrades_a_version_2_ledger_and_keeps_its_audit_log(ledgers: Ledgers) -> None:
    """Version 3 added the audit log's ``outcome``; older rows keep an empty one."""
    location, schema = ledgers.version_4()
    downgrade_to_version_3(location, schema)
    in_store(
        location, schema, "ALTER TABLE audit DROP COLUMN outcome", "UPDATE schema_version SET version = 2"
    )
    again = ledgers.open(location, schema)
    assert again.upgraded_from == 2
    at = datetime(2026, 1, 1, tzinfo=UTC)
    failed = AuditEntry(at, "alice", "127.0.0.1:1", "demo", "SELECT 2", Decision.FAILED, outcome="timed out")
    again.audit_log.append(failed)
    assert [(entry.statement, entry.outcome) for entry in again.audit_log.entries()] == [
        ("SELECT COUNT(*) FROM patients", ""),
        ("SELECT 2", "timed out"),
    ]
    assert again.verify() == []


def test_spends_cannot_be_deleted_behind_the_ledgers_back(ledger: Ledger) -> None:
    spend(ledger, 0.5)
    with pytest.raises(LedgerStoreError, match="spends are append-only"):
        behind_the_back(ledger, "DELETE FROM spends")
    assert ledger.balance("alice", "demo").spent_epsilon == 0.5


@pytest.mark.parametrize("table", ["grants", "caps"])
@pytest.mark.parametrize("edit", ["DELETE FROM {table}", "UPDATE {table} SET epsilon = 100"])
def test_grants_and_caps_are_append_only(ledger: Ledger, table: str, edit: str) -> None:
    ledger.set_cap("demo", PrivacyLoss(5.0))
    with pytest.raises(LedgerStoreError, match=f"{table} are append-only"):
        behind_the_back(ledger, edit.format(table=table))
    assert ledger.balance("alice", "demo").granted_epsilon == 1.0
    assert ledger.cap("demo").cap_epsilon == 5.0


def test_a_reserved_spend_cannot_be_made_cheaper_behind_the_ledgers_back(ledger: Ledger) -> None:
    spend(ledger, 0.5)
    with pytest.raises(LedgerStoreError, match="only a reserved spend may change, and only its state"):
        behind_the_back(ledger, "UPDATE spends SET epsilon = 0.01")


def test_a_committed_spend_cannot_be_reopened_behind_the_ledgers_back(ledger: Ledger) -> None:
    ledger.commit(spend(ledger, 0.5))
    with pytest.raises(LedgerStoreError, match="only a reserved spend may change"):
        behind_the_back(ledger, "UPDATE spends SET state = 'reserved'")


def test_the_ledger_keeps_working_after_a_refused_statement(ledger: Ledger) -> None:
    with pytest.raises(LedgerStoreError):
        behind_the_back(ledger, "DELETE FROM grants")
    spend(ledger, 0.25)
    assert ledger.balance("alice", "demo").spent_epsilon == 0.25


# -- analysts -------------------------------------------------------------------------------------


def test_verifier_round_trip(ledger: Ledger) -> None:
    assert ledger.verifier("alice") == VERIFIER


def test_set_verifier_replaces_it(ledger: Ledger) -> None:
    ledger.set_verifier("alice", OTHER_VERIFIER)
    assert ledger.verifier("alice") == OTHER_VERIFIER


def test_verifier_of_unknown_analyst_is_none(ledger: Ledger) -> None:
    assert ledger.verifier("mallory") is None


def test_refuses_a_plaintext_password_as_verifier(ledger: Ledger) -> None:
    with pytest.raises(InvalidVerifierError, match="not a SCRAM-SHA-256 verifier") as refused:
        ledger.add_analyst("bob", "hunter2")
    assert refused.value.hint == (
        "pass SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>, never a plaintext password"
    )


def test_add_analyst_twice_is_refused(ledger: Ledger) -> None:
    with pytest.raises(AnalystExistsError, match='analyst "alice" already exists') as refused:
        ledger.add_analyst("alice", VERIFIER)
    assert refused.value.hint == "choose another name, or run `veil analyst remove alice` first"


def test_an_audit_entry_reads_back_as_it_was_written(ledger: Ledger) -> None:
    written = AuditEntry(
        datetime(2026, 3, 1, 12, 30, tzinfo=UTC),
        "alice",
        "127.0.0.1:5555",
        "demo",
        "SELECT AVG(age) FROM t",
        Decision.FAILED,
        epsilon=0.5,
        delta=1e-7,
        accountant="zcdp",
        mechanisms="gaussian, laplace",
        sqlstate="57014",
        error="canceling statement due to user request",
        outcome="cancelled",
    )
    ledger.audit_log.append(written)
    (read,) = ledger.audit_log.entries(analyst="alice")
    assert read == dataclasses.replace(written, id=read.id) and read.id is not None


def test_reservations_lists_the_open_spends_of_a_dataset_oldest_first(ledger: Ledger) -> None:
    ledger.grant("alice", "sales", PrivacyLoss(1.0))
    first, other, done = spend(ledger, 0.1), spend(ledger, 0.2, dataset="sales"), spend(ledger, 0.3)
    ledger.commit(done)
    last = spend(ledger, 0.4)
    assert [s.id for s in ledger.reservations("demo")] == [first, last]
    assert [(s.id, s.dataset, s.epsilon) for s in ledger.reservations()] == [
        (first, "demo", 0.1),
        (other, "sales", 0.2),
        (last, "demo", 0.4),
    ]


@pytest.mark.parametrize("name", ["", "a b", "x" * 64, "zoë", "bob;drop", "a/b"])
def test_refuses_invalid_analyst_names(ledger: Ledger, name: str) -> None:
    with pytest.raises(InvalidNameError, match=r"analyst name .* is not allowed"):
        ledger.add_analyst(name, VERIFIER)


def test_accepts_names_of_letters_digits_and_punctuation(ledger: Ledger) -> None:
    name = "A.b-c_9" + "x" * 56
    ledger.add_analyst(name, VERIFIER)
    assert ledger.verifier(name) == VERIFIER


def test_list_analysts_is_sorted_and_timestamped_by_the_clock(ledgers: Ledgers) -> None:
    start = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    ledger = ledgers.new(clock=fixed_clock(start))
    ledger.add_analyst("zed", VERIFIER)
    ledger.add_analyst("amy", VERIFIER)
    assert ledger.list_analysts() == [
        Analyst("amy", start + timedelta(seconds=1)),
        Analyst("zed", start),
    ]


def test_names_sort_byte_by_byte_in_every_store(ledger: Ledger) -> None:
    """A linguistic collation would put "amy" next to "Amy" and ignore punctuation."""
    names = ["amy", "Zed", "_x", "Amy", "a.b", "a-c", "B"]
    for name in names:
        ledger.add_analyst(name, VERIFIER)
        ledger.grant(name, "demo", PrivacyLoss(1.0))
    expected = sorted([*names, "alice"], key=str.encode)
    assert [analyst.name for analyst in ledger.list_analysts()] == expected
    assert [balance.analyst for balance in ledger.balances()] == expected


def test_timestamps_are_stored_in_utc(ledgers: Ledgers) -> None:
    tokyo = timezone(timedelta(hours=9))
    ledger = ledgers.new(clock=lambda: datetime(2024, 5, 1, 9, tzinfo=tokyo))
    created = ledger.add_analyst("amy", VERIFIER).created_at
    assert created == datetime(2024, 5, 1, 0, tzinfo=UTC)
    assert created.utcoffset() == timedelta(0)


def test_remove_analyst_revokes_login_and_spending(ledger: Ledger) -> None:
    ledger.remove_analyst("alice")
    assert ledger.verifier("alice") is None
    with pytest.raises(UnknownAnalystError):
        spend(ledger, 0.1)


def test_readded_analyst_keeps_what_was_spent(ledger: Ledger) -> None:
    spend(ledger, 0.75)
    ledger.remove_analyst("alice")
    ledger.add_analyst("alice", VERIFIER)
    assert ledger.balance("alice", "demo").remaining_epsilon == 0.25


def test_remove_unknown_analyst_is_refused(ledger: Ledger) -> None:
    with pytest.raises(UnknownAnalystError, match='analyst "bob" does not exist') as raised:
        ledger.remove_analyst("bob")
    assert raised.value.hint == "run `veil analyst add bob` to create it"


# -- grants and balances --------------------------------------------------------------------------


def test_grant_to_unknown_analyst_says_how_to_add_one(ledger: Ledger) -> None:
    with pytest.raises(UnknownAnalystError, match=r'^analyst "bob" does not exist$') as raised:
        ledger.grant("bob", "demo", PrivacyLoss(1.0))
    assert raised.value.hint == "run `veil analyst add bob` to create it"


def test_grant_needs_positive_epsilon(ledger: Ledger) -> None:
    with pytest.raises(InvalidBudgetError, match="epsilon > 0"):
        ledger.grant("alice", "demo", PrivacyLoss(0.0))


def test_grants_add_up(ledger: Ledger) -> None:
    balance = ledger.grant("alice", "demo", PrivacyLoss(0.5, 1e-5))
    assert (balance.granted_epsilon, balance.granted_delta) == (1.5, 2e-5)


def test_balance_without_grant_is_zero(ledger: Ledger) -> None:
    assert ledger.balance("alice", "other") == Balance("alice", "other", 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def test_balance_of_unknown_analyst_is_refused(ledger: Ledger) -> None:
    with pytest.raises(UnknownAnalystError):
        ledger.balance("bob", "demo")


def test_balances_list_every_pair_with_a_grant(ledger: Ledger) -> None:
    ledger.add_analyst("bob", VERIFIER)
    ledger.add_analyst("carol", VERIFIER)
    ledger.grant("bob", "sales", PrivacyLoss(2.0))
    ledger.grant("alice", "sales", PrivacyLoss(3.0))
    pairs = [(b.analyst, b.dataset, b.granted_epsilon) for b in ledger.balances()]
    assert pairs == [("alice", "demo", 1.0), ("alice", "sales", 3.0), ("bob", "sales", 2.0)]


def test_balances_of_one_analyst(ledger: Ledger) -> None:
    ledger.add_analyst("bob", VERIFIER)
    ledger.grant("bob", "sales", PrivacyLoss(2.0))
    assert [b.dataset for b in ledger.balances("bob")] == ["sales"]


# -- revoking -------------------------------------------------------------------------------------


def test_revoke_takes_back_part_of_a_grant(ledger: Ledger) -> None:
    spend(ledger, 0.25)
    balance = ledger.revoke("alice", "demo", PrivacyLoss(0.5))
    assert (balance.granted_epsilon, balance.spent_epsilon, balance.remaining_epsilon) == (0.5, 0.25, 0.25)
    assert balance.granted_delta == 1e-5  # a revoke of epsilon only leaves delta alone
    spend(ledger, 0.25)
    with pytest.raises(BudgetExhaustedError, match=r"only epsilon 0\.0 and delta 0\.00001 remains"):
        spend(ledger, 0.01)


def test_revoke_of_delta_takes_back_delta(ledger: Ledger) -> None:
    balance = ledger.revoke("alice", "demo", PrivacyLoss(0.1, 4e-6))
    assert (balance.granted_epsilon, balance.granted_delta) == (0.9, 6e-6)
    with pytest.raises(BudgetExhaustedError, match="delta"):
        spend(ledger, 0.1, 7e-6)


def test_revoke_without_an_amount_takes_back_everything_unspent(ledger: Ledger) -> None:
    spend(ledger, 0.3, 2e-6)
    balance = ledger.revoke("alice", "demo")
    assert (balance.granted_epsilon, balance.spent_epsilon, balance.remaining_epsilon) == (0.3, 0.3, 0.0)
    assert (balance.granted_delta, balance.remaining_delta) == (2e-6, 0.0)
    with pytest.raises(BudgetExhaustedError):
        spend(ledger, 0.01)


def test_revoke_cannot_take_back_what_was_spent(ledger: Ledger) -> None:
    spend(ledger, 0.75)
    balance = ledger.revoke("alice", "demo", PrivacyLoss(0.5))
    assert (balance.granted_epsilon, balance.spent_epsilon, balance.remaining_epsilon) == (0.75, 0.75, 0.0)


def test_a_grant_after_a_full_revoke_starts_from_what_was_spent(ledger: Ledger) -> None:
    spend(ledger, 0.4)
    ledger.revoke("alice", "demo")
    balance = ledger.grant("alice", "demo", PrivacyLoss(0.5))
    assert (balance.granted_epsilon, balance.remaining_epsilon) == (0.9, 0.5)


def test_revoke_from_an_unknown_analyst_is_refused(ledger: Ledger) -> None:
    with pytest.raises(UnknownAnalystError, match='analyst "bob" does not exist'):
        ledger.revoke("bob", "demo")


def test_a_cancelled_reservation_can_be_revoked_afterwards(ledger: Ledger) -> None:
    ledger.cancel(spend(ledger, 0.6))
    assert ledger.revoke("alice", "demo").granted_epsilon == 0.0


@pytest.mark.parametrize("accountant", ["zcdp", "advanced"])
def test_a_full_revoke_under_another_accountant_leaves_exactly_what_was_spent(
    ledger: Ledger, accountant: str
) -> None:
    """Under zCDP (or advanced composition) the ε spent depends on the grant's δ, a share of which pays
    for the conversion: a revoke that took δ back first and ε at the old δ left more ε spent than
    granted (found by a mutant of the revoke's arithmetic: 0.2507 spent of 0.2400 granted)."""
    chosen = get_accountant(accountant)
    for _ in range(2):
        ledger.reserve(
            "alice", "demo", Release(0.3, 1e-6, rho=0.001), statement="SELECT 1", accountant=chosen
        )
    before = ledger.balance("alice", "demo", accountant=chosen)
    after = ledger.revoke("alice", "demo", accountant=chosen)
    assert after.granted_delta < before.granted_delta  # δ was taken back too
    assert after.spent_epsilon <= after.granted_epsilon and after.spent_delta <= after.granted_delta
    assert after.remaining_epsilon == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(BudgetExhaustedError):
        ledger.reserve("alice", "demo", Release(0.01, 0.0, rho=1e-5), statement="SELECT 1", accountant=chosen)


def test_a_delta_revoke_under_zcdp_stops_where_the_epsilon_spent_would_pass_the_grant(ledger: Ledger) -> None:
    """Nearly all of ε spent: taking all unspent δ back would convert ρ at a smaller δ into more ε than
    granted, so the revoke takes only the δ that keeps the ε spent within the grant."""
    zcdp = get_accountant("zcdp")
    for _ in range(4):  # 1.2 added up; ρ = 0.028 converted at δ/2 = 5·10⁻⁶: 0.992 (at 2.5·10⁻⁶: 1.03)
        ledger.reserve("alice", "demo", Release(0.3, 0.0, rho=0.007), statement="SELECT 1", accountant=zcdp)
    before = ledger.balance("alice", "demo", accountant=zcdp)
    assert 0.99 < before.spent_epsilon < 0.995
    after = ledger.revoke("alice", "demo", PrivacyLoss(0.0, 1e-5), accountant=zcdp)
    assert before.granted_delta - before.remaining_delta < after.granted_delta < before.granted_delta
    assert after.spent_epsilon <= after.granted_epsilon == before.granted_epsilon
    assert after.spent_epsilon == pytest.approx(after.granted_epsilon, rel=1e-6)  # as far as it could go


# -- dataset caps ---------------------------------------------------------------------------------


@pytest.fixture
def capped(ledger: Ledger) -> Ledger:
    """alice and bob each hold epsilon 1.0 on demo, which is capped at 1.0 for both together."""
    ledger.add_analyst("bob", VERIFIER)
    ledger.grant("bob", "demo", PrivacyLoss(1.0, 1e-5))
    ledger.set_cap("demo", PrivacyLoss(1.0, 1e-5))
    return ledger


def test_two_analysts_together_cannot_exceed_the_cap(capped: Ledger) -> None:
    answered = 0
    for analyst in itertools.islice(itertools.cycle(["alice", "bob"]), 14):
        with contextlib.suppress(BudgetExhaustedError):
            spend(capped, 0.1, analyst=analyst)
            answered += 1
    assert answered == 10
    assert capped.cap("demo").spent_epsilon == 1.0
    assert capped.balance("alice", "demo").spent_epsilon == 0.5
    assert capped.balance("bob", "demo").spent_epsilon == 0.5


def test_the_cap_refusal_names_the_dataset(capped: Ledger) -> None:
    spend(capped, 0.7)
    with pytest.raises(
        BudgetExhaustedError,
        match=r'^privacy budget exhausted: dataset "demo" is capped at epsilon 1\.0 and delta 0\.00001 '
        r"across all analysts, and epsilon 0\.4 more would exceed it$",
    ) as refused:
        spend(capped, 0.4, analyst="bob")
    assert "veil budget cap" in (refused.value.hint or "")
    assert capped.balance("bob", "demo").spent_epsilon == 0.0


def test_the_cap_counts_delta_too(capped: Ledger) -> None:
    spend(capped, 0.1, 8e-6)
    with pytest.raises(BudgetExhaustedError, match='dataset "demo" is capped'):
        spend(capped, 0.1, 4e-6, analyst="bob")


def test_a_cap_step_counts_what_others_spent_in_whole_steps(capped: Ledger) -> None:
    """With steps of 0.5 × the cap, bob's 0.1 counts as 0.5: alice may add 0.5 but not 0.6, which the
    exact cap (0.1 + 0.6 ≤ 1.0) would let through — so her refusals do not reveal bob's 0.1."""
    spend(capped, 0.1, analyst="bob")
    with pytest.raises(BudgetExhaustedError, match='dataset "demo" is capped'):
        capped.reserve("alice", "demo", PrivacyLoss(0.6), statement="SELECT 1", cap_step=0.5)
    capped.reserve("alice", "demo", PrivacyLoss(0.5), statement="SELECT 1", cap_step=0.5)
    assert capped.balance("alice", "demo").spent_epsilon == 0.5


def test_an_analysts_grant_still_binds_under_a_larger_cap(ledger: Ledger) -> None:
    ledger.set_cap("demo", PrivacyLoss(10.0))
    spend(ledger, 1.0)
    with pytest.raises(BudgetExhaustedError, match='analyst "alice" asked for'):
        spend(ledger, 0.1)


def test_delta_grants_that_add_past_one_still_pay_for_a_spend(ledger: Ledger) -> None:
    """δ grants add in the ledger; what an accountant compares with is kept below 1 (a δ of 1 is no
    guarantee, and PrivacyLoss refuses it)."""
    ledger.grant("alice", "demo", PrivacyLoss(1.0, 0.6))
    ledger.grant("alice", "demo", PrivacyLoss(1.0, 0.6))
    spend(ledger, 0.1, 0.9)
    assert ledger.balance("alice", "demo").spent_delta == 0.9


def test_a_cap_is_reported_under_the_accountant_asked_for(capped: Ledger) -> None:
    spend(capped, 0.2)
    assert capped.cap("demo").accountant == "basic"
    assert capped.cap("demo", accountant=get_accountant("zcdp")).accountant == "zcdp"


def test_a_cap_on_another_dataset_does_not_apply(ledger: Ledger) -> None:
    ledger.set_cap("sales", PrivacyLoss(0.1))
    spend(ledger, 0.5)
    assert ledger.cap("sales").spent_epsilon == 0.0


def test_removing_the_cap_lifts_it(capped: Ledger) -> None:
    spend(capped, 1.0)
    capped.set_cap("demo", None)
    spend(capped, 0.5, analyst="bob")
    assert capped.cap("demo").cap_epsilon is None
    assert capped.cap("demo").spent_epsilon == 1.5


def test_a_cap_below_what_was_spent_refuses_everything(ledger: Ledger) -> None:
    spend(ledger, 0.5)
    ledger.set_cap("demo", PrivacyLoss(0.25))
    with pytest.raises(BudgetExhaustedError, match=r'dataset "demo" is capped at epsilon 0\.25'):
        spend(ledger, 0.01)


def test_caps_lists_every_capped_dataset_with_its_spending(capped: Ledger) -> None:
    capped.set_cap("sales", PrivacyLoss(2.0))
    spend(capped, 0.3)
    spend(capped, 0.2, analyst="bob")
    assert [(cap.dataset, cap.cap_epsilon, cap.spent_epsilon) for cap in capped.caps()] == [
        ("demo", 1.0, 0.5),
        ("sales", 2.0, 0.0),
    ]


def test_cap_needs_positive_epsilon(ledger: Ledger) -> None:
    with pytest.raises(InvalidBudgetError, match="a cap needs epsilon > 0"):
        ledger.set_cap("demo", PrivacyLoss(0.0))


# -- renewal --------------------------------------------------------------------------------------


def renewing(ledgers: Ledgers, now: datetime, renewal: str | None) -> tuple[Ledger, Clock]:
    clock = Clock(now)
    ledger = ledgers.new(clock=clock)
    ledger.add_analyst("alice", VERIFIER)
    ledger.grant("alice", "demo", PrivacyLoss(1.0), renewal=renewal)
    return ledger, clock


def test_a_monthly_grant_renews_on_the_first_of_the_month(ledgers: Ledgers) -> None:
    ledger, clock = renewing(ledgers, datetime(2024, 1, 15, tzinfo=UTC), "month")
    spend(ledger, 1.0)
    clock.now = datetime(2024, 1, 31, 23, 59, 59, tzinfo=UTC)
    with pytest.raises(BudgetExhaustedError):
        spend(ledger, 0.1)
    clock.now = datetime(2024, 2, 1, tzinfo=UTC)
    balance = ledger.balance("alice", "demo")
    assert (balance.spent_epsilon, balance.remaining_epsilon) == (0.0, 1.0)
    assert (balance.renewal, balance.period_start) == ("month", date(2024, 2, 1))
    spend(ledger, 1.0)
    assert [s.period for s in ledger.history("alice")] == ["2024-01-01", "2024-02-01"]


def test_a_weekly_grant_renews_on_monday(ledgers: Ledgers) -> None:
    ledger, clock = renewing(ledgers, datetime(2024, 6, 5, 12, tzinfo=UTC), "week")  # a Wednesday
    spend(ledger, 1.0)
    clock.now = datetime(2024, 6, 9, 23, 59, tzinfo=UTC)  # Sunday: still the same week
    assert ledger.balance("alice", "demo").period_start == date(2024, 6, 3)
    with pytest.raises(BudgetExhaustedError):
        spend(ledger, 0.1)
    clock.now = datetime(2024, 6, 10, tzinfo=UTC)  # Monday
    assert ledger.balance("alice", "demo").period_start == date(2024, 6, 10)
    spend(ledger, 1.0)


def test_a_daily_grant_renews_at_midnight_utc(ledgers: Ledgers) -> None:
    ledger, clock = renewing(ledgers, datetime(2024, 3, 1, 23, 30, tzinfo=UTC), "day")
    spend(ledger, 1.0)
    clock.now = datetime(2024, 3, 2, 0, 0, tzinfo=UTC)
    spend(ledger, 1.0)


def test_renewal_periods_follow_utc_not_the_clocks_zone(ledgers: Ledgers) -> None:
    ledger, clock = renewing(ledgers, datetime(2024, 1, 20, tzinfo=UTC), "month")
    spend(ledger, 1.0)
    clock.now = datetime(2024, 2, 1, 8, 0, tzinfo=timezone(timedelta(hours=9)))  # Jan 31, 23:00 UTC
    with pytest.raises(BudgetExhaustedError):
        spend(ledger, 0.1)


def test_a_grant_without_renewal_never_renews_and_grants_accumulate(ledgers: Ledgers) -> None:
    ledger, clock = renewing(ledgers, datetime(2024, 1, 15, tzinfo=UTC), None)
    spend(ledger, 1.0)
    clock.now = datetime(2024, 2, 15, tzinfo=UTC)
    with pytest.raises(BudgetExhaustedError):
        spend(ledger, 0.1)
    balance = ledger.grant("alice", "demo", PrivacyLoss(0.5))
    assert (balance.granted_epsilon, balance.spent_epsilon, balance.remaining_epsilon) == (1.5, 1.0, 0.5)
    assert (balance.renewal, balance.period_start) == (None, None)


def test_the_dataset_cap_does_not_renew(ledgers: Ledgers) -> None:
    ledger, clock = renewing(ledgers, datetime(2024, 1, 15, tzinfo=UTC), "month")
    ledger.set_cap("demo", PrivacyLoss(1.5))
    spend(ledger, 1.0)
    clock.now = datetime(2024, 2, 15, tzinfo=UTC)
    spend(ledger, 0.5)
    with pytest.raises(BudgetExhaustedError, match='dataset "demo" is capped'):
        spend(ledger, 0.1)


def test_cancel_in_a_later_period_gives_back_to_the_period_reserved_in(ledgers: Ledgers) -> None:
    ledger, clock = renewing(ledgers, datetime(2024, 1, 31, 23, 0, tzinfo=UTC), "month")
    reservation = spend(ledger, 0.6)
    clock.now = datetime(2024, 2, 1, 1, 0, tzinfo=UTC)
    spend(ledger, 0.3)
    ledger.cancel(reservation)
    assert ledger.balance("alice", "demo").spent_epsilon == 0.3  # February is untouched
    clock.now = datetime(2024, 1, 31, 23, 30, tzinfo=UTC)
    assert ledger.balance("alice", "demo").spent_epsilon == 0.0  # January got it back
    assert ledger.verify() == []


def test_unknown_renewal_is_refused(ledger: Ledger) -> None:
    with pytest.raises(InvalidBudgetError, match="unknown renewal period 'year'") as refused:
        ledger.grant("alice", "demo", PrivacyLoss(1.0), renewal="year")
    assert refused.value.hint == "use one of day, week, month, or none"


@pytest.mark.parametrize(
    ("renewal", "day", "start"),
    [
        ("month", date(2024, 2, 29), "2024-02-01"),
        ("week", date(2024, 1, 1), "2024-01-01"),  # a Monday
        ("week", date(2023, 12, 31), "2023-12-25"),  # a Sunday: the week began the Monday before
        ("day", date(2024, 7, 4), "2024-07-04"),
        (None, date(2024, 7, 4), ""),
    ],
)
def test_period_start(renewal: str | None, day: date, start: str) -> None:
    now = datetime(day.year, day.month, day.day, 13, tzinfo=UTC)
    assert period_start(renewal, now) == start


# -- spending -------------------------------------------------------------------------------------


def test_reserve_debits_the_balance(ledger: Ledger) -> None:
    spend(ledger, 0.25, 1e-6)
    balance = ledger.balance("alice", "demo")
    assert (balance.spent_epsilon, balance.remaining_epsilon) == (0.25, 0.75)
    assert balance.spent_delta == 1e-6


def test_overspend_is_refused_and_spends_nothing(ledger: Ledger) -> None:
    spend(ledger, 0.75)
    before = ledger.balance("alice", "demo")
    with pytest.raises(BudgetExhaustedError):
        spend(ledger, 0.5)
    assert ledger.balance("alice", "demo") == before
    assert len(ledger.history("alice")) == 1
    assert ledger.verify() == []


def test_exhausted_error_says_what_was_asked_and_what_remains(ledger: Ledger) -> None:
    spend(ledger, 0.75)
    with pytest.raises(
        BudgetExhaustedError, match=r"asked for epsilon 0\.5 .*only epsilon 0\.25 .*remains"
    ) as e:
        spend(ledger, 0.5)
    assert e.value.hint == "ask an administrator for more budget (veil budget grant) or lower veil.epsilon"


def test_delta_overspend_is_refused(ledger: Ledger) -> None:
    with pytest.raises(BudgetExhaustedError, match="delta") as e:
        spend(ledger, 0.1, 2e-5)
    assert e.value.hint is not None
    assert "δ grant (veil budget grant … --delta 1e-5)" in e.value.hint and "lower veil.delta" in e.value.hint


def test_reserve_without_a_grant_is_refused(ledger: Ledger) -> None:
    with pytest.raises(BudgetExhaustedError, match='dataset "other"'):
        spend(ledger, 0.1, dataset="other")


def test_reserve_for_unknown_analyst_is_refused(ledger: Ledger) -> None:
    with pytest.raises(UnknownAnalystError, match='analyst "bob" does not exist') as raised:
        ledger.reserve("bob", "demo", PrivacyLoss(0.1), statement="SELECT 1")
    assert "veil analyst add bob" in (raised.value.hint or "")


def test_reserve_needs_positive_epsilon(ledger: Ledger) -> None:
    with pytest.raises(InvalidBudgetError, match="epsilon > 0"):
        spend(ledger, 0.0)


def test_exact_fit_is_accepted(ledger: Ledger) -> None:
    spend(ledger, 0.25)
    spend(ledger, 0.75, 1e-5)
    assert ledger.balance("alice", "demo").remaining_epsilon == 0.0


def test_ten_tenths_fit_into_one(ledger: Ledger) -> None:
    for _ in range(10):
        spend(ledger, 0.1)
    with pytest.raises(BudgetExhaustedError):
        spend(ledger, 1e-9)


def test_reserving_exactly_what_remains_is_accepted(ledger: Ledger) -> None:
    spend(ledger, 0.3)
    spend(ledger, 0.1)
    remaining = ledger.balance("alice", "demo").remaining_epsilon
    spend(ledger, remaining)
    assert ledger.balance("alice", "demo").spent_epsilon == 1.0


def test_cancel_releases_the_reservation(ledger: Ledger) -> None:
    reservation = spend(ledger, 1.0)
    ledger.cancel(reservation)
    assert ledger.balance("alice", "demo").spent_epsilon == 0.0
    spend(ledger, 1.0)


def test_cancel_restores_every_total(capped: Ledger) -> None:
    spend(capped, 0.2, 1e-6)
    before = (capped.balance("alice", "demo"), capped.balance("bob", "demo"), capped.cap("demo"))
    capped.cancel(spend(capped, 0.3, 2e-6, analyst="bob"))
    after = (capped.balance("alice", "demo"), capped.balance("bob", "demo"), capped.cap("demo"))
    assert after == before
    assert after[1].releases == 0
    assert capped.verify() == []


def test_commit_keeps_the_charge(ledger: Ledger) -> None:
    ledger.commit(spend(ledger, 0.5))
    assert ledger.balance("alice", "demo").spent_epsilon == 0.5


def test_reserved_but_not_committed_counts_as_spent_after_a_crash(ledgers: Ledgers, ledger: Ledger) -> None:
    spend(ledger, 0.5)
    restarted = ledgers.reopen(ledger)
    assert restarted.balance("alice", "demo").spent_epsilon == 0.5
    assert [s.state for s in restarted.history("alice")] == [SpendState.RESERVED]
    assert restarted.verify() == []


@pytest.mark.parametrize("close", [Ledger.commit, Ledger.cancel])
def test_a_closed_reservation_cannot_change_again(
    ledger: Ledger, close: Callable[[Ledger, int], None]
) -> None:
    reservation = spend(ledger, 0.5)
    ledger.commit(reservation)
    with pytest.raises(
        UnknownReservationError, match=f"reservation {reservation} is not open: it is already committed"
    ):
        close(ledger, reservation)


def test_unknown_reservation_is_refused(ledger: Ledger) -> None:
    with pytest.raises(UnknownReservationError, match="there is no reservation 42"):
        ledger.cancel(42)


def test_history_records_every_state_in_order(ledgers: Ledgers) -> None:
    start = datetime(2024, 5, 1, tzinfo=UTC)
    ledger = ledgers.new(clock=fixed_clock(start))
    ledger.add_analyst("alice", VERIFIER)
    ledger.grant("alice", "demo", PrivacyLoss(1.0))
    ledger.commit(first := spend(ledger, 0.1))
    ledger.cancel(spend(ledger, 0.2))
    spend(ledger, 0.3)
    history = ledger.history("alice")
    assert [(s.epsilon, s.state) for s in history] == [
        (0.1, SpendState.COMMITTED),
        (0.2, SpendState.CANCELLED),
        (0.3, SpendState.RESERVED),
    ]
    assert history[0].id == first
    assert history[0].statement == "SELECT COUNT(*) FROM t"
    assert history[0].updated_at > history[0].created_at


def test_history_filters_by_dataset(ledger: Ledger) -> None:
    ledger.grant("alice", "sales", PrivacyLoss(1.0))
    spend(ledger, 0.1)
    spend(ledger, 0.2, dataset="sales")
    assert [s.dataset for s in ledger.history("alice", "sales")] == ["sales"]
    assert len(ledger.history("alice")) == 2


# -- consistency ----------------------------------------------------------------------------------


def test_verify_finds_a_total_changed_behind_the_ledgers_back(ledger: Ledger) -> None:
    spend(ledger, 0.5)
    behind_the_back(
        ledger, f"UPDATE totals SET epsilon = '{to_text(charge_units(0.25))}' WHERE analyst = 'alice'"
    )
    problems = ledger.verify()
    assert len(problems) == 1
    assert "('alice', 'demo', '')" in problems[0]


@pytest.mark.parametrize(
    "amount", ["0.25", "0.5e0", "00.500000000000000000000000", "-0.500000000000000000000000"]
)
def test_the_store_refuses_an_amount_not_written_as_whole_quanta(ledger: Ledger, amount: str) -> None:
    """Amounts are the text of whole quanta, checked by the store itself in both dialects."""
    spend(ledger, 0.5)
    with pytest.raises(LedgerStoreError, match=r"(?i)check constraint"):
        behind_the_back(ledger, f"UPDATE totals SET epsilon = '{amount}' WHERE analyst = 'alice'")
    assert ledger.verify() == []


def test_verify_sees_one_consistent_moment_while_others_spend(ledger: Ledger) -> None:
    """verify() reads the spends and the totals in two statements; a reservation committed in
    between must not look like a broken total."""
    ledger.grant("alice", "demo", PrivacyLoss(100.0))
    done = threading.Event()

    def keep_spending() -> None:
        while not done.is_set():
            ledger.commit(spend(ledger, 0.001))

    spenders = [threading.Thread(target=keep_spending) for _ in range(2)]
    for spender in spenders:
        spender.start()
    try:
        reports = [ledger.verify() for _ in range(40)]
    finally:
        done.set()
        for spender in spenders:
            spender.join()
    assert [problems for problems in reports if problems] == []


def test_rebuild_totals_repairs_them(ledger: Ledger) -> None:
    ledger.commit(spend(ledger, 0.5))
    behind_the_back(ledger, "DELETE FROM totals")
    ledger.rebuild_totals()
    assert ledger.verify() == []
    assert ledger.balance("alice", "demo").spent_epsilon == 0.5


# -- concurrency ----------------------------------------------------------------------------------


def race(
    ledgers: list[Ledger], attempts: int, epsilon: float, *, analysts: tuple[str, ...] = ("alice",)
) -> int:
    """``attempts`` threads, all released at once, each reserving ``epsilon``; returns how many got it."""
    barrier = threading.Barrier(attempts)
    successes: list[int] = []
    refusals: list[BudgetExhaustedError] = []

    def attempt(ledger: Ledger, analyst: str) -> None:
        barrier.wait()
        try:
            successes.append(ledger.reserve(analyst, "demo", PrivacyLoss(epsilon), statement="race"))
        except BudgetExhaustedError as refused:
            refusals.append(refused)

    threads = [
        threading.Thread(target=attempt, args=(ledgers[i % len(ledgers)], analysts[i % len(analysts)]))
        for i in range(attempts)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(successes) + len(refusals) == attempts
    return len(successes)


def test_fifty_threads_never_overspend(ledger: Ledger) -> None:
    assert race([ledger], attempts=50, epsilon=0.1) == 10
    balance = ledger.balance("alice", "demo")
    assert balance.spent_epsilon == balance.granted_epsilon == 1.0
    assert ledger.verify() == []


def test_two_ledger_objects_on_one_store_never_overspend(ledgers: Ledgers, ledger: Ledger) -> None:
    assert race([ledger, ledgers.reopen(ledger)], attempts=30, epsilon=0.1) == 10
    balance = ledgers.reopen(ledger).balance("alice", "demo")
    assert balance.spent_epsilon == balance.granted_epsilon


def test_threads_of_two_analysts_never_exceed_the_cap(capped: Ledger) -> None:
    assert race([capped], attempts=40, epsilon=0.1, analysts=("alice", "bob")) == 10
    assert capped.cap("demo").spent_epsilon == 1.0
    assert capped.verify() == []


@pytest.mark.parametrize("closes", [["cancel"] * 8, ["commit", "cancel"] * 4])
def test_a_reservation_closed_by_many_threads_at_once_closes_once(ledger: Ledger, closes: list[str]) -> None:
    """One wins; the others are told the reservation is no longer open (not a store error)."""
    reservation = spend(ledger, 0.5)
    barrier = threading.Barrier(len(closes))
    outcomes: list[str] = []

    def close(action: str) -> None:
        barrier.wait()
        try:
            getattr(ledger, action)(reservation)
            outcomes.append(action)
        except UnknownReservationError:
            outcomes.append("refused")

    threads = [threading.Thread(target=close, args=(action,)) for action in closes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count("refused") == len(closes) - 1
    (final,) = ledger.history("alice")
    expected_spent = 0.0 if final.state == SpendState.CANCELLED else 0.5
    assert ledger.balance("alice", "demo").spent_epsilon == expected_spent
    assert ledger.verify() == []


PROCESS_WORKER = textwrap.dedent(
    """
    import sys
    import threading

    from budget.errors import BudgetExhaustedError
    from budget.ledger import Ledger
    from budget.loss import PrivacyLoss

    location, schema, threads, attempts = sys.argv[1], sys.argv[2] or None, int(sys.argv[3]), int(sys.argv[4])
    ledger = Ledger.open(location, schema=schema)
    go = threading.Event()
    won = []

    def work():
        go.wait()
        for _ in range(attempts):
            try:
                won.append(ledger.reserve("alice", "demo", PrivacyLoss(0.1), statement="process"))
            except BudgetExhaustedError:
                pass

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    print("ready", flush=True)
    sys.stdin.readline()
    go.set()
    for worker in workers:
        worker.join()
    ledger.close()
    print(len(won), flush=True)
    """
)
PROCESSES, THREADS_PER_PROCESS, ATTEMPTS_PER_THREAD = 4, 4, 4


def test_threads_in_separate_processes_never_overspend(ledgers: Ledgers, ledger: Ledger) -> None:
    """4 processes × 4 threads × 4 attempts of 0.1 against a grant of 1.0, all let go at once."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    arguments = [ledger.location, schema_of(ledger) or "", str(THREADS_PER_PROCESS), str(ATTEMPTS_PER_THREAD)]
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", PROCESS_WORKER, *arguments],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(PROCESSES)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None and worker.stdout.readline() == "ready\n"
        won = [int(worker.communicate("go\n", timeout=60)[0]) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    assert [worker.returncode for worker in workers] == [0] * PROCESSES
    assert sum(won) == 10
    restarted = ledgers.reopen(ledger)
    assert restarted.balance("alice", "demo").spent_epsilon == 1.0
    assert len(restarted.history("alice")) == 10
    assert restarted.verify() == []


def test_a_revoke_down_to_the_spend_never_shows_more_spent_than_granted(ledgers: Ledgers) -> None:
    """Found by the property below on PostgreSQL (issue 13): granted 1.0505168702507381 against spent
    1.0505168702507384 — the grant was shown rounded to nearest, the spend rounded up. Both are now
    rounded up in the ledger's decimal sense, so equal decimals show as equal floats."""
    ledger = ledgers.new()
    ledger.add_analyst("alice", VERIFIER)
    ledger.grant("alice", "demo", PrivacyLoss(1.5, 1e-5))
    for amount in (0.6875, 0.3630168702507382):
        spend(ledger, amount)
    balance = ledger.revoke("alice", "demo")
    assert (
        balance.spent_epsilon
        == balance.granted_epsilon
        == float_up(charge_units(0.6875) + charge_units(0.3630168702507382))
    )
    assert balance.remaining_epsilon == 0


# -- properties -----------------------------------------------------------------------------------

operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("reserve"),
            st.sampled_from(["alice", "bob"]),
            st.floats(min_value=0.01, max_value=0.7, allow_nan=False),
            st.sampled_from([0.0, 1e-6, 4e-6]),
        ),
        st.tuples(st.sampled_from(["commit", "cancel"]), st.just(""), st.integers(0, 20), st.just(0.0)),
        st.tuples(
            st.sampled_from(["grant", "revoke"]),
            st.sampled_from(["alice", "bob"]),
            st.sampled_from([0.0, 0.1, 0.35, 1.0]),  # 0.0: revoke everything unspent
            st.just(0.0),
        ),
        st.tuples(st.just("cap"), st.just(""), st.sampled_from([0.0, 0.5, 1.5, 3.0]), st.just(0.0)),
        st.tuples(st.just("tick"), st.just(""), st.sampled_from([1, 12, 24 * 9]), st.just(0.0)),
    ),
    max_size=15,
)


def exact_sum(amounts: Iterable[float]) -> Fraction:
    """The model's sum: the decimals of the floats (as the ledger reads them), added exactly."""
    return sum((Fraction(as_decimal(amount)) for amount in amounts), Fraction(0))


def smallest_float_at_least(amount: Fraction) -> float:
    """What the ledger reports as spent: never below the exact decimal sum (read as a decimal)."""
    value = float(amount)
    return value if Fraction(as_decimal(value)) >= amount else math.nextafter(value, math.inf)


@settings(
    max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(grant=st.floats(min_value=0.1, max_value=2.0, allow_nan=False), steps=operations)
def test_no_sequence_of_operations_overspends_or_breaks_the_totals(
    ledgers: Ledgers, grant: float, steps: list[tuple[str, str, float, float]]
) -> None:
    """alice's grant renews monthly, bob's never; the clock starts two days before a month ends.

    After every step the balances agree with a model of the counting spends (exact decimals), no
    balance exceeds its grant, no accepted reservation took the dataset past its cap, and at the
    end :meth:`Ledger.verify` finds every running total equal to what the spends say.
    """
    clock = Clock(datetime(2024, 1, 30, 12, tzinfo=UTC))
    ledger = ledgers.new(clock=clock)
    renewal = {"alice": "month", "bob": None}
    for analyst in renewal:
        ledger.add_analyst(analyst, VERIFIER)
        ledger.grant(analyst, "demo", PrivacyLoss(grant, 1e-5), renewal=renewal[analyst])
    counting: dict[int, tuple[str, str, float]] = {}  # reserved or committed: (analyst, period, ε)
    still_open: set[int] = set()
    reservations: list[int] = []
    cap: Fraction | None = None
    for action, analyst, amount, delta in steps:
        if action == "reserve":
            try:
                reservation = spend(ledger, amount, delta, analyst=analyst)
            except BudgetExhaustedError:
                continue
            reservations.append(reservation)
            still_open.add(reservation)
            counting[reservation] = (analyst, period_start(renewal[analyst], clock.now), amount)
            if cap is not None:
                assert exact_sum(e for _, _, e in counting.values()) <= cap
        elif action in ("commit", "cancel") and reservations:
            reservation = reservations[int(amount) % len(reservations)]
            if reservation not in still_open:
                with pytest.raises(UnknownReservationError):
                    getattr(ledger, action)(reservation)
                continue
            getattr(ledger, action)(reservation)
            still_open.remove(reservation)
            if action == "cancel":
                del counting[reservation]
        elif action == "grant":
            ledger.grant(analyst, "demo", PrivacyLoss(amount or 0.2), renewal=renewal[analyst])
        elif action == "revoke":
            ledger.revoke(analyst, "demo", PrivacyLoss(amount) if amount else None)
        elif action == "cap":
            ledger.set_cap("demo", PrivacyLoss(amount) if amount else None)
            cap = Fraction(as_decimal(amount)) if amount else None
        elif action == "tick":
            clock.now += timedelta(hours=amount)
        for name in renewal:
            balance = ledger.balance(name, "demo")
            period = period_start(renewal[name], clock.now)
            assert balance.spent_epsilon <= balance.granted_epsilon
            assert balance.spent_delta <= balance.granted_delta
            spent = exact_sum(e for who, p, e in counting.values() if (who, p) == (name, period))
            assert balance.spent_epsilon == smallest_float_at_least(spent)  # exact decimals, rounded up
        assert ledger.cap("demo").spent_epsilon == smallest_float_at_least(
            exact_sum(e for _, _, e in counting.values())
        )
    assert ledger.verify() == []
    ledger.close()
