"""The SQLite store's classification of faults and what it tells the administrator, and which of its own
reads never take the write lock (listing tables, the integrity check).

Found by mutation testing (issue 21): the fault names SQLite reports beyond the few provoked in
test_ledger_faults.py, the hints, and the read paths were not pinned."""

from __future__ import annotations

import contextlib
import random
import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from budget.errors import LedgerStoreError
from budget.ledger import Ledger
from budget.schema import TABLES
from budget.store import SQLiteStore, Transaction, _sqlite_fault, open_store

DAMAGED_HINT = "restore the ledger from a backup (sqlite3 ledger.sqlite '.recover' may save what is left)"
ACCESS_HINT = "check that the file and its directory are readable and writable and not on a network share"
NOT_A_LEDGER_HINT = (
    "set ledger.path in veil.toml to another file, or move this one aside and run `veil init-demo`"
)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    location = tmp_path / "ledger.sqlite"
    Ledger.create(location).close()
    return location


@pytest.fixture
def store(path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(path, lock_timeout=0.2)
    yield opened
    opened.close()


@contextlib.contextmanager
def write_lock_held(path: Path) -> Iterator[None]:
    """SQLite's write lock, held by another connection (as another process would) until the block ends."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        connection.execute("COMMIT")
        connection.close()


@pytest.mark.parametrize(
    ("name", "fault"),
    [
        ("SQLITE_BUSY", "locked"),
        ("SQLITE_BUSY_SNAPSHOT", "locked"),
        ("SQLITE_LOCKED", "locked"),
        ("SQLITE_LOCKED_SHAREDCACHE", "locked"),
        ("SQLITE_FULL", "full"),
        ("SQLITE_IOERR", "io"),
        ("SQLITE_IOERR_WRITE", "io"),
        ("SQLITE_CORRUPT", "io"),
        ("SQLITE_CORRUPT_INDEX", "io"),
        ("SQLITE_CANTOPEN", "io"),
        ("SQLITE_READONLY", "unavailable"),
        ("SQLITE_ERROR", "unavailable"),
        ("", "unavailable"),
    ],
)
def test_every_sqlite_error_name_has_its_fault(name: str, fault: str) -> None:
    """Each fault becomes its own SQLSTATE (proxy/errors.py): a lock is worth retrying, a damaged file is not."""
    assert _sqlite_fault(name) == fault


def test_a_file_that_is_not_sqlite_is_named_and_explained(tmp_path: Path) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_bytes(b"not a database " * 300)
    with pytest.raises(LedgerStoreError) as refused:
        Ledger.open(junk)
    assert refused.value.message == f"{junk} is not a Veil ledger (it is not an SQLite database)"
    assert refused.value.hint == NOT_A_LEDGER_HINT


def test_an_error_sqlite_gives_no_name_is_unavailable_and_says_what_to_check(store: SQLiteStore) -> None:
    """A statement the sqlite3 module itself refuses (no SQLite error name) is still a store error."""
    with pytest.raises(LedgerStoreError) as failed, store.transaction(write=False) as transaction:
        transaction.execute("SELECT ?")
    assert failed.value.fault == "unavailable"
    assert failed.value.message.startswith(
        f"cannot use the ledger at {store.path}: Incorrect number of bindings"
    )
    assert failed.value.hint == ACCESS_HINT


def test_a_damaged_page_read_in_a_transaction_is_io_and_says_to_restore(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as db:
        ((root,),) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'analysts'").fetchall()
        (page_size,) = db.execute("PRAGMA page_size").fetchone()
    with path.open("r+b") as file:
        file.seek((root - 1) * page_size)
        file.write(random.Random(0).randbytes(page_size))
    store = open_store(path)
    try:
        with pytest.raises(LedgerStoreError) as damaged, store.transaction(write=False) as transaction:
            transaction.execute("SELECT * FROM analysts")
        with pytest.raises(LedgerStoreError) as checked:
            store.check_integrity()
    finally:
        store.close()
    assert damaged.value.fault == "io" and damaged.value.hint == DAMAGED_HINT
    assert "database disk image is malformed" in damaged.value.message
    assert checked.value.fault == "io" and checked.value.hint == DAMAGED_HINT


def test_tables_lists_the_ledgers_tables(store: SQLiteStore) -> None:
    assert store.tables() >= set(TABLES)
    assert {"analysts", "spends", "audit", "answers"} <= store.tables()


def test_tables_and_the_integrity_check_read_while_another_process_holds_the_write_lock(
    store: SQLiteStore, path: Path
) -> None:
    """``veil serve`` checks the ledger at start while other processes may be spending: neither read
    may wait for (or fail on) the write lock."""
    with write_lock_held(path):
        assert "spends" in store.tables()
        store.check_integrity()


class LockedStore(SQLiteStore):
    """A store whose every transaction fails as locked, with no SQLite error behind it (as the wait for
    another thread's turn does)."""

    def transaction(self, *, write: bool, durable: bool = True) -> AbstractContextManager[Transaction]:
        raise LedgerStoreError("cannot use the ledger: another thread held it for 0.2 s", fault="locked")


def test_the_integrity_check_passes_on_an_error_that_is_not_damage(path: Path) -> None:
    """Only damage (SQLITE_CORRUPT, SQLITE_NOTADB) stopping the check becomes "damaged"; anything else,
    here a lock with no SQLite error behind it, reaches the caller as it was."""
    store = LockedStore(path)
    with pytest.raises(LedgerStoreError, match="another thread held it") as raised:
        store.check_integrity()
    assert raised.value.fault == "locked"
