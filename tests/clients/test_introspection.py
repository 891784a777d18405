"""Introspection through real clients, on both backends: psql's ``\\d`` family, SQLAlchemy's inspector,
pandas over SQLAlchemy and asyncpg. Every answer comes from the schema-only shadow database, so it spends
no budget and shows the policy's privacy annotations wherever the tools show comments."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import asyncpg
import pandas as pd
import psycopg
import pytest
import sqlalchemy
from sqlalchemy.pool import NullPool

from proxy.catalog.comments import column_comment, table_comment
from proxy.config import DatasetPolicy, load_config
from tests.conftest import ALICE, DATASET, Admin, Analyst, Demo, RunningServer

pytestmark = pytest.mark.client

TABLES = ["patients", "visits", "zones"]
needs_psql = pytest.mark.skipif(
    shutil.which("psql") is None,
    reason="the psql client is not installed (apt-get install postgresql-client)",
)


@pytest.fixture(scope="module")
def policy(demo: Demo) -> DatasetPolicy:
    """The served dataset's policy; conftest checks that the PostgreSQL dataset declares the same tables."""
    return load_config(demo.config).datasets[DATASET]


def psql(server: RunningServer, command: str, analyst: Analyst = ALICE) -> subprocess.CompletedProcess[str]:
    """``psql -X -c COMMAND`` (the simple protocol), the password in PGPASSWORD and no other PG* variable."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PG")},
        "PGPASSWORD": analyst.password,
        "PGCONNECT_TIMEOUT": "10",
    }
    return subprocess.run(
        ["psql", "-X", "-v", "ON_ERROR_STOP=1", server.url(analyst.name, DATASET), "-c", command],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )


def engine_for(server: RunningServer, analyst: Analyst = ALICE) -> sqlalchemy.Engine:
    """SQLAlchemy 2 over psycopg 3 as analysts create it: nothing Veil-specific in the URL or options."""
    url = sqlalchemy.URL.create(
        "postgresql+psycopg",
        username=analyst.name,
        password=analyst.password,
        host=server.host,
        port=server.port,
        database=DATASET,
    )
    return sqlalchemy.create_engine(url, poolclass=NullPool)


@pytest.fixture
def engine(veil_server: RunningServer) -> Iterator[sqlalchemy.Engine]:
    engine = engine_for(veil_server)
    yield engine
    engine.dispose()


@needs_psql
def test_psql_dt_lists_the_policy_tables(veil_server: RunningServer) -> None:
    result = psql(veil_server, r"\dt")
    assert result.returncode == 0, result.stderr
    assert "List of relations" in result.stdout
    for table in TABLES:
        assert f" public | {table:<8} | table | veil" in result.stdout
    assert "(3 rows)" in result.stdout


@needs_psql
def test_psql_d_visits_shows_its_columns_and_types(veil_server: RunningServer) -> None:
    result = psql(veil_server, r"\d visits")
    assert result.returncode == 0, result.stderr
    assert 'Table "public.visits"' in result.stdout
    assert " cost " in result.stdout and "double precision" in result.stdout
    assert " visit_date " in result.stdout and "| date " in result.stdout


@needs_psql
def test_psql_d_plus_visits_shows_the_privacy_annotations(
    veil_server: RunningServer, policy: DatasetPolicy
) -> None:
    result = psql(veil_server, r"\d+ visits")
    assert result.returncode == 0, result.stderr
    visits = policy.tables["visits"]
    for column in visits.columns.values():
        assert column_comment(visits, column) in result.stdout, column.name
    assert "clamped to [" in result.stdout and "privacy unit" in result.stdout


@needs_psql
def test_psql_dt_plus_shows_privacy_unit_and_max_contributions(
    veil_server: RunningServer, policy: DatasetPolicy
) -> None:
    result = psql(veil_server, r"\dt+")
    assert result.returncode == 0, result.stderr
    for table in TABLES:
        assert table_comment(policy.tables[table]) in result.stdout


@needs_psql
@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (r"\dn", " public | veil"),
        (r"\l", f" {DATASET} | veil  | UTF8"),
        (r"\df", "List of functions"),
        (r"\dn+", "differentially private aggregates only"),
        (r"\du", " veil "),
    ],
)
def test_psql_listings_succeed(veil_server: RunningServer, command: str, expected: str) -> None:
    result = psql(veil_server, command)
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout


def test_sqlalchemy_inspector_lists_tables_and_columns(
    engine: sqlalchemy.Engine, policy: DatasetPolicy
) -> None:
    inspector = sqlalchemy.inspect(engine)
    assert sorted(inspector.get_table_names()) == TABLES
    columns = inspector.get_columns("visits")
    visits = policy.tables["visits"]
    assert [column["name"] for column in columns] == list(visits.columns)
    assert [column["comment"] for column in columns] == [
        column_comment(visits, column) for column in visits.columns.values()
    ]
    types = {column["name"]: type(column["type"]) for column in columns}
    assert types["cost"] is sqlalchemy.dialects.postgresql.DOUBLE_PRECISION
    assert types["visit_date"] is sqlalchemy.DATE
    assert inspector.has_table("visits") and not inspector.has_table("salaries")
    assert inspector.get_table_comment("visits")["text"] == table_comment(visits)


def test_pandas_reads_a_dp_aggregate_through_sqlalchemy(engine: sqlalchemy.Engine) -> None:
    with engine.connect() as connection:
        frame = pd.read_sql("SELECT region, COUNT(*) AS n FROM patients GROUP BY region", connection)
    assert list(frame.columns) == ["region", "n"]
    assert len(frame) == 7
    assert frame["n"].dtype.kind == "i"


def test_introspection_spends_no_budget(veil_server: RunningServer, admin: Admin) -> None:
    analyst = admin.add_analyst(1.0, prefix="introspect")
    before = admin.balance(analyst)
    if shutil.which("psql") is not None:
        for command in (r"\dt+", r"\d+ visits", r"\l", r"\df"):
            assert psql(veil_server, command, analyst).returncode == 0
    engine = engine_for(veil_server, analyst)
    try:
        inspector = sqlalchemy.inspect(engine)
        assert inspector.get_columns("patients")
    finally:
        engine.dispose()
    asyncio.run(_asyncpg_relations(veil_server, analyst))
    after = admin.balance(analyst)
    assert after["spent_epsilon"] == before["spent_epsilon"] == 0


async def _asyncpg_relations(server: RunningServer, analyst: Analyst) -> list[Any]:
    connection = await asyncpg.connect(
        host=server.host,
        port=server.port,
        user=analyst.name,
        password=analyst.password,
        database=DATASET,
        ssl=False,
        timeout=10,
    )
    try:
        return await connection.fetch(
            "SELECT c.relname FROM pg_catalog.pg_class c WHERE c.relname = $1", "visits", timeout=10
        )
    finally:
        await connection.close()


def test_asyncpg_reads_the_catalog_with_a_parameter(veil_server: RunningServer) -> None:
    rows = asyncio.run(_asyncpg_relations(veil_server, ALICE))
    assert [tuple(row) for row in rows] == [("visits",)]


def test_a_catalog_query_joined_with_a_dataset_table_is_refused(veil_server: RunningServer) -> None:
    with psycopg.connect(veil_server.conninfo(), autocommit=True) as connection:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="catalog relations cannot be read"):
            connection.execute("SELECT c.relname, COUNT(*) FROM pg_class c, visits v GROUP BY c.relname")
        assert connection.execute("SELECT count(*) FROM pg_catalog.pg_namespace").fetchone() == (3,)
