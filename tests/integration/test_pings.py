"""Driver pings (``SELECT 1`` and other select lists of literals) are answered from memory once seen:
the same answer over every protocol, still refused in a failed transaction block, still audited."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from budget.audit import Decision
from budget.ledger import Ledger
from tests.conftest import Admin, Demo

Connect = Callable[..., psycopg.Connection[Any]]


@pytest.mark.parametrize("prepare_threshold", [None, 0])  # simple protocol; prepared, extended protocol
def test_a_remembered_ping_answers_as_the_first_one_did(
    connect: Connect, prepare_threshold: int | None
) -> None:
    connection = connect()
    connection.prepare_threshold = prepare_threshold
    answers = [connection.execute("SELECT 1, 'one' AS word").fetchall() for _ in range(4)]
    assert answers == [[(1, "one")]] * 4
    cursor = connection.execute("SELECT 1, 'one' AS word", binary=True)
    assert cursor.fetchall() == [(1, "one")] and [c.name for c in cursor.description] == ["?column?", "word"]


def test_a_remembered_ping_is_refused_in_a_failed_transaction_block(connect: Connect) -> None:
    connection = connect(autocommit=False)
    connection.execute("SELECT 1")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        connection.execute("SELECT * FROM visits")
    with pytest.raises(psycopg.errors.InFailedSqlTransaction):
        connection.execute("SELECT 1")
    connection.rollback()
    assert connection.execute("SELECT 1").fetchall() == [(1,)]


def test_every_ping_is_audited_a_moment_after_its_answer(admin: Admin, connect: Connect, demo: Demo) -> None:
    analyst = admin.add_analyst(0.1, prefix="pinger")
    connection = connect(analyst)
    for _ in range(3):
        connection.execute("SELECT 1")
    deadline = time.monotonic() + 5
    while True:
        entries = Ledger.open(demo.ledger).audit_log.entries(analyst=analyst.name)
        if len(entries) == 3 or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert [(e.statement, e.decision) for e in entries] == [("SELECT 1", Decision.ANSWERED)] * 3
