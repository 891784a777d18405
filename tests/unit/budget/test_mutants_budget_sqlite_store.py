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
from tests.unit.budget.test_group_commit import write_lock_held

DAMAGED_HINT = "restore the ledger from a backup (sqlite3 ledger.sqlite '.recover' may save what is left)"
ACCESS_HINT = "check that the file and its directory are readable and writable and not on a network share"
NOT_A_LEDGER_HINT = (
    "set ledger.path in veil.toml to another file, or move this one aside and run `veil init-demo`"
)


@pytest.fixture
def store(path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(path, lock_timeout=0.2)
    yield opened
    opened.close()


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


def test_a_ledger_deleted_while_open_is_not_made_again_empty(path: Path) -> None:
    """Opened without ``create``, the store connects read-write only: a file that vanished is an error,
    never a fresh empty ledger that would forget every spend."""
    store = SQLiteStore(path)
    path.unlink()
    try:
        with pytest.raises(LedgerStoreError) as missing, store.transaction(write=False):
            pass
    finally:
        store.close()
    assert missing.value.fault == "io"
    assert not path.exists()


def test_create_makes_the_file_and_open_refuses_a_missing_one(tmp_path: Path) -> None:
    made = open_store(tmp_path / "new.sqlite", create=True)
    try:
        with made.transaction(write=True) as transaction:
            transaction.execute("CREATE TABLE t (x)")
    finally:
        made.close()
    assert (tmp_path / "new.sqlite").is_file()
    missing = tmp_path / "missing.sqlite"
    with pytest.raises(LedgerStoreError) as refused:
        open_store(missing)
    assert refused.value.message == (
        f"no ledger at {missing}; run `veil init-demo`, or set ledger.path in veil.toml to an existing ledger"
    )
    assert refused.value.hint == "run `veil init-demo`, or set ledger.path in veil.toml to an existing ledger"
    assert not missing.exists()


def test_open_store_keeps_the_path_and_the_lock_timeout(path: Path) -> None:
    store = open_store(str(path), lock_timeout=0.3)
    try:
        assert isinstance(store, SQLiteStore)
        assert (store.path, store.location, store.description, store.lock_timeout) == (
            path,
            str(path),
            str(path),
            0.3,
        )
        assert "spends" in store.tables()
    finally:
        store.close()


@pytest.mark.parametrize(
    ("location", "dsn"),
    [
        ("postgresql://veil@db/ledger", True),
        ("postgres://veil@db/ledger", True),
        ("host=db dbname=ledger user=veil", True),
        ("/srv/veil/ledger.sqlite", False),
        ("postgresql.sqlite", False),
        ("ledger-dbname.sqlite", False),
    ],
)
def test_a_dsn_is_told_from_a_path(location: str, dsn: bool) -> None:
    from budget.store import is_dsn

    assert is_dsn(location) is dsn


def test_a_thread_waiting_for_the_writer_too_long_is_locked_with_a_hint(store: SQLiteStore) -> None:
    """Threads of one process queue in the store before SQLite's lock; one kept waiting past the
    timeout is refused as ``locked``."""
    import threading

    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store.transaction(write=True):
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        holding.wait(30)
        with pytest.raises(LedgerStoreError) as waited, store.transaction(write=True):
            pass
        with store.transaction(write=False) as transaction:  # readers do not queue
            assert transaction.execute("SELECT 1") == [(1,)]
    finally:
        release.set()
        holder.join()
    assert waited.value.message == f"cannot use the ledger at {store.path}: another thread held it for 0.2 s"
    assert waited.value.hint == "check for a stuck veil process" and waited.value.fault == "locked"
    with store.transaction(write=True) as transaction:  # the turn was given back
        assert transaction.execute("SELECT 2") == [(2,)]


@pytest.mark.parametrize(("durable", "level"), [(True, 2), (False, 1)])
def test_a_transaction_that_need_not_be_durable_skips_the_flush(
    store: SQLiteStore, durable: bool, level: int
) -> None:
    """``synchronous`` FULL (2) flushes at every commit; NORMAL (1) in WAL mode does not."""
    with store.transaction(write=True, durable=durable) as transaction:
        assert transaction.execute("PRAGMA synchronous") == [(level,)]
    with store.transaction(write=True) as transaction:  # durable is the default
        assert transaction.execute("PRAGMA synchronous") == [(2,)]


def test_a_failing_body_rolls_back_and_its_error_passes_unchanged(store: SQLiteStore) -> None:
    with pytest.raises(KeyError), store.transaction(write=True) as transaction:
        transaction.execute("INSERT INTO answers VALUES ('a', 'd', 'v', 'q', 'x', 1, 'now')")
        raise KeyError("stop")
    with store.transaction(write=False) as transaction:
        assert transaction.execute("SELECT count(*) FROM answers") == [(0,)]
    with store.transaction(write=True) as transaction:
        transaction.execute(
            "INSERT INTO answers VALUES (?, ?, ?, ?, ?, ?, ?)", ["a", "d", "v", "q", "x", 1, "now"]
        )
    with store.transaction(write=False) as transaction:
        assert transaction.execute("SELECT answer FROM answers WHERE analyst = ?", ("a",)) == [("x",)]


def test_a_store_closed_from_another_thread_closes_every_threads_connection(store: SQLiteStore) -> None:
    """Connections are kept per thread; close() (from any thread) closes them all, and the store opens
    new ones when used again."""
    import threading

    used: list[sqlite3.Connection] = []

    def use() -> None:
        with store.transaction(write=False) as transaction:
            transaction.execute("SELECT 1")
        used.append(store._connection())

    worker = threading.Thread(target=use)
    worker.start()
    worker.join()
    store.close()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        used[0].execute("SELECT 1")
    with store.transaction(write=False) as transaction:
        assert transaction.execute("SELECT 1") == [(1,)]


def test_a_dsn_opens_a_postgres_store_with_the_schema_and_lock_timeout_asked_for() -> None:
    """No server is needed: a PostgreSQL store connects on its first transaction."""
    from budget.postgres_store import DEFAULT_SCHEMA, PostgresStore

    store = open_store("postgresql://veil@127.0.0.1:1/ledger", schema="team_a", lock_timeout=0.3)
    assert isinstance(store, PostgresStore)
    assert (store.schema, store.lock_timeout) == ("team_a", 0.3)
    assert store.location == "user=veil dbname=ledger host=127.0.0.1 port=1"
    default = open_store("host=127.0.0.1 port=1 dbname=ledger")
    assert isinstance(default, PostgresStore)
    assert (default.schema, default.lock_timeout) == (
        DEFAULT_SCHEMA,
        30.0,
    ) and DEFAULT_SCHEMA == "veil_ledger"
    store.close()
    default.close()


def test_a_new_file_is_created_only_when_asked(tmp_path: Path) -> None:
    """``create`` makes the file (mode rwc); the same store without it would refuse the missing file."""
    fresh = tmp_path / "fresh.sqlite"
    store = SQLiteStore(fresh, create=True)
    try:
        with store.transaction(write=False) as transaction:
            assert transaction.execute("SELECT 1") == [(1,)]
    finally:
        store.close()
    assert fresh.is_file()


def test_a_thread_keeps_its_connection_across_transactions(store: SQLiteStore) -> None:
    """Connections are kept per thread (a query does not pay for connecting): a temporary table, which
    lives in one connection, is still there in the thread's next transaction, and absent in another
    thread's."""
    import threading

    with store.transaction(write=True) as transaction:
        transaction.execute("CREATE TEMP TABLE scratch (x)")
        transaction.execute("INSERT INTO scratch VALUES (1)")
    with store.transaction(write=False) as transaction:
        assert transaction.execute("SELECT x FROM scratch") == [(1,)]
    seen: list[object] = []

    def other() -> None:
        try:
            with store.transaction(write=False) as transaction:
                seen.append(transaction.execute("SELECT x FROM scratch"))
        except LedgerStoreError as error:
            seen.append(error)

    worker = threading.Thread(target=other)
    worker.start()
    worker.join()
    assert isinstance(seen[0], LedgerStoreError) and "no such table: scratch" in seen[0].message


@pytest.mark.parametrize("timeout", [0.2, 12.5])
def test_sqlite_waits_for_another_process_as_long_as_the_lock_timeout(path: Path, timeout: float) -> None:
    """SQLite's busy timeout (how long a writer waits for another process's lock) is the store's
    ``lock_timeout``, not the sqlite3 module's default of 5 s."""
    store = SQLiteStore(path, lock_timeout=timeout)
    try:
        with store.transaction(write=False) as transaction:
            assert transaction.execute("PRAGMA busy_timeout") == [(int(timeout * 1000),)]
    finally:
        store.close()
