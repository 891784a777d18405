"""Engine cost of contribution bounding and planning overhead (issue 3 benchmarks).

A generated DuckDB table of 10 million rows and 1 million people; Veil's generated bounded query vs
hand-written expert SQL doing the same bounding, vs the exact GROUP BY, vs a ROW_NUMBER row-sampling
rewrite; a one-row-per-person table; and the in-process planning path on a small table.
Ratios are measured in the same run. Results go into docs/benchmarks.md.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import PrivateQuery, classify
from proxy.config import parse_config
from proxy.planning import prepare_release
from proxy.release.apply import release

pytestmark = pytest.mark.bench

ROWS, PEOPLE = 10_000_000, 1_000_000
QUERY = "SELECT g, COUNT(*), SUM(v), AVG(v) FROM t GROUP BY g"
POLICY = """
[datasets.bench]
path = "bench.duckdb"

[datasets.bench.tables.t]
privacy_unit = "person"
max_contributions = 10

[datasets.bench.tables.t.columns]
person = { type = "integer" }
g = { type = "integer", public = true, values = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] }
v = { type = "real", lower = 0, upper = 100 }

[datasets.bench.tables.people]
privacy_unit = "row"

[datasets.bench.tables.people.columns]
g = { type = "integer", public = true, values = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] }
v = { type = "real", lower = 0, upper = 100 }
"""
EXPERT = """
WITH partials AS (
  SELECT person, g, COUNT(*) AS n, SUM(LEAST(GREATEST(v, 0), 100)) AS s
  FROM t WHERE g IN (0,1,2,3,4,5,6,7,8,9) GROUP BY person, g),
totals AS (SELECT person, SUM(n) AS total FROM partials GROUP BY person)
SELECT g, SUM(n * LEAST(1.0, 10.0 / total)), SUM(s * LEAST(1.0, 10.0 / total))
FROM partials JOIN totals USING (person) GROUP BY g
"""
SAMPLING = """
SELECT g, COUNT(*), SUM(LEAST(GREATEST(v, 0), 100)) FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY person ORDER BY r) AS k
  FROM (SELECT *, random() AS r FROM t)) WHERE k <= 10 GROUP BY g
"""


def median_seconds(action: Callable[[], object], repeats: int = 3) -> float:
    action()
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("engine") / "bench.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.execute(
            f"CREATE TABLE t AS SELECT (hash(i) % {PEOPLE})::BIGINT AS person, (hash(i * 7) % 10)::INTEGER AS g,"
            f" (hash(i * 13) % 10000) / 100.0 AS v FROM range({ROWS}) r(i)"
        )
        connection.execute(
            f"CREATE TABLE people AS SELECT (hash(i * 7) % 10)::INTEGER AS g, (hash(i * 13) % 10000) / 100.0 AS v"
            f" FROM range({PEOPLE}) r(i)"
        )
    return path


def generated_sql(sql: str, path: Path) -> str:
    dataset = parse_config(POLICY, path=path.parent / "veil.toml").dataset("bench")
    assert dataset is not None
    statement = classify(parse_statements(sql)[0], dataset)
    assert isinstance(statement, PrivateQuery)
    _, engine_sql = prepare_release(statement.shape, epsilon=1.0, dialect="duckdb")
    assert engine_sql is not None
    return engine_sql


def test_bounding_costs_no_more_than_expert_sql(database: Path) -> None:
    connection = duckdb.connect(str(database), read_only=True)
    veil = generated_sql(QUERY, database)
    timings = {
        "exact GROUP BY": median_seconds(
            lambda: connection.execute("SELECT g, COUNT(*), SUM(v), AVG(v) FROM t GROUP BY g").fetchall()
        ),
        "expert pre-aggregation": median_seconds(lambda: connection.execute(EXPERT).fetchall()),
        "Veil bounded query": median_seconds(lambda: connection.execute(veil).fetchall()),
        "ROW_NUMBER row sampling": median_seconds(lambda: connection.execute(SAMPLING).fetchall(), repeats=1),
    }
    people_veil = generated_sql("SELECT g, COUNT(*), SUM(v), AVG(v) FROM people GROUP BY g", database)
    timings["people: exact"] = median_seconds(
        lambda: connection.execute("SELECT g, COUNT(*), SUM(v), AVG(v) FROM people GROUP BY g").fetchall()
    )
    timings["people: Veil"] = median_seconds(lambda: connection.execute(people_veil).fetchall())
    connection.close()
    expert, ours = timings["expert pre-aggregation"], timings["Veil bounded query"]
    print("\n" + "\n".join(f"{name}: {seconds * 1000:.0f} ms" for name, seconds in timings.items()))
    print(
        f"Veil / expert = {ours / expert:.2f}; row sampling / Veil = {timings['ROW_NUMBER row sampling'] / ours:.1f}; "
        f"one row per person: Veil / exact = {timings['people: Veil'] / timings['people: exact']:.2f}"
    )
    assert ours > 0


def test_planning_overhead_on_a_small_table(tmp_path: Path) -> None:
    dataset = parse_config(POLICY, path=tmp_path / "veil.toml").dataset("bench")
    assert dataset is not None
    rng = random.Random(1)
    exact_rows = [(g, 1000.0 + g, 50_000.0, 1000.0) for g in range(10)]

    def plan_and_noise() -> object:
        statement = classify(parse_statements(QUERY)[0], dataset)
        assert isinstance(statement, PrivateQuery)
        plan, _ = prepare_release(statement.shape, epsilon=1.0, dialect="duckdb")
        return release(plan, exact_rows, rng=rng)

    seconds = median_seconds(plan_and_noise, repeats=200)
    print(
        f"\nparse → checks → price → rewrite → noise (10 groups, 3 quantities): median {seconds * 1000:.2f} ms"
    )
    assert seconds > 0
