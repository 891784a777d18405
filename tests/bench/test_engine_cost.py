"""Engine cost of contribution bounding and planning overhead (issue 3 benchmarks).

A generated DuckDB table of 10 million rows and 1 million people; Veil's generated bounded query vs
hand-written expert SQL doing the same bounding, vs the exact GROUP BY, vs a ROW_NUMBER row-sampling
rewrite; a one-row-per-person table; and the in-process planning path on a small table.

The same comparison on PostgreSQL (``-k postgres``; skips without a server, see ``postgres_dsn``) uses
a tenth of the size — 1 million rows, 100,000 people, in a fresh schema — because PostgreSQL's row-at-a-
time executor is about an order of magnitude slower than DuckDB's on these aggregations, and generating
the table takes a while too. Veil's SQL comes from the same planner, in the ``postgres`` dialect.
Ratios are measured in the same run. Results go into docs/benchmarks.md.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest
from psycopg import sql as pgsql

from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import PrivateQuery, classify
from proxy.config import DatasetPolicy, parse_config
from proxy.query.planning import prepare_release
from proxy.release.apply import release
from tests.conftest import schema_in

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


def bench_dataset(policy: str, path: Path) -> DatasetPolicy:
    dataset = parse_config(policy, path=path.parent / "veil.toml").dataset("bench")
    assert dataset is not None
    return dataset


def generated_sql(sql: str, path: Path, *, policy: str = POLICY, dialect: str = "duckdb") -> str:
    """The engine SQL Veil would run for ``sql``: the planner's output, stopped before the engine."""
    statement = classify(parse_statements(sql)[0], bench_dataset(policy, path))
    assert isinstance(statement, PrivateQuery)
    _, engine_sql = prepare_release(statement.shape, epsilon=1.0, dialect=dialect)
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


# --- PostgreSQL -------------------------------------------------------------------------------------

PG_ROWS, PG_PEOPLE = 1_000_000, 100_000
PG_POLICY = POLICY.replace(
    'path = "bench.duckdb"\n',
    'backend = "postgres"\ndsn_env = "VEIL_BENCH_DSN"\nschema = "bench"\n',  # planning never connects
)
# hashint8 spreads rows over people unevenly (about 10 each, some more), as DuckDB's hash() does above.
PG_TABLES = f"""
CREATE TABLE t AS
SELECT abs(hashint8(i)) % {PG_PEOPLE} AS person, (abs(hashint8(i * 7)) % 10)::integer AS g,
       (abs(hashint8(i * 13)) % 10000) / 100.0::double precision AS v
FROM generate_series(0::bigint, {PG_ROWS - 1}) AS r(i);
CREATE TABLE people AS
SELECT (abs(hashint8(i * 7)) % 10)::integer AS g, (abs(hashint8(i * 13)) % 10000) / 100.0::double precision AS v
FROM generate_series(0::bigint, {PG_PEOPLE - 1}) AS r(i);
"""
# The expert SQL above, as a PostgreSQL expert writes it: the per-person total as double precision
# (SUM of bigint is NUMERIC in PostgreSQL, and NUMERIC arithmetic is several times slower).
PG_EXPERT = """
WITH partials AS (
  SELECT person, g, COUNT(*) AS n, SUM(LEAST(GREATEST(v, 0), 100)) AS s
  FROM t WHERE g IN (0,1,2,3,4,5,6,7,8,9) GROUP BY person, g),
totals AS (SELECT person, SUM(n)::double precision AS total FROM partials GROUP BY person)
SELECT g, SUM(n * LEAST(1.0, 10.0 / total)), SUM(s * LEAST(1.0, 10.0 / total))
FROM partials JOIN totals USING (person) GROUP BY g ORDER BY g
"""
PG_SAMPLING = """
SELECT g, COUNT(*), SUM(LEAST(GREATEST(v, 0), 100)) FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY person ORDER BY r) AS k
  FROM (SELECT *, random() AS r FROM t) AS shuffled) AS numbered WHERE k <= 10 GROUP BY g
"""


@pytest.fixture(scope="module")
def postgres_bench(postgres_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection whose search_path is a fresh schema holding ``t`` and ``people`` (dropped after)."""
    with schema_in(postgres_dsn) as schema, psycopg.connect(postgres_dsn, autocommit=True) as connection:
        connection.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
        connection.execute(PG_TABLES)  # type: ignore[call-overload]
        connection.execute("VACUUM ANALYZE t")
        connection.execute("VACUUM ANALYZE people")
        yield connection


@pytest.mark.postgres
def test_postgres_bounding_costs_no_more_than_expert_sql(
    postgres_bench: psycopg.Connection[Any], tmp_path: Path
) -> None:
    connection = postgres_bench

    def run(sql: str) -> Callable[[], list[Any]]:
        return lambda: connection.execute(sql).fetchall()  # type: ignore[call-overload]

    veil = generated_sql(QUERY, tmp_path / "bench", policy=PG_POLICY, dialect="postgres")
    people_veil = generated_sql(
        "SELECT g, COUNT(*), SUM(v), AVG(v) FROM people GROUP BY g",
        tmp_path / "bench",
        policy=PG_POLICY,
        dialect="postgres",
    )
    # The same bounding, so the same exact bounded quantities (before noise) per group.
    ours = {row[0]: (row[1], row[2]) for row in run(veil)()}
    expert = {row[0]: (row[1], row[2]) for row in run(PG_EXPERT)()}
    assert ours.keys() == expert.keys() == set(range(10))
    for g, (count, total) in expert.items():
        assert math.isclose(ours[g][0], count, rel_tol=1e-9) and math.isclose(ours[g][1], total, rel_tol=1e-9)

    timings = {
        "exact GROUP BY": median_seconds(run("SELECT g, COUNT(*), SUM(v), AVG(v) FROM t GROUP BY g")),
        "expert pre-aggregation": median_seconds(run(PG_EXPERT)),
        "Veil bounded query": median_seconds(run(veil)),
        "ROW_NUMBER row sampling": median_seconds(run(PG_SAMPLING), repeats=1),
        "people: exact": median_seconds(run("SELECT g, COUNT(*), SUM(v), AVG(v) FROM people GROUP BY g")),
        "people: Veil": median_seconds(run(people_veil)),
    }
    settings = dict(
        connection.execute(
            "SELECT name, current_setting(name) FROM pg_settings"
            " WHERE name IN ('work_mem', 'jit', 'max_parallel_workers_per_gather', 'shared_buffers')"
        ).fetchall()
    )
    (version,) = connection.execute("SHOW server_version").fetchone()  # type: ignore[misc]
    ratio = timings["Veil bounded query"] / timings["expert pre-aggregation"]
    print(f"\nPostgreSQL {version}, {settings}; {PG_ROWS:,} rows, {PG_PEOPLE:,} people")
    print("\n".join(f"{name}: {seconds * 1000:.0f} ms" for name, seconds in timings.items()))
    print(
        f"Veil / expert = {ratio:.2f}; "
        f"row sampling / Veil = {timings['ROW_NUMBER row sampling'] / timings['Veil bounded query']:.1f}; "
        f"Veil / exact = {timings['Veil bounded query'] / timings['exact GROUP BY']:.1f}; "
        f"one row per person: Veil / exact = {timings['people: Veil'] / timings['people: exact']:.2f}"
    )
    assert ratio > 0
