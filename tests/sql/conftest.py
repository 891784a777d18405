"""The engines of a table-driven suite of tests/sql: a module names its policy and rows with a ``rows``
fixture (tests/sql/engines.py) and gets them in a DuckDB file, in a PostgreSQL schema, and behind a
query service with a ledger that grants alice ε = 1000 on its dataset. A module with engines of its own
defines these fixtures itself."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from budget.ledger import Ledger
from proxy.query.service import QueryService
from tests.sql.engines import Engine, Rows, granted_ledger, on_duckdb, on_postgres, query_service


@pytest.fixture(scope="module")
def duckdb_engine(rows: Rows, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return on_duckdb(rows, tmp_path_factory.mktemp(rows.dataset))


@pytest.fixture(scope="module")
def postgres_engine(rows: Rows, postgres_dsn: str) -> Iterator[Engine]:
    with on_postgres(rows, postgres_dsn) as engine:
        yield engine


@pytest.fixture
def ledger(rows: Rows, tmp_path: Path) -> Iterator[Ledger]:
    ledger = granted_ledger(tmp_path / "ledger.sqlite", rows.dataset)
    yield ledger
    ledger.close()


@pytest.fixture
def service(engine: Engine, ledger: Ledger) -> Iterator[QueryService]:
    with query_service(engine, ledger) as service:
        yield service
