"""The audit writer commits a message's entries before ``append`` returns, and reports a failure."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from budget.audit import AuditEntry, AuditLog, Decision
from budget.ledger import Ledger
from proxy.server.audit_trail import AuditWriter


def entry(statement: str) -> AuditEntry:
    return AuditEntry(
        at=datetime(2026, 1, 1, tzinfo=UTC),
        analyst="ana",
        client="127.0.0.1:1",
        dataset="demo",
        statement=statement,
        decision=Decision.ANSWERED,
    )


class BrokenLog(AuditLog):
    """Fails every append, as a full disk would."""

    def __init__(self) -> None:
        pass

    def append(self, *entries: AuditEntry) -> None:
        raise OSError("disk I/O error")


def test_entries_are_written_when_append_returns(tmp_path: Path) -> None:
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    writer = AuditWriter(ledger.audit_log)

    async def session(name: str) -> None:
        for number in range(5):
            statement = f"SELECT {number} -- {name}"
            await writer.append([entry(statement)])
            assert statement in [e.statement for e in ledger.audit_log.entries()]

    async def sessions() -> None:
        await asyncio.gather(session("a"), session("b"))

    asyncio.run(sessions())
    statements = [e.statement for e in ledger.audit_log.entries()]
    assert sorted(statements) == sorted(f"SELECT {n} -- {name}" for n in range(5) for name in "ab")


def test_a_failed_write_reaches_the_session_and_the_writer_goes_on(tmp_path: Path) -> None:
    broken = AuditWriter(BrokenLog())
    with pytest.raises(OSError, match="disk I/O error"):
        asyncio.run(broken.append([entry("SELECT 1")]))
    with pytest.raises(OSError, match="disk I/O error"):
        asyncio.run(broken.append([entry("SELECT 2")]))


def test_posted_entries_are_written_in_order_behind_earlier_ones(tmp_path: Path) -> None:
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    writer = AuditWriter(ledger.audit_log)

    async def pings_then_a_query() -> None:
        for number in range(3):
            writer.post([entry(f"SELECT {number}")])
        await writer.append([entry("SELECT COUNT(*) FROM t")])  # queued behind the posts

    asyncio.run(pings_then_a_query())
    assert [e.statement for e in ledger.audit_log.entries()] == [
        "SELECT 0",
        "SELECT 1",
        "SELECT 2",
        "SELECT COUNT(*) FROM t",
    ]


def test_a_failed_posted_write_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    broken = AuditWriter(BrokenLog())

    async def post_and_wait() -> None:
        broken.post([entry("SELECT 1")])
        with pytest.raises(OSError):
            await broken.append([entry("SELECT 2")])  # by then the post has failed too

    with caplog.at_level("ERROR", logger="veil.audit"):
        asyncio.run(post_and_wait())
    assert "audit append failed: disk I/O error" in caplog.text


class SlowCountingLog(AuditLog):
    """The real log, counting its transactions; the first write waits until the test lets it go."""

    def __init__(self, store: object, release: threading.Event) -> None:
        super().__init__(store)  # type: ignore[arg-type]
        self.transactions: list[int] = []
        self.entered = threading.Event()
        self._release = release

    def append(self, *entries: AuditEntry) -> None:
        self.entered.set()
        self._release.wait()
        self.transactions.append(len(entries))
        super().append(*entries)


def test_messages_queued_during_a_write_share_the_next_transaction(tmp_path: Path) -> None:
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    release = threading.Event()
    log = SlowCountingLog(ledger.store, release)
    writer = AuditWriter(log)

    async def many() -> None:
        first = asyncio.ensure_future(writer.append([entry("first")]))
        await asyncio.to_thread(log.entered.wait)  # the writer thread holds "first", waiting
        rest = [asyncio.ensure_future(writer.append([entry(f"queued {n}")])) for n in range(5)]
        release.set()
        await asyncio.gather(first, *rest)

    asyncio.run(many())
    assert log.transactions == [1, 5]
    assert [e.statement for e in ledger.audit_log.entries()] == ["first"] + [f"queued {n}" for n in range(5)]
