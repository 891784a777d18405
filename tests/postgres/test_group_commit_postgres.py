"""Group commit on a PostgreSQL ledger: reservations queued behind one that waits for the dataset's
row lock (held here by another connection, as another host would) join its batch, and each is checked
against the totals the earlier ones in the batch wrote."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import psycopg
import pytest
from psycopg import sql

from budget.errors import BudgetExhaustedError
from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from tests.unit.budget.test_ledger import VERIFIER

pytestmark = pytest.mark.postgres


def test_reservations_in_one_postgres_batch_are_checked_against_each_other(
    postgres_dsn: str, new_schema: Callable[[], str]
) -> None:
    schema = new_schema()
    ledger = Ledger.create(postgres_dsn, schema=schema)
    try:
        ledger.add_analyst("alice", VERIFIER)
        ledger.grant("alice", "demo", PrivacyLoss(0.25))
        ledger.cancel(ledger.reserve("alice", "demo", PrivacyLoss(0.01), statement="makes the totals row"))
        outcomes: list[object] = []

        def reserve() -> None:
            try:
                outcomes.append(ledger.reserve("alice", "demo", PrivacyLoss(0.1), statement="batch"))
            except BudgetExhaustedError as refused:
                outcomes.append(refused)

        with psycopg.connect(postgres_dsn) as holder:  # a transaction of its own, as another host's
            holder.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
            holder.execute("SELECT 1 FROM totals WHERE analyst = '' AND dataset = 'demo' FOR UPDATE")
            threads = [threading.Thread(target=reserve) for _ in range(4)]
            for thread in threads:
                thread.start()
            deadline = time.monotonic() + 30
            while ledger._reservations.queued < 3:  # one waits for the row lock, three behind it
                assert time.monotonic() < deadline, "the reservations did not queue"
                time.sleep(0.01)
            holder.rollback()
        for thread in threads:
            thread.join()
        assert sum(isinstance(outcome, int) for outcome in outcomes) == 2
        assert sum(isinstance(outcome, BudgetExhaustedError) for outcome in outcomes) == 2
        assert ledger.balance("alice", "demo").spent_epsilon == 0.2
        assert ledger.verify() == []
    finally:
        ledger.close()
