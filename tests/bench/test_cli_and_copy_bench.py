"""Issue 19's two measured goals, each against a baseline measured in the same run, interleaved:

* ``veil --help`` wall time as a ratio to ``python -c pass`` (goal ≤ 5×): the command line loads its heavy
  commands (pandas, DuckDB, sqlglot) only when they run;
* ``COPY (SELECT … FROM a public table) TO STDOUT`` of 100,000 rows through psycopg: Veil against the local
  PostgreSQL server's same COPY of the same rows (goal ≤ 3×).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from tests.bench.test_wire import items_server
from tests.conftest import RunningServer, schema_in

pytestmark = pytest.mark.bench

ROWS = 100_000
RUNS = 15
FILL = (
    f"SELECT i AS id, 'item ' || i AS name, CAST((i % 1000) / 10.0 AS {{double}}) AS price "
    f"FROM generate_series(1, {ROWS}) AS t(i)"
)
VEIL = Path(sys.executable).with_name("veil")


def seconds(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def interleaved(actions: dict[str, Callable[[], object]], runs: int = RUNS) -> dict[str, float]:
    """Median seconds of each action, the actions taking turns so that load affects them alike."""
    for action in actions.values():
        action()  # warm up
    timings: dict[str, list[float]] = {name: [] for name in actions}
    for _ in range(runs):
        for name, action in actions.items():
            timings[name].append(seconds(action))
    return {name: statistics.median(values) for name, values in timings.items()}


def test_veil_help_against_a_bare_interpreter() -> None:
    def run(*command: str) -> Callable[[], object]:
        return lambda: subprocess.run(command, check=True, capture_output=True)

    medians = interleaved(
        {"python -c pass": run(sys.executable, "-c", "pass"), "veil --help": run(str(VEIL), "--help")}
    )
    ratio = medians["veil --help"] / medians["python -c pass"]
    print(
        f"\npython -c pass {medians['python -c pass'] * 1000:.0f} ms, veil --help "
        f"{medians['veil --help'] * 1000:.0f} ms: ratio {ratio:.1f}x (goal <= 5x); median of {RUNS}, interleaved"
    )
    assert ratio > 1


@pytest.fixture(scope="module")
def veil(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with items_server(tmp_path_factory.mktemp("copy"), FILL.format(double="DOUBLE")) as server:
        yield server


def copied(connection: psycopg.Connection, query: str) -> int:
    size = 0
    with connection.cursor().copy(f"COPY ({query}) TO STDOUT") as copy:
        for block in copy:
            size += len(block)
    return size


def test_copy_of_a_public_table_against_postgresql(veil: RunningServer, postgres_dsn: str) -> None:
    with schema_in(postgres_dsn) as schema:
        with psycopg.connect(postgres_dsn, autocommit=True) as connection:
            connection.execute(f"CREATE TABLE {schema}.items AS {FILL.format(double='DOUBLE PRECISION')}")
        veil_dsn = f"postgresql://bench:bench@{veil.host}:{veil.port}/items"
        with (
            psycopg.connect(postgres_dsn, autocommit=True) as pg,
            psycopg.connect(veil_dsn, autocommit=True) as ours,
        ):
            pg_query, our_query = (
                f"SELECT id, name, price FROM {schema}.items",
                "SELECT id, name, price FROM items",
            )
            assert copied(pg, pg_query) == copied(ours, our_query)  # the same bytes' worth of rows
            medians = interleaved(
                {"PostgreSQL": lambda: copied(pg, pg_query), "Veil": lambda: copied(ours, our_query)}
            )
    ratio = medians["Veil"] / medians["PostgreSQL"]
    print(
        f"\nCOPY of {ROWS:,} rows: PostgreSQL {medians['PostgreSQL'] * 1000:.0f} ms, Veil "
        f"{medians['Veil'] * 1000:.0f} ms: ratio {ratio:.1f}x (goal <= 3x); median of {RUNS}, interleaved"
    )
    assert ratio > 0
