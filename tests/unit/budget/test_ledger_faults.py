"""Ledger faults are classified (budget/store.py, postgres_store.py) so that the proxy can give each its
SQLSTATE (proxy/errors.py); the errors here are SQLite's own, provoked for real."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from budget.errors import LedgerStoreError
from budget.ledger import Ledger
from budget.store import _sqlite_fault, open_store
from proxy.errors import ledger_fault


def test_a_full_database_is_full(tmp_path: Path) -> None:
    with contextlib.closing(sqlite3.connect(tmp_path / "small.db")) as db:
        db.execute("PRAGMA max_page_count = 2")
        db.execute("CREATE TABLE t (x)")
        with pytest.raises(sqlite3.DatabaseError) as full:
            db.execute("INSERT INTO t SELECT randomblob(100000)")
    assert _sqlite_fault(full.value.sqlite_errorname) == "full"


def test_a_database_another_writer_holds_is_locked(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    with (
        contextlib.closing(sqlite3.connect(path, timeout=0)) as first,
        contextlib.closing(sqlite3.connect(path, timeout=0)) as second,
    ):
        first.execute("BEGIN IMMEDIATE")
        with pytest.raises(sqlite3.OperationalError) as busy:
            second.execute("BEGIN IMMEDIATE")
    assert _sqlite_fault(busy.value.sqlite_errorname) == "locked"


@pytest.mark.parametrize(
    "fault, sqlstate",
    [("locked", "55P03"), ("full", "53100"), ("io", "58030"), ("lost", "08006"), ("unavailable", "58030")],
)
def test_each_fault_has_its_sqlstate_and_a_message_without_paths(fault: str, sqlstate: str) -> None:
    error = ledger_fault(LedgerStoreError("cannot use the ledger at /srv/veil/ledger.sqlite: x", fault=fault))
    assert error.sqlstate == sqlstate
    assert "/srv" not in error.message


def test_the_store_reports_a_lock_another_process_holds_as_locked(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    Ledger.create(path).close()
    store = open_store(path, lock_timeout=0.05)
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=0)) as other:
            other.execute("BEGIN IMMEDIATE")
            with pytest.raises(LedgerStoreError) as held, store.transaction(write=True):
                pass
    finally:
        store.close()
    assert held.value.fault == "locked" and store.lock_timeout == 0.05
    assert "readable and writable" in (held.value.hint or "")
