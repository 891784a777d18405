"""Per-person values (analysis/per_person.py): which bounds each has, and how the missing ones are chosen
with DP when the query runs (query/planning.py ``choose_value_bounds``)."""

from __future__ import annotations

import math
import random

import duckdb
import pytest
import sqlglot

from proxy.analysis.derived import ValueBound
from proxy.analysis.intervals import interval
from proxy.analysis.parse import parse_statements
from proxy.analysis.shape import QueryShape
from proxy.analysis.statements import PrivateQuery, classify
from proxy.backends.duckdb import DuckDBBackend
from proxy.errors import PolicyViolationError
from proxy.query.explain import explain_query
from proxy.query.planning import Execute, bound_choice_epsilon, choose_value_bounds, prepare_release
from proxy.release.plan import price_query
from proxy.rewrite.bound_contributions import value_histogram_query
from tests.unit.proxy.policy_fixture import clinic_policy

PER_PATIENT = "FROM (SELECT patient_id, COUNT(*) AS n, SUM(cost) AS spent, SUM(age) AS years, AVG(age) AS a, MAX(age) AS oldest, COUNT(*) FILTER (WHERE cost > 100) AS big FROM visits GROUP BY patient_id) AS p"


def shape_of(sql: str) -> QueryShape:
    (tree,) = parse_statements(sql)
    statement = classify(tree, clinic_policy())
    assert isinstance(statement, PrivateQuery)
    return statement.shape


def test_each_per_person_value_has_the_bounds_the_policy_implies() -> None:
    table = shape_of(f"SELECT COUNT(*) {PER_PATIENT}").table
    bounds = {name: (column.lower, column.upper) for name, column in table.columns.items()}
    assert bounds == {
        "patient_id": (None, None),
        "n": (0.0, None),  # a count: at least 0, no upper bound the policy could know
        "spent": (None, None),
        "years": (None, None),
        "a": (0.0, 100.0),  # an average stays within the values' bounds
        "oldest": (0.0, 100.0),
        "big": (0.0, None),
    }


def test_the_privacy_unit_may_be_renamed_in_a_per_person_subquery() -> None:
    inner = "SELECT patient_id AS Who, COUNT(*) AS n FROM visits GROUP BY patient_id"
    table = shape_of(f"SELECT COUNT(*) FROM ({inner}) AS p").table
    assert list(table.columns) == ["who", "n"]


def test_a_count_per_person_bounds_arithmetic_only_where_both_bounds_are_known() -> None:
    """A count per person has a lower bound (0) and no upper one: its arithmetic is unbounded."""
    table = shape_of(f"SELECT COUNT(*) {PER_PATIENT}").table
    assert interval(sqlglot.parse_one("n + 1"), table=table) == (-math.inf, math.inf)
    assert interval(sqlglot.parse_one("a + 1"), table=table) == (1.0, 101.0)


def test_a_per_person_aggregate_takes_columns() -> None:
    with pytest.raises(PolicyViolationError) as refused:
        shape_of("SELECT COUNT(*) FROM (SELECT patient_id, SUM(*) AS n FROM visits GROUP BY patient_id) AS p")
    assert (
        str(refused.value) == "aggregates in a per-person subquery take a column or an expression of columns"
    )


@pytest.mark.parametrize("aggregate", ["SUM(DISTINCT cost)", "COUNT(DISTINCT cost, age)"])
def test_distinct_in_a_per_person_subquery_is_only_a_count_of_one_expression(aggregate: str) -> None:
    with pytest.raises(PolicyViolationError) as refused:
        shape_of(
            f"SELECT AVG(n) FROM (SELECT patient_id, {aggregate} AS n FROM visits GROUP BY patient_id) AS p"
        )
    assert (
        str(refused.value)
        == "DISTINCT is only allowed as COUNT(DISTINCT expression) in a per-person subquery"
    )


def test_totals_get_bounds_chosen_with_dp_only_where_the_query_needs_them() -> None:
    shape = shape_of(f"SELECT AVG(n), SUM(spent), AVG(years), AVG(a), COUNT(big) {PER_PATIENT}")
    assert shape.value_bounds == (
        ValueBound("n", 1.0, 1000, 1),  # counts in steps of 1, up to the default cap
        ValueBound("spent", 500.5, 1000, 0),  # cost in [-50, 500.5]: a sum of either sign
        ValueBound("years", 100.0, 1000, 1),  # age in [0, 100]: a sum that cannot be negative
    )
    before = {
        aggregate.label: (aggregate.column.lower, aggregate.column.upper)
        for aggregate in shape.aggregates
        if aggregate.column
    }
    assert before["avg(n)"] == (0.0, 1000.0), "priced at the widest bound the choice can give"
    assert before["sum(spent)"] == (-500_500.0, 500_500.0)
    assert before["avg(a)"] == (0.0, 100.0)


def test_an_explicit_clamp_needs_no_choice() -> None:
    assert shape_of(f"SELECT AVG(veil_clamp(n, 0, 20)) {PER_PATIENT}").value_bounds == ()


def test_the_cap_of_an_auto_table_is_its_contribution_cap() -> None:
    shape = shape_of("SELECT AVG(n) FROM (SELECT user_id, COUNT(*) AS n FROM ratings GROUP BY user_id) AS p")
    assert shape.value_bounds == (ValueBound("n", 1.0, 100, 1),)


def test_chosen_bounds_clamp_and_price_the_values() -> None:
    shape = shape_of(f"SELECT AVG(n), SUM(spent) {PER_PATIENT}")
    chosen = shape.with_value_bounds(tuple(bound.with_choice(4) for bound in shape.value_bounds))
    plan = price_query(chosen, epsilon=1.0, bound_epsilon=bound_choice_epsilon(chosen, 1.0))
    sensitivities = {m.quantity.label: m.sensitivity for m in plan.measurements}
    assert sensitivities == {"sum(n)": 4.0, "count(n)": 1.0, "sum(spent)": 2002.0}
    assert plan.describe() == (
        "ε=1 (n in [0, 4] chosen with DP ε=0.05, spent in [-2002, 2002] chosen with DP ε=0.05, "
        "sum(n) ε=0.3, count(n) ε=0.3, sum(spent) ε=0.3)"
    )


def test_before_the_choice_the_plan_says_what_it_may_be() -> None:
    shape = shape_of(f"SELECT AVG(n) {PER_PATIENT}")
    plan, _ = prepare_release(
        shape, epsilon=1.0, dialect="duckdb", bound_epsilon=bound_choice_epsilon(shape, 1.0)
    )
    assert plan.describe().startswith("ε=1 (n in [0, 1000] at most, chosen with DP when the query runs ε=0.1")


@pytest.fixture
def engine() -> Execute:
    """visits: 200 patients with 1..5 visits (cost 10 each) and one with 60."""
    connection = duckdb.connect(":memory:")
    connection.execute(
        "CREATE TABLE visits AS SELECT p AS patient_id, 30 AS age, 10.0 AS cost, 'x' AS note, 'north' AS region,"
        " 'male' AS sex FROM range(200) t(p), range(5) u(k) WHERE k <= p % 5"
        " UNION ALL SELECT 999, 30, 10.0, 'x', 'north', 'male' FROM range(60)"
    )

    def execute(sql: str) -> tuple[list[tuple[str, str]], list[tuple[object, ...]]]:
        cursor = connection.execute(sql)
        return [(d[0], str(d[1])) for d in cursor.description], cursor.fetchall()

    return execute


def test_the_value_histogram_counts_each_person_once(engine: Execute) -> None:
    shape = shape_of(f"SELECT AVG(n) {PER_PATIENT}")
    (bound,) = shape.value_bounds
    rows = engine(value_histogram_query(shape, bound, dialect="duckdb").sql(dialect="duckdb"))[1]
    assert dict(rows) == {1: 40, 2: 40, 3: 40, 4: 40, 5: 40, 60: 1}


def test_the_chosen_bound_covers_almost_everyone(engine: Execute) -> None:
    """At ε = 10 one person may be clamped (C = cells/ε_q rounds to 0 or 1), and each grid step away from
    the smallest candidate costs a rank: the bound covers everyone but the heavy patient."""
    shape = shape_of(f"SELECT AVG(n) {PER_PATIENT}")
    plan, _ = prepare_release(
        shape, epsilon=10.0, dialect="duckdb", bound_epsilon=bound_choice_epsilon(shape, 10.0)
    )
    chosen = choose_value_bounds(plan, execute=engine, dialect="duckdb", rng=random.Random(3))
    (bound,) = chosen.value_bounds
    assert bound.chosen is not None and 5 <= bound.chosen < 60, "every count kept but the heavy patient's 60"
    (aggregate,) = chosen.aggregates
    assert aggregate.column is not None
    assert (aggregate.column.lower, aggregate.column.upper) == (0.0, float(bound.chosen))


def test_values_filtered_out_by_the_outer_where_are_not_counted(engine: Execute) -> None:
    shape = shape_of(f"SELECT AVG(n) {PER_PATIENT} WHERE n < 10")
    (bound,) = shape.value_bounds
    rows = engine(value_histogram_query(shape, bound, dialect="duckdb").sql(dialect="duckdb"))[1]
    assert 60 not in dict(rows)


def test_explain_charges_the_choice_and_says_so() -> None:
    sandbox = DuckDBBackend.sandbox()
    try:
        explanation = explain_query(
            clinic_policy(), f"SELECT AVG(n) {PER_PATIENT}", backend=sandbox, epsilon=1.0
        )
    finally:
        sandbox.close()
    assert [(m.quantity, m.epsilon, m.sensitivity) for m in explanation.measurements] == [
        # the choice first, as the NOTICE lists it (each person one count of the value histogram)
        ("n in [0, 1000] at most, chosen with DP when the query runs", pytest.approx(0.1), 1.0),
        ("sum(n)", pytest.approx(0.45), 1000.0),
        ("count(n)", pytest.approx(0.45), 1.0),
    ]
    (note,) = explanation.notes
    assert note.startswith(
        "n in [0, 1000] at most, chosen with DP when the query runs: ε=0.1 of the query's ε"
    )
