"""``FILTER (WHERE …)`` becomes the CASE argument the analysis understands (analysis/filter_clauses.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlglot

from proxy.analysis.aggregates import AggregateKind
from proxy.analysis.filter_clauses import filters_as_case
from proxy.analysis.parse import parse_statements
from proxy.analysis.shape import QueryShape
from proxy.analysis.statements import PrivateQuery, classify
from proxy.config import parse_config
from proxy.errors import PolicyViolationError, QuerySyntaxError, UnsupportedQueryError
from proxy.release.plan import price_query
from proxy.rewrite.bound_contributions import bounded_query, mode_histogram_query, value_histogram_query
from tests.unit.proxy.policy_fixture import POLICY, clinic_policy


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


def test_a_filtered_clamp_keeps_the_bounds_of_the_clamp() -> None:
    """``veil_clamp`` is read inside the FILTER clause's CASE: it used to be refused as ``function
    anonymous()``."""
    sql = "SELECT SUM(veil_clamp(cost, 0, 10)) FILTER (WHERE age > 65) FROM visits"
    (aggregate,) = shape_of(sql).shape.aggregates
    assert aggregate.column is not None and (aggregate.column.lower, aggregate.column.upper) == (0, 10)
    assert aggregate.label == "sum(veil_clamp(cost, 0, 10)) FILTER (WHERE age > 65)"


def test_filtered_and_unfiltered_aggregates_are_different_quantities() -> None:
    shape = shape_of("SELECT SUM(cost), SUM(cost) FILTER (WHERE age > 65) FROM visits").shape
    assert len(shape.aggregates) == 2


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT COUNT(*) FILTER (WHERE random() < 0.5) FROM visits", "not allowed in an aggregate"),
        ("SELECT COUNT(*) FILTER (WHERE age IN (SELECT age FROM patients)) FROM visits", "subqueries"),
        ("SELECT COUNT(DISTINCT patient_id) FILTER (WHERE random() < 0.5) FROM visits", "not allowed"),
        (
            "SELECT MODE() WITHIN GROUP (ORDER BY sex) FILTER (WHERE random() < 0.5) FROM visits",
            "not allowed",
        ),
        (  # a CASE with an ELSE counts every person: not a condition, and not the unit alone
            "SELECT COUNT(DISTINCT CASE WHEN age > 3 THEN patient_id ELSE 0 END) FROM visits",
            "only supported as COUNT\\(DISTINCT <privacy unit>\\)",
        ),
        (
            "SELECT COUNT(DISTINCT CASE WHEN age > 3 THEN age END) FROM visits",
            "only supported as COUNT\\(DISTINCT <privacy unit>\\)",
        ),
        (
            "SELECT COUNT(DISTINCT age) FILTER (WHERE age > 3) FROM visits",
            "only supported as COUNT\\(DISTINCT <privacy unit>\\)",
        ),
        (
            "SELECT MODE() WITHIN GROUP (ORDER BY CASE WHEN age > 3 THEN sex ELSE 'male' END) FROM visits",
            "answered only WITHIN GROUP \\(ORDER BY one column\\)",
        ),
    ],
)
def test_refusals(sql: str, message: str) -> None:
    with pytest.raises((PolicyViolationError, UnsupportedQueryError), match=message):
        shape_of(sql)


@pytest.mark.parametrize(
    ("sql", "label"),
    [
        (
            "SELECT COUNT(DISTINCT patient_id) FILTER (WHERE age > 3) FROM visits",
            "count(DISTINCT patient_id) FILTER (WHERE age > 3)",
        ),
        (
            "SELECT COUNT(DISTINCT v.patient_id) FILTER (WHERE v.age > 3) FROM visits v",
            "count(DISTINCT v.patient_id) FILTER (WHERE v.age > 3)",
        ),
        (
            "SELECT COUNT(DISTINCT CASE WHEN age > 3 THEN patient_id END) FROM visits",
            "count(DISTINCT CASE WHEN age > 3 THEN patient_id END)",
        ),
        (
            "SELECT COUNT(DISTINCT CASE WHEN age > 3 THEN patient_id ELSE NULL END) FROM visits",
            "count(DISTINCT CASE WHEN age > 3 THEN patient_id ELSE NULL END)",
        ),
    ],
)
def test_people_with_a_matching_row_are_counted_at_the_price_of_people(sql: str, label: str) -> None:
    """COUNT(DISTINCT unit) under a condition counts the people, not their rows: sensitivity 1 without
    GROUP BY, as without the condition, and the engine reads the condition (``CASE WHEN c THEN 1 END``)."""
    shape = shape_of(sql).shape
    (aggregate,) = shape.aggregates
    assert aggregate.kind is AggregateKind.COUNT_UNITS and aggregate.label == label
    assert aggregate.column is not None
    assert aggregate.column.expression.sql(dialect="postgres") == "CASE WHEN age > 3 THEN 1 END"
    (measurement,) = price_query(shape, epsilon=1.0).measurements
    assert measurement.quantity.label == label and measurement.sensitivity == 1.0


def test_people_with_and_without_a_condition_are_two_quantities() -> None:
    shape = shape_of(
        "SELECT COUNT(DISTINCT patient_id), COUNT(DISTINCT patient_id) FILTER (WHERE age > 3) FROM visits"
    ).shape
    assert [m.quantity.label for m in price_query(shape, epsilon=1.0).measurements] == [
        "count(DISTINCT patient_id)",
        "count(DISTINCT patient_id) FILTER (WHERE age > 3)",
    ]


def test_people_per_group_under_a_condition_are_weighted_over_all_their_groups() -> None:
    """A person counts at most once per group, divided by all the groups they have rows in: the ℓ1 bound
    min(L, groups) of COUNT(DISTINCT unit) holds whatever the condition."""
    sql = "SELECT sex, COUNT(DISTINCT patient_id) FILTER (WHERE age > 3) FROM visits GROUP BY sex"
    plan = price_query(shape_of(sql).shape, epsilon=1.0)
    (measurement,) = plan.measurements
    assert measurement.sensitivity == 2.0  # min(L = 3, two sexes)
    engine = bounded_query(plan.shape, (measurement.quantity,), dialect="duckdb").sql(dialect="duckdb")
    assert "_dp_units_e_" in engine and "_dp_person_groups" in engine


@pytest.mark.parametrize(
    ("sql", "label"),
    [
        (
            "SELECT MODE() WITHIN GROUP (ORDER BY sex) FILTER (WHERE age > 3) FROM visits",
            "mode(sex) FILTER (WHERE age > 3)",
        ),
        (
            "SELECT MODE() WITHIN GROUP (ORDER BY CASE WHEN age > 3 THEN sex END) FROM visits",
            "mode(CASE WHEN age > 3 THEN sex END)",
        ),
    ],
)
def test_a_filtered_mode_reads_its_column_where_the_condition_holds(sql: str, label: str) -> None:
    shape = shape_of(sql).shape
    (aggregate,) = shape.aggregates
    assert aggregate.kind is AggregateKind.MODE and aggregate.label == label
    assert aggregate.column is not None and aggregate.column.values == ("female", "male")
    histogram = mode_histogram_query(shape, aggregate.column, dialect="duckdb").sql(dialect="duckdb")
    assert "CASE WHEN age > 3 THEN sex END" in histogram


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


EVENTS = """
[datasets.clinic.tables.events]
privacy_unit = "pid"
max_contributions = 2

[datasets.clinic.tables.events.columns]
pid = { type = "integer" }
ts = { type = "timestamp", lower = 2024-01-01T00:00:00, upper = 2025-12-31T23:59:59 }
unbounded = { type = "timestamp" }
day = { type = "date", lower = 2024-01-01, upper = 2025-12-31 }
undated = { type = "date" }
n = { type = "integer" }
x = { type = "real", lower = 0, upper = 10 }
note = { type = "text" }
region = { type = "text", public = true, values = ["north", "south"] }
"""
FILTER = "FILTER (WHERE region = 'north')"

# An aggregate as the analyst writes it → its refusal without a FILTER clause. With one, the refusal must
# be the same, naming the aggregate with its FILTER clause wherever it names the aggregate at all.
AGGREGATE_REFUSALS = {
    "quantile-of-an-unbounded-timestamp": (
        "MIN(unbounded)",
        'min(unbounded): column "unbounded" has no declared bounds',
    ),
    "quantile-of-an-unbounded-date": (
        "MAX(undated)",
        'max(undated): column "undated" has no declared bounds',
    ),
    "percentile-of-an-unbounded-number": (
        "PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY n)",
        'percentile_cont(0.9) WITHIN GROUP (ORDER BY n): column "n" has no declared bounds',
    ),
    "median-of-text": ("MEDIAN(note)", 'median(note): column "note" is not numeric'),
    "sum-of-a-timestamp": ("SUM(ts)", 'sum(ts): column "ts" is not numeric'),
    "avg-of-a-date": ("AVG(day)", 'avg(day): column "day" is not numeric'),
    "sum-of-an-unbounded-number": ("SUM(n)", 'sum(n): column "n" has no declared bounds'),
    "stddev-of-text": ("STDDEV(note)", 'stddev(note): column "note" is not numeric'),
    "corr-with-text": ("CORR(x, note)", 'corr(x, note): column "note" is not numeric'),
    "regression-on-an-unbounded-number": (
        "REGR_SLOPE(n, x)",
        'regr_slope(n, x): column "n" has no declared bounds',
    ),
    "covariance-of-an-underivable-range": (
        "COVAR_POP(x, n * 2)",
        "covar_pop(x, n * 2): the range of n * 2 cannot be derived from the policy",
    ),
    "sum-of-an-underivable-range": (
        "SUM(x / n)",
        "sum(x / n): the range of x / n cannot be derived from the policy",
    ),
    "quantile-of-a-computed-timestamp": (
        "MIN(ts + INTERVAL '1' HOUR)",
        "min(ts + INTERVAL '1 HOUR'): only a date or timestamp column itself is answered, not a date or timestamp "
        "computed from it",
    ),
    "sum-of-star": ("SUM(*)", "sum(*) is not allowed"),
    "an-unsupported-aggregate": (
        "STRING_AGG(note, ',')",
        "aggregate string_agg() is not supported yet on private data",
    ),
    "distinct-of-another-column": (
        "COUNT(DISTINCT n)",
        "DISTINCT aggregates are only supported as COUNT(DISTINCT <privacy unit>)",
    ),
    "an-empty-clamp": (
        "SUM(veil_clamp(x, 5, 1))",
        "veil_clamp takes (expression, lower, upper) with constant numbers, lower < upper",
    ),
}


def refusal(sql: str) -> PolicyViolationError:
    dataset = parse_config(POLICY + EVENTS, path=Path("/nonexistent/veil.toml")).dataset("clinic")
    assert dataset is not None
    (tree,) = parse_statements(sql)
    with pytest.raises(PolicyViolationError) as raised:
        classify(tree, dataset)
    return raised.value


@pytest.mark.parametrize("name", list(AGGREGATE_REFUSALS))
def test_a_refusal_names_the_aggregate_as_written(name: str) -> None:
    aggregate, message = AGGREGATE_REFUSALS[name]
    assert refusal(f"SELECT {aggregate} FROM events").message == message


@pytest.mark.parametrize("name", list(AGGREGATE_REFUSALS))
def test_a_refusal_of_a_filtered_aggregate_names_it_with_its_filter_clause(name: str) -> None:
    """Not by the CASE it is analysed as (``sum(CASE WHEN region = 'north' THEN n END)``), and for the
    same reason as without the clause (the range of a CASE, or a date computed, was the reason given)."""
    aggregate, message = AGGREGATE_REFUSALS[name]
    error = refusal(f"SELECT {aggregate} {FILTER} FROM events")
    call = re.match(
        r"[a-z_]+\(.*?\)(?=:| is not allowed)", message
    )  # the aggregate, where the message names it
    expected = message if call is None else message.replace(call[0], f"{call[0]} {FILTER}", 1)
    assert error.message == expected
    assert "CASE" not in error.message and "CASE" not in (error.hint or "")


PER_PERSON = "WITH p AS (SELECT pid, COUNT(*) AS k FROM events GROUP BY pid) "


def events_shape(sql: str) -> QueryShape:
    dataset = parse_config(POLICY + EVENTS, path=Path("/nonexistent/veil.toml")).dataset("clinic")
    assert dataset is not None
    statement = classify(parse_statements(sql)[0], dataset)
    assert isinstance(statement, PrivateQuery)
    return statement.shape


def test_a_filtered_per_person_value_has_its_own_bound_chosen_over_the_matching_people() -> None:
    """``AVG(k) FILTER (WHERE k > 1)`` used to be refused: the chosen bounds were applied by the column's
    name, which the CASE hides. Now the value under the condition has its own bound, chosen from the
    people whose value the aggregate reads, and applied to the CASE the engine clamps."""
    shape = events_shape(PER_PERSON + "SELECT AVG(k), AVG(k) FILTER (WHERE k > 1) FROM p")
    assert [bound.key for bound in shape.value_bounds] == ["k", "k FILTER (WHERE k > 1)"]
    chosen = shape.with_value_bounds(
        (shape.value_bounds[0].with_choice(40), shape.value_bounds[1].with_choice(3))
    )
    plain, filtered = (aggregate.column for aggregate in chosen.aggregates)
    assert plain is not None and filtered is not None
    assert (plain.lower, plain.upper) == (0.0, 40.0)
    assert (filtered.lower, filtered.upper) == (0.0, 3.0)
    assert filtered.expression.sql(dialect="postgres") == "CASE WHEN k > 1 THEN k END"
    assert [m.quantity.label for m in price_query(chosen, epsilon=1.0).measurements] == [
        "sum(k)",
        "count(k)",
        "sum(k) FILTER (WHERE k > 1)",
        "count(k) FILTER (WHERE k > 1)",
    ]
    plain_sum, _, filtered_sum, _ = price_query(chosen, epsilon=1.0).measurements
    # one row per person in the per-person table, each priced at its own chosen bound
    assert (plain_sum.sensitivity, filtered_sum.sensitivity) == (40.0, 3.0)


def test_the_bound_of_a_filtered_per_person_value_is_chosen_from_the_matching_people() -> None:
    shape = events_shape(PER_PERSON + "SELECT SUM(k) FILTER (WHERE k > 1) FROM p")
    (bound,) = shape.value_bounds
    histogram = value_histogram_query(shape, bound, dialect="duckdb").sql(dialect="duckdb")
    assert "CASE WHEN k > 1 THEN k END" in histogram and "IS NULL" in histogram


def test_a_count_under_a_filter_chooses_no_bound() -> None:
    """COUNT reads no value's magnitude: nothing to choose, nothing spent."""
    assert events_shape(PER_PERSON + "SELECT COUNT(k) FILTER (WHERE k > 1) FROM p").value_bounds == ()


def test_a_second_filter_clause_is_a_syntax_error() -> None:
    """As in PostgreSQL: one FILTER clause per aggregate call, so a FILTER never wraps another."""
    with pytest.raises(QuerySyntaxError):
        parse_statements("SELECT COUNT(*) FILTER (WHERE age > 1) FILTER (WHERE age < 9) FROM visits")
