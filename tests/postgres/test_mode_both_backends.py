"""MODE() WITHIN GROUP and Gaussian noise with τ-thresholding through the query service, on both engines:
the donors of tests/unit/proxy/donors_fixture.py in a real DuckDB file and in a real PostgreSQL schema.

Every test that takes ``service`` runs twice: ``[duckdb]`` always, ``[postgres]`` (marked ``postgres``)
on the server of ``tests/postgres/conftest.py`` — skipped when it is unreachable, unless
``VEIL_REQUIRE_POSTGRES=1``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy.backends.base import Backend
from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.postgres import PostgresBackend
from proxy.config import ColumnType
from proxy.errors import PolicyViolationError
from proxy.query.service import Principal, QueryService, StatementOutcome
from proxy.settings import SessionSettings
from proxy.wire.scram import make_scram_verifier
from tests.postgres.conftest import in_schema
from tests.service_fixture import serving
from tests.unit.proxy.donors_fixture import (
    POSTGRES_DONORS,
    donors_policy,
    donors_postgres_policy,
    duckdb_donors,
)

ALICE = Principal("alice")
BACKENDS = ["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    ledger.add_analyst("alice", make_scram_verifier("secret", iterations=1))
    ledger.grant("alice", "bank", PrivacyLoss(3.0, 1e-5))
    return ledger


@pytest.fixture(params=BACKENDS)
def service(request: pytest.FixtureRequest, tmp_path: Path, ledger: Ledger) -> Iterator[QueryService]:
    backend: Backend
    if request.param == "duckdb":
        dataset = donors_policy(tmp_path)
        backend = DuckDBBackend(duckdb_donors(tmp_path))
    else:
        dsn = request.getfixturevalue("postgres_dsn")  # skips (or fails) here when the server is down
        schema = request.getfixturevalue("fresh_schema")
        with psycopg.connect(dsn, autocommit=True) as connection:
            in_schema(connection, schema, POSTGRES_DONORS)
        dataset = donors_postgres_policy(dsn, schema)
        assert dataset.dsn is not None
        backend = PostgresBackend(dataset.dsn, schema=dataset.schema, pool_size=dataset.pool_size)
    with serving(dataset, backend, ledger, seed=11) as service:
        yield service


def run(service: QueryService, sql: str, settings: SessionSettings) -> StatementOutcome:
    (tree,) = service.parse(sql)
    return service.run(tree, principal=ALICE, settings=settings)


def test_modes_per_group_beside_other_aggregates(service: QueryService, ledger: Ledger) -> None:
    outcome = run(
        service,
        "SELECT region, MODE() WITHIN GROUP (ORDER BY blood) AS blood, COUNT(*) AS visits,"
        " MODE() WITHIN GROUP (ORDER BY dose) AS dose, MODE() WITHIN GROUP (ORDER BY stars) AS stars"
        " FROM donors GROUP BY region ORDER BY region",
        SessionSettings({"veil.epsilon": "1"}),
    )
    assert outcome.table is not None
    # every gap is >= 660 rows; at ε/4 per mode, except with probability 1e-9, a released value's count
    # is at most (2/0.25)·ln(5·2/1e-9) = 184 rows below the mode's (mechanisms/mode.py)
    assert [(r, b, d, s) for r, b, _, d, s in outcome.table.rows] == [
        ("north", "O", 1.5, 3),
        ("south", "O", 1.5, 3),
    ]
    assert [column.type for column in outcome.table.columns] == [
        ColumnType.TEXT,
        ColumnType.TEXT,
        ColumnType.INTEGER,
        ColumnType.REAL,
        ColumnType.INTEGER,
    ]
    assert "mode(blood) ε=0.25, count(*) ε=0.25, mode(dose) ε=0.25, mode(stars) ε=0.25" in outcome.notices[0]
    assert ledger.balance("alice", "bank").spent_epsilon == pytest.approx(1.0)


def test_mode_of_a_column_without_public_values_is_refused_and_spends_nothing(
    service: QueryService, ledger: Ledger
) -> None:
    with pytest.raises(
        PolicyViolationError, match='MODE\\(\\) of "note": the column has no public value domain'
    ) as raised:
        run(service, "SELECT MODE() WITHIN GROUP (ORDER BY note) FROM donors", SessionSettings())
    assert raised.value.sqlstate == "42501"
    assert "values = [...]" in (raised.value.hint or "")
    assert ledger.history("alice") == []


def test_gaussian_noise_with_thresholding_releases_only_shared_keys(
    service: QueryService, ledger: Ledger
) -> None:
    settings = SessionSettings({"veil.epsilon": "1", "veil.delta": "1e-6", "veil.mechanism": "gaussian"})
    outcome = run(service, "SELECT note, COUNT(*) AS n FROM donors GROUP BY note", settings)
    assert outcome.table is not None
    assert [row[0] for row in outcome.table.rows] == ["x"], "the heavy donor's own note stays hidden"
    # Δ₂ = 2 (L) at (ε/2, δ/3): σ ≈ 16; the shared key has 4,002 visits
    assert abs(outcome.table.rows[0][1] - 4002) <= 200
    balance = ledger.balance("alice", "bank")
    assert (balance.spent_epsilon, balance.spent_delta) == (pytest.approx(1.0), pytest.approx(1e-6))
    notice = outcome.notices[0]
    assert "count(*) ε=0.5 δ=3.33e-07" in notice and "(δ=3.33e-07))" in notice and "τ=" in notice
