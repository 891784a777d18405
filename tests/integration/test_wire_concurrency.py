"""100 psycopg connections spend one analyst's grant at once, through the wire: exactly the answers
the grant pays for, then a budget refusal (SQLSTATE 53Z01) for everyone, and nothing else.

The grant pays for exactly K = GRANT / EPSILON answers (exact decimals). Each connection asks
distinct DP queries back to back until it is refused. Runs over an SQLite ledger and over a
PostgreSQL one (``postgres``; skips without a server), with one worker process and with two.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

from budget.amounts import as_decimal
from budget.ledger import SpendState
from tests.conftest import Analyst, RunningServer, running_server
from tests.integration.ledger_servers import LEDGER_KINDS, ServedDemo, distinct_count_query, served_demo

CONNECTIONS = 100
EPSILON = 0.01
GRANT = 0.5
ANSWERS = 50  # GRANT / EPSILON, exactly
BUDGET_EXHAUSTED = "53Z01"


@pytest.fixture(params=LEDGER_KINDS)
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServedDemo]:
    with served_demo(request.param, tmp_path / "demo", request) as served:
        yield served


def spend_until_refused(servers: list[RunningServer], analyst: Analyst) -> Counter[str]:
    """Connect CONNECTIONS clients, spread over ``servers``, release them together; each asks until
    refused. → "answered" per answer, and each connection's final SQLSTATE."""
    start = threading.Barrier(CONNECTIONS, timeout=60)

    def client(number: int) -> list[str]:
        outcomes = []
        server = servers[number % len(servers)]
        with psycopg.connect(server.conninfo(analyst), prepare_threshold=None, autocommit=True) as connection:
            connection.execute(f"SET veil.epsilon = {EPSILON}")
            start.wait()
            while True:
                try:
                    (row,) = connection.execute(distinct_count_query()).fetchall()
                except psycopg.Error as error:
                    outcomes.append(error.sqlstate or f"no SQLSTATE: {error!r}")
                    return outcomes
                assert isinstance(row[0], int | float)
                outcomes.append("answered")

    with ThreadPoolExecutor(max_workers=CONNECTIONS) as pool:
        results = list(pool.map(client, range(CONNECTIONS)))
    return Counter(outcome for outcomes in results for outcome in outcomes)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_hundred_connections_get_exactly_the_answers_the_grant_pays_for(
    served: ServedDemo, tmp_path: Path, workers: int
) -> None:
    analyst = served.spending_analyst(GRANT, prefix="hundred")
    with running_server(served.config, tmp_path / "serve.log", workers=workers) as server:
        outcomes = spend_until_refused([server], analyst)
    assert outcomes == {"answered": ANSWERS, BUDGET_EXHAUSTED: CONNECTIONS}
    check_exactly_spent(served, analyst)


@pytest.mark.parametrize("workers", [1, 2])
def test_two_servers_sharing_one_ledger_get_exactly_the_answers_the_grant_pays_for(
    served: ServedDemo, tmp_path: Path, workers: int
) -> None:
    """Two `veil serve` (each of one or two worker processes) on one ledger — one file, or one
    PostgreSQL schema, as two hosts would share it — 50 clients each."""
    analyst = served.spending_analyst(GRANT, prefix="shared")
    with (
        running_server(served.config, tmp_path / "first.log", workers=workers) as first,
        running_server(served.config, tmp_path / "second.log", workers=workers) as second,
    ):
        outcomes = spend_until_refused([first, second], analyst)
    assert outcomes == {"answered": ANSWERS, BUDGET_EXHAUSTED: CONNECTIONS}
    check_exactly_spent(served, analyst)


def check_exactly_spent(served: ServedDemo, analyst: Analyst) -> None:
    ledger = served.open_ledger()
    try:
        spends = ledger.history(analyst.name)
        assert [s.state for s in spends] == [SpendState.COMMITTED] * ANSWERS  # none left open
        assert sum((as_decimal(s.epsilon) for s in spends), Decimal(0)) == Decimal(repr(GRANT))
        balance = ledger.balance(analyst.name, "demo")
        assert (balance.spent_epsilon, balance.remaining_epsilon) == (GRANT, 0.0)
        assert ledger.verify() == []
    finally:
        ledger.close()
