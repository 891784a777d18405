"""``FILTER (WHERE …)`` becomes the CASE argument the analysis understands (analysis/filter_clauses.py)."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.analysis.aggregates import AggregateKind
from proxy.analysis.filter_clauses import filters_as_case
from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import PrivateQuery, classify
from proxy.errors import PolicyViolationError
from proxy.release.plan import price_query
from tests.unit.proxy.policy_fixture import clinic_policy


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("COUNT(*) FILTER (WHERE cost IS NULL)", "COUNT(CASE WHEN cost IS NULL THEN 1 END)"),
        ("COUNT(cost) FILTER (WHERE age > 3)", "COUNT(CASE WHEN age > 3 THEN cost END)"),
        ("SUM(cost) FILTER (WHERE age > 3)", "SUM(CASE WHEN age > 3 THEN cost END)"),
        ("AVG(cost * 2) FILTER (WHERE age > 3)", "AVG(CASE WHEN age > 3 THEN cost * 2 END)"),
        (
            "COUNT(DISTINCT patient_id) FILTER (WHERE age > 3)",
            "COUNT(DISTINCT CASE WHEN age > 3 THEN patient_id END)",
        ),
        (
            "PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY age) FILTER (WHERE sex = 'male')",
            "PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY CASE WHEN sex = 'male' THEN age END)",
        ),
    ],
)
def test_rewrites(sql: str, expected: str) -> None:
    tree = sqlglot.parse_one(f"SELECT {sql} FROM visits", read="postgres")
    assert filters_as_case(tree).sql(dialect="postgres") == f"SELECT {expected} FROM visits"


def shape_of(sql: str) -> PrivateQuery:
    (tree,) = parse_statements(sql)
    statement = classify(tree, clinic_policy())
    assert isinstance(statement, PrivateQuery)
    return statement


def test_a_filtered_count_over_a_private_column_is_answered() -> None:
    """It used to be refused as ``column "cost" is private``."""
    (aggregate,) = shape_of("SELECT COUNT(*) FILTER (WHERE cost IS NULL) FROM visits").shape.aggregates
    assert aggregate.kind is AggregateKind.COUNT


def test_a_filtered_sum_keeps_the_bounds_of_its_value() -> None:
    (aggregate,) = shape_of("SELECT SUM(cost) FILTER (WHERE age > 65) FROM visits").shape.aggregates
    assert aggregate.column is not None and (aggregate.column.lower, aggregate.column.upper) == (-50, 500.5)


def test_filtered_and_unfiltered_aggregates_are_different_quantities() -> None:
    shape = shape_of("SELECT SUM(cost), SUM(cost) FILTER (WHERE age > 65) FROM visits").shape
    assert len(shape.aggregates) == 2


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT COUNT(*) FILTER (WHERE random() < 0.5) FROM visits", "not allowed in an aggregate"),
        ("SELECT COUNT(*) FILTER (WHERE age IN (SELECT age FROM patients)) FROM visits", "subqueries"),
        (
            "SELECT COUNT(DISTINCT patient_id) FILTER (WHERE age > 3) FROM visits",
            r"COUNT\(DISTINCT patient_id\) with a condition",
        ),
        (
            "SELECT MODE() WITHIN GROUP (ORDER BY sex) FILTER (WHERE age > 3) FROM visits",
            r"MODE\(\) with a condition",
        ),
    ],
)
def test_refusals(sql: str, message: str) -> None:
    with pytest.raises(PolicyViolationError, match=message):
        shape_of(sql)


@pytest.mark.parametrize(
    ("sql", "labels"),
    [
        (
            "SELECT COUNT(*) FILTER (WHERE cost IS NULL), SUM(cost) FILTER (WHERE age > 65) FROM visits",
            ["count(*) FILTER (WHERE cost IS NULL)", "sum(cost) FILTER (WHERE age > 65)"],
        ),
        (
            "SELECT AVG(cost * 2) FILTER (WHERE sex = 'male') FROM visits",
            ["sum(cost * 2) FILTER (WHERE sex = 'male')", "count(cost * 2) FILTER (WHERE sex = 'male')"],
        ),
        (
            "SELECT STDDEV(cost) FILTER (WHERE age > 3) FROM visits",
            [
                "count(cost) FILTER (WHERE age > 3)",
                "sum(cost) FILTER (WHERE age > 3)",
                "sum(cost ^ 2) FILTER (WHERE age > 3)",
            ],
        ),
        (
            "SELECT MIN(age) FILTER (WHERE cost > 0) FROM visits",
            ["min(age) FILTER (WHERE cost > 0)"],
        ),
        (
            "SELECT CORR(cost, age) FILTER (WHERE sex = 'male') FROM visits",
            [
                f"{quantity} FILTER (WHERE sex = 'male')"
                for quantity in (
                    "count(age | cost)",
                    "sum(age | cost)",
                    "sum(cost | age)",
                    "sum((age | cost) ^ 2)",
                    "sum((cost | age) ^ 2)",
                    "sum(age * cost)",
                )
            ],
        ),
        (  # a CASE the analyst wrote is shown as written too
            "SELECT COUNT(CASE WHEN cost IS NULL THEN 1 END) FROM visits",
            ["count(CASE WHEN cost IS NULL THEN 1 END)"],
        ),
    ],
)
def test_notices_and_explain_name_a_filtered_aggregate_as_written(sql: str, labels: list[str]) -> None:
    """Not as the CASE this module rewrites it to: ``count(*) FILTER (WHERE cost IS NULL)``, not
    ``count(CASE WHEN cost IS NULL THEN 1 END)`` (what the NOTICE said before)."""
    plan = price_query(shape_of(sql).shape, epsilon=1.0)
    assert sorted(m.quantity.label for m in plan.measurements) == sorted(labels)
    assert sorted(label for label, _, _ in plan.split()) == sorted(labels)  # what the NOTICE lists
