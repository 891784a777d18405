"""What only the SQLite store has: a file, WAL, errors about files, and the upgrade of a version-1
ledger (which only ever existed in SQLite). The ledger's contract on both stores is
tests/unit/budget/test_ledger.py."""

from __future__ import annotations

import contextlib
import random
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from budget.errors import BudgetExhaustedError, LedgerStoreError
from budget.ledger import Ledger, SpendState
from budget.loss import PrivacyLoss
from budget.schema import SCHEMA_VERSION
from budget.store import SQLiteStore, open_store
from tests.unit.budget.test_ledger import VERIFIER, spend


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    ledger.add_analyst("alice", VERIFIER)
    ledger.grant("alice", "demo", PrivacyLoss(1.0, 1e-5))
    yield ledger
    ledger.close()


def test_a_path_opens_an_sqlite_store(tmp_path: Path) -> None:
    assert isinstance(open_store(tmp_path / "x.sqlite", create=True), SQLiteStore)


def test_open_requires_the_file_to_exist(tmp_path: Path) -> None:
    missing = tmp_path / "missing.sqlite"
    with pytest.raises(LedgerStoreError, match=r"no ledger at .*missing\.sqlite; run `veil init-demo`"):
        Ledger.open(missing)
    assert not missing.exists()


def test_open_refuses_a_file_that_is_not_sqlite(tmp_path: Path) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_bytes(b"not a database " * 300)
    with pytest.raises(LedgerStoreError, match=r"notes\.txt is not a Veil ledger") as raised:
        Ledger.open(junk)
    assert "veil init-demo" in (raised.value.hint or "")


def test_open_refuses_a_ledger_whose_schema_version_is_another_applications(tmp_path: Path) -> None:
    path = tmp_path / "borrowed.sqlite"
    Ledger.create(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE schema_version SET application = 'other'")
    conn.close()
    with pytest.raises(
        LedgerStoreError,
        match=r"borrowed\.sqlite is not a Veil ledger \(its schema_version table is not Veil's\)",
    ):
        Ledger.open(path)


def test_create_refuses_a_foreign_sqlite_database(tmp_path: Path) -> None:
    other = tmp_path / "app.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (id INTEGER)")
    conn.close()
    with pytest.raises(LedgerStoreError, match=r"app\.sqlite is not a Veil ledger \(it already holds"):
        Ledger.create(other)


def test_uses_wal_journal_mode(ledger: Ledger) -> None:
    conn = sqlite3.connect(ledger.path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        conn.close()


def test_spends_cannot_be_deleted_with_the_sqlite3_shell(ledger: Ledger) -> None:
    spend(ledger, 0.5)
    conn = sqlite3.connect(ledger.path)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("DELETE FROM spends")
    finally:
        conn.close()


# -- upgrade from version 1 -----------------------------------------------------------------------

# Version 1's tables and triggers, as `git show ec9fa8c~1:budget/ledger.py` created them.
V1_SCHEMA = (
    "CREATE TABLE schema_version (application TEXT NOT NULL, version INTEGER NOT NULL)",
    "CREATE TABLE analysts (name TEXT PRIMARY KEY, verifier TEXT NOT NULL, created_at TEXT NOT NULL)",
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
T0 = "2024-03-01T09:00:00+00:00"
V1_SPENDS = (  # analyst, dataset, epsilon, delta, statement, state
    ("alice", "demo", 0.1, 0.0, "SELECT COUNT(*) FROM visits", "committed"),
    ("alice", "demo", 0.2, 1e-6, "SELECT AVG(age) FROM patients", "cancelled"),
    ("alice", "demo", 0.3, 0.0, "SELECT SUM(cost) FROM visits", "reserved"),
    ("bob", "demo", 0.25, 0.0, "SELECT COUNT(*) FROM patients", "committed"),
    ("alice", "sales", 0.5, 0.0, "SELECT COUNT(*) FROM orders", "committed"),
)


def build_v1_ledger(path: Path) -> None:
    """A version-1 ledger as an older Veil left it: two analysts, three grants, spends in every state."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        for statement in V1_SCHEMA:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES ('veil-ledger', 1)")
        for name in ("alice", "bob"):
            conn.execute("INSERT INTO analysts VALUES (?, ?, ?)", (name, VERIFIER, T0))
        conn.executemany(
            "INSERT INTO grants (analyst, dataset, epsilon, delta, created_at) VALUES (?, ?, ?, ?, ?)",
            [
                ("alice", "demo", 1.0, 1e-5, T0),
                ("bob", "demo", 0.5, 0.0, T0),
                ("alice", "sales", 0.5, 0.0, T0),
            ],
        )
        conn.executemany(
            "INSERT INTO spends (analyst, dataset, epsilon, delta, statement, state, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(*row, T0, "2024-03-01T09:00:01+00:00") for row in V1_SPENDS],
        )
    finally:
        conn.close()


@pytest.fixture
def upgraded(tmp_path: Path) -> Iterator[Ledger]:
    path = tmp_path / "v1.sqlite"
    build_v1_ledger(path)
    ledger = Ledger.open(path)
    yield ledger
    ledger.close()


def test_open_upgrades_a_version_1_ledger(upgraded: Ledger) -> None:
    conn = sqlite3.connect(upgraded.path)
    try:
        assert conn.execute("SELECT application, version FROM schema_version").fetchall() == [
            ("veil-ledger", SCHEMA_VERSION)
        ]
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()
    assert {"grants", "spends", "caps", "totals", "audit", "answers"} <= tables
    assert not {"grants_v1", "spends_v1"} & tables
    assert upgraded.verify() == []


def test_the_upgrade_keeps_every_balance(upgraded: Ledger) -> None:
    balances = {
        (b.analyst, b.dataset): (b.granted_epsilon, b.spent_epsilon, b.remaining_epsilon, b.spent_delta)
        for b in upgraded.balances()
    }
    assert balances == {
        ("alice", "demo"): (1.0, 0.4, 0.6, 0.0),  # 0.1 committed + 0.3 still reserved; 0.2 cancelled
        ("alice", "sales"): (0.5, 0.5, 0.0, 0.0),
        ("bob", "demo"): (0.5, 0.25, 0.25, 0.0),
    }
    assert upgraded.balance("alice", "demo").granted_delta == 1e-5
    assert upgraded.cap("demo").spent_epsilon == 0.65  # dataset-wide totals are rebuilt too


def test_the_upgrade_keeps_the_history(upgraded: Ledger) -> None:
    history = upgraded.history("alice") + upgraded.history("bob")
    assert sorted(
        (s.id, s.analyst, s.dataset, s.epsilon, s.delta, s.statement, s.state) for s in history
    ) == [(number, *row[:5], SpendState(row[5])) for number, row in enumerate(V1_SPENDS, start=1)]
    assert {(s.created_at, s.period) for s in history} == {(datetime(2024, 3, 1, 9, tzinfo=UTC), "")}


def test_an_upgraded_ledger_keeps_spending_and_refusing(upgraded: Ledger) -> None:
    reserved = next(s.id for s in upgraded.history("alice") if s.state == SpendState.RESERVED)
    upgraded.commit(reserved)
    new = spend(upgraded, 0.6)
    assert new == len(V1_SPENDS) + 1  # ids continue after the old ones
    with pytest.raises(BudgetExhaustedError):
        spend(upgraded, 0.01)
    assert upgraded.verify() == []


def test_an_upgraded_ledger_is_still_append_only(upgraded: Ledger) -> None:
    conn = sqlite3.connect(upgraded.path)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="spends are append-only"):
            conn.execute("DELETE FROM spends")
        with pytest.raises(sqlite3.IntegrityError, match="grants are append-only"):
            conn.execute("UPDATE grants SET epsilon = 9")
    finally:
        conn.close()


def test_create_upgrades_a_version_1_ledger_too(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite"
    build_v1_ledger(path)
    ledger = Ledger.create(path)
    try:
        assert ledger.balance("bob", "demo").spent_epsilon == 0.25
        assert ledger.verify() == []
    finally:
        ledger.close()


def test_opening_an_upgraded_ledger_again_changes_nothing(upgraded: Ledger) -> None:
    before = upgraded.balances()
    again = Ledger.open(upgraded.path)
    try:
        assert again.balances() == before
    finally:
        again.close()


@pytest.mark.parametrize(
    ("start", "listed"),
    [
        (8, r"\*\*\* in database main \*\*\*\nOn tree page"),
        (0, "database disk image is malformed"),
    ],  # 0: the check itself fails (SQLITE_CORRUPT)
)
def test_the_integrity_check_reports_a_damaged_page(tmp_path: Path, start: int, listed: str) -> None:
    """In process, the check tests/robustness/test_ledger_integrity.py makes through ``veil serve``: random
    bytes over the analysts' cells make ``quick_check`` list the damage; over the page's header too, they
    make the check itself fail."""
    path = tmp_path / "ledger.sqlite"
    made = Ledger.create(path)
    made.add_analyst("alice", VERIFIER)
    made.close()
    with contextlib.closing(sqlite3.connect(path)) as db:
        ((root,),) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'analysts'").fetchall()
        (page_size,) = db.execute("PRAGMA page_size").fetchone()
    with path.open("r+b") as file:
        file.seek((root - 1) * page_size + start)
        file.write(random.Random(0).randbytes(page_size - start))
    store = open_store(path)
    try:
        with pytest.raises(LedgerStoreError, match=rf"ledger\.sqlite is damaged: {listed}") as damaged:
            store.check_integrity()
    finally:
        store.close()
    assert damaged.value.fault == "io"


def test_the_integrity_check_passes_a_sound_ledger(ledger: Ledger) -> None:
    ledger.store.check_integrity()


def test_a_closed_store_opens_fresh_connections_when_used_again(ledger: Ledger) -> None:
    """close() shuts every thread's connection; a later transaction opens a new one, in any thread."""
    spend(ledger, 0.25)
    ledger.store.close()
    assert ledger.balance("alice", "demo").spent_epsilon == 0.25
    spend(ledger, 0.25)
    assert ledger.balance("alice", "demo").spent_epsilon == 0.5
