"""The audit log and the answer cache as the ledger's store keeps them: what the cache keys on, that the
first stored answer stays, which transactions each write and read uses (reads never wait for a writer;
audit rows and cached answers skip the flush to disk), and how timestamps are kept in UTC.

Found by mutation testing (issue 21): these properties were not pinned by the ledger suite."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from budget.answer_cache import AnswerCache, CacheKey
from budget.audit import AuditEntry, AuditLog, Decision
from budget.errors import LedgerStoreError
from budget.store import SQLiteStore, Transaction
from tests.unit.budget.test_group_commit import write_lock_held

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
KEY = CacheKey("alice", "demo", "v1", "digest-1")


class RecordingStore(SQLiteStore):
    """The real SQLite store, recording how each transaction was opened: (write, durable)."""

    def __init__(self, path: Path, **kwargs: float) -> None:
        super().__init__(path, **kwargs)  # type: ignore[arg-type]
        self.opened: list[tuple[bool, bool]] = []

    def transaction(self, *, write: bool, durable: bool = True) -> AbstractContextManager[Transaction]:
        self.opened.append((bool(write), bool(durable)))
        return super().transaction(write=write, durable=durable)


@pytest.fixture
def store(path: Path) -> Iterator[RecordingStore]:
    opened = RecordingStore(path, lock_timeout=0.2)
    yield opened
    opened.close()


def entry(at: datetime, analyst: str = "alice", statement: str = "SELECT 1") -> AuditEntry:
    return AuditEntry(at, analyst, "127.0.0.1:5555", "demo", statement, Decision.ANSWERED, epsilon=0.1)


def stored_column(path: Path, sql: str) -> list[object]:
    with sqlite3.connect(path) as connection:
        return [row[0] for row in connection.execute(sql)]


@pytest.fixture
def new_york() -> Iterator[None]:
    """The process's local time zone set far from UTC, so that a naive timestamp read as local time,
    or an aware one converted to local time, shows (UTC−5 in March)."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


# -- the answer cache ---------------------------------------------------------------------------------


def cache(store: RecordingStore, now: datetime = T0) -> AnswerCache:
    return AnswerCache(store, clock=lambda: now)


def test_a_stored_answer_is_found_under_its_key(store: RecordingStore) -> None:
    answers = cache(store)
    assert answers.get(KEY) is None
    answers.put(KEY, '{"rows": [[41.5]]}', spend_id=7)
    assert answers.get(KEY) == '{"rows": [[41.5]]}'


@pytest.mark.parametrize(
    "other",
    [
        CacheKey("bob", "demo", "v1", "digest-1"),
        CacheKey("alice", "sales", "v1", "digest-1"),
        CacheKey("alice", "demo", "v2", "digest-1"),
        CacheKey("alice", "demo", "v1", "digest-2"),
    ],
    ids=["analyst", "dataset", "data_version", "query_key"],
)
def test_an_answer_is_not_found_under_a_key_differing_in_any_part(
    store: RecordingStore, other: CacheKey
) -> None:
    """Another analyst, dataset, version of the data or query must pay for its own answer."""
    answers = cache(store)
    answers.put(KEY, "mine", spend_id=1)
    assert answers.get(other) is None
    answers.put(other, "theirs", spend_id=2)
    assert (answers.get(KEY), answers.get(other)) == ("mine", "theirs")


def test_the_first_stored_answer_stays(store: RecordingStore) -> None:
    """Two identical queries racing past an empty cache: the second answer is not stored, so a repeat
    always gets the same noisy answer."""
    answers = cache(store)
    answers.put(KEY, "first", spend_id=1)
    answers.put(KEY, "second", spend_id=2)
    assert answers.get(KEY) == "first"
    assert stored_column(store.path, "SELECT spend_id FROM answers") == [1]


def test_a_stored_answer_records_its_spend_and_the_clocks_time(store: RecordingStore) -> None:
    cache(store, now=T0 + timedelta(minutes=5)).put(KEY, "answer", spend_id=42)
    with sqlite3.connect(store.path) as connection:
        rows = connection.execute(
            "SELECT analyst, dataset, data_version, query_key, answer, spend_id, created_at FROM answers"
        ).fetchall()
    assert rows == [("alice", "demo", "v1", "digest-1", "answer", 42, "2026-03-01T12:05:00+00:00")]


def test_the_cache_writes_without_the_flush_and_reads_without_the_write_lock(store: RecordingStore) -> None:
    answers = cache(store)
    answers.put(KEY, "answer", spend_id=1)
    answers.get(KEY)
    assert store.opened == [(True, False), (False, True)]


def test_a_cached_answer_is_read_while_another_process_holds_the_write_lock(
    store: RecordingStore, path: Path
) -> None:
    """A repeat is served even while a writer holds the ledger (WAL lets readers through); a read
    taking the write lock would wait and fail as ``locked``."""
    answers = cache(store)
    answers.put(KEY, "answer", spend_id=1)
    with write_lock_held(path):
        assert answers.get(KEY) == "answer"
        with pytest.raises(LedgerStoreError) as locked:
            answers.put(CacheKey("alice", "demo", "v1", "other"), "x", spend_id=2)
    assert locked.value.fault == "locked"


# -- the audit log ------------------------------------------------------------------------------------


def test_audit_rows_are_written_without_the_flush_and_read_without_the_write_lock(
    store: RecordingStore,
) -> None:
    log = AuditLog(store)
    log.append(entry(T0), entry(T0 + timedelta(seconds=1)))
    log.entries()
    assert store.opened == [(True, False), (False, True)]


def test_appending_nothing_opens_no_transaction(store: RecordingStore) -> None:
    AuditLog(store).append()
    assert store.opened == []


def test_the_audit_log_is_read_while_another_process_holds_the_write_lock(
    store: RecordingStore, path: Path
) -> None:
    log = AuditLog(store)
    log.append(entry(T0))
    with write_lock_held(path):
        assert [read.statement for read in log.entries()] == ["SELECT 1"]


def test_a_limit_keeps_the_oldest_entries(store: RecordingStore) -> None:
    log = AuditLog(store)
    log.append(*(entry(T0 + timedelta(seconds=n), statement=f"SELECT {n}") for n in range(4)))
    assert [read.statement for read in log.entries(limit=2)] == ["SELECT 0", "SELECT 1"]
    assert [read.statement for read in log.entries(limit=0)] == []
    assert len(log.entries()) == 4


def test_since_keeps_the_entries_at_or_after_it_in_any_zone(store: RecordingStore, new_york: None) -> None:
    log = AuditLog(store)
    log.append(*(entry(T0 + timedelta(hours=n), statement=f"SELECT {n}") for n in range(4)))
    statements = [read.statement for read in log.entries(since=T0 + timedelta(hours=2))]
    assert statements == ["SELECT 2", "SELECT 3"]
    # 09:00 at UTC+2 is 07:00 UTC, before every entry; a naive since is UTC, not local time
    two_hours_east = timezone(timedelta(hours=2))
    assert len(log.entries(since=datetime(2026, 3, 1, 9, 0, tzinfo=two_hours_east))) == 4
    assert len(log.entries(since=datetime(2026, 3, 1, 13, 0))) == 3
    assert [read.statement for read in log.entries(analyst="alice", since=T0 + timedelta(hours=3))] == [
        "SELECT 3"
    ]


def test_timestamps_are_stored_and_read_back_in_utc(store: RecordingStore, new_york: None) -> None:
    """A naive timestamp means UTC (not the local time); an aware one is converted to UTC. Both are
    stored as UTC ISO text, which ``since`` compares as text."""
    log = AuditLog(store)
    naive = datetime(2026, 3, 1, 12, 0)
    east = datetime(2026, 3, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    log.append(entry(naive, statement="naive"), entry(east, statement="east"))
    assert stored_column(store.path, "SELECT at FROM audit ORDER BY id") == [
        "2026-03-01T12:00:00+00:00",
        "2026-03-01T12:00:00+00:00",
    ]
    for read in log.entries():
        assert read.at == T0 and read.at.utcoffset() == timedelta(0)
