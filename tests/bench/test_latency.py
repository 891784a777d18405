"""Latency of a DP COUNT through the whole proxy vs the same exact COUNT straight in DuckDB.

Run with ``make bench``. Both are measured in the same run on the same 100,000-person demo; the
ratio is what to compare across machines. Results go into docs/benchmarks.md.
"""

from __future__ import annotations

import itertools
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import psycopg
import pytest

pytestmark = pytest.mark.bench

REPEATS = 50
VEIL = Path(sys.executable).parent / "veil"
COUNT = "SELECT COUNT(*) FROM visits"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("bench") / "demo"
    subprocess.run([str(VEIL), "init-demo", str(directory)], check=True, capture_output=True)
    return directory


@pytest.fixture(scope="module")
def port(demo: Path) -> Iterator[int]:
    server = subprocess.Popen(
        [str(VEIL), "serve", "--config", str(demo / "veil.toml"), "--port", "0", "--log-level", "warning"],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stderr is not None
    line = server.stderr.readline()
    match = re.search(r"listening on [\d.]+:(\d+)", line)
    assert match, line
    yield int(match.group(1))
    server.terminate()
    server.wait(timeout=10)
    server.stderr.close()


def median_ms(action: Callable[[], object]) -> float:
    action()  # warm-up
    timings = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        action()
        timings.append((time.perf_counter() - start) * 1000)
    return statistics.median(timings)


def test_dp_count_latency_against_direct_duckdb(demo: Path, port: int) -> None:
    direct = duckdb.connect(str(demo / "demo.duckdb"), read_only=True)
    exact_ms = median_ms(lambda: direct.execute(COUNT).fetchall())
    # the expert's hand-written bounding: per-person pre-aggregation, capped at max_contributions
    bounded_ms = median_ms(
        lambda: direct.execute(
            "SELECT SUM(LEAST(n, 10)) FROM (SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY patient_id)"
        ).fetchall()
    )
    conninfo = f"postgresql://alice:veil-demo@127.0.0.1:{port}/demo"
    fresh = itertools.count()  # each query differs (a predicate true for every row): none is cached
    with psycopg.connect(conninfo, prepare_threshold=None, autocommit=True) as connection:
        connection.execute("SET veil.epsilon = 0.001")  # 52 answers must fit the demo's grant
        dp_ms = median_ms(lambda: connection.execute(f"{COUNT} WHERE cost > -1 - {next(fresh)}").fetchall())
        cached_ms = median_ms(lambda: connection.execute(f"{COUNT} WHERE cost > -1").fetchall())
    direct.close()
    print(
        f"\nmedian of {REPEATS}: exact COUNT in DuckDB {exact_ms:.2f} ms; "
        f"bounded COUNT in DuckDB {bounded_ms:.2f} ms; DP COUNT through Veil + psycopg {dp_ms:.2f} ms "
        f"(a repeat, from the answer cache: {cached_ms:.2f} ms); "
        f"ratio DP/exact {dp_ms / exact_ms:.1f}x, DP/bounded {dp_ms / bounded_ms:.2f}x"
    )
    assert dp_ms > 0 and exact_ms > 0 and cached_ms > 0
