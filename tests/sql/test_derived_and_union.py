"""WITH, subqueries in FROM, per-person derived tables, FILTER and UNION ALL (issue 18, part B), table-driven
on DuckDB, PostgreSQL and Spark: each shape is answered through the query service at a large ε with a seeded RNG,
its price is checked (the ledger's charge, the NOTICE's split) and its answer against the exact answer of
the same query in plain SQL over the raw rows (DuckDB). Then what an attacker would try: refused shapes
spend nothing, an engine failure in any part of a UNION ALL charges the statement, and a person with many
rows moves a per-person aggregate by at most what was priced.

Every test that takes ``service`` runs three times: ``[duckdb]`` always, ``[postgres]`` (marked
``postgres``) against the server of ``tests/conftest.py`` — skipped when it is unreachable, unless
``VEIL_REQUIRE_POSTGRES=1`` — and ``[spark]`` (marked ``spark``, the same rows as Parquet; skipped without
pyspark and Java unless ``VEIL_REQUIRE_SPARK=1``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from budget.ledger import Ledger, SpendState
from budget.loss import PrivacyLoss
from proxy.analysis.parse import parse_statements
from proxy.analysis.refusals import UNSUPPORTED
from proxy.analysis.shape import QueryShape
from proxy.analysis.statements import PrivateQuery, classify
from proxy.backends.base import Backend
from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.postgres import PostgresBackend
from proxy.config import ColumnType, DatasetPolicy
from proxy.errors import BackendUnavailableError, ProxyError
from proxy.query.planning import collect_histograms, prepare_release, resolve_group_domains
from proxy.query.service import Principal, QueryService, StatementOutcome
from proxy.release.plan import ReleasePlan
from proxy.rewrite.bound_contributions import value_histogram_query
from proxy.settings import SessionSettings
from proxy.wire.scram import make_scram_verifier
from tests.conftest import schema_in
from tests.sql.shapes_fixture import (
    POLICY,
    duckdb_file,
    frames,
    load_duckdb,
    load_postgres,
    shapes_policy,
    shapes_postgres_policy,
)
from tests.sql.spark_fixture import open_spark, spark_policy

ALICE = Principal("alice")
BACKENDS = [
    "duckdb",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("spark", marks=pytest.mark.spark),
]
LARGE_EPSILON = "100"


@dataclass(frozen=True)
class Engine:
    dataset: DatasetPolicy
    backend: Backend


def _engine(request: pytest.FixtureRequest, directory: Path, *, heavy: int = 30) -> Iterator[Engine]:
    if request.param == "spark":
        request.getfixturevalue("spark_ready")  # skips (or fails) here without pyspark and Java
        directory.mkdir(exist_ok=True)
        location = 'path = "shapes.duckdb"\n'
        dataset = spark_policy(
            POLICY,
            location,
            name="shapes",
            duckdb_path=duckdb_file(directory, heavy=heavy),
            directory=directory,
        )
        spark_backend = open_spark(dataset)
        try:
            yield Engine(dataset, spark_backend)
        finally:
            spark_backend.close()
        return
    if request.param == "duckdb":
        directory.mkdir(exist_ok=True)
        duckdb_backend = DuckDBBackend(duckdb_file(directory, heavy=heavy))
        try:
            yield Engine(shapes_policy(directory), duckdb_backend)
        finally:
            duckdb_backend.close()
        return
    dsn = request.getfixturevalue("postgres_dsn")  # skips (or fails) here when the server is down
    with schema_in(dsn) as schema:
        load_postgres(dsn, schema, heavy=heavy)
        dataset = shapes_postgres_policy(dsn, schema)
        assert dataset.dsn is not None
        backend = PostgresBackend(dataset.dsn, schema=dataset.schema, pool_size=dataset.pool_size)
        try:
            yield Engine(dataset, backend)
        finally:
            backend.close()


@pytest.fixture(scope="module", params=BACKENDS)
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """The dataset in one engine, built once for the module."""
    yield from _engine(request, tmp_path_factory.mktemp("shapes"))


@pytest.fixture(scope="module")
def exact() -> Iterator[duckdb.DuckDBPyConnection]:
    """The raw rows in DuckDB, for the exact answers."""
    with duckdb.connect(":memory:") as connection:
        load_duckdb(connection, frames())
        yield connection


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    ledger.add_analyst("alice", make_scram_verifier("secret", iterations=1))
    ledger.grant("alice", "shapes", PrivacyLoss(10_000.0, 1e-3))
    return ledger


@pytest.fixture
def service(engine: Engine, ledger: Ledger) -> Iterator[QueryService]:
    sandbox = DuckDBBackend.sandbox()
    try:
        yield QueryService(
            engine.dataset, backend=engine.backend, sandbox=sandbox, ledger=ledger, rng=random.Random(18)
        )
    finally:
        sandbox.close()


def run(service: QueryService, sql: str, epsilon: str = LARGE_EPSILON, **settings: str) -> StatementOutcome:
    (tree,) = service.parse(sql)
    return service.run(tree, principal=ALICE, settings=SessionSettings({"veil.epsilon": epsilon, **settings}))


@dataclass(frozen=True)
class Shape:
    id: str
    sql: str
    notice: tuple[str, ...]  # what the NOTICE must say of the ε split at ε = 100
    exact: str | None = None  # the same query in plain SQL (DuckDB) when Veil's own syntax is not that
    absolute: float = 1.0  # tolerance: |noisy − exact| <= absolute + relative·|exact|
    relative: float = 0.01


PER_USER = "WITH per_user AS (SELECT user_id, COUNT(*) AS n FROM ratings GROUP BY user_id) "
SHAPES = [
    Shape(
        "cte_per_user_avg_and_median",
        PER_USER + "SELECT AVG(n), PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY n) FROM per_user",
        ("n in [0, ", "] chosen with DP ε=10", "sum(n) ε=30", "count(n) ε=30", "median(n) ε=30"),
        exact=PER_USER + "SELECT AVG(n), quantile_cont(n, 0.5) FROM per_user",
        absolute=1.1,  # the median of integer counts: any point of (10, 11] has the median's rank
    ),
    Shape(
        "subquery_per_user_clamped",
        "SELECT COUNT(*) AS users, AVG(veil_clamp(n, 0, 50)) AS per_user"
        " FROM (SELECT user_id, COUNT(*) AS n FROM ratings GROUP BY user_id) AS p",
        ("count(*) ε=33.33", "ε=33.33"),
        exact="SELECT COUNT(*), AVG(LEAST(GREATEST(n, 0), 50))"
        " FROM (SELECT user_id, COUNT(*) AS n FROM ratings GROUP BY user_id) AS p",
    ),
    Shape(
        "cte_per_user_sum_and_filter",
        "WITH u AS (SELECT user_id, SUM(stars) AS total, COUNT(*) FILTER (WHERE stars >= 4) AS liked"
        " FROM ratings GROUP BY user_id) SELECT AVG(total), AVG(liked) FROM u",
        ("total in [0, ", "liked in [0, ", "chosen with DP ε=5", "sum(total) ε=22.5", "count(liked) ε=22.5"),
        relative=0.02,  # the heavy user's 30 ratings are clamped to the chosen bound
    ),
    Shape(
        "cte_per_user_mean_of_means",
        "WITH u AS (SELECT user_id, AVG(stars) AS mean_stars FROM ratings GROUP BY user_id)"
        " SELECT AVG(mean_stars) FROM u",
        ("sum(mean_stars) ε=50", "count(mean_stars) ε=50"),
        absolute=0.05,
    ),
    Shape(
        "cte_row_filter",
        "WITH adults AS (SELECT * FROM visits WHERE age >= 40)"
        " SELECT region, COUNT(*) AS n, AVG(cost) AS mean_cost FROM adults GROUP BY region",
        ("count(*) ε=33.33", "sum(cost) ε=33.33", "count(cost) ε=33.33"),
    ),
    Shape(
        "subquery_rows_renamed",
        "SELECT r, SUM(c) AS total FROM (SELECT region AS r, cost * 2 AS c FROM visits) AS v GROUP BY r",
        ("ε=100",),
        absolute=200,  # a sum of about 700,000 with noise of scale 3,000/100
    ),
    Shape(
        "cte_chained",
        "WITH liked AS (SELECT * FROM ratings WHERE stars >= 4),"
        " per_user AS (SELECT user_id, COUNT(*) AS n FROM liked GROUP BY user_id)"
        " SELECT COUNT(*) AS users, AVG(veil_clamp(n, 0, 20)) AS liked FROM per_user",
        ("count(*) ε=33.33",),
        exact="WITH liked AS (SELECT * FROM ratings WHERE stars >= 4),"
        " per_user AS (SELECT user_id, COUNT(*) AS n FROM liked GROUP BY user_id)"
        " SELECT COUNT(*), AVG(LEAST(n, 20)) FROM per_user",
    ),
    Shape(
        "distinct_people",
        "SELECT COUNT(*) AS people FROM (SELECT DISTINCT user_id FROM ratings) AS s",
        ("count(*) ε=100",),
    ),
    Shape(
        "filter_count_and_sum",
        "SELECT COUNT(*) FILTER (WHERE cost IS NULL) AS missing,"
        " SUM(cost) FILTER (WHERE region = 'north') AS north FROM visits",
        (  # named as written, not as the CASE they are rewritten to
            "(count(*) FILTER (WHERE cost IS NULL) ε=50, sum(cost) FILTER (WHERE region = 'north') ε=50)",
        ),
        absolute=100,
    ),
    Shape(
        "filter_grouped",
        "SELECT region, COUNT(*) FILTER (WHERE age >= 65) AS old,"
        " AVG(cost) FILTER (WHERE age < 65) AS mean_cost FROM visits GROUP BY region",
        (
            "(count(*) FILTER (WHERE age >= 65) ε=33.33, sum(cost) FILTER (WHERE age < 65) ε=33.33,"
            " count(cost) FILTER (WHERE age < 65) ε=33.33)",
        ),
    ),
    Shape(
        "filter_percentile",
        "SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY age) FILTER (WHERE cost IS NOT NULL) FROM visits",
        ("(median(age) FILTER (WHERE cost IS NOT NULL) ε=100)",),
        exact="SELECT quantile_cont(age, 0.5) FILTER (WHERE cost IS NOT NULL) FROM visits",
        absolute=1.5,
    ),
    Shape(  # people with a matching row, priced as people (sensitivity 1), the analyst's CASE form too
        "filter_count_people",
        "SELECT COUNT(DISTINCT patient_id) FILTER (WHERE cost > 400) AS costly,"
        " COUNT(DISTINCT CASE WHEN age < 40 THEN patient_id END) AS young FROM visits",
        (
            "(count(DISTINCT patient_id) FILTER (WHERE cost > 400) ε=50,"
            " count(DISTINCT CASE WHEN age < 40 THEN patient_id END) ε=50)",
        ),
        relative=0,
    ),
    Shape(  # each patient has visits in both regions: weighted min(1, L / 2) = 1, so exact up to the noise
        "filter_count_people_grouped",
        "SELECT region, COUNT(DISTINCT patient_id) FILTER (WHERE cost < 200) AS cheap,"
        " COUNT(DISTINCT patient_id) AS everyone FROM visits GROUP BY region",
        ("(count(DISTINCT patient_id) FILTER (WHERE cost < 200) ε=50, count(DISTINCT patient_id) ε=50)",),
        relative=0,
    ),
    Shape(  # the heavy user rated 3 stars only: not among the people counted
        "filter_count_people_with_a_heavy_user",
        "SELECT COUNT(DISTINCT user_id) FILTER (WHERE stars = 5) FROM ratings",
        ("(count(DISTINCT user_id) FILTER (WHERE stars = 5) ε=100)",),
        relative=0,
    ),
    Shape(  # the regions tie over all visits; the conditions break the tie in opposite directions
        "filter_mode",
        "SELECT MODE() WITHIN GROUP (ORDER BY region) FILTER (WHERE age < 40) AS young,"
        " MODE() WITHIN GROUP (ORDER BY region) FILTER (WHERE cost > 250) AS costly FROM visits",
        ("(mode(region) FILTER (WHERE age < 40) ε=50, mode(region) FILTER (WHERE cost > 250) ε=50)",),
        exact="SELECT mode(region) FILTER (WHERE age < 40), mode(region) FILTER (WHERE cost > 250) FROM visits",
    ),
    Shape(  # a per-person value under a FILTER: its bound chosen with DP from the people it reads
        "filter_per_person_chosen_bound",
        PER_USER
        + "SELECT AVG(n) FILTER (WHERE n > 10) AS many, SUM(n) FILTER (WHERE n <= 5) AS few FROM per_user",
        (
            "n FILTER (WHERE n > 10) in [0, ",
            "n FILTER (WHERE n <= 5) in [0, ",
            "chosen with DP ε=5",
            "sum(n) FILTER (WHERE n > 10) ε=30",
            "count(n) FILTER (WHERE n > 10) ε=30",
            "sum(n) FILTER (WHERE n <= 5) ε=30",
        ),
        relative=0.02,  # the heavy user's 30 ratings are clamped to the chosen bound
    ),
    Shape(  # a pair of per-person values: both bounds chosen with DP and applied to the pair's sums
        "cte_per_user_correlation",
        "WITH u AS (SELECT user_id, COUNT(*) AS n, SUM(stars) AS total FROM ratings GROUP BY user_id)"
        " SELECT CORR(total, n) FROM u",
        ("n in [0, ", "total in [0, ", "chosen with DP ε=5", "sum(n * total) ε=15"),
        absolute=0.05,  # the heavy user's count and total are clamped to the chosen bounds
        relative=0,
    ),
    Shape(
        "union_all_counts",
        "SELECT 'visits' AS source, COUNT(*) AS n FROM visits UNION ALL SELECT 'ratings', COUNT(*) FROM ratings",
        ("ε=100 in 2 parts of a UNION ALL", "part 1: ε=50 (count(*) ε=50)", "part 2: ε=50 (count(*) ε=50)"),
    ),
    Shape(
        "union_all_total_and_groups_limited",
        "SELECT 'all' AS region, COUNT(*) AS n FROM visits"
        " UNION ALL SELECT region, COUNT(*) FROM visits GROUP BY region ORDER BY n DESC LIMIT 1",
        ("in 2 parts of a UNION ALL",),
    ),
    Shape(
        "union_all_integer_and_real",
        "SELECT COUNT(*) AS value FROM visits UNION ALL SELECT AVG(age) FROM visits",
        ("part 1: ε=50", "part 2: ε=50 (sum(age) ε=25, count(age) ε=25)"),
    ),
    Shape(
        "union_all_of_a_cte",
        PER_USER + "SELECT AVG(n) AS value FROM per_user UNION ALL SELECT COUNT(*) FROM per_user",
        ("part 1: ε=50 (n in [0, ", "chosen with DP ε=5", "part 2: ε=50 (count(*) ε=50)"),
    ),
]


def _close(noisy: Any, exact: Any, shape: Shape) -> bool:
    if isinstance(exact, str) or exact is None:
        return noisy == exact
    return math.isfinite(float(noisy)) and abs(
        float(noisy) - float(exact)
    ) <= shape.absolute + shape.relative * abs(float(exact))


def _sorted(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Grouped answers come back in the policy's key order, exact ones in the engine's: sort by the keys."""
    return sorted(rows, key=lambda row: tuple(str(value) for value in row if isinstance(value, str)))


@pytest.mark.parametrize("shape", SHAPES, ids=[shape.id for shape in SHAPES])
def test_shape_is_answered_priced_and_accurate(
    service: QueryService, ledger: Ledger, exact: duckdb.DuckDBPyConnection, shape: Shape
) -> None:
    outcome = run(service, shape.sql)
    assert outcome.table is not None
    for text in shape.notice:
        assert text in outcome.notices[0], outcome.notices[0]
    (spend,) = ledger.history("alice")
    assert spend.state is SpendState.COMMITTED
    assert ledger.balance("alice", "shapes").spent_epsilon == pytest.approx(100)
    expected = _sorted(exact.execute(shape.exact or shape.sql).fetchall())
    answer = _sorted(outcome.table.rows)
    assert len(answer) == len(expected), (answer, expected)
    for got, want in zip(answer, expected, strict=True):
        assert all(_close(g, w, shape) for g, w in zip(got, want, strict=True)), (got, want)


def test_per_user_average_without_bounds_prices_the_chosen_bound(service: QueryService) -> None:
    """At ε = 1 the chosen bound costs a tenth of it, named in the NOTICE; the answer is an average."""
    outcome = run(service, PER_USER + "SELECT AVG(n) FROM per_user", epsilon="1")
    assert "chosen with DP ε=0.1, sum(n) ε=0.45, count(n) ε=0.45" in outcome.notices[0]
    assert outcome.table is not None and outcome.table.columns[0].type is ColumnType.REAL


def test_a_filtered_per_person_bound_fits_the_values_the_filter_keeps(service: QueryService) -> None:
    """Chosen over every user, n's bound fits counts up to 20 (and the heavy user's 30); chosen over the
    users with n <= 5 — the only values SUM(n) FILTER (WHERE n <= 5) reads — it fits 5, so the sum's
    noise is that of a bound of about 6, not 32."""
    outcome = run(
        service, PER_USER + "SELECT SUM(n) AS every, SUM(n) FILTER (WHERE n <= 5) AS few FROM per_user"
    )
    notice = outcome.notices[0]
    filtered = notice.split("n FILTER (WHERE n <= 5) in [0, ", 1)[1].split("]", 1)[0]
    everyone = notice.split("(n in [0, ", 1)[1].split("]", 1)[0]
    assert 5 <= int(filtered) <= 8 < int(everyone), notice


def test_union_all_is_one_reservation_of_the_sum(service: QueryService, ledger: Ledger) -> None:
    run(
        service,
        "SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*) FROM ratings UNION ALL SELECT 1.0 * COUNT(*) FROM visits WHERE age > 30",
        epsilon="3",
    )
    (spend,) = ledger.history("alice")
    assert spend.state is SpendState.COMMITTED and spend.epsilon == pytest.approx(3)


def test_union_all_parts_already_answered_are_free(service: QueryService, ledger: Ledger) -> None:
    """A part is the same question as the query on its own at its share of ε: its stored answer serves."""
    alone = run(service, "SELECT COUNT(*) FROM visits", epsilon="1")
    union = run(service, "SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*) FROM ratings", epsilon="2")
    assert "part 1: the stored answer, free" in union.notices[0]
    assert union.table is not None and alone.table is not None
    assert union.table.rows[0] == alone.table.rows[0]
    assert ledger.balance("alice", "shapes").spent_epsilon == pytest.approx(2)  # 1 alone + 1 for part 2
    again = run(service, "SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*) FROM ratings", epsilon="2")
    assert "spent nothing" in again.notices[0]
    assert again.table is not None and again.table.rows == union.table.rows
    assert ledger.balance("alice", "shapes").spent_epsilon == pytest.approx(2)


def test_engine_failure_in_a_later_part_charges_the_statement(service: QueryService, ledger: Ledger) -> None:
    """Part 1 has read private rows when part 2 fails: the whole statement is charged, as one entry."""
    with pytest.raises(BackendUnavailableError) as raised:
        run(service, "SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*) FROM missing", epsilon="2")
    assert "charged" in str(raised.value.detail)
    (spend,) = ledger.history("alice")
    assert spend.state is SpendState.COMMITTED and spend.epsilon == pytest.approx(2)


REFUSED = [
    (
        "SELECT COUNT(*) FROM visits UNION ALL SELECT region FROM visits GROUP BY region",
        "42501",
        "must aggregate",
    ),
    (
        "SELECT 'a' AS x FROM visits GROUP BY region UNION ALL SELECT COUNT(*) FROM visits",
        "42501",
        "must aggregate",
    ),
    (
        "SELECT region, COUNT(*) FROM visits GROUP BY region UNION ALL SELECT COUNT(*), 1 FROM visits",
        "42804",
        "UNION types text and integer cannot be matched",
    ),
    (
        "SELECT COUNT(*), 1 FROM visits UNION ALL SELECT COUNT(*) FROM visits",
        "42601",
        "same number of columns",
    ),
    (
        "SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*) FROM visits ORDER BY COUNT(*)",
        "0A000",
        "ORDER BY clause",
    ),
    (
        "SELECT AVG(n) FROM (SELECT user_id, MIN(movie) AS n FROM ratings GROUP BY user_id) p",
        "42501",
        r'avg\(n\): column "n" has no declared bounds',
    ),
    ("SELECT COUNT(*) FROM (SELECT * FROM visits ORDER BY age LIMIT 10) s", "42501", "LIMIT and OFFSET"),
    (
        "WITH RECURSIVE r AS (SELECT 1 AS x UNION ALL SELECT x + 1 FROM r) SELECT COUNT(*) FROM r, visits",
        "42501",
        "WITH RECURSIVE",
    ),
]


@pytest.mark.parametrize(("sql", "sqlstate", "message"), REFUSED)
def test_refused_shapes_spend_nothing(
    service: QueryService, ledger: Ledger, sql: str, sqlstate: str, message: str | None
) -> None:
    with pytest.raises(ProxyError, match=message) as raised:
        run(service, sql)
    assert raised.value.sqlstate == sqlstate
    assert ledger.history("alice") == []


CONSTRUCTS = {
    "window function": "SELECT COUNT(*) OVER () FROM visits",
    "WINDOW clause": "SELECT COUNT(*) FROM visits WINDOW w AS (PARTITION BY region)",
    "QUALIFY": "SELECT region, COUNT(*) FROM visits GROUP BY region QUALIFY COUNT(*) > 1",
    "WITH RECURSIVE": "WITH RECURSIVE v AS (SELECT * FROM visits) SELECT COUNT(*) FROM v",
    "UNION": "SELECT COUNT(*) FROM visits UNION SELECT COUNT(*) FROM ratings",
    "INTERSECT": "SELECT COUNT(*) FROM visits INTERSECT SELECT COUNT(*) FROM ratings",
    "EXCEPT": "SELECT COUNT(*) FROM visits EXCEPT SELECT COUNT(*) FROM ratings",
    "nested UNION ALL": "SELECT COUNT(*) FROM ((SELECT COUNT(*) FROM visits LIMIT 1) UNION ALL SELECT COUNT(*) FROM ratings) s",
    "UNION ALL part": "SELECT COUNT(*) FROM visits UNION ALL SELECT 1",
    "LATERAL": "SELECT COUNT(*) FROM visits v, LATERAL (SELECT 1 AS one) x",
    "joined subquery": "SELECT COUNT(*) FROM visits v JOIN (SELECT * FROM visits) w ON v.patient_id = w.patient_id",
    "GROUPING SETS": "SELECT region, COUNT(*) FROM visits GROUP BY GROUPING SETS ((region), ())",
    "ROLLUP": "SELECT region, COUNT(*) FROM visits GROUP BY ROLLUP (region)",
    "CUBE": "SELECT region, COUNT(*) FROM visits GROUP BY CUBE (region)",
    "select-list subquery": "SELECT COUNT(*), (SELECT COUNT(*) FROM ratings) FROM visits",
    "subquery LIMIT": "SELECT COUNT(*) FROM (SELECT * FROM visits LIMIT 5) s",
    "FETCH": "SELECT COUNT(*) FROM visits FETCH FIRST 1 ROWS ONLY",
}


def test_every_construct_has_a_refusal_case() -> None:
    assert set(CONSTRUCTS) == set(UNSUPPORTED)


@pytest.mark.parametrize(("construct", "sql"), list(CONSTRUCTS.items()), ids=list(CONSTRUCTS))
def test_each_unsupported_construct_is_refused_with_its_message(
    service: QueryService, ledger: Ledger, construct: str, sql: str
) -> None:
    message, hint = UNSUPPORTED[construct]
    with pytest.raises(ProxyError) as raised:
        run(service, sql)
    assert (raised.value.sqlstate, raised.value.message, raised.value.hint) == ("42501", message, hint)
    assert ledger.history("alice") == []


@pytest.fixture(params=BACKENDS)
def heavy_engines(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Engine, Engine]]:
    """The dataset without user 5000, and with user 5000 holding 20,000 ratings."""
    without = _engine(request, tmp_path / "without", heavy=0)
    with_heavy = _engine(request, tmp_path / "with", heavy=20_000)
    try:
        yield next(without), next(with_heavy)
    finally:
        for generator in (without, with_heavy):
            generator.close()


def test_a_person_with_many_rows_moves_the_derived_aggregate_by_at_most_its_sensitivity(
    heavy_engines: tuple[Engine, Engine],
) -> None:
    """The engine's exact, bounded quantities of ``AVG(n)`` and the median of ``n`` over per-user counts,
    with and without one user who has 20,000 rows: the sum moves by at most the priced sensitivity (the
    chosen bound), the count and every histogram (the bound's and the quantile's) by at most one person."""
    small, large = heavy_engines
    sql = PER_USER + "SELECT AVG(n), MEDIAN(n) FROM per_user"
    (tree,) = parse_statements(sql)
    statement = classify(tree, small.dataset)
    assert isinstance(statement, PrivateQuery)
    dialect = small.backend.dialect
    shape = resolve_group_domains(statement.shape, execute=small.backend.execute, dialect=dialect)
    (bound,) = shape.value_bounds
    chosen = shape.with_value_bounds((bound.with_choice(24),))
    plan, main = prepare_release(chosen, epsilon=1.0, dialect=dialect, bound_epsilon=0.1)
    assert main is not None
    sums = [engine.backend.execute(main)[1][0] for engine in (small, large)]
    for measurement, before, after in zip(plan.scalar_measurements, *sums, strict=True):
        assert abs(float(after) - float(before)) <= measurement.sensitivity
    assert [m.sensitivity for m in plan.scalar_measurements] == [24.0, 1.0]  # sum(n), count(n)
    histograms = [
        collect_histograms(plan, execute=engine.backend.execute, dialect=dialect) for engine in (small, large)
    ]
    (name,) = histograms[0]
    (before,), (after,) = histograms[0][name].values(), histograms[1][name].values()
    assert sum(abs(a - b) for a, b in zip(after, before, strict=True)) <= 1
    counts = value_histogram_query(shape, bound, dialect=dialect).sql(dialect=dialect)
    people = [dict(engine.backend.execute(counts)[1]) for engine in (small, large)]
    moved = sum(abs(people[1].get(k, 0) - people[0].get(k, 0)) for k in set(people[0]) | set(people[1]))
    assert moved == 1, "the heavy user is one more person at the cap"


def _exact_quantities(engine: Engine, shape: QueryShape) -> tuple[tuple[Any, ...], ReleasePlan]:
    dialect = engine.backend.dialect
    plan, main = prepare_release(shape, epsilon=1.0, dialect=dialect, bound_epsilon=0.1)
    assert main is not None
    return engine.backend.execute(main)[1][0], plan


def _shape(sql: str, engine: Engine) -> QueryShape:
    (tree,) = parse_statements(sql)
    statement = classify(tree, engine.dataset)
    assert isinstance(statement, PrivateQuery)
    return resolve_group_domains(
        statement.shape, execute=engine.backend.execute, dialect=engine.backend.dialect
    )


def test_a_person_with_many_matching_rows_moves_filtered_aggregates_by_at_most_their_sensitivity(
    heavy_engines: tuple[Engine, Engine],
) -> None:
    """User 5000's 20,000 ratings all have 3 stars: counted once among the people with a 3-star rating
    (sensitivity 1, whatever their rows), and their per-person count, read under ``n > 10``, moves the
    filtered sum by at most the chosen bound and the bound's histogram — over the matching people only —
    by one person."""
    small, large = heavy_engines
    sql = PER_USER + "SELECT SUM(n) FILTER (WHERE n > 10), COUNT(n) FILTER (WHERE n > 10) FROM per_user"
    shape = _shape(sql, small)
    (bound,) = shape.value_bounds
    assert bound.key == "n FILTER (WHERE n > 10)"
    chosen = shape.with_value_bounds((bound.with_choice(24),))
    (before, plan), (after, _) = (_exact_quantities(engine, chosen) for engine in (small, large))
    assert [m.sensitivity for m in plan.scalar_measurements] == [24.0, 1.0]
    assert [float(a) - float(b) for a, b in zip(after, before, strict=True)] == [24.0, 1.0]
    counts = value_histogram_query(shape, bound, dialect=small.backend.dialect).sql(
        dialect=small.backend.dialect
    )
    people = [dict(engine.backend.execute(counts)[1]) for engine in (small, large)]
    assert sum(people[0].values()) == 500, "only the users with more than 10 ratings: 500 of 1,000"
    moved = sum(abs(people[1].get(k, 0) - people[0].get(k, 0)) for k in set(people[0]) | set(people[1]))
    assert moved == 1, "the heavy user is one more person at the cap"
    sql = "SELECT COUNT(DISTINCT user_id) FILTER (WHERE stars = 3) FROM ratings"
    (before, plan), (after, _) = (_exact_quantities(engine, _shape(sql, engine)) for engine in (small, large))
    assert [m.sensitivity for m in plan.scalar_measurements] == [1.0]
    assert int(after[0]) - int(before[0]) == 1
