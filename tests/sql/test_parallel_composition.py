"""Parallel composition across statements, table-driven: each statement shape on DuckDB, PostgreSQL and Spark,
with the partition it is charged to (or none: ordinary), its price, and its answer against the exact one
at a large ε (seeded noise).

The data is the same on both engines (``DATA_SQL``): 400 patients, a quarter per region, one row each in
``patients`` and one to three visits each in ``visits``, all in the patient's region — except every
fiftieth patient, whose second visit is in the next region: the engine guard leaves such a person out of
statements pinned to a region. The exact answers are plain SQL on the same engine (``EXACT_*``); on Spark
(the same rows as Parquet) they come from the DuckDB file the Parquet was written from.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest
import tomli_w

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy.backends.base import Backend
from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.postgres import PostgresBackend
from proxy.config import DatasetPolicy, parse_config
from proxy.query.service import Principal, QueryService
from proxy.settings import SessionSettings
from proxy.wire.scram import make_scram_verifier
from tests.conftest import schema_in
from tests.postgres.conftest import in_schema
from tests.sql.spark_fixture import TIMEOUT_MS, open_spark, parquet_tables

EPSILON = 100.0
PEOPLE = 400
ALICE = Principal("alice")
REGION = "CASE {g} % 4 WHEN 0 THEN 'north' WHEN 1 THEN 'south' WHEN 2 THEN 'east' ELSE 'west' END"
DATA_SQL = f"""
CREATE TABLE patients AS
SELECT g AS patient_id, {REGION.format(g="g")} AS region, g % 90 AS age
FROM generate_series(1, {PEOPLE}) AS p(g);
CREATE TABLE visits AS
SELECT g AS patient_id,
       CASE WHEN g % 50 = 0 AND k = 2 THEN {REGION.format(g="g + 1")} ELSE {REGION.format(g="g")} END AS region,
       (g * 7 + k * 13) % 100 AS cost
FROM generate_series(1, {PEOPLE}) AS p(g), generate_series(1, 3) AS v(k)
WHERE k <= g % 3 + 1
"""
POLICY = """
[datasets.regions]
{location}
max_epsilon = 1000.0

[datasets.regions.tables.patients]
privacy_unit = "patient_id"
max_contributions = 1

[datasets.regions.tables.patients.columns]
patient_id = {{ type = "integer" }}
region = {{ type = "text", public = true, values = ["north", "south", "east", "west", "islands"], partition = true }}
age = {{ type = "integer", lower = 0, upper = 100 }}

[datasets.regions.tables.visits]
privacy_unit = "patient_id"
max_contributions = 3

[datasets.regions.tables.visits.columns]
patient_id = {{ type = "integer" }}
region = {{ type = "text", public = true, values = ["north", "south", "east", "west", "islands"], partition = true }}
cost = {{ type = "real", lower = 0, upper = 100 }}
"""
STAYERS = (
    "patient_id NOT IN (SELECT patient_id FROM visits GROUP BY patient_id HAVING MIN(region) <> MAX(region))"
)


@dataclass(frozen=True)
class Shape:
    """A statement, the partition it is charged to (None: an ordinary statement), the plain SQL of its
    exact answer on the same engine, and how far a noisy cell may be from it at ε = 100."""

    sql: str
    partition: str | None
    exact: str
    tolerance: float = 1.0


SHAPES = {
    "equality": Shape(
        "SELECT COUNT(*) FROM patients WHERE region = 'north'",
        "patients.region = 'north'",
        "SELECT COUNT(*) FROM patients WHERE region = 'north'",
    ),
    "equality-reversed-and-anded": Shape(
        "SELECT AVG(age) FROM patients WHERE 'east' = region AND age >= 30",
        "patients.region = 'east'",
        "SELECT AVG(age) FROM patients WHERE region = 'east' AND age >= 30",
    ),
    "in-list-with-repeats-grouped": Shape(
        "SELECT region, COUNT(*) FROM patients WHERE region IN ('south', 'north', 'south') GROUP BY region"
        " ORDER BY region",
        "patients.region IN ('north', 'south')",
        "SELECT r, COUNT(patients.region) FROM (VALUES ('east'), ('islands'), ('north'), ('south'), ('west'))"
        " AS d(r) LEFT JOIN patients ON patients.region = d.r AND patients.region IN ('north', 'south')"
        " GROUP BY r ORDER BY r",
    ),
    "median": Shape(
        "SELECT MEDIAN(age) FROM patients WHERE region = 'west'",
        "patients.region = 'west'",
        "SELECT PERCENTILE_DISC(0.5) WITHIN GROUP (ORDER BY age) FROM patients WHERE region = 'west'",
        tolerance=2.0,
    ),
    "visits-guard-leaves-out-movers": Shape(
        "SELECT COUNT(*), SUM(cost) FROM visits WHERE region = 'south'",
        "visits.region = 'south'",
        f"SELECT COUNT(*), SUM(cost) FROM visits WHERE region = 'south' AND {STAYERS}",
        tolerance=200.0,  # the sum's sensitivity is 3 · 100
    ),
    "nested-parentheses": Shape(
        "SELECT COUNT(*) FROM visits WHERE cost > 10 AND (cost < 90 AND (region = 'north'))",
        "visits.region = 'north'",
        f"SELECT COUNT(*) FROM visits WHERE cost > 10 AND cost < 90 AND region = 'north' AND {STAYERS}",
    ),
    "or-is-ordinary": Shape(
        "SELECT COUNT(*) FROM patients WHERE region = 'north' OR region = 'south'",
        None,
        "SELECT COUNT(*) FROM patients WHERE region = 'north' OR region = 'south'",
    ),
    "other-case-is-ordinary": Shape(
        "SELECT COUNT(*) FROM patients WHERE region = 'North'",
        None,
        "SELECT COUNT(*) FROM patients WHERE region = 'North'",
    ),
    "undeclared-value-is-ordinary": Shape(
        "SELECT COUNT(*) FROM patients WHERE region IN ('north', 'atlantis')",
        None,
        "SELECT COUNT(*) FROM patients WHERE region IN ('north', 'atlantis')",
    ),
    "contradiction-is-ordinary": Shape(
        "SELECT COUNT(*) FROM patients WHERE region = 'north' AND region = 'south'",
        None,
        "SELECT 0",
    ),
    "no-where-is-ordinary": Shape(
        "SELECT COUNT(*) FROM visits",
        None,
        "SELECT COUNT(*) FROM visits",
    ),
}


def policy_of(
    location: dict[str, Any], directory: Path, *, sources: dict[str, str] | None = None
) -> DatasetPolicy:
    text = POLICY.format(location=tomli_w.dumps(location))
    if sources is not None:
        text += "\n" + tomli_w.dumps({"datasets": {"regions": {"sources": sources}}})
    dataset = parse_config(text, path=directory / "veil.toml").dataset("regions")
    assert dataset is not None
    return dataset


@dataclass
class Engine:
    service: QueryService
    ledger: Ledger
    exact: Backend


@pytest.fixture(
    params=[
        "duckdb",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("spark", marks=pytest.mark.spark),
    ]
)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    backend: Backend
    schemas = contextlib.ExitStack()
    exact: Backend | None = None
    if request.param in ("duckdb", "spark"):
        path = tmp_path / "regions.duckdb"
        with duckdb.connect(str(path)) as connection:
            connection.execute(DATA_SQL)
        dataset = policy_of({"path": str(path)}, tmp_path)
        if request.param == "spark":  # the same rows as Parquet; exact answers still from DuckDB
            request.getfixturevalue("spark_ready")
            files = parquet_tables(path, tmp_path / "parquet")
            sources = {table: str(tmp_path / "parquet" / name) for table, name in files.items()}
            location = {"backend": "spark", "statement_timeout_ms": TIMEOUT_MS}
            dataset = policy_of(location, tmp_path, sources=sources)
            exact = DuckDBBackend(path)
            schemas.callback(exact.close)
            backend = open_spark(dataset)
        else:
            backend = DuckDBBackend(path)
    else:
        dsn = request.getfixturevalue("postgres_dsn")
        schema = schemas.enter_context(schema_in(dsn))
        with psycopg.connect(dsn, autocommit=True) as connection:
            in_schema(connection, schema, DATA_SQL)
        dataset = policy_of({"backend": "postgres", "dsn": dsn, "schema": schema}, tmp_path)
        assert dataset.dsn is not None
        backend = PostgresBackend(dataset.dsn, schema=dataset.schema, pool_size=1)
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    ledger.add_analyst("alice", make_scram_verifier("secret", iterations=1))
    ledger.grant("alice", "regions", PrivacyLoss(EPSILON))
    sandbox = DuckDBBackend.sandbox()
    try:
        service = QueryService(
            dataset, backend=backend, sandbox=sandbox, ledger=ledger, rng=random.Random(18)
        )
        yield Engine(service, ledger, exact or backend)
    finally:
        backend.close()
        sandbox.close()
        ledger.close()
        schemas.close()


@pytest.mark.parametrize("name", list(SHAPES))
def test_each_shape_is_charged_to_its_partition_and_answers_close_to_the_truth(
    engine: Engine, name: str
) -> None:
    shape = SHAPES[name]
    settings = SessionSettings({"veil.epsilon": repr(EPSILON)})
    (tree,) = engine.service.parse(shape.sql)
    outcome = engine.service.run(tree, principal=ALICE, settings=settings)
    (spend,) = engine.ledger.history("alice")
    assert spend.epsilon == EPSILON
    assert (spend.partition.describe() if spend.partition is not None else None) == shape.partition
    if shape.partition is not None:
        assert f"charged to the partition {shape.partition} only (parallel composition)" in outcome.notices[0]
    assert outcome.table is not None
    _, exact = engine.exact.execute(shape.exact)
    assert len(outcome.table.rows) == len(exact)
    for noisy_row, exact_row in zip(outcome.table.rows, exact, strict=True):
        for noisy, truth in zip(noisy_row, exact_row, strict=True):
            if isinstance(truth, str):
                assert noisy == truth
            else:
                assert abs(float(noisy) - float(truth or 0)) <= shape.tolerance, (noisy_row, exact_row)


def test_statements_pinned_to_each_region_cost_the_largest_of_them(engine: Engine) -> None:
    settings = SessionSettings({"veil.epsilon": repr(EPSILON / 2)})
    for age, region in enumerate(("north", "south", "east", "west", "north")):  # no two alike: none cached
        (tree,) = engine.service.parse(
            f"SELECT COUNT(*) FROM patients WHERE region = '{region}' AND age > {age}"
        )
        engine.service.run(tree, principal=ALICE, settings=settings)
    assert engine.ledger.balance("alice", "regions").spent_epsilon == EPSILON
