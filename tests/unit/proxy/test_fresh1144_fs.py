"""Survivors of the fresh mutation sample (seed 1144, docs/testing.md) in the query pipeline and the
analysis: a UNION ALL whose parts group by an expression over a declared range, a write statement with a
recursive WITH, and a per-person subquery over a table the dataset does not have."""

from __future__ import annotations

import pytest

from proxy.config import ColumnType
from proxy.errors import PolicyViolationError, UnknownTableError
from proxy.query.service import QueryService
from proxy.settings import SessionSettings
from tests.unit.proxy import test_service_answers as answers
from tests.unit.proxy.test_mutants_an_joins import refusal
from tests.unit.proxy.test_service_answers import ALICE, run, spent

service = answers.service  # the clinic: 3,000 visits of 1,000 patients (3 each), ages 20–69, a third female

DECADES_UNION = (
    "SELECT age / 10 AS decade, COUNT(*) AS n FROM visits GROUP BY 1"
    " UNION ALL SELECT age / 10, COUNT(*) FROM visits WHERE sex = 'female' GROUP BY 1"
)


def test_a_union_of_parts_grouped_by_an_expression_gets_each_parts_domain_from_the_engine(
    service: QueryService,
) -> None:
    """``age / 10`` over the declared range 0–100 has the public domain 0..10, which the engine computes
    from the range (never from the rows): each part answers all 11 decades, empty ones included, with
    its count within 10 noise scales (Laplace of scale 3 / 0.5 = 6 per part: a false failure has
    probability below 22·e^-10 = 0.001)."""
    outcome = run(service, DECADES_UNION, **{"veil.epsilon": "1"})
    assert outcome.table is not None and outcome.tag == "SELECT 22"
    rows = outcome.table.rows
    assert [decade for decade, _ in rows] == list(range(11)) * 2
    everyone = {decade: 600 if 2 <= decade <= 6 else 0 for decade in range(11)}
    women = {decade: 200 if 2 <= decade <= 6 else 0 for decade in range(11)}
    for (decade, noisy), exact in zip(rows, [*everyone.values(), *women.values()], strict=True):
        assert abs(noisy - exact) <= 60, (decade, noisy, exact)
    assert outcome.charge is not None and outcome.charge.epsilon == pytest.approx(1.0)
    assert spent(service) == pytest.approx(1.0)


def test_describing_that_union_plans_its_parts_and_spends_nothing(service: QueryService) -> None:
    """The extended protocol's Describe plans both parts, domains included, and reads no private row."""
    (tree,) = service.parse(DECADES_UNION)
    description = service.describe(tree, principal=ALICE, settings=SessionSettings({"veil.epsilon": "1"}))
    assert description.columns is not None
    assert [(c.name, c.type) for c in description.columns] == [
        ("decade", ColumnType.INTEGER),
        ("n", ColumnType.INTEGER),
    ]
    assert spent(service) == 0.0


def test_a_write_with_a_recursive_with_is_refused_as_a_write() -> None:
    """The statement's kind is the reason that tells the analyst what to do (Veil is read-only); its WITH
    is not looked into first."""
    sqlstate, message, _ = refusal("WITH RECURSIVE r AS (SELECT 1) DELETE FROM visits", PolicyViolationError)
    assert (sqlstate, message) == ("42501", "only SELECT statements may read private tables")


def test_a_per_person_subquery_over_a_table_the_dataset_lacks_names_it() -> None:
    """Every table a statement reads is looked up before the per-person subquery is built, so the
    analyst gets 42P01 with the name, not an internal error."""
    sql = "SELECT AVG(n) FROM (SELECT patient_id, COUNT(*) AS n FROM nowhere GROUP BY patient_id) AS t"
    sqlstate, message, _ = refusal(sql, UnknownTableError)
    assert (sqlstate, message) == ("42P01", 'relation "nowhere" does not exist')
