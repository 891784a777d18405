"""The engines a table-driven suite of tests/sql runs on: one policy and its rows, in a DuckDB file and in a
PostgreSQL schema of the server of ``tests/conftest.py``, behind the query service with a seeded
RandomSource. The suites (dates and correlation, timestamps) differ only in their policy and rows."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import tomli_w

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy.backends.base import Backend
from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.postgres import PostgresBackend
from proxy.config import DatasetPolicy, parse_config
from proxy.query.service import Principal, QueryService, StatementOutcome
from proxy.settings import SessionSettings
from proxy.wire.scram import make_scram_verifier
from tests.conftest import schema_in

ALICE = Principal("alice")
EPSILON = 100.0  # large: the checks are about the price and the arithmetic, not the noise


@dataclass(frozen=True)
class Rows:
    """A policy of one dataset whose DuckDB file is named by the line ``path = "<file>"``, and the SQL that
    creates its rows on each engine (``duckdb``, ``postgres``)."""

    dataset: str
    policy: str
    file: str
    create: dict[str, str]

    @property
    def path_line(self) -> str:
        return tomli_w.dumps({"path": self.file})


@dataclass(frozen=True)
class Engine:
    """One backend holding the rows and the policy that points at it. The exact answers are asked of the
    service's own backend, directly."""

    name: str
    dataset: DatasetPolicy
    make_backend: Callable[[], Backend]
    policy: str  # the policy text, for a served copy
    exact_file: Path | None = None  # Spark: exact answers from DuckDB on the same rows (quantile_disc)

    def exact(self, service: QueryService, sql: str) -> list[tuple[Any, ...]]:
        if self.exact_file is None:
            return service.backend.execute(sql)[1]
        with duckdb.connect(str(self.exact_file), read_only=True) as connection:
            return connection.execute(sql).fetchall()


def on_duckdb(rows: Rows, directory: Path) -> Engine:
    """The rows in ``directory/<file>``, the policy with its absolute path."""
    path = directory / rows.file
    with duckdb.connect(str(path)) as connection:
        connection.execute(rows.create["duckdb"])
    text = rows.policy.replace(rows.path_line, tomli_w.dumps({"path": str(path)}))
    return Engine("duckdb", _dataset(text, rows.dataset, directory), lambda: DuckDBBackend(path), text)


@contextlib.contextmanager
def on_postgres(rows: Rows, dsn: str) -> Iterator[Engine]:
    """The rows in a new schema (dropped afterwards), the policy with ``backend``, ``dsn`` and ``schema``."""
    with schema_in(dsn) as schema:
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute(f"SET search_path TO {schema}")
            connection.execute(rows.create["postgres"])  # type: ignore[arg-type]
        location = 'backend = "postgres"\n' + tomli_w.dumps({"dsn": dsn, "schema": schema})
        text = rows.policy.replace(rows.path_line, location)
        dataset = _dataset(text, rows.dataset, Path("/nonexistent"))
        assert dataset.dsn is not None
        dataset_dsn = dataset.dsn
        yield Engine(
            "postgres", dataset, lambda: PostgresBackend(dataset_dsn, schema=schema, pool_size=2), text
        )


def _dataset(text: str, name: str, directory: Path) -> DatasetPolicy:
    dataset = parse_config(text, path=directory / "veil.toml").dataset(name)
    assert dataset is not None
    return dataset


def granted_ledger(path: Path, dataset: str) -> Ledger:
    """A ledger where alice may spend ε = 1000 and δ = 1e-5 on ``dataset``."""
    ledger = Ledger.create(path)
    ledger.add_analyst("alice", make_scram_verifier("secret", iterations=1))
    ledger.grant("alice", dataset, PrivacyLoss(1000.0, 1e-5))
    return ledger


@contextlib.contextmanager
def query_service(engine: Engine, ledger: Ledger, *, seed: int = 18) -> Iterator[QueryService]:
    """The engine's dataset behind a query service with its own backend and a seeded RandomSource."""
    backend, sandbox = engine.make_backend(), DuckDBBackend.sandbox()
    try:
        yield QueryService(
            engine.dataset, backend=backend, sandbox=sandbox, ledger=ledger, rng=random.Random(seed)
        )
    finally:
        backend.close()
        sandbox.close()


def run(
    service: QueryService, sql: str, epsilon: float = EPSILON, settings: dict[str, str] | None = None
) -> StatementOutcome:
    """One statement as alice, at ``epsilon`` and with the other session ``settings``."""
    (tree,) = service.parse(sql)
    chosen = {"veil.epsilon": f"{epsilon:g}", **(settings or {})}
    return service.run(tree, principal=ALICE, settings=SessionSettings(chosen))
