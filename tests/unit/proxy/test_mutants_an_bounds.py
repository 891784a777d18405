"""Bounds Veil derives for expressions inside aggregates (analysis/intervals.py) and the conditions an
aggregate may hold (analysis/aggregates.py, checks.py): the bounds set each aggregate's sensitivity."""

from __future__ import annotations

import pytest

from proxy.analysis.statements import PrivateQuery
from proxy.errors import PolicyViolationError, UnsupportedQueryError
from tests.unit.proxy.test_mutants_an_joins import classified


def only_aggregate_bounds(sql: str) -> tuple[float | None, float | None]:
    statement = classified(sql)
    assert isinstance(statement, PrivateQuery)
    (aggregate,) = statement.shape.aggregates
    assert aggregate.column is not None
    return aggregate.column.lower, aggregate.column.upper


def test_rounding_widens_a_columns_bounds_by_one_each_way() -> None:
    assert only_aggregate_bounds("SELECT SUM(ROUND(cost)) FROM visits") == (-50 - 1, 500.5 + 1)
    assert only_aggregate_bounds("SELECT SUM(CEIL(age)) FROM visits") == (-1, 101)


def test_a_divisor_unbounded_on_one_side_bounds_nothing() -> None:
    """patient_id has no declared bounds: Veil derives no range through a division by it, and asks for
    an explicit clamp instead."""
    with pytest.raises(PolicyViolationError) as refused:
        classified("SELECT SUM(cost / GREATEST(patient_id, 1)) FROM visits")
    assert refused.value.message == (
        "sum(cost / greatest(patient_id, 1)): the range of cost / greatest(patient_id, 1) "
        "cannot be derived from the policy"
    )


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT SUM(cost) FILTER (WHERE age > random()) FROM visits",
        "SELECT SUM(CASE WHEN age > random() THEN cost END) FROM visits",
        "SELECT COUNT(DISTINCT patient_id) FILTER (WHERE age > random()) FROM visits",
        "SELECT MODE() WITHIN GROUP (ORDER BY region) FILTER (WHERE age > random()) FROM visits",
    ],
)
def test_a_function_that_could_fail_or_vary_per_row_is_refused_in_an_aggregates_condition(sql: str) -> None:
    with pytest.raises(PolicyViolationError) as refused:
        classified(sql)
    assert (
        refused.value.message == "function rand() is not allowed in an aggregate of a query on private data"
    )


def test_a_subquery_without_a_table_is_named_in_the_refusal() -> None:
    with pytest.raises(UnsupportedQueryError) as refused:
        classified("SELECT (SELECT 1)")
    assert str(refused.value) == "SUBQUERY is not supported in a query without a table"
