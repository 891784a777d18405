"""Fresh DP COUNT throughput through the wire, against PostgreSQL's exact COUNT (issue 20).

C connections (C = 1, 10, 50, 200; psycopg 3 async, simple protocol, autocommit) each send queries
back to back for SECONDS; answers per second, counted over the window. Three targets in the same run,
taking turns within every round (the order rotates) so load from elsewhere hits all alike:

* PostgreSQL: ``SELECT COUNT(*) FROM events WHERE v >= n`` on the local server — the exact answer
  (with at most POSTGRES_MAX_CONNECTIONS connections: the shared test server allows 100 in all, and its
  throughput on two cores no longer grows past a few connections);
* Veil ``--workers 1`` and ``--workers N`` (N = cores): the same query on a DuckDB dataset holding the
  same rows, answered with differential privacy — bounded contributions, noise, and a durable ledger
  debit per answer (the answer cache is off and every query differs, so each answer is fresh).

One analyst spends on every connection (the worst case for the ledger: one totals row, one lock);
``max_statements_per_analyst`` is raised so that the analyst limit does not cap the concurrency
measured. The client runs in this process and takes its share of the two cores in every target.

Run with ``.venv/bin/python -m pytest -q -m bench tests/bench/test_throughput.py -s`` (about 2 minutes;
needs the PostgreSQL server, ``postgres_dsn``). Results go into docs/benchmarks.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import statistics
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import psycopg
import pytest

from budget.ledger import Ledger, SpendState
from budget.loss import PrivacyLoss
from proxy.server.workers import default_workers
from proxy.wire.scram import make_scram_verifier
from tests.conftest import RunningServer, running_server, schema_in

pytestmark = pytest.mark.bench

ROWS = 100_000
PEOPLE = 20_000
CONNECTIONS = (1, 10, 50, 200)
SECONDS = 4.0
ROUNDS = 2
EPSILON = 0.001
FILL = f"SELECT i % {PEOPLE} AS person_id, (i * 7919) % 1000 AS v FROM generate_series(1, {ROWS}) AS t(i)"
POLICY = """
[server]
max_connections = 500
authentication_slots = 256
max_statements_per_analyst = 256

[datasets.bench]
path = "bench.duckdb"
answer_cache = false
default_epsilon = 0.001

[datasets.bench.tables.events]
privacy_unit = "person_id"
max_contributions = 5

[datasets.bench.tables.events.columns]
person_id = { type = "integer" }
v = { type = "integer", lower = 0, upper = 999 }
"""
_numbers = itertools.count()


POSTGRES_MAX_CONNECTIONS = 50  # the shared test server allows 100 in all; other runs need some


@dataclass(frozen=True)
class Target:
    name: str
    conninfo: str
    table: str  # as the query names it
    max_connections: int = 1_000


@dataclass(frozen=True)
class Measured:
    answers: int
    errors: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.answers / self.seconds


def query(table: str) -> str:
    """A COUNT no earlier query asked (distinct threshold and offset), so no cache could serve it."""
    number = next(_numbers)
    return f"SELECT COUNT(*) FROM {table} WHERE v >= {number % 500} AND person_id > {-1 - number}"


async def measure(target: Target, connections: int, seconds: float) -> Measured:
    """Open ``connections`` connections (untimed), then all send queries back to back for ``seconds``."""
    opened = [
        await psycopg.AsyncConnection.connect(target.conninfo, autocommit=True, prepare_threshold=None)
        for _ in range(min(connections, target.max_connections))
    ]
    answers = errors = 0
    stop = time.monotonic() + seconds

    async def client(connection: psycopg.AsyncConnection) -> None:
        nonlocal answers, errors
        while time.monotonic() < stop:
            try:
                cursor = await connection.execute(query(target.table))
                (row,) = await cursor.fetchall()
                assert isinstance(row[0], int | float)
                answers += 1
            except psycopg.Error:
                errors += 1

    started = time.monotonic()
    try:
        await asyncio.gather(*(client(connection) for connection in opened))
    finally:
        elapsed = time.monotonic() - started
        for connection in opened:
            await connection.close()
    return Measured(answers, errors, elapsed)


@pytest.fixture(scope="module")
def veil_directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("throughput")
    with duckdb.connect(str(directory / "bench.duckdb")) as connection:
        connection.execute(f"CREATE TABLE events AS {FILL}")
    (directory / "veil.toml").write_text(POLICY, encoding="utf-8")
    ledger = Ledger.create(directory / "ledger.sqlite")
    ledger.add_analyst("bench", make_scram_verifier("bench"))
    ledger.grant("bench", "bench", PrivacyLoss(1e6))
    ledger.close()
    return directory


@contextlib.contextmanager
def veil_target(directory: Path, workers: int) -> Iterator[Target]:
    with running_server(
        directory / "veil.toml", directory / f"serve-{workers}.log", workers=workers
    ) as server:
        yield Target(f"veil --workers {workers}", veil_conninfo(server), "events")


def veil_conninfo(server: RunningServer) -> str:
    return psycopg.conninfo.make_conninfo(
        host=server.host, port=server.port, user="bench", password="bench", dbname="bench"
    )


@pytest.fixture(scope="module")
def postgres_target(postgres_dsn: str) -> Iterator[Target]:
    with schema_in(postgres_dsn) as schema:
        with psycopg.connect(postgres_dsn, autocommit=True) as connection:
            connection.execute(f"CREATE TABLE {schema}.events AS {FILL}")
            connection.execute(f"ANALYZE {schema}.events")
        yield Target("PostgreSQL", postgres_dsn, f"{schema}.events", POSTGRES_MAX_CONNECTIONS)


def test_fresh_dp_count_throughput_against_postgresql(veil_directory: Path, postgres_target: Target) -> None:
    workers = default_workers()
    with veil_target(veil_directory, 1) as single, veil_target(veil_directory, workers) as several:
        targets = [postgres_target, single, several]
        runs: dict[tuple[str, int], list[Measured]] = {}
        load = [os.getloadavg()[0]]
        for round_number in range(ROUNDS):
            for connections in CONNECTIONS:
                order = targets[round_number % 3 :] + targets[: round_number % 3]
                for target in order:
                    measured = asyncio.run(measure(target, connections, SECONDS))
                    runs.setdefault((target.name, connections), []).append(measured)
            load.append(os.getloadavg()[0])
    report(runs, targets, load)
    for (name, connections), measured in runs.items():
        assert sum(m.errors for m in measured) == 0, f"{name} at {connections} connections: errors"
        assert all(m.answers > 0 for m in measured), f"{name} at {connections} connections: no answer"
    veil_answers = sum(m.answers for (name, _), ms in runs.items() if name.startswith("veil") for m in ms)
    ledger = Ledger.open(veil_directory / "ledger.sqlite")
    try:  # every fresh answer was debited, exactly once, and nothing is left reserved
        spends = ledger.history("bench")
        assert [spend.state for spend in spends] == [SpendState.COMMITTED] * veil_answers
        assert ledger.verify() == []
    finally:
        ledger.close()


def report(runs: dict[tuple[str, int], list[Measured]], targets: list[Target], load: list[float]) -> None:
    print(f"\n{ROWS:,} rows, {PEOPLE:,} people; {SECONDS:g} s per run, {ROUNDS} rounds, median answers/s")
    print(f"1-minute load average during the runs: {', '.join(f'{value:.1f}' for value in load)}")
    print(subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip())
    header = "| connections | " + " | ".join(target.name for target in targets) + " | ratios to PostgreSQL |"
    print(header)
    print("|---" * (len(targets) + 2) + "|")
    for connections in CONNECTIONS:
        rates = [statistics.median(m.per_second for m in runs[(t.name, connections)]) for t in targets]
        ratios = " / ".join(f"{rate / rates[0]:.2f}×" for rate in rates[1:])
        print(f"| {connections} | " + " | ".join(f"{rate:.0f}" for rate in rates) + f" | {ratios} |")
