"""The wire protocol's own cost, against the local PostgreSQL server in the same run (issue 5).

Through psycopg 3 (simple protocol, autocommit): median latency of ``SELECT 1``; a 10,000-row result
from a public table; connections per second (Veil: with SCRAM-SHA-256 at 4,096 iterations; the local
PostgreSQL server trusts local connections, so its baseline has no authentication cost). Veil serves a
DuckDB dataset whose public table holds the same rows as the PostgreSQL table.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import psycopg
import pytest

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy.wire.scram import make_scram_verifier
from tests.conftest import RunningServer, running_server, schema_in

pytestmark = pytest.mark.bench

ROWS = 10_000
REPEATS = 1000
POLICY = """
[datasets.items]
path = "items.duckdb"

[datasets.items.tables.items]
public = true
key = "id"

[datasets.items.tables.items.columns]
id = { type = "integer" }
name = { type = "text" }
price = { type = "real" }
"""
FILL = f"SELECT i AS id, 'item ' || i AS name, (i % 1000) / 10.0 AS price FROM generate_series(1, {ROWS}) AS t(i)"


@contextlib.contextmanager
def items_server(directory: Path, fill: str) -> Iterator[RunningServer]:
    """``veil serve`` on a DuckDB dataset whose public table ``items`` holds ``fill``'s rows, for analyst
    ``bench`` (password ``bench``)."""
    with duckdb.connect(str(directory / "items.duckdb")) as connection:
        connection.execute(f"CREATE TABLE items AS {fill}")
    (directory / "veil.toml").write_text(POLICY, encoding="utf-8")
    ledger = Ledger.create(directory / "ledger.sqlite")
    ledger.add_analyst("bench", make_scram_verifier("bench"))
    ledger.grant("bench", "items", PrivacyLoss(1.0))
    ledger.close()
    with running_server(directory / "veil.toml", directory / "serve.log") as server:
        yield server


@pytest.fixture(scope="module")
def veil(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with items_server(tmp_path_factory.mktemp("wire"), FILL) as server:
        yield server


@pytest.fixture(scope="module")
def postgres_items(postgres_dsn: str) -> Iterator[tuple[str, str]]:
    with schema_in(postgres_dsn) as schema:
        with psycopg.connect(postgres_dsn, autocommit=True) as connection:
            connection.execute(f"CREATE TABLE {schema}.items AS {FILL}")
        yield postgres_dsn, schema


def median_ms(action: Callable[[], object], repeats: int = REPEATS) -> float:
    action()
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        timings.append((time.perf_counter() - start) * 1000)
    return statistics.median(timings)


def connections_per_second(connect: Callable[[], psycopg.Connection], seconds: float = 2.0) -> float:
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        connect().close()
        count += 1
    return count / (time.perf_counter() - start)


def test_wire_costs_against_postgresql(veil: RunningServer, postgres_items: tuple[str, str]) -> None:
    dsn, schema = postgres_items
    veil_dsn = f"postgresql://bench:bench@{veil.host}:{veil.port}/items"
    measured: dict[str, dict[str, float]] = {}
    for name, conninfo, table in (("PostgreSQL", dsn, f"{schema}.items"), ("Veil", veil_dsn, "items")):
        with psycopg.connect(conninfo, autocommit=True, prepare_threshold=None) as connection:
            select_one = median_ms(lambda c=connection: c.execute("SELECT 1").fetchall())
            rows = median_ms(
                lambda c=connection, t=table: c.execute(f"SELECT id, name, price FROM {t}").fetchall(), 30
            )
            assert len(connection.execute(f"SELECT id, name, price FROM {table}").fetchall()) == ROWS
        per_second = connections_per_second(lambda c=conninfo: psycopg.connect(c, autocommit=True))
        measured[name] = {"select1": select_one, "rows": rows, "connections": per_second}
    pg, ours = measured["PostgreSQL"], measured["Veil"]
    print(
        f"\nSELECT 1 median: PostgreSQL {pg['select1']:.3f} ms, Veil {ours['select1']:.3f} ms"
        f" ({1000 / ours['select1']:.0f} round trips/s)"
        f"\n{ROWS:,}-row public table: PostgreSQL {pg['rows']:.2f} ms, Veil {ours['rows']:.2f} ms"
        f" (Veil / PostgreSQL {ours['rows'] / pg['rows']:.1f}x)"
        f"\nconnections/s with SCRAM: PostgreSQL {pg['connections']:.0f}, Veil {ours['connections']:.0f}"
    )
    assert all(value > 0 for numbers in measured.values() for value in numbers.values())
