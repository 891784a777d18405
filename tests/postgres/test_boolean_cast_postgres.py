"""``WHERE CAST(smoker AS BOOLEAN)`` answered by the query service on a real PostgreSQL schema: the cast of a
boolean to boolean is kept by the error-free rewrite (proxy/rewrite/safe_predicates.py, ``_cast``), with its
target type, and counts the rows it selects."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy.backends.postgres import PostgresBackend
from proxy.query.service import Principal, QueryService
from proxy.settings import SessionSettings
from proxy.wire.scram import make_scram_verifier
from tests.postgres.conftest import in_schema
from tests.service_fixture import serving
from tests.unit.proxy.policy_fixture import clinic_postgres_policy

pytestmark = pytest.mark.postgres

# 1,000 people (each row its own person): 700 smokers, 250 not, 50 unknown
PEOPLE = """
CREATE TABLE people (income double precision, smoker boolean);
INSERT INTO people
SELECT 1000.0, CASE WHEN i < 700 THEN true WHEN i < 950 THEN false END FROM generate_series(0, 999) AS t(i);
"""


@pytest.fixture
def service(
    tmp_path: Path, postgres_dsn: str, fresh_schema: str, pg: psycopg.Connection[Any]
) -> Iterator[QueryService]:
    in_schema(pg, fresh_schema, PEOPLE)
    dataset = clinic_postgres_policy(postgres_dsn, fresh_schema)
    assert dataset.dsn is not None
    backend = PostgresBackend(dataset.dsn, schema=dataset.schema, pool_size=dataset.pool_size)
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    ledger.add_analyst("alice", make_scram_verifier("secret", iterations=1))
    ledger.grant("alice", "clinic", PrivacyLoss(1.0, 0.0))
    with serving(dataset, backend, ledger, seed=3) as service:
        yield service


def test_a_boolean_column_cast_to_boolean_filters_as_it_reads(service: QueryService) -> None:
    """700 of the 1,000 rows are TRUE. At ε = 1 a row count has discrete Laplace noise of scale 1: off by
    more than 20 with probability below e^-20. Were the cast written without its type (``CAST(smoker
    AS)``), PostgreSQL would refuse the engine query with a syntax error."""
    (tree,) = service.parse("SELECT COUNT(*) FROM people WHERE CAST(smoker AS BOOLEAN)")
    outcome = service.run(tree, principal=Principal("alice"), settings=SessionSettings({"veil.epsilon": "1"}))
    assert outcome.table is not None
    ((count,),) = outcome.table.rows
    assert abs(count - 700) <= 20
