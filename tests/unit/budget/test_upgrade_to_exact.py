"""The upgrade from version 4 (float grants and spends, 28-digit decimal totals) to exact amounts.

Every test starts from the version-4 ledger of tests/unit/budget/ledger_v4.py, made with version 4's
own DDL, and opens it with today's Veil. tests/postgres/test_upgrade_to_exact_postgres.py runs them
all again on PostgreSQL.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction

import pytest

from budget.amounts import SCALE, from_text
from budget.errors import BudgetExhaustedError, InvalidBudgetError, LedgerStoreError
from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from budget.partitions import Partition
from budget.schema import SCHEMA_VERSION
from budget.store import open_store
from tests.unit.budget import ledger_v4
from tests.unit.budget.test_ledger import Clock, Ledgers, behind_the_back, in_store
from tests.unit.budget.test_ledger import ledgers as ledgers  # the fixture, for SQLite

JANUARY = datetime(2026, 1, 15, tzinfo=UTC)  # bob's monthly grant is in its January period
TINY_SPEND = 8  # the spend of 1e-31, below the quantum


@pytest.fixture
def old(ledgers: Ledgers) -> tuple[str, str | None]:
    return ledgers.version_4()


@pytest.fixture
def upgraded(ledgers: Ledgers, old: tuple[str, str | None]) -> Ledger:
    return ledgers.open(*old, clock=Clock(JANUARY))


def test_opening_a_version_4_ledger_upgrades_it_and_says_so(upgraded: Ledger) -> None:
    assert upgraded.upgraded_from == 4
    assert upgraded.upgrade_note is not None
    assert f"from schema version 4 to {SCHEMA_VERSION}" in upgraded.upgrade_note
    assert "balances and history are unchanged" in upgraded.upgrade_note
    with upgraded.store.transaction(write=False) as tx:
        assert tx.execute("SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]


def test_opening_it_again_upgrades_nothing(ledgers: Ledgers, old: tuple[str, str | None]) -> None:
    ledgers.open(*old).close()
    assert ledgers.open(*old).upgrade_note is None


@pytest.mark.parametrize("pair", [pair for pair in ledger_v4.BALANCES if pair[1] != "tiny"])
def test_the_upgrade_keeps_every_balance(upgraded: Ledger, pair: tuple[str, str]) -> None:
    balance = upgraded.balance(*pair)
    granted_epsilon, spent_epsilon, granted_delta, spent_delta, releases = ledger_v4.BALANCES[pair]
    assert (balance.granted_epsilon, balance.spent_epsilon) == (granted_epsilon, spent_epsilon)
    assert (balance.granted_delta, balance.spent_delta) == (granted_delta, spent_delta)
    assert balance.releases == releases


def test_the_upgrade_charges_a_spend_below_the_quantum_one_quantum(upgraded: Ledger) -> None:
    """Version 4 held a spend of 1e-31; today's ledger cannot hold less than 1e-30, and rounds it up
    (against the analyst), never away."""
    assert upgraded.balance("alice", "tiny").spent_epsilon == 1e-30
    tiny = next(spend for spend in upgraded.history("alice") if spend.id == TINY_SPEND)
    assert tiny.epsilon == 1e-30 and tiny.charge is not None and tiny.charge.epsilon == 1


def test_the_upgrade_keeps_the_history(upgraded: Ledger) -> None:
    history = {spend.id: spend for name in ("alice", "bob") for spend in upgraded.history(name)}
    assert sorted(history) == [row[0] for row in ledger_v4.SPENDS]
    for row in ledger_v4.SPENDS:
        spend = history[row[0]]
        epsilon = 1e-30 if row[0] == TINY_SPEND else row[4]
        assert (spend.analyst, spend.dataset, spend.period) == row[1:4]
        assert (spend.epsilon, spend.delta, spend.rho, spend.rho_delta) == (epsilon, *row[5:8])
        assert (spend.statement, spend.state.value) == row[8:10]
        assert spend.created_at == spend.updated_at == datetime.fromisoformat(ledger_v4.AT)
        stored = Partition.from_stored(str(row[12]), str(row[13]))
        assert spend.partition == stored


def test_the_upgrade_keeps_the_running_totals(upgraded: Ledger) -> None:
    """The exact part of every totals and partition_totals row — releases, ε, δ and the δ outside ρ —
    equals what version 4 stored (as 28-digit decimal text), now in quanta."""
    with upgraded.store.transaction(write=False) as tx:
        rows = {
            tuple(row[:3]): row[3:]
            for row in tx.execute(
                "SELECT analyst, dataset, period, releases, epsilon, delta, zcdp_delta FROM totals"
            )
        }
        rows.update(
            {
                tuple(row[:5]): row[5:]
                for row in tx.execute(
                    "SELECT analyst, dataset, period, partition_column, partition_value, releases, epsilon,"
                    " delta, zcdp_delta FROM partition_totals"
                )
            }
        )
    expected = {key: (row[0], row[1], row[2], row[6]) for key, row in ledger_v4.totals().items()}
    assert rows.keys() == expected.keys()
    for key, (releases, *amounts) in expected.items():
        have = rows[key]
        assert int(have[0]) == releases
        assert [from_text(value) for value in have[1:]] == [_quanta_up(str(amount)) for amount in amounts]
    assert upgraded.verify() == []


def _quanta_up(decimal_text: str) -> int:
    """Version 4's decimal text in quanta: exact, except the 1e-31 of ``tiny``, charged one quantum."""
    return math.ceil(Fraction(Decimal(decimal_text)) * SCALE)


def test_the_upgrade_keeps_caps_the_audit_log_and_stored_answers(upgraded: Ledger) -> None:
    demo = upgraded.cap("demo")
    assert (demo.cap_epsilon, demo.cap_delta, demo.spent_epsilon) == (5.0, 1e-06, 0.9033333333333333)
    assert upgraded.cap("tiny").cap_epsilon is None  # removed before the upgrade, still removed
    assert [entry.statement for entry in upgraded.audit_log.entries()] == ["SELECT COUNT(*) FROM patients"]
    with upgraded.store.transaction(write=False) as tx:
        (answer,) = tx.execute(
            "SELECT a.spend_id, s.statement FROM answers a JOIN spends s ON s.id = a.spend_id"
        )
    assert answer == (1, "SELECT COUNT(*) FROM patients")


def test_an_upgraded_ledger_spends_exactly_what_is_left(upgraded: Ledger) -> None:
    """alice has 1.2 − 0.57 = 0.63 left on demo: exactly that is accepted, then not one quantum more;
    new spends get new ids after the copied ones."""
    left = upgraded.balance("alice", "demo").remaining_epsilon
    assert left == 0.63
    reservation = upgraded.reserve("alice", "demo", PrivacyLoss(left), statement="SELECT 9")
    assert reservation == len(ledger_v4.SPENDS) + 1
    with pytest.raises(BudgetExhaustedError):
        upgraded.reserve("alice", "demo", PrivacyLoss(1e-30), statement="SELECT 10")
    with pytest.raises(InvalidBudgetError, match="below the ledger's quantum"):
        upgraded.reserve("alice", "demo", PrivacyLoss(1e-31), statement="SELECT 11")
    upgraded.commit(reservation)
    upgraded.grant("alice", "demo", PrivacyLoss(0.1))
    assert upgraded.balance("alice", "demo").remaining_epsilon == 0.1
    assert upgraded.verify() == []


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("DELETE FROM grants", "grants are append-only"),
        ("UPDATE caps SET epsilon = NULL", "caps are append-only"),
        ("DELETE FROM spends", "spends are append-only"),
        (
            "UPDATE spends SET epsilon = '0.000000000000000000000000000001' WHERE id = 4",
            "only a reserved spend may",
        ),
    ],
)
def test_an_upgraded_ledger_is_still_append_only(upgraded: Ledger, statement: str, message: str) -> None:
    with pytest.raises(LedgerStoreError, match=message):
        behind_the_back(upgraded, statement)


def test_a_failed_upgrade_leaves_the_version_4_ledger_as_it_was(
    ledgers: Ledgers, old: tuple[str, str | None]
) -> None:
    """The upgrade is one transaction: a row today's schema refuses (here a spend whose δ outside ρ
    exceeds its δ, which version 4 did not check) fails it, and nothing of it remains."""
    in_store(
        *old,
        "INSERT INTO spends (analyst, dataset, period, epsilon, delta, rho, rho_delta, statement, state,"
        " created_at, updated_at) VALUES ('alice', 'demo', '', 0.1, 0.0, 0.5, 1e-9, 'SELECT 1', 'committed',"
        " '2026-01-10', '2026-01-10')",
    )
    with pytest.raises(LedgerStoreError, match=r"(?i)check constraint"):
        ledgers.open(*old)
    store = open_store(old[0], schema=old[1])
    try:
        with store.transaction(write=False) as tx:
            assert tx.execute("SELECT version FROM schema_version") == [(4,)]
            assert tx.execute("SELECT epsilon, delta FROM grants WHERE id = 2") == [(0.3, 1e-12)]
            assert len(tx.execute("SELECT id FROM spends")) == len(ledger_v4.SPENDS) + 1
            assert len(tx.execute("SELECT * FROM totals")) == len(
                [k for k in ledger_v4.totals() if len(k) == 3]
            )
        assert "spends_v4" not in store.tables()
    finally:
        store.close()


def test_the_upgrade_rounds_what_is_finer_than_the_quantum_against_the_analyst(
    ledgers: Ledgers, old: tuple[str, str | None]
) -> None:
    """A grant or cap of 1.5 quanta becomes 1 (never more than was granted), a revoke or a spend of 1.5
    quanta becomes 2 (never less than was taken or spent)."""
    amount = 1.5e-30
    in_store(
        *old,
        f"INSERT INTO grants VALUES (6, 'alice', 'tiny', 'grant', {amount}, {amount}, NULL, '{ledger_v4.AT}')",
        f"INSERT INTO grants VALUES (7, 'alice', 'tiny', 'revoke', {amount}, {amount}, NULL, '{ledger_v4.AT}')",
        f"INSERT INTO caps VALUES (4, 'other', {amount}, {amount}, '{ledger_v4.AT}')",
        "INSERT INTO spends VALUES (9, 'alice', 'tiny', '', 1.5e-30, 1.5e-30, NULL, 1.5e-30, 'SELECT 9',"
        f" 'committed', '{ledger_v4.AT}', '{ledger_v4.AT}', '', '')",
    )
    upgraded = ledgers.open(*old, clock=Clock(JANUARY))
    with upgraded.store.transaction(write=False) as tx:
        grants = tx.execute("SELECT kind, epsilon, delta FROM grants WHERE id IN (6, 7) ORDER BY id")
        caps = tx.execute("SELECT epsilon, delta FROM caps WHERE id = 4")
        spends = tx.execute("SELECT epsilon, delta, rho_delta FROM spends WHERE id = 9")
    assert [(kind, from_text(e), from_text(d)) for kind, e, d in grants] == [
        ("grant", 1, 1),
        ("revoke", 2, 2),
    ]
    assert [tuple(from_text(value) for value in row) for row in caps] == [(1, 1)]
    assert [tuple(from_text(value) for value in row) for row in spends] == [(2, 2, 2)]
    assert upgraded.verify() == []
