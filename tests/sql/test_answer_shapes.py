"""Answers that look like SQL answers (issue 18, part A), table-driven, on DuckDB, PostgreSQL and Spark.

Each shape runs through the query service (a real engine, a real SQLite ledger, a seeded RandomSource)
at a large ε, and is checked for its types (counts and integer quantiles are integers, counts are never
negative, averages never NULL), its rounding (``veil.round``), its price (the charge, and the NOTICE's
split naming aggregates as written) and its accuracy against the exact answer computed by the same
engine. Tolerances come from the noise: a Laplace draw of scale b exceeds 20·b with probability e^-20,
so they do not depend on the seed.

The data: 2,000 customers with 3 orders each (within max_contributions = 4, so bounding changes no
exact answer), quantities 0..10, prices 0..99 and the days of 2024 (reaching their declared bounds), regions
north and south — and the public value east, which has no row at all. ``sessions`` has
max_contributions = "auto".
"""

from __future__ import annotations

import contextlib
import datetime
import math
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest
import tomli_w
from psycopg import sql as pgsql

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy.backends.base import Backend
from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.postgres import PostgresBackend
from proxy.config import DatasetPolicy, parse_config
from proxy.query.explain import explain_query
from proxy.query.service import Principal, QueryService, StatementOutcome
from proxy.release.present import auto_digits
from proxy.settings import SessionSettings
from proxy.wire.scram import make_scram_verifier
from tests.conftest import schema_in
from tests.sql.spark_fixture import open_spark, spark_policy

ALICE = Principal("alice")
LOCATION = 'path = "shop.duckdb"\n'
POLICY = f"""
[datasets.shop]
{LOCATION}default_epsilon = 1.0
max_epsilon = 1000.0

[datasets.shop.tables.orders]
privacy_unit = "customer_id"
max_contributions = 4

[datasets.shop.tables.orders.columns]
customer_id = {{ type = "integer" }}
quantity = {{ type = "integer", lower = 0, upper = 10 }}
price = {{ type = "real", lower = 0, upper = 100 }}
region = {{ type = "text", public = true, values = ["north", "south", "east"] }}
day = {{ type = "date", lower = 2024-01-01, upper = 2024-12-31 }}

[datasets.shop.tables.sessions]
privacy_unit = "customer_id"
max_contributions = "auto"
contribution_cap = 50

[datasets.shop.tables.sessions.columns]
customer_id = {{ type = "integer" }}
pages = {{ type = "integer", lower = 1, upper = 20 }}
"""
DUCKDB_SHOP = [
    "CREATE TABLE orders AS SELECT i // 3 AS customer_id, i % 11 AS quantity,"
    " CAST((i % 101) * 0.99 AS DOUBLE) AS price,"
    " CASE WHEN i % 2 = 0 THEN 'north' ELSE 'south' END AS region,"
    " DATE '2024-01-01' + CAST(i % 366 AS INTEGER) AS day FROM range(6000) t(i)",
    "CREATE TABLE sessions AS SELECT i // 4 AS customer_id, 1 + i % 20 AS pages FROM range(8000) t(i)",
]
POSTGRES_SHOP = """
CREATE TABLE orders AS SELECT i / 3 AS customer_id, i % 11 AS quantity,
    ((i % 101) * 0.99)::double precision AS price,
    CASE WHEN i % 2 = 0 THEN 'north' ELSE 'south' END AS region,
    DATE '2024-01-01' + (i % 366)::integer AS day
FROM generate_series(0::bigint, 5999) AS t(i);
CREATE TABLE sessions AS SELECT i / 4 AS customer_id, 1 + i % 20 AS pages
FROM generate_series(0::bigint, 7999) AS t(i);
"""
BACKENDS = [
    "duckdb",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("spark", marks=pytest.mark.spark),
]


@dataclass(frozen=True)
class Engine:
    dataset: DatasetPolicy
    open: Callable[[], Backend]
    exact_file: Path | None = None  # Spark: exact answers from DuckDB on the same rows (its SQL is ours)


@pytest.fixture(scope="module", params=BACKENDS)
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """The shop, built once per module and engine."""
    if request.param in ("duckdb", "spark"):
        directory = tmp_path_factory.mktemp("shop")
        with duckdb.connect(str(directory / "shop.duckdb")) as connection:
            for statement in DUCKDB_SHOP:
                connection.execute(statement)
        if request.param == "spark":
            request.getfixturevalue("spark_ready")  # skips (or fails) here without pyspark and Java
            spark = spark_policy(
                POLICY, LOCATION, name="shop", duckdb_path=directory / "shop.duckdb", directory=directory
            )
            yield Engine(spark, lambda: open_spark(spark), exact_file=directory / "shop.duckdb")
            return
        dataset = _dataset(POLICY, directory)
        yield Engine(dataset, lambda: DuckDBBackend(directory / "shop.duckdb"))
        return
    dsn = request.getfixturevalue("postgres_dsn")  # skips (or fails) here when the server is down
    with contextlib.ExitStack() as stack:
        schema = stack.enter_context(schema_in(dsn))
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
            connection.execute(POSTGRES_SHOP)  # type: ignore[call-overload]
        location = 'backend = "postgres"\n' + tomli_w.dumps({"dsn": dsn, "schema": schema})
        dataset = _dataset(POLICY.replace(LOCATION, location), Path("/nonexistent"))
        assert dataset.dsn is not None

        def open_postgres() -> Backend:
            assert dataset.dsn is not None
            return PostgresBackend(
                dataset.dsn,
                schema=dataset.schema,
                pool_size=dataset.pool_size,
                statement_timeout_ms=dataset.statement_timeout_ms,
            )

        yield Engine(dataset, open_postgres)


def _dataset(policy: str, directory: Path) -> DatasetPolicy:
    dataset = parse_config(policy, path=directory / "veil.toml").dataset("shop")
    assert dataset is not None
    return dataset


@pytest.fixture
def service(engine: Engine, tmp_path: Path) -> Iterator[QueryService]:
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    ledger.add_analyst("alice", make_scram_verifier("secret", iterations=1))
    ledger.grant("alice", "shop", PrivacyLoss(10_000.0))
    backend, sandbox = engine.open(), DuckDBBackend.sandbox()
    try:
        yield QueryService(
            engine.dataset, backend=backend, sandbox=sandbox, ledger=ledger, rng=random.Random(18)
        )
    finally:
        backend.close()
        sandbox.close()


def run(service: QueryService, sql: str, settings: dict[str, str]) -> StatementOutcome:
    (tree,) = service.parse(sql)
    return service.run(tree, principal=ALICE, settings=SessionSettings(settings))


def exact(service: QueryService, sql: str, engine: Engine) -> list[tuple[Any, ...]]:
    """The exact answer, from the same engine (PostgreSQL's NUMERIC as float) — for Spark, from DuckDB
    on the same rows: the reference SQL is written for DuckDB and PostgreSQL (percentile_disc of dates)."""
    if engine.exact_file is not None:
        with duckdb.connect(str(engine.exact_file), read_only=True) as connection:
            rows = connection.execute(sql).fetchall()
    else:
        rows = service.backend.execute(sql)[1]
    return [tuple(float(v) if isinstance(v, Decimal) else v for v in row) for row in rows]


# --- the table ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """One output column: its Python type, and how far from the exact answer it may be."""

    type: type
    tolerance: float
    count: bool = False  # a count: never negative
    bounds: tuple[float, float] | None = None  # an average or a quantile: always within


COUNT = Column(int, 20 * 4 / 200 + 0.5, count=True)  # ε = 200 on one count, L = 4: b = 0.02; rounded


@dataclass(frozen=True)
class Shape:
    id: str
    sql: str
    columns: tuple[Column, ...]
    exact_sql: str = ""  # portable SQL for the exact answer (default: the same text)
    keys: int = 0  # leading group-key columns, matched against the exact answer's rows
    split: tuple[str, ...] = ()  # the NOTICE's parts, as written
    settings: dict[str, str] = field(default_factory=dict)


SHAPES = [
    Shape("count", "SELECT COUNT(*) FROM orders", (COUNT,), split=("count(*) ε=200",)),
    Shape(
        "grouped count with an empty public group",
        "SELECT region, COUNT(*) FROM orders GROUP BY region",
        (COUNT,),
        keys=1,
    ),
    Shape(
        "count of people: sensitivity 1, exact integer noise",
        "SELECT COUNT(DISTINCT o.customer_id) FROM orders o",
        (Column(int, 20 / 200, count=True),),
        split=("count(DISTINCT o.customer_id) ε=200",),
    ),
    Shape(
        "integer sum: an integer, rounded to its noise",  # Δ = 4·10 = 40: b = 0.2
        "SELECT SUM(quantity) FROM orders",
        (Column(int, 20 * 0.2 + 0.5),),
    ),
    Shape(
        "real sum and average share the sum",  # ε/2 each: b_S = 400/100 = 4, b_C = 4/100 = 0.04
        "SELECT SUM(o.price) AS total, AVG(o.price) FROM orders o",
        # |ΔAVG| ≤ (20·4 + 100·20·0.04)/(6000 − 1) < 0.03, and rounding at most half a unit of 1e-4
        (Column(float, 20 * 4 + 0.05), Column(float, 0.03, bounds=(0, 100))),
        exact_sql="SELECT SUM(price), AVG(price) FROM orders",
        split=("sum(o.price) ε=100", "count(o.price) ε=100"),
    ),
    Shape(
        "average per group, the empty one included, never NULL",  # b_S = 4, b_C = 0.04, 3,000 rows a group
        "SELECT region, AVG(price) FROM orders GROUP BY region",
        (Column(float, (20 * 4 + 100 * 20 * 0.04) / 2999 + 0.0005, bounds=(0, 100)),),
        keys=1,
    ),
    Shape(
        "quantiles of an integer column are integers",  # within one: ties between integers (module doc)
        "SELECT MIN(quantity), MAX(quantity), MEDIAN(quantity),"
        " PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY quantity) FROM orders",
        (Column(int, 0, bounds=(0, 10)), Column(int, 0, bounds=(0, 10)))
        + (Column(int, 1, bounds=(0, 10)),) * 2,
        exact_sql="SELECT MIN(quantity), MAX(quantity), PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY quantity),"
        " PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY quantity) FROM orders",
        split=(
            "min(quantity) ε=50",
            "max(quantity) ε=50",
            "median(quantity) ε=50",
            "percentile_cont(0.9) WITHIN GROUP (ORDER BY quantity) ε=50",
        ),
    ),
    Shape(
        "quantiles of a date column are dates",  # within a day of SQL's: ties between days, as for integers
        "SELECT MIN(day), MAX(day), MEDIAN(day) FROM orders",
        (Column(datetime.date, 0), Column(datetime.date, 0), Column(datetime.date, 1)),
        exact_sql="SELECT MIN(day), MAX(day), PERCENTILE_DISC(0.5) WITHIN GROUP (ORDER BY day) FROM orders",
        split=("min(day) ε=66.67", "max(day) ε=66.67", "median(day) ε=66.67"),
    ),
    Shape(
        "median of a real column: a grid point",  # prices 0.99 apart, grid step 0.1
        "SELECT MEDIAN(price) FROM orders",
        (Column(float, 0.99 + 0.1, bounds=(0, 100)),),
        exact_sql="SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY price) FROM orders",
    ),
    Shape(
        "standard deviation",  # ε/3 each: b_S = 6, b_S² = 600, b_C = 0.06 → |Δvar| ≲ 4, |Δsd| ≲ 0.07
        "SELECT STDDEV(price) FROM orders",
        (Column(float, 0.15),),
        exact_sql="SELECT STDDEV_SAMP(price) FROM orders",
        split=("sum(price) ε=66.67", "sum(price ^ 2) ε=66.67", "count(price) ε=66.67"),
    ),
    Shape(
        "veil.round = 1",
        "SELECT AVG(price) FROM orders",
        (Column(float, 0.03 + 0.05, bounds=(0, 100)),),
        settings={"veil.round": "1"},
    ),
]


@pytest.mark.parametrize("shape", SHAPES, ids=[shape.id for shape in SHAPES])
def test_answer_shape(service: QueryService, engine: Engine, shape: Shape) -> None:
    outcome = run(service, shape.sql, {"veil.epsilon": "200", **shape.settings})
    assert outcome.table is not None and outcome.charge is not None
    assert outcome.charge.epsilon == 200, "the price: the session's ε, all of it"
    for part in shape.split:
        assert part in outcome.notices[0], outcome.notices[0]
    truth = {
        row[: shape.keys]: row[shape.keys :] for row in exact(service, shape.exact_sql or shape.sql, engine)
    }
    for row in outcome.table.rows:
        key, values = row[: shape.keys], row[shape.keys :]
        expected = truth.get(key)
        for column, value, true_value in zip(
            shape.columns, values, expected or (None,) * len(values), strict=True
        ):
            _check(column, value, true_value, empty=expected is None)
    if shape.settings.get("veil.round") == "1":
        assert all(round(value, 1) == value for row in outcome.table.rows for value in row[shape.keys :])


def _check(column: Column, value: Any, true_value: Any, *, empty: bool) -> None:
    assert type(value) is column.type, f"{value!r} should be a {column.type.__name__}"
    if column.count:
        assert value >= 0, "a count is never negative"
    if column.bounds is not None:
        assert column.bounds[0] <= value <= column.bounds[1]
    if empty:
        assert not column.count or value <= COUNT.tolerance, "an empty group's count is about 0"
        return  # no exact value to compare with (SQL's AVG of no rows is NULL; Veil's is a value)
    if column.type is datetime.date:
        assert abs((value - true_value).days) <= column.tolerance, (value, true_value)
        return
    assert abs(value - true_value) <= column.tolerance, (value, true_value)


# --- the same stored answer, shown raw or shaped -------------------------------------------------------


def test_raw_counts_and_rounding_reshape_one_stored_answer_for_free(service: QueryService) -> None:
    """At ε = 0.01 an empty group's count and sum are pure noise (count scale 400); asked again with other
    settings, the stored noisy answer is shown raw or shaped, and nothing more is spent."""
    sql = "SELECT region, COUNT(*), SUM(price) FROM orders GROUP BY region"
    shaped = run(service, sql, {"veil.epsilon": "0.01"})
    raw = run(service, sql, {"veil.epsilon": "0.01", "veil.raw_counts": "on", "veil.round": "off"})
    assert raw.charge is not None and raw.charge.cached
    assert service.ledger.balance("alice", "shop").spent_epsilon == pytest.approx(0.01)
    assert shaped.table is not None and raw.table is not None
    # b_S = 4·100/0.005 = 80,000: s.d. 113,137 → auto keeps the thousands
    digits = auto_digits(math.sqrt(2) * 4 * 100 / 0.005)
    assert digits == -4
    for (region, count, total), (same, raw_count, raw_total) in zip(
        shaped.table.rows, raw.table.rows, strict=True
    ):
        assert region == same
        assert count == max(raw_count, 0) and isinstance(raw_count, int)
        assert total == round(max(raw_total, 0.0), digits), "prices are never negative, nor is their sum"


def test_describe_announces_the_types_the_answer_has(service: QueryService) -> None:
    sql = (
        "SELECT region, COUNT(*), MEDIAN(quantity), MEDIAN(price), AVG(quantity) FROM orders GROUP BY region"
    )
    (tree,) = service.parse(sql)
    described = service.describe(tree, principal=ALICE, settings=SessionSettings())
    outcome = run(service, sql, {"veil.epsilon": "1"})
    assert described.columns is not None and outcome.table is not None
    assert described.columns == outcome.table.columns
    assert [type(value) for value in outcome.table.rows[0]] == [str, int, int, float, float]


# --- veil explain = the charge ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(DISTINCT customer_id) FROM sessions",  # "auto", but the bound does not matter
        "SELECT COUNT(*), AVG(pages) FROM sessions",  # "auto": a share of ε chooses L
        "SELECT region, SUM(price), STDDEV(quantity), MEDIAN(quantity) FROM orders GROUP BY region",
        # a per-person value whose bound is chosen with DP
        "WITH per_customer AS (SELECT customer_id, COUNT(*) AS n FROM orders GROUP BY customer_id)"
        " SELECT AVG(n) FROM per_customer",
    ],
)
def test_explain_shows_the_split_the_answer_is_charged(
    service: QueryService, engine: Engine, sql: str
) -> None:
    """The same parts with the same ε, in the same order; a bound chosen with DP shows its value only
    in the answer's NOTICE (``L=4``, ``n in [0, 4]``), where explain says what it may be."""
    explanation = explain_query(engine.dataset, sql, backend=service.backend, epsilon=2.0)
    outcome = run(service, sql, {"veil.epsilon": "2"})
    assert outcome.charge is not None
    assert explanation.epsilon == outcome.charge.epsilon == 2.0
    notice = outcome.notices[0]
    split = notice.split("this answer spent ε=2 (", 1)[1].rsplit("); ", 1)[0]
    charged = re.findall(r"(?:^|, )(.*?) ε=([0-9.e+-]+)(?=, |$)", split)  # a label may hold ", "
    explained = [(m.quantity, f"{m.epsilon:.4g}") for m in explanation.measurements]
    assert [epsilon for _, epsilon in charged] == [epsilon for _, epsilon in explained]
    for (charged_label, _), (explained_label, _) in zip(charged, explained, strict=True):
        if _is_bound_choice(explained_label):
            assert _is_bound_choice(charged_label), (charged_label, explained_label)
        else:
            assert charged_label == explained_label
    assert ("contribution bound" in notice) is ("COUNT(*)" in sql and "WITH" not in sql)


def _is_bound_choice(label: str) -> bool:
    return label.startswith("contribution bound L=") or "chosen with DP" in label
