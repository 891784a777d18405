"""The transaction status in ReadyForQuery follows PostgreSQL's rules, as drivers rely on it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg.pq import TransactionStatus

Connect = Callable[..., psycopg.Connection[Any]]


def test_rollback_to_a_savepoint_clears_the_failure_and_stays_in_the_block(connect: Connect) -> None:
    connection = connect()
    connection.execute("BEGIN")
    connection.execute("SAVEPOINT before")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        connection.execute("SELECT * FROM visits")
    assert connection.info.transaction_status == TransactionStatus.INERROR
    connection.execute("ROLLBACK TO SAVEPOINT before")
    assert connection.info.transaction_status == TransactionStatus.INTRANS
    assert connection.execute("SELECT 1").fetchall() == [(1,)]
    connection.execute("COMMIT")
    assert connection.info.transaction_status == TransactionStatus.IDLE


def test_psycopg_transaction_blocks_with_savepoints_work(connect: Connect) -> None:
    """psycopg's nested transaction() sends SAVEPOINT / ROLLBACK TO SAVEPOINT / RELEASE."""
    connection = connect(autocommit=False)
    with connection.transaction():
        with pytest.raises(psycopg.errors.InsufficientPrivilege), connection.transaction():
            connection.execute("SELECT * FROM visits")
        assert connection.execute("SELECT 2").fetchall() == [(2,)]
    assert connection.info.transaction_status == TransactionStatus.IDLE
