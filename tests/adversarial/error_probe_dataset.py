"""The dataset of the error probes (test_error_probes.py): a small table of people, the same rows in
DuckDB and in PostgreSQL, and an in-process query service over each that records every engine query.

Person 42 is the ordinary target of the probes (age 37, a name ending in a backslash — a LIKE
pattern that fails on PostgreSQL). Person 43 holds extreme values that real data could hold: the
largest BIGINT, a double near its maximum, an infinite birth date, an empty name. No person 4242
exists: a probe aimed at them must end the same way as one aimed at 42 or 43.

Unlike probe_dataset.py's, this table has a real-valued and a date column with extreme values, and
the analyst a budget for a thousand probes.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from pathlib import Path

import duckdb
import psycopg
import pytest
import tomli_w

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy.backends import open_backend
from proxy.backends.base import Backend, Columns, Description, Rows
from proxy.backends.duckdb import DuckDBBackend
from proxy.config import DatasetPolicy, parse_config
from proxy.query.service import QueryService
from proxy.wire.scram import make_scram_verifier
from tests.conftest import schema_in

ANALYST = "mallory"
POLICY = """
[datasets.probe]
path = "probe.duckdb"
default_epsilon = 0.01

[datasets.probe.tables.people]
privacy_unit = "id"
max_contributions = 1

[datasets.probe.tables.people.columns]
id = { type = "integer" }
age = { type = "integer", lower = 0, upper = 100 }
income = { type = "real", lower = 0, upper = 1000000 }
born = { type = "date" }
name = { type = "text" }
region = { type = "text", public = true, values = ["north", "south"] }
"""
ROWS = """
SELECT i AS id, 20 + i % 60 AS age, 1000.5 * (i % 50) AS income, DATE '1950-01-01' + CAST(i * 97 AS INTEGER) AS born,
       'p' || i AS name, CASE WHEN i % 2 = 0 THEN 'north' ELSE 'south' END AS region
FROM {series} AS t(i) WHERE i NOT IN (42, 43)
UNION ALL SELECT 42, 37, 52000.25, DATE '1987-05-05', 'Ann\\', 'north'
UNION ALL SELECT 43, 9223372036854775807, 1.7e308, DATE 'infinity', '', 'south'
"""
DUCKDB_TABLE = (
    "CREATE TABLE people (id BIGINT, age BIGINT, income DOUBLE, born DATE, name VARCHAR, region VARCHAR)"
)
POSTGRES_TABLE = (
    "CREATE TABLE people (id bigint, age bigint, income double precision, born date, name text, region text)"
)


class RecordingBackend:
    """The real engine, and a list of every query sent to it: a refusal must come before the first."""

    def __init__(self, inner: Backend) -> None:
        self.inner, self.dialect, self.executed = inner, inner.dialect, list[str]()

    def execute(self, sql: str) -> tuple[Description, Rows]:
        self.executed.append(sql)
        return self.inner.execute(sql)

    def execute_columns(self, sql: str) -> Columns:
        self.executed.append(sql)
        return self.inner.execute_columns(sql)

    def data_version(self) -> str:
        return self.inner.data_version()

    def close(self) -> None:
        self.inner.close()


def probe_policy(directory: Path, *, postgres: tuple[str, str] | None = None) -> DatasetPolicy:
    """The DuckDB policy, or with ``postgres=(dsn, schema)`` the same tables on PostgreSQL."""
    text = POLICY
    if postgres is not None:
        dsn, schema = postgres
        location = 'backend = "postgres"\n' + tomli_w.dumps({"dsn": dsn, "schema": schema})
        text = POLICY.replace('path = "probe.duckdb"\n', location)
    dataset = parse_config(text, path=directory / "veil.toml").dataset("probe")
    assert dataset is not None
    return dataset


def duckdb_people(directory: Path) -> Path:
    path = directory / "probe.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.execute(DUCKDB_TABLE)
        connection.execute("INSERT INTO people " + ROWS.format(series="range(200)"))
    return path


def postgres_people(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(psycopg.sql.SQL("SET search_path TO {}").format(psycopg.sql.Identifier(schema)))
        connection.execute(POSTGRES_TABLE)
        connection.execute("INSERT INTO people " + ROWS.format(series="generate_series(0, 199)"))  # type: ignore[arg-type]


def _ledger(directory: Path) -> Ledger:
    ledger = Ledger.create(directory / "ledger.sqlite")
    ledger.add_analyst(ANALYST, make_scram_verifier("secret", iterations=1))
    ledger.grant(ANALYST, "probe", PrivacyLoss(1e6, 0.5))
    return ledger


@contextlib.contextmanager
def error_probe_service(
    engine: str, directory: Path, request: pytest.FixtureRequest
) -> Iterator[QueryService]:
    """The pipeline on a fresh DuckDB file or PostgreSQL schema (dropped afterwards), with a fresh ledger."""
    with contextlib.ExitStack() as stack:
        if engine == "duckdb":
            dataset = probe_policy(directory)
            duckdb_people(directory)
        else:
            dsn = request.getfixturevalue("postgres_dsn")  # skips (or fails) here without a server
            schema = stack.enter_context(schema_in(dsn))
            postgres_people(dsn, schema)
            dataset = probe_policy(directory, postgres=(dsn, schema))
        backend = open_backend(dataset, environ={})
        stack.callback(backend.close)
        sandbox = DuckDBBackend.sandbox()
        stack.callback(sandbox.close)
        recording = RecordingBackend(backend)
        yield QueryService(
            dataset, backend=recording, sandbox=sandbox, ledger=_ledger(directory), rng=random.Random(7)
        )
