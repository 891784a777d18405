"""A survivor of seed 2125's sample of proxy/query/service.py (docs/testing.md) that only PostgreSQL tells
apart: a query re-planned with a contribution bound remembered from an earlier choice must still be written
in the engine's dialect — ``strpos`` is ``POSITION(… IN …)`` for PostgreSQL, while sqlglot's generic
``STR_POSITION`` is no PostgreSQL function. Skips without a server unless ``VEIL_REQUIRE_POSTGRES=1``."""

from __future__ import annotations

import pytest

from proxy.query.service import QueryService
from tests.postgres import test_mutants_query_postgres as clinic
from tests.postgres.test_query_dialect_postgres import run, spent

pytestmark = pytest.mark.postgres

service = clinic.service  # the clinic in a fresh PostgreSQL schema; alice holds ε = 10, δ = 1e-5


def test_a_query_with_a_remembered_bound_is_sent_in_postgresqls_dialect(service: QueryService) -> None:
    """ratings has max_contributions = "auto": the count chooses the bound under its filter and remembers
    it; the sum under the same filter reuses it, re-planned with the bound, and is asked of PostgreSQL.
    8,000 ratings of 2,000 users plus 90 of user 5000; 1,600 + 90 have 3 stars: the sum of the capped
    ones is near 3 · 1,600."""
    where = "WHERE strpos(CAST(stars AS TEXT), '3') > 0"
    run(service, f"SELECT COUNT(*) FROM ratings {where}", **{"veil.epsilon": "1"})
    total = run(service, f"SELECT SUM(stars) FROM ratings {where}", **{"veil.epsilon": "1"})
    assert "remembered from an earlier choice" in total.notices[0]
    assert total.table is not None and total.tag == "SELECT 1"
    ((value,),) = total.table.rows
    assert abs(value - 4800) < 1000
    assert total.charge is not None and not total.charge.cached
    assert spent(service) == (pytest.approx(2.0), 0.0)
