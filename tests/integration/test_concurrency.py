"""Many connections spending one analyst's budget at once: the ledger never overspends."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from tests.conftest import Admin, Analyst, Demo, RunningServer, running_server

CONNECTIONS = 20
QUERIES_PER_CONNECTION = 3
GRANT = 1.0
EPSILON = 0.1  # so GRANT / EPSILON = 10 answers in all


@pytest.fixture(scope="module")
def two_workers(demo: Demo) -> Iterator[RunningServer]:
    """The demo served by two worker processes (the session's ``veil_server`` is one process)."""
    with running_server(demo.config, demo.directory / "two-workers.log", workers=2) as server:
        yield server


@pytest.fixture(params=["one process", "two workers"])
def server(request: pytest.FixtureRequest) -> RunningServer:
    name = "veil_server" if request.param == "one process" else "two_workers"
    served: RunningServer = request.getfixturevalue(name)
    return served


def spend_concurrently(server: RunningServer, analyst: Analyst, sql: str, *, rows: int = 1) -> Counter[str]:
    """Open CONNECTIONS connections, then let all of them fire their queries at once.

    Each query is different (``sql`` takes a ``{n}`` that makes a predicate true for every row), so
    none is served from the answer cache: every answer must be paid for.
    → how many queries were answered (with ``rows`` rows, last column numeric) and how many failed, by SQLSTATE.
    """
    start = threading.Barrier(CONNECTIONS, timeout=30)

    def client(number: int) -> list[str]:
        outcomes = []
        with psycopg.connect(server.conninfo(analyst), prepare_threshold=None, autocommit=True) as connection:
            connection.execute(f"SET veil.epsilon = {EPSILON}")
            start.wait()
            for query in range(QUERIES_PER_CONNECTION):
                try:
                    answer = connection.execute(
                        sql.format(n=number * QUERIES_PER_CONNECTION + query)
                    ).fetchall()
                    assert len(answer) == rows and all(isinstance(row[-1], int | float) for row in answer)
                    outcomes.append("answered")
                except psycopg.Error as error:
                    outcomes.append(error.sqlstate or repr(error))
        return outcomes

    with ThreadPoolExecutor(max_workers=CONNECTIONS) as pool:
        results = list(pool.map(client, range(CONNECTIONS)))
    return Counter(outcome for outcomes in results for outcome in outcomes)


def test_twenty_connections_get_exactly_the_answers_the_grant_pays_for(
    server: RunningServer, admin: Admin
) -> None:
    analyst = admin.add_analyst(GRANT, prefix="crowd")

    outcomes = spend_concurrently(server, analyst, "SELECT COUNT(*) FROM visits WHERE cost > -1 - {n}")

    assert outcomes == {"answered": 10, "53Z01": CONNECTIONS * QUERIES_PER_CONNECTION - 10}
    balance = admin.balance(analyst)
    assert balance["spent_epsilon"] <= GRANT
    assert balance["spent_epsilon"] == pytest.approx(GRANT, abs=1e-12)
    assert balance["remaining_epsilon"] == 0
    history = admin.history(analyst)
    assert [spend["state"] for spend in history] == ["committed"] * 10  # no reservation left dangling
    assert all(spend["epsilon"] == EPSILON for spend in history)


def test_two_analysts_spending_at_once_do_not_share_a_budget(server: RunningServer, admin: Admin) -> None:
    first, second = admin.add_analyst(0.2, prefix="twin"), admin.add_analyst(0.5, prefix="twin")
    with ThreadPoolExecutor(max_workers=2) as pool:
        counts = list(
            pool.map(
                lambda analyst: spend_concurrently(
                    server,
                    analyst,
                    "SELECT region, SUM(cost) FROM visits WHERE cost > -1 - {n} GROUP BY region",
                    rows=7,
                ),
                [first, second],
            )
        )
    assert [c["answered"] for c in counts] == [2, 5]
    assert admin.balance(first)["spent_epsilon"] == pytest.approx(0.2, abs=1e-12)
    assert admin.balance(second)["spent_epsilon"] == pytest.approx(0.5, abs=1e-12)
