"""The ReadyForQuery status a session reports, statement by statement (as PostgreSQL 15 reports it)."""

from __future__ import annotations

import pytest

from proxy.errors import InFailedTransactionError
from proxy.server.transaction_block import FAILED, IDLE, IN_BLOCK, TransactionBlock


def block_after(*steps: str) -> TransactionBlock:
    """``steps``: transaction tags to run, or ``"error"`` for a failed statement."""
    block = TransactionBlock()
    for step in steps:
        if step == "error":
            block.fail()
        else:
            block.check(step)
            block.advance(step)
    return block


@pytest.mark.parametrize(
    ("steps", "status"),
    [
        ((), IDLE),
        (("BEGIN",), IN_BLOCK),
        (("BEGIN", "COMMIT"), IDLE),
        (("BEGIN", "ROLLBACK"), IDLE),
        (("error",), IDLE),  # an error outside a block fails nothing
        (("BEGIN", "error"), FAILED),
        (("BEGIN", "error", "ROLLBACK"), IDLE),
        (("BEGIN", "error", "COMMIT"), IDLE),  # answered ROLLBACK by the session
        (("BEGIN", "error", "ROLLBACK TO SAVEPOINT"), IN_BLOCK),
        (("ROLLBACK TO SAVEPOINT",), IDLE),
    ],
)
def test_status_follows_postgresql(steps: tuple[str, ...], status: str) -> None:
    assert block_after(*steps).status == status


@pytest.mark.parametrize("tag", [None, "BEGIN", "SAVEPOINT"])
def test_a_failed_block_refuses_all_but_its_end(tag: str | None) -> None:
    block = block_after("BEGIN", "error")
    with pytest.raises(InFailedTransactionError) as refused:
        block.check(tag)
    assert refused.value.sqlstate == "25P02"


@pytest.mark.parametrize("tag", ["COMMIT", "ROLLBACK", "ROLLBACK TO SAVEPOINT"])
def test_a_failed_block_accepts_its_end(tag: str) -> None:
    block_after("BEGIN", "error").check(tag)  # no exception
