"""Engine queries the query service builds late — after a bound was chosen, or for the "(other)" row —
sent to a real PostgreSQL: they must be written in its dialect, not sqlglot's generic one.

DuckDB reads the generic SQL, so the in-process DuckDB tests cannot tell; PostgreSQL cannot. A filter
with ``strpos`` is enough: sqlglot writes it as ``POSITION('x' IN note)`` for PostgreSQL and as
``STR_POSITION(note, 'x')`` generically, a function PostgreSQL does not have — so a query generated
without the dialect fails in the engine, after the reservation, as a charged failure. The module is in
``[tool.mutmut]``'s test selection (docs/testing.md, mutation testing). It skips without a server unless
``VEIL_REQUIRE_POSTGRES=1``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql as pgsql

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy.backends.postgres import PostgresBackend
from proxy.query.service import Principal, QueryService, StatementOutcome
from proxy.settings import SessionSettings
from proxy.wire.scram import make_scram_verifier
from tests.postgres.conftest import in_schema
from tests.postgres.test_query_service_both_backends import postgres_clinic
from tests.service_fixture import serving
from tests.unit.proxy.policy_fixture import clinic_postgres_policy
from tests.unit.proxy.test_mutants_svcF_reconstruct import (
    assert_estimated_from_truthful_release,
    truthful_sex_release,
)

pytestmark = pytest.mark.postgres

ALICE = Principal("alice")


@pytest.fixture
def service(tmp_path: Path, postgres_dsn: str, fresh_schema: str) -> Iterator[QueryService]:
    """The clinic of test_query_service_both_backends.py in a fresh schema; alice holds ε = 10."""
    postgres_clinic(postgres_dsn, fresh_schema)
    dataset = clinic_postgres_policy(postgres_dsn, fresh_schema)
    assert dataset.dsn is not None
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    ledger.add_analyst("alice", make_scram_verifier("secret", iterations=1))
    ledger.grant("alice", "clinic", PrivacyLoss(10.0, 1e-5))
    backend = PostgresBackend(dataset.dsn, schema=dataset.schema, pool_size=1, statement_timeout_ms=30_000)
    with serving(dataset, backend, ledger, seed=11) as service:
        yield service


def run(service: QueryService, sql: str, **settings: str) -> StatementOutcome:
    (tree,) = service.parse(sql)
    return service.run(tree, principal=ALICE, settings=SessionSettings(settings))


def spent(service: QueryService) -> tuple[float, float]:
    balance = service.ledger.balance("alice", "clinic")
    return balance.spent_epsilon, balance.spent_delta


def test_the_other_rows_total_is_asked_in_postgresqls_dialect(service: QueryService) -> None:
    """The "(other)" row comes from a third engine query (the total without GROUP BY): with the filter's
    ``strpos`` it runs only as PostgreSQL SQL. 3,000 visits hold 'x', the secret row is filtered out, so
    (other) is noise around 0."""
    outcome = run(
        service,
        "SELECT note, COUNT(*) AS n FROM visits WHERE strpos(note, 'x') > 0 GROUP BY note",
        **{"veil.other_row": "on", "veil.epsilon": "1", "veil.delta": "1e-6"},
    )
    assert outcome.table is not None
    rows = dict(outcome.table.rows)
    assert list(rows) == ["x", "(other)"]
    # ε = 1 in three shares (counts, people gate, total): noise scale 9 per count, two of them in (other)
    assert abs(rows["x"] - 3000) <= 180
    assert abs(rows["(other)"]) <= 360
    assert outcome.charge is not None and not outcome.charge.cached
    assert outcome.charge.epsilon == pytest.approx(1.0)
    assert spent(service) == (pytest.approx(1.0), pytest.approx(1e-6))


def test_a_union_part_replanned_after_its_bound_choice_is_asked_in_postgresqls_dialect(
    service: QueryService,
) -> None:
    """ratings has max_contributions = "auto": each part chooses its bound with DP, then is planned again
    with it — that second plan's SQL goes to PostgreSQL. 1,600 of the 8,090 ratings have 5 stars (one
    per user of 2,000 at most, none of the heavy user's 90); the second part counts the 8,000 of the
    2,000 ordinary users plus at most L of the heavy user's."""
    outcome = run(
        service,
        "SELECT COUNT(*) FROM ratings WHERE strpos(CAST(stars AS text), '5') > 0"
        " UNION ALL SELECT COUNT(*) FROM ratings",
        **{"veil.epsilon": "1"},
    )
    assert outcome.table is not None
    (fives,), (everything,) = outcome.table.rows
    assert abs(fives - 1600) <= 300
    assert abs(everything - 8000) <= 300
    assert outcome.charge is not None and not outcome.charge.cached
    assert outcome.charge.epsilon == pytest.approx(1.0)
    assert spent(service) == (pytest.approx(1.0), 0.0)


def test_veil_reconstruct_reads_a_release_in_postgresql_and_says_it_spent_nothing(
    service: QueryService, pg: psycopg.Connection[Any], fresh_schema: str
) -> None:
    """A release as ``veil materialize diversity --out db:released`` writes it: the value sets (here of
    one value each, p = 1: each set holds the true value) and the companion table of metadata. EM over
    sets that say the truth gives back their counts: 30 female, 70 male."""
    metadata = truthful_sex_release()
    in_schema(
        pg,
        fresh_schema,
        "CREATE TABLE released (sex text[]);"
        " INSERT INTO released SELECT ARRAY['female'] FROM generate_series(1, 30);"
        " INSERT INTO released SELECT ARRAY['male'] FROM generate_series(1, 70);"
        " CREATE TABLE released__metadata (document text);",
    )
    pg.execute(
        pgsql.SQL("INSERT INTO {} VALUES (%s)").format(pgsql.Identifier(fresh_schema, "released__metadata")),
        (json.dumps(metadata),),
    )
    outcome = run(service, "SELECT * FROM veil_reconstruct('released', 'sex')")
    assert_estimated_from_truthful_release(outcome)
    assert spent(service) == (0.0, 0.0)
