"""Survivors of a random sample of proxy/query/service.py's mutants (seed 2116, docs/testing.md) in
UNION ALL: the statement's ORDER BY over the rows of all parts places NULLs as PostgreSQL does."""

from __future__ import annotations

import math

import pytest

from proxy.query.service import QueryService
from tests.unit.proxy import test_service_answers as answers
from tests.unit.proxy.test_service_answers import run, spent

service = answers.service  # the clinic's query service, where alice holds ε = 10 and δ = 1e-5

NULL_AND_COUNT = (
    "SELECT NULLIF(COUNT(*), COUNT(*)) AS n FROM visits UNION ALL SELECT COUNT(*) FROM visits WHERE age > 30"
)


@pytest.mark.parametrize(
    ("order", "null_first"),
    [
        ("ORDER BY 1 DESC", True),
        ("ORDER BY 1", False),
        ("ORDER BY 1 NULLS FIRST", True),
        ("ORDER BY 1 DESC NULLS LAST", False),
    ],
)
def test_a_union_alls_order_by_places_nulls_as_postgresql_does(
    service: QueryService, order: str, null_first: bool
) -> None:
    """PostgreSQL sorts NULL above every value: first in descending order, last in ascending order, unless
    NULLS FIRST/LAST says otherwise. DuckDB, where the rows of the parts are sorted, puts NULLs last by
    default: the order must be sent with its NULLS placement."""
    outcome = run(service, f"{NULL_AND_COUNT} {order}", **{"veil.epsilon": "1"})
    assert outcome.table is not None and outcome.tag == "SELECT 2"
    values = [value for (value,) in outcome.table.rows]
    assert (values[0] is None) is null_first and (values[1] is None) is not null_first
    assert spent(service) == 1.0


def test_a_charged_union_all_is_audited_as_charged_not_as_a_stored_answer(service: QueryService) -> None:
    """The audit log tells a spend from a free stored answer by ``charge.cached``: a union that measured
    its parts spent ε — so did one that measured one part and found the other stored (its ε rounded up,
    never below the part's); one whose every part was stored spent nothing."""
    union = "SELECT COUNT(*) FROM visits WHERE age > 40 UNION ALL SELECT COUNT(*) FROM visits WHERE age > 30"
    fresh = run(service, union, **{"veil.epsilon": "1"})
    assert fresh.charge is not None
    assert (fresh.charge.epsilon, fresh.charge.cached) == (1.0, False)
    run(service, "SELECT COUNT(*) FROM visits", **{"veil.epsilon": "0.5"})
    half = run(
        service,
        "SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*) FROM visits WHERE age > 20",
        **{"veil.epsilon": "1"},
    )
    assert half.charge is not None and half.charge.cached is False
    assert half.charge.epsilon == math.nextafter(0.5, math.inf)
    again = run(service, union, **{"veil.epsilon": "1"})
    assert again.charge is not None and again.charge.cached is True
    assert spent(service) == pytest.approx(2.0)
