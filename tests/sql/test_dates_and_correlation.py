"""Dates and correlation (issue 18, part C), table-driven, on DuckDB, PostgreSQL and Spark.

The same 12,000 events of 6,000 people (two each, ``max_contributions = 2``, so no person is ever scaled)
live in a DuckDB file and in a PostgreSQL schema; every value lies inside its declared bounds, so the
exact answer of each query is what the engine's own SQL computes over the rows. Each accepted shape runs
through the query service at a large ε with a seeded RandomSource and is checked for

* its price: the ε split the NOTICE states (quantity by quantity), what the ledger was charged (ε, and no δ),
  and the sensitivities ``veil explain`` gives for those quantities;
* its accuracy against the exact answer;
* its types: dates come back as dates, integers as integers.

Each refusal is checked for its SQLSTATE, message and hint, and for spending nothing. Tests that take
``backend`` run three times: ``[duckdb]`` always, ``[postgres]`` (marked ``postgres``) on the server of
``tests/conftest.py`` — skipped when it is unreachable, unless ``VEIL_REQUIRE_POSTGRES=1`` — and ``[spark]``
(marked ``spark``: the DuckDB rows as Parquet, exact answers from DuckDB).
"""

from __future__ import annotations

import datetime
import math
import random
import shutil
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from budget.ledger import Ledger
from proxy.backends.duckdb import DuckDBBackend
from proxy.cli.main import main as veil_main
from proxy.config import ColumnType, load_config
from proxy.errors import PolicyViolationError
from proxy.query.service import QueryService, StatementOutcome
from proxy.settings import SessionSettings
from tests.conftest import Demo
from tests.sql.answer_checks import Shape, assert_answered, assert_refused
from tests.sql.engines import (
    ALICE,
    Engine,
    Rows,
    query_service,
    run,
)
from tests.sql.spark_fixture import open_spark, spark_policy

FIRST, LAST = datetime.date(2024, 1, 1), datetime.date(2025, 12, 31)

POLICY = """
[datasets.shop]
path = "shop.duckdb"
default_epsilon = 1.0
max_epsilon = 100.0

[datasets.shop.tables.events]
privacy_unit = "pid"
max_contributions = 2

[datasets.shop.tables.events.columns]
pid = { type = "integer" }
day = { type = "date", lower = 2024-01-01, upper = 2025-12-31 }
undated = { type = "date" }
x = { type = "real", lower = 0, upper = 10 }
y = { type = "real", lower = 0, upper = 25 }
n = { type = "integer", lower = 0, upper = 100 }
note = { type = "text" }
region = { type = "text", public = true, values = ["north", "south"] }
"""

# Row i of 12,000 belongs to person i // 2. Every day of the two years occurs (7 and 731 are coprime);
# y = x + u with u in [0, 15) gives a correlation near 0.55; y is NULL on every 11th row and x on every
# 13th, so the pairs of CORR and REGR_* are fewer than the rows.
ROWS = 12_000
DUCKDB_EVENTS = f"""
CREATE TABLE events AS SELECT
    i // 2 AS pid,
    DATE '2024-01-01' + ((i * 7) % 731)::INTEGER AS day,
    DATE '2024-01-01' + ((i * 7) % 731)::INTEGER AS undated,
    CASE WHEN i % 13 = 0 THEN NULL ELSE ((i * 37) % 1000) / 100.0 END::DOUBLE AS x,
    CASE WHEN i % 11 = 0 THEN NULL ELSE ((i * 37) % 1000) / 100.0 + ((i * 53) % 1500) / 100.0 END::DOUBLE AS y,
    (i * 17) % 101 AS n,
    'x' AS note,
    CASE WHEN (i // 2) % 3 = 0 THEN 'north' ELSE 'south' END AS region
FROM range({ROWS}) t(i)
"""
POSTGRES_EVENTS = f"""
CREATE TABLE events AS SELECT
    i / 2 AS pid,
    DATE '2024-01-01' + ((i * 7) % 731)::int AS day,
    DATE '2024-01-01' + ((i * 7) % 731)::int AS undated,
    (CASE WHEN i % 13 = 0 THEN NULL ELSE ((i * 37) % 1000) / 100.0 END)::double precision AS x,
    (CASE WHEN i % 11 = 0 THEN NULL ELSE ((i * 37) % 1000) / 100.0 + ((i * 53) % 1500) / 100.0 END)::double precision AS y,
    (i * 17) % 101 AS n,
    'x'::text AS note,
    CASE WHEN (i / 2) % 3 = 0 THEN 'north' ELSE 'south' END AS region
FROM generate_series(0::bigint, {ROWS - 1}) AS t(i)
"""


EVENTS = Rows("shop", POLICY, "shop.duckdb", {"duckdb": DUCKDB_EVENTS, "postgres": POSTGRES_EVENTS})


@pytest.fixture(scope="module")
def rows() -> Rows:
    return EVENTS


@pytest.fixture(scope="module")
def spark_engine(
    spark_ready: None, duckdb_engine: Engine, tmp_path_factory: pytest.TempPathFactory
) -> Engine:
    """The DuckDB file's rows as Parquet, the policy on Spark."""
    assert duckdb_engine.dataset.path is not None
    path, directory = duckdb_engine.dataset.path, tmp_path_factory.mktemp("spark")
    dataset = spark_policy(POLICY, EVENTS.path_line, name="shop", duckdb_path=path, directory=directory)
    return Engine("spark", dataset, lambda: open_spark(dataset), POLICY, exact_file=path)


@pytest.fixture(
    params=[
        "duckdb",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("spark", marks=pytest.mark.spark),
    ]
)
def engine(request: pytest.FixtureRequest) -> Engine:
    return request.getfixturevalue(f"{request.param}_engine")  # type: ignore[no-any-return]


# --- accepted shapes --------------------------------------------------------------------------------------

PAIRS = "count(x | y), sum(y | x), sum(x | y)"
SQUARES = "sum((y | x) ^ 2), sum((x | y) ^ 2)"


CORRELATION_SPLIT = (  # spec §7: six noisy sums, ε/6 each; sensitivities from §2.2 (L = 2)
    ("count(x | y)", 2.0),  # L
    ("sum(x | y)", 20.0),  # L · max |x|
    ("sum(y | x)", 50.0),  # L · max |y| = 2 · 25
    ("sum((x | y) ^ 2)", 200.0),  # L · max x²
    ("sum((y | x) ^ 2)", 1250.0),  # L · max y²
    ("sum(x * y)", 500.0),  # L · max |corner product| = 2 · 10 · 25
)
R, D, N = ColumnType.REAL, ColumnType.DATE, ColumnType.INTEGER

SHAPES = {
    "corr-covar-regr": Shape(
        "SELECT CORR(y, x), COVAR_POP(y, x), COVAR_SAMP(y, x), REGR_SLOPE(y, x), REGR_INTERCEPT(y, x),"
        " REGR_R2(y, x) FROM events",
        "SELECT CORR(y, x), COVAR_POP(y, x), COVAR_SAMP(y, x), REGR_SLOPE(y, x), REGR_INTERCEPT(y, x),"
        " REGR_R2(y, x) FROM events",
        CORRELATION_SPLIT,
        (0.005, 0.05, 0.05, 0.005, 0.05, 0.005),
        (R, R, R, R, R, R),
    ),
    "corr-either-order-shares-its-sums": Shape(
        "SELECT CORR(x, y), CORR(y, x) FROM events",
        "SELECT CORR(x, y), CORR(y, x) FROM events",
        CORRELATION_SPLIT,
        (0.005, 0.005),
        (R, R),
    ),
    "covar-alone-needs-four-sums": Shape(
        "SELECT COVAR_POP(y, x) FROM events WHERE n < 50",
        "SELECT COVAR_POP(y, x) FROM events WHERE n < 50",
        (("count(x | y)", 2.0), ("sum(x | y)", 20.0), ("sum(y | x)", 50.0), ("sum(x * y)", 500.0)),
        (0.05,),
        (R,),
    ),
    "slope-needs-five-sums": Shape(
        "SELECT REGR_SLOPE(y, x), REGR_INTERCEPT(y, x) FROM events",
        "SELECT REGR_SLOPE(y, x), REGR_INTERCEPT(y, x) FROM events",
        (
            ("count(x | y)", 2.0),
            ("sum(x | y)", 20.0),
            ("sum(y | x)", 50.0),
            ("sum((x | y) ^ 2)", 200.0),
            ("sum(x * y)", 500.0),
        ),
        (0.005, 0.05),
        (R, R),
    ),
    "regr-sums-and-counts": Shape(
        "SELECT REGR_COUNT(y, x), REGR_AVGX(y, x), REGR_AVGY(y, x), REGR_SXX(y, x), REGR_SYY(y, x),"
        " REGR_SXY(y, x) FROM events",
        "SELECT REGR_COUNT(y, x), REGR_AVGX(y, x), REGR_AVGY(y, x), REGR_SXX(y, x), REGR_SYY(y, x),"
        " REGR_SXY(y, x) FROM events",
        CORRELATION_SPLIT,
        (3, 0.01, 0.01, 300, 1500, 600),
        (N, R, R, R, R, R),
    ),
    "corr-per-public-group-with-a-filter": Shape(
        "SELECT region, CORR(y, x) AS r, REGR_SLOPE(y, x) AS slope FROM events WHERE n >= 10"
        " GROUP BY region ORDER BY region",
        "SELECT region, CORR(y, x), REGR_SLOPE(y, x) FROM events WHERE n >= 10 GROUP BY region ORDER BY region",
        CORRELATION_SPLIT,
        (0, 0.01, 0.01),
        (ColumnType.TEXT, R, R),
        rows=2,
    ),
    "corr-of-expressions": Shape(
        "SELECT CORR(y * 2, veil_clamp(n, 0, 50)) FROM events",
        "SELECT CORR(y * 2, LEAST(n, 50)) FROM events",
        (
            ("count(veil_clamp(n, 0, 50) | y * 2)", 2.0),
            ("sum(veil_clamp(n, 0, 50) | y * 2)", 100.0),  # n clamped to [0, 50]: L · 50
            ("sum(y * 2 | veil_clamp(n, 0, 50))", 100.0),  # y * 2 in [0, 50] by interval analysis
            ("sum((veil_clamp(n, 0, 50) | y * 2) ^ 2)", 5000.0),
            ("sum((y * 2 | veil_clamp(n, 0, 50)) ^ 2)", 5000.0),
            ("sum(veil_clamp(n, 0, 50) * (y * 2))", 5000.0),
        ),
        (0.01,),
        (R,),
    ),
    "date-min-max-percentiles": Shape(
        "SELECT MIN(day), MAX(day), MEDIAN(day), PERCENTILE_DISC(0.25) WITHIN GROUP (ORDER BY day),"
        " PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY day) FROM events",
        "SELECT MIN(day), MAX(day), quantile_disc(day, 0.5), quantile_disc(day, 0.25), quantile_disc(day, 0.9)"
        " FROM events",
        (
            ("min(day)", 5040.0),  # L · K (rank sensitivity in histogram weights)
            ("max(day)", 5040.0),
            ("median(day)", 5040.0),
            ("percentile_cont(0.25) WITHIN GROUP (ORDER BY day)", 5040.0),
            ("percentile_cont(0.9) WITHIN GROUP (ORDER BY day)", 5040.0),
        ),
        (0, 0, 2, 2, 2),
        (D, D, D, D, D),
        exact_by_engine={
            "postgres": "SELECT MIN(day), MAX(day), percentile_disc(0.5) WITHIN GROUP (ORDER BY day),"
            " percentile_disc(0.25) WITHIN GROUP (ORDER BY day),"
            " percentile_disc(0.9) WITHIN GROUP (ORDER BY day) FROM events"
        },
    ),
    "date-median-per-year": Shape(
        "SELECT EXTRACT(year FROM day) AS year, COUNT(*) AS events, MEDIAN(day) AS middle FROM events"
        " GROUP BY 1 ORDER BY 1",
        "SELECT EXTRACT(year FROM day)::INTEGER, COUNT(*), quantile_disc(day, 0.5) FROM events GROUP BY 1 ORDER BY 1",
        (("count(*)", 2.0), ("median(day)", 5040.0)),
        (0, 2, 2),
        (N, N, D),
        rows=2,
        exact_by_engine={
            "postgres": "SELECT EXTRACT(year FROM day)::int, COUNT(*), percentile_disc(0.5) WITHIN GROUP"
            " (ORDER BY day) FROM events GROUP BY 1 ORDER BY 1"
        },
    ),
    "group-by-month": Shape(
        "SELECT date_trunc('month', day) AS month, COUNT(*) AS events FROM events GROUP BY 1 ORDER BY 1",
        "SELECT CAST(date_trunc('month', day) AS DATE), COUNT(*) FROM events GROUP BY 1 ORDER BY 1",
        (("count(*)", 2.0),),
        (0, 2),
        (D, N),
        rows=24,
    ),
    "group-by-day-and-region": Shape(
        "SELECT day, region, COUNT(*) FROM events WHERE day >= '2025-12-01' GROUP BY day, region"
        " HAVING COUNT(*) > 0 ORDER BY day, region",
        "SELECT day, region, COUNT(*) FROM events WHERE day >= '2025-12-01' GROUP BY day, region"
        " ORDER BY day, region",
        (("count(*)", 2.0),),
        (0, 0, 2),
        (D, ColumnType.TEXT, N),
        rows=62,
    ),
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_each_shape_is_answered_priced_and_accurate(
    name: str, engine: Engine, service: QueryService, ledger: Ledger
) -> None:
    assert_answered(SHAPES[name], engine=engine, service=service, ledger=ledger)


def test_results_lie_in_their_valid_ranges_even_at_a_small_epsilon(service: QueryService) -> None:
    """At ε = 0.05 over 3 people the noisy sums are nonsense, but CORR stays in [-1, 1] and R² in [0, 1]
    (or NULL, with a notice saying why): post-processing of noisy values and public bounds only."""
    sql = "SELECT region, CORR(y, x) AS r, REGR_R2(y, x) AS r2 FROM events WHERE pid < 3 GROUP BY region"
    seen = []
    for seed in range(20):
        service.rng = random.Random(seed)
        outcome = run(service, sql.replace("pid < 3", f"pid < 3 AND n <= {100 + seed}"), epsilon=0.05)
        assert outcome.table is not None
        for _, r, r2 in outcome.table.rows:
            assert r is None or -1 <= r <= 1
            assert r2 is None or 0 <= r2 <= 1
            seen.append((r, r2))
        if any(r is None for _, r, _ in outcome.table.rows):
            assert any("corr(y, x) is NULL in" in notice for notice in outcome.notices), outcome.notices
    assert any(r is not None for r, _ in seen) and any(r is None for r, _ in seen)


ROUNDED_PAIRS = (
    "CORR(y, x)", "COVAR_POP(y, x)", "COVAR_SAMP(y, x)", "REGR_SLOPE(y, x)", "REGR_INTERCEPT(y, x)",
    "REGR_R2(y, x)", "REGR_AVGY(y, x)", "REGR_SXX(y, x)", "REGR_SXY(y, x)",
)  # fmt: skip
DRAWS = 10


def test_correlation_and_regression_are_rounded_to_the_order_of_their_noise(
    duckdb_engine: Engine, ledger: Ledger
) -> None:
    """veil.round = auto rounds a (y, x) aggregate to one digit below the order of magnitude of its noise's
    standard deviation, derived from the noise of the sums it is composed of. Checked against the spread
    actually observed over DRAWS fresh answers at ε = 1: each shown value is the raw answer (the same
    stored answer, shown with veil.round = off for free) rounded to 1 − ⌊log10 s⌋ digits, s the observed
    standard deviation — up to one digit either way, which holds while s is within a factor of 10 of the
    true standard deviation σ. Over 12,000 rows the noise of each aggregate is, to first order, a linear
    combination of the Laplace noises of its sums (kurtosis at most 6), so with DRAWS = 10 draws s < σ/10
    has probability about P(χ²₉ < 0.09) < 1e-7, and s > 10σ at most Var(s²)/(99σ²)² ≤ (2/9 + 3/10)/99² <
    1e-4 (Chebyshev). Rounding is post-processing of released values, the same on every engine: DuckDB
    alone (the engine runs each draw's query afresh)."""
    sql = f"SELECT {', '.join(ROUNDED_PAIRS)} FROM events WHERE n <= {{limit}}"
    shown, raw = [], []
    with query_service(duckdb_engine, ledger) as service:
        for draw in range(DRAWS):
            service.rng = random.Random(draw)
            query = sql.format(limit=100 + draw)  # every n is at most 100: the same rows, not the same text
            auto = run(service, query, epsilon=1.0)
            off = run(service, query, epsilon=1.0, settings={"veil.round": "off"})
            assert off.charge is not None and off.charge.cached
            assert auto.table is not None and off.table is not None
            shown.append(auto.table.rows[0])
            raw.append(off.table.rows[0])
    assert ledger.balance("alice", "shop").spent_epsilon == pytest.approx(DRAWS)
    for index, name in enumerate(ROUNDED_PAIRS):
        spread = statistics.stdev(row[index] for row in raw)
        digits = 1 - math.floor(math.log10(spread))
        for shown_row, raw_row in zip(shown, raw, strict=True):
            candidates = {round(raw_row[index], d) + 0.0 for d in (digits - 1, digits, digits + 1)}
            assert shown_row[index] in candidates, (name, spread, shown_row[index], raw_row[index])
        assert any(s[index] != r[index] for s, r in zip(shown, raw, strict=True)), (name, "never rounded")


def test_dates_keep_their_type_through_post_processing(service: QueryService) -> None:
    outcome = run(
        service,
        "SELECT region, MAX(day) - MIN(day) AS span, MIN(day) AS first FROM events GROUP BY region"
        " HAVING MIN(day) < DATE '2024-02-01' ORDER BY first, region",
    )
    assert outcome.table is not None
    assert [row[0] for row in outcome.table.rows] == ["north", "south"]
    for _, span, first in outcome.table.rows:
        assert first == FIRST and span == (LAST - FIRST).days


# --- refusals ---------------------------------------------------------------------------------------------

REFUSALS = {
    "sum-of-a-date": (
        "SELECT SUM(day) FROM events",
        'sum(day): column "day" is not numeric',
        "a date or timestamp column answers",
    ),
    "avg-of-a-date": (
        "SELECT AVG(day) FROM events",
        'avg(day): column "day" is not numeric',
        "MIN, MAX, MEDIAN",
    ),
    "quantile-of-an-unbounded-date": (
        "SELECT MAX(undated) FROM events",
        'max(undated): column "undated" has no declared bounds',
        "declare lower and upper dates for column undated",
    ),
    "quantile-of-a-date-expression": (
        "SELECT MIN(day + 1) FROM events",
        "min(day + 1): only a date or timestamp column itself is answered",
        "a date or timestamp column answers",
    ),
    "keys-of-an-unbounded-date": (
        "SELECT date_trunc('month', undated), COUNT(*) FROM events GROUP BY 1",
        "GROUP BY DATE_TRUNC('MONTH', undated): the keys are not public",
        "declare lower and upper dates for undated",
    ),
    "corr-of-text": (
        "SELECT CORR(y, note) FROM events",
        'corr(y, note): column "note" is not numeric',
        "COUNT",
    ),
    "corr-of-an-unbounded-column": (
        "SELECT CORR(y, pid) FROM events",
        'corr(y, pid): column "pid" has no declared bounds',
        "declare lower and upper for column pid",
    ),
    "corr-of-a-date": (
        "SELECT CORR(y, day) FROM events",
        'corr(y, day): column "day" is not numeric',
        "a date or timestamp column",
    ),
    "covar-of-an-unbounded-expression": (
        "SELECT COVAR_POP(y, pid * 2) FROM events",
        "covar_pop(y, pid * 2): the range of pid * 2 cannot be derived",
        "veil_clamp(pid * 2, lower, upper)",
    ),
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_each_refusal_says_what_is_wrong_and_spends_nothing(
    name: str, service: QueryService, ledger: Ledger
) -> None:
    assert_refused(*REFUSALS[name], service=service, ledger=ledger)


# --- the demo ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    directory = tmp_path_factory.mktemp("demo") / "demo"
    result = CliRunner().invoke(veil_main, ["init-demo", str(directory), "--people", "2000"])
    assert result.exit_code == 0, result.output
    assert "has ε = 10 and δ = 1e-05 on dataset 'demo'" in result.output
    return Demo(directory)


@pytest.fixture
def demo_service(demo: Demo, tmp_path: Path) -> Iterator[tuple[QueryService, Ledger]]:
    """alice on a copy of the demo's ledger (so each test starts from the grant init-demo wrote)."""
    ledger_path = tmp_path / "ledger.sqlite"
    shutil.copy(demo.ledger, ledger_path)
    ledger = Ledger.open(ledger_path)
    dataset = load_config(demo.config).dataset("demo")
    assert dataset is not None
    backend, sandbox = DuckDBBackend(demo.database), DuckDBBackend.sandbox()
    try:
        yield (
            QueryService(dataset, backend=backend, sandbox=sandbox, ledger=ledger, rng=random.Random(5)),
            ledger,
        )
    finally:
        backend.close()
        sandbox.close()
        ledger.close()


def demo_run(service: QueryService, sql: str, **settings: str) -> StatementOutcome:
    (tree,) = service.parse(sql)
    return service.run(tree, principal=ALICE, settings=SessionSettings(settings))


def test_the_demo_groups_visits_by_month_and_year_without_delta(
    demo_service: tuple[QueryService, Ledger],
) -> None:
    service, ledger = demo_service
    months = demo_run(
        service, "SELECT date_trunc('month', visit_date) AS month, COUNT(*) FROM visits GROUP BY 1"
    )
    assert months.table is not None
    assert [row[0] for row in months.table.rows] == [
        datetime.date(year, month, 1) for year in (2024, 2025) for month in range(1, 13)
    ]
    years = demo_run(service, "SELECT EXTRACT(year FROM visit_date) AS year, COUNT(*) FROM visits GROUP BY 1")
    assert years.table is not None and [row[0] for row in years.table.rows] == [2024, 2025]
    assert all("τ=" not in notice for notice in (*months.notices, *years.notices))
    assert ledger.balance("alice", "demo").spent_delta == 0


def test_the_demo_answers_the_first_and_last_visit_as_dates(
    demo_service: tuple[QueryService, Ledger],
) -> None:
    service, _ = demo_service
    sql = "SELECT MIN(visit_date), MEDIAN(visit_date), MAX(visit_date) FROM visits"
    outcome = demo_run(service, sql, **{"veil.epsilon": "1"})
    assert outcome.table is not None
    assert [column.type for column in outcome.table.columns] == [ColumnType.DATE] * 3
    (row,) = outcome.table.rows
    assert all(isinstance(value, datetime.date) and FIRST <= value <= LAST for value in row)


def test_the_demo_hint_for_keys_from_the_data_leads_to_an_answer(
    demo_service: tuple[QueryService, Ledger],
) -> None:
    """The issue's complaint: the hint sent the analyst to SET veil.delta, which then failed for want of a
    δ grant. alice now has one, and the hint says that δ needs a grant."""
    service, ledger = demo_service
    sql = "SELECT visit_id % 2 AS parity, COUNT(*) FROM visits GROUP BY 1"
    with pytest.raises(PolicyViolationError, match="the keys are not public") as refused:
        demo_run(service, sql)
    hint = refused.value.hint or ""
    assert "SET veil.delta = 1e-6" in hint and "δ grant" in hint
    outcome = demo_run(service, sql, **{"veil.delta": "1e-6", "veil.epsilon": "1"})
    assert outcome.table is not None and sorted(row[0] for row in outcome.table.rows) == [0, 1]
    assert ledger.balance("alice", "demo").spent_delta == pytest.approx(1e-6)
