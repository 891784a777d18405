"""One small dataset, ``probe``, on either engine, for the side-channel tests (docs/privacy.md).

``people``: 200 people, one row each (``id``, ``age``, ``region``); person 42 is the target of the
probes. ``events``: 300,000 rows of 10 people, so that a join on the privacy unit compares ~9·10⁹ pairs
— a query that runs until it is stopped. ``ghost`` is declared in the policy but missing from the
engine: every query on it fails *in the engine*, after the reservation.
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
from proxy.backends import open_backend
from proxy.backends.duckdb import DuckDBBackend
from proxy.config import DatasetPolicy, parse_config
from proxy.query.service import Principal, QueryService, StatementOutcome
from proxy.settings import SessionSettings
from proxy.wire.scram import make_scram_verifier
from tests.conftest import schema_in

TARGET = 42
SLOW_QUERY = "SELECT COUNT(*) FROM events AS a JOIN events AS b ON a.person = b.person WHERE a.v < b.v"
BACKENDS = ["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)]

_TABLES = {
    "people": {
        "privacy_unit": "id",
        "max_contributions": 1,
        "columns": {
            "id": {"type": "integer"},
            "age": {"type": "integer", "lower": 0, "upper": 100},
            "birth": {"type": "date"},
            "name": {"type": "text"},
            "region": {"type": "text", "public": True, "values": ["north", "south"]},
        },
    },
    "events": {
        "privacy_unit": "person",
        "max_contributions": 10,
        "columns": {"person": {"type": "integer"}, "v": {"type": "integer", "lower": 0, "upper": 100}},
    },
    "ghost": {"privacy_unit": "id", "max_contributions": 1, "columns": {"id": {"type": "integer"}}},
}
_PEOPLE = (
    "SELECT i AS id, 20 + i % 60 AS age, DATE '1950-01-01' + (i * 97 % 18000)::INTEGER AS birth,"
    " 'p' || i AS name, CASE WHEN i % 2 = 0 THEN 'north' ELSE 'south' END AS region"
)
DUCKDB_DATA = [
    f"CREATE TABLE people AS {_PEOPLE} FROM range(200) t(i)",
    "CREATE TABLE events AS SELECT (i % 10)::INTEGER AS person, (i % 97)::INTEGER AS v FROM range(300000) t(i)",
]
POSTGRES_DATA = [
    f"CREATE TABLE people AS {_PEOPLE} FROM generate_series(0, 199) t(i)",
    "CREATE TABLE events AS SELECT (i % 10)::integer AS person, (i % 97)::integer AS v"
    " FROM generate_series(0, 299999) t(i)",
]


@dataclass
class Probe:
    """The pipeline of the ``probe`` dataset and its ledger; each analyst has ε = 10."""

    service: QueryService
    ledger: Ledger

    def run(self, sql: str, analyst: str = "alice", **settings: str) -> StatementOutcome:
        session = SessionSettings()
        for name, value in settings.items():
            session.set(name.replace("_", ".", 1), value)
        (tree,) = self.service.parse(sql)
        return self.service.run(tree, principal=Principal(analyst), settings=session)

    def spent(self, analyst: str = "alice") -> float:
        return self.ledger.balance(analyst, "probe").spent_epsilon

    def states(self, analyst: str = "alice") -> list[str]:
        return [spend.state.value for spend in self.ledger.history(analyst, "probe")]


def probe_policy(location: dict[str, Any], **keys: Any) -> DatasetPolicy:
    """The ``probe`` dataset at ``location`` (path, or backend/dsn/schema), with extra dataset ``keys``."""
    document = {"datasets": {"probe": {**location, **keys, "tables": _TABLES}}}
    dataset = parse_config(tomli_w.dumps(document), path=Path("/nonexistent/veil.toml")).dataset("probe")
    assert dataset is not None
    return dataset


@contextlib.contextmanager
def probe_service(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, **keys: Any
) -> Iterator[Probe]:
    """The pipeline on a fresh DuckDB file or PostgreSQL schema, with a fresh SQLite ledger."""
    with contextlib.ExitStack() as stack:
        if backend == "duckdb":
            path = tmp_path / "probe.duckdb"
            with duckdb.connect(str(path)) as connection:
                for statement in DUCKDB_DATA:
                    connection.execute(statement)
            dataset = probe_policy({"path": str(path)}, **keys)
        else:
            dsn = request.getfixturevalue("postgres_dsn")
            schema = stack.enter_context(schema_in(dsn))
            with psycopg.connect(dsn, autocommit=True) as connection:
                connection.execute(f"SET search_path TO {schema}")
                for statement in POSTGRES_DATA:
                    connection.execute(statement)  # type: ignore[arg-type]
            dataset = probe_policy({"backend": "postgres", "dsn": dsn, "schema": schema}, **keys)
        engine = open_backend(dataset, environ={})
        stack.callback(engine.close)
        sandbox = DuckDBBackend.sandbox()
        stack.callback(sandbox.close)
        ledger = Ledger.create(tmp_path / f"ledger-{backend}.sqlite")
        for analyst in ("alice", "bob"):
            ledger.add_analyst(analyst, make_scram_verifier("secret", iterations=1))
            ledger.grant(analyst, "probe", PrivacyLoss(10.0, 1e-5))
        service = QueryService(dataset, backend=engine, sandbox=sandbox, ledger=ledger, rng=random.Random(3))
        yield Probe(service, ledger)
