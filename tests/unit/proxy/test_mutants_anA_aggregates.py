"""How aggregates are read (analysis/aggregates.py): which inputs of one query are one quantity and
which are two, the bounds a (y, x) pair takes from per-person values chosen with DP, percentiles at the
ends of [0, 1], and a timestamp's epoch second. Two different inputs under one name would be measured
as one (a column answered with another's value); one input under two names is measured twice."""

from __future__ import annotations

import datetime
from fractions import Fraction

import pytest

from proxy.analysis.aggregates import AggregateInput, second_number
from proxy.analysis.shape import QueryShape
from proxy.analysis.statements import PrivateQuery
from proxy.errors import PolicyViolationError
from tests.unit.proxy.test_mutants_an_joins import classified
from tests.unit.proxy.test_per_person_values import PER_PATIENT


def shape(sql: str) -> QueryShape:
    statement = classified(sql)
    assert isinstance(statement, PrivateQuery)
    return statement.shape


def inputs(sql: str) -> list[tuple[str, AggregateInput]]:
    """Each aggregate's label and its one input."""
    found = []
    for aggregate in shape(sql).aggregates:
        (source,) = aggregate.inputs
        found.append((aggregate.label, source))
    return found


def test_people_counted_under_two_conditions_are_two_counts() -> None:
    read = inputs(
        "SELECT COUNT(DISTINCT patient_id) FILTER (WHERE age > 3), "
        "COUNT(DISTINCT patient_id) FILTER (WHERE age > 4) FROM visits"
    )
    assert [label for label, _ in read] == [
        "count(DISTINCT patient_id) FILTER (WHERE age > 3)",
        "count(DISTINCT patient_id) FILTER (WHERE age > 4)",
    ]
    (_, first), (_, second) = read
    assert first.name != second.name
    assert first.expression.sql(dialect="postgres") == "CASE WHEN age > 3 THEN 1 END"
    assert second.expression.sql(dialect="postgres") == "CASE WHEN age > 4 THEN 1 END"


def test_the_mode_of_some_rows_is_not_the_mode_of_all_rows() -> None:
    read = inputs(
        "SELECT MODE() WITHIN GROUP (ORDER BY region), "
        "MODE() WITHIN GROUP (ORDER BY region) FILTER (WHERE age > 3) FROM visits"
    )
    assert [label for label, _ in read] == ["mode(region)", "mode(region) FILTER (WHERE age > 3)"]
    (_, every), (_, some) = read
    assert every.name == "region"
    assert some.name.startswith("e_") and some.name != every.name
    assert some.expression.sql(dialect="postgres") == "CASE WHEN age > 3 THEN region END"
    assert some.values == every.values == ("north", "south")


def test_one_filtered_input_clamped_to_two_ranges_is_two_inputs() -> None:
    """The engine keys values by input name and each is clamped to its own bounds: one name for both
    would read values clamped to [0, 10] for a sum priced for [5, 10]."""
    read = inputs(
        "SELECT SUM(veil_clamp(cost, 0, 10)) FILTER (WHERE age > 3), "
        "SUM(veil_clamp(cost, 5, 10)) FILTER (WHERE age > 3) FROM visits"
    )
    (_, low), (_, high) = read
    assert (low.lower, low.upper, high.lower, high.upper) == (0.0, 10.0, 5.0, 10.0)
    assert low.name != high.name


def test_a_filter_clause_and_its_case_spelled_out_are_one_quantity() -> None:
    """``SUM(x) FILTER (WHERE c)`` is ``SUM(CASE WHEN c THEN x END)``: measured once, not twice (which
    would spend twice the budget and give two different answers to one question) — also when the condition
    is one sqlglot writes differently for PostgreSQL than generically (strpos)."""
    aggregates = shape(
        "SELECT SUM(veil_clamp(cost, 0, 10)) FILTER (WHERE strpos(note, 'x') > 0), "
        "SUM(veil_clamp(CASE WHEN strpos(note, 'x') > 0 THEN cost END, 0, 10)) FROM visits"
    ).aggregates
    assert len(aggregates) == 1
    assert aggregates[0].label == "sum(veil_clamp(cost, 0, 10)) FILTER (WHERE position('x' IN note) > 0)"


def test_a_correlation_with_one_per_person_value_takes_its_chosen_bounds_on_both_ends() -> None:
    """spent (a per-person sum, either sign) is clamped to [-2002, 2002] once its bound is chosen
    (4 rows × 500.5); a (declared bounds [0, 100], no choice) keeps its own."""
    per_person = shape(f"SELECT CORR(spent, a) {PER_PATIENT}")
    chosen = per_person.with_value_bounds(tuple(bound.with_choice(4) for bound in per_person.value_bounds))
    (aggregate,) = chosen.aggregates
    pair = aggregate.pair
    assert pair is not None
    assert [(source.text, source.lower, source.upper) for source in pair.arguments] == [
        ("spent", -2002.0, 2002.0),
        ("a", 0.0, 100.0),
    ]
    assert (pair.y.lower, pair.y.upper, pair.x.lower, pair.x.upper) == (-2002.0, 2002.0, 0.0, 100.0)
    assert (pair.product.lower, pair.product.upper) == (-200200.0, 200200.0)


@pytest.mark.parametrize(("q", "label"), [("1", "max(age)"), ("1.0", "max(age)"), ("0", "min(age)")])
def test_percentiles_at_the_ends_are_the_extremes(q: str, label: str) -> None:
    (aggregate,) = shape(f"SELECT PERCENTILE_CONT({q}) WITHIN GROUP (ORDER BY age) FROM visits").aggregates
    assert aggregate.label == label
    assert aggregate.q == Fraction(q)


@pytest.mark.parametrize("q", ["1.5", "-0.5", "'0.5'"])
def test_a_percentile_outside_zero_to_one_is_refused_saying_what_it_takes(q: str) -> None:
    with pytest.raises(PolicyViolationError) as refused:
        classified(f"SELECT PERCENTILE_CONT({q}) WITHIN GROUP (ORDER BY age) FROM visits")
    assert refused.value.message == (
        "PERCENTILE takes a constant fraction between 0 and 1, e.g. PERCENTILE_CONT(0.9)"
    )


@pytest.mark.parametrize(
    ("moment", "second"),
    [
        (datetime.datetime(1970, 1, 1), 0),
        (datetime.datetime(1970, 1, 1, 0, 0, 1, 500_000), 1),
        (datetime.datetime(1969, 12, 31, 23, 59, 59, 500_000), -1),  # floored, not rounded toward 0
        (datetime.datetime(2024, 1, 1, 6), 1_704_088_800),
    ],
)
def test_an_epoch_second_drops_the_fraction(moment: datetime.datetime, second: int) -> None:
    """A timestamp bound is measured in whole seconds (the released second is turned back into a
    timestamp): a fraction would put the grid of a quantile between seconds."""
    number = second_number(moment)
    assert number == second
    assert isinstance(number, int)
