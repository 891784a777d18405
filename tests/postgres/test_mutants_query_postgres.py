"""proxy/query/planning.py's engine queries sent to a real PostgreSQL, where sqlglot's generic SQL fails:
each planning step that asks the engine must write its query in the engine's dialect. A filter with
``strpos`` tells: PostgreSQL gets ``POSITION('x' IN note)``, the generic form ``STR_POSITION(note, 'x')``
is no PostgreSQL function (tests/postgres/test_query_dialect_postgres.py does the same for the service's
own late queries). Found by ``make mutants`` (docs/testing.md, issue 21). Skips without a server unless
``VEIL_REQUIRE_POSTGRES=1``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from budget.loss import PrivacyLoss
from proxy.backends.postgres import PostgresBackend
from proxy.query.service import QueryService
from tests.conftest import schema_in
from tests.postgres.test_query_dialect_postgres import run, spent
from tests.postgres.test_query_service_both_backends import postgres_clinic
from tests.service_fixture import granted_ledger, serving
from tests.unit.proxy.policy_fixture import clinic_postgres_policy

pytestmark = pytest.mark.postgres


@pytest.fixture
def service(tmp_path: Path, postgres_dsn: str) -> Iterator[QueryService]:
    """The clinic of test_query_service_both_backends.py in a fresh schema; alice holds ε = 10, δ = 1e-5."""
    with schema_in(postgres_dsn) as schema:
        postgres_clinic(postgres_dsn, schema)
        dataset = clinic_postgres_policy(postgres_dsn, schema)
        assert dataset.dsn is not None
        ledger = granted_ledger(tmp_path / "ledger.sqlite", "clinic", PrivacyLoss(10.0, 1e-5))
        backend = PostgresBackend(
            dataset.dsn, schema=dataset.schema, pool_size=1, statement_timeout_ms=30_000
        )
        with serving(dataset, backend, ledger, seed=13) as service:
            yield service


def test_a_per_person_values_bound_is_chosen_in_postgresqls_dialect(service: QueryService) -> None:
    """``AVG(n)`` of a per-person count has no upper bound: it is chosen with DP from a histogram of the
    values, asked of the engine under the subquery's filter. 1,000 patients have 3 visits with 'x' each
    (the one 'secret' visit is filtered out): the average is 3, and at ε = 1 within 1 (as in
    test_service_answers.py)."""
    outcome = run(
        service,
        "SELECT AVG(n) FROM (SELECT patient_id, COUNT(*) AS n FROM visits WHERE strpos(note, 'x') > 0"
        " GROUP BY patient_id) AS p",
        **{"veil.epsilon": "1"},
    )
    assert outcome.table is not None and outcome.tag == "SELECT 1"
    ((average,),) = outcome.table.rows
    assert abs(average - 3) <= 1
    assert outcome.charge is not None and outcome.charge.epsilon == pytest.approx(1.0)
    assert spent(service) == (pytest.approx(1.0), 0.0)


def test_a_group_by_expressions_domain_is_evaluated_in_postgresqls_dialect(service: QueryService) -> None:
    """The public keys of ``strpos(region, 'u')`` are computed by the engine over the policy's values
    (north → 0, south → 3), never over the table; that query too must be PostgreSQL's. 1,501 visits in
    the north (the 'secret' one among them), 1,500 in the south; at ε = 1 the noise of each count has
    scale 3 (L = 3), so within 60 of the truth but with probability e^-20."""
    outcome = run(
        service,
        "SELECT strpos(region, 'u') AS p, COUNT(*) AS n FROM visits GROUP BY 1",
        **{"veil.epsilon": "1"},
    )
    assert outcome.table is not None and outcome.tag == "SELECT 2"
    counts = dict(outcome.table.rows)
    assert sorted(counts) == [0, 3]
    assert abs(counts[0] - 1501) <= 60 and abs(counts[3] - 1500) <= 60
    assert spent(service) == (pytest.approx(1.0), 0.0)


def test_a_top_k_selection_is_asked_in_postgresqls_dialect(service: QueryService) -> None:
    """A top-k of public keys answered by a DP selection (one key of four cells): its one engine query,
    each cell's people, is written for PostgreSQL, filter included. Each patient has one female visit
    (north or south: 500 patients each) and two male ones, one in each region (1,000 patients in each
    male cell). The selection's score gap of 500 people at its share of ε = 1 picks a male cell but
    with probability below e^-20; the released count's noise is far below 100."""
    outcome = run(
        service,
        "SELECT region, sex, COUNT(DISTINCT patient_id) AS n FROM visits WHERE strpos(note, 'x') > 0"
        " GROUP BY region, sex ORDER BY n DESC LIMIT 1",
        **{"veil.epsilon": "1"},
    )
    assert outcome.table is not None and outcome.tag == "SELECT 1"
    ((region, sex, people),) = outcome.table.rows
    assert region in ("north", "south") and sex == "male" and abs(people - 1000) <= 100
    assert outcome.charge is not None and outcome.charge.epsilon == pytest.approx(1.0)
    assert spent(service) == (pytest.approx(1.0), 0.0)


def test_a_numeric_nan_in_a_keys_domain_is_no_public_key(service: QueryService) -> None:
    """PostgreSQL's NUMERIC has a NaN (it arrives as Decimal('NaN')): no public cell can hold it, so it
    is left out of the domain and only the key 1 is answered. 60 of the 3,001 visits are at age 30;
    at ε = 1 (noise scale 3) the count is within 60 of 2,941 but with probability e^-20."""
    outcome = run(
        service,
        "SELECT CASE WHEN age = 30 THEN CAST('NaN' AS NUMERIC) ELSE 1 END AS k, COUNT(*) AS n"
        " FROM visits GROUP BY 1",
        **{"veil.epsilon": "1"},
    )
    assert outcome.table is not None and outcome.tag == "SELECT 1"
    ((key, count),) = outcome.table.rows
    assert key == 1 and abs(count - 2941) <= 60


def test_a_public_query_is_sent_in_postgresqls_dialect(service: QueryService) -> None:
    """A query of a public table goes to the engine as written, free — in PostgreSQL's SQL
    (``POSITION('o' IN code)``, not the generic ``STR_POSITION``; fresh sample, seed 1142)."""
    outcome = run(service, "SELECT code, strpos(code, 'o') AS p FROM zones ORDER BY code")
    assert outcome.table is not None
    assert [tuple(row) for row in outcome.table.rows] == [("east", 0), ("north", 2), ("south", 2)]
    assert outcome.charge is None
    assert spent(service) == (0.0, 0.0)
