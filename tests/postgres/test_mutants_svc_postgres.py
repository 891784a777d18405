"""Survivors of a random sample of proxy/query/service.py's mutants (seed 2101, docs/testing.md) that only
PostgreSQL tells apart: the service's own engine queries written in sqlglot's generic dialect, where
``strpos`` becomes ``STR_POSITION``, no PostgreSQL function. Skips without a server unless
``VEIL_REQUIRE_POSTGRES=1``."""

from __future__ import annotations

import pytest

from proxy.query.service import QueryService
from tests.postgres import test_mutants_query_postgres as clinic
from tests.postgres.test_query_dialect_postgres import run, spent

pytestmark = pytest.mark.postgres

service = clinic.service  # the clinic in a fresh PostgreSQL schema; alice holds ε = 10, δ = 1e-5


def test_copy_of_a_public_query_is_sent_in_postgresqls_dialect(service: QueryService) -> None:
    outcome = run(service, "COPY (SELECT code, strpos(zone, 'S') AS p FROM zones ORDER BY code) TO STDOUT")
    assert outcome.copy is not None and outcome.tag == "COPY 3"
    assert outcome.copy.values == [["east", "north", "south"], [0, 0, 1]]
    assert spent(service) == (0.0, 0.0)


def test_a_union_part_that_chooses_its_bound_is_asked_in_postgresqls_dialect(service: QueryService) -> None:
    """ratings has max_contributions = "auto": the second part chooses its bound with DP, then is re-planned
    with it; both the histogram and the count it then asks go to PostgreSQL under the part's filter. 8,000
    ratings of 2,000 users plus 90 of user 5000; 1,600 + 90 have 3 stars."""
    outcome = run(
        service,
        "SELECT COUNT(*) FROM ratings UNION ALL"
        " SELECT COUNT(*) FROM ratings WHERE strpos(CAST(stars AS TEXT), '3') > 0",
        **{"veil.epsilon": "1"},
    )
    assert outcome.table is not None and outcome.tag == "SELECT 2"
    (everyone,), (three,) = outcome.table.rows
    assert abs(everyone - 8000) < 500 and abs(three - 1600) < 500
    assert spent(service) == (pytest.approx(1.0), 0.0)
