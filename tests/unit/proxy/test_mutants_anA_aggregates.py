"""How aggregates are read (analysis/aggregates.py): which inputs of one query are one quantity and
which are two, the bounds a (y, x) pair takes from per-person values chosen with DP, percentiles at the
ends of [0, 1], and a timestamp's epoch second. Two different inputs under one name would be measured
as one (a column answered with another's value); one input under two names is measured twice."""

from __future__ import annotations

import datetime
from fractions import Fraction
from pathlib import Path

import pytest

from proxy.analysis.aggregates import AggregateInput, second_number
from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import PrivateQuery, classify
from proxy.config import ColumnType, parse_config
from proxy.errors import PolicyViolationError
from tests.unit.proxy.test_mutants_an_joins import classified
from tests.unit.proxy.test_mutants_anD_joins import shape_of as shape
from tests.unit.proxy.test_per_person_values import PER_PATIENT
from tests.unit.proxy.visits_fixture import POLICY as MOMENTS_POLICY

DATE_HINT = (
    "a date or timestamp column answers COUNT, MIN, MAX, MEDIAN and PERCENTILE_CONT/DISC (as dates or "
    "timestamps) once the policy declares its lower and upper bounds; group by date_trunc or EXTRACT of it"
)


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


def test_a_filter_clause_and_its_case_are_one_quantity_under_integer_policy_bounds() -> None:
    """``cost`` is declared with ``lower = -50``: the FILTER's rewrite carries -50.0, the CASE the
    policy's -50. The input's name must not tell them apart, or one question is charged twice."""
    aggregates = shape(
        "SELECT SUM(cost) FILTER (WHERE age > 3), SUM(CASE WHEN age > 3 THEN cost END) FROM visits"
    ).aggregates
    assert len(aggregates) == 1


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


def moments(sql: str) -> object:
    """``sql`` on visits_fixture.py's table: a date column (born) and a timestamp column (seen), neither
    with declared bounds."""
    dataset = parse_config(MOMENTS_POLICY, path=Path("/nonexistent/veil.toml")).dataset("d")
    assert dataset is not None
    (tree,) = parse_statements(sql)
    return classify(tree, dataset)


def test_a_count_of_dates_reads_the_column_as_it_is() -> None:
    statement = moments("SELECT COUNT(born), COUNT(seen) FROM visits")
    assert isinstance(statement, PrivateQuery)
    read = [
        (source.name, source.expression.sql(dialect="postgres"), source.type, source.lower, source.upper)
        for aggregate in statement.shape.aggregates
        for source in aggregate.inputs
    ]
    assert read == [
        ("born", "born", ColumnType.DATE, None, None),
        ("seen", "seen", ColumnType.TIMESTAMP, None, None),
    ]


@pytest.mark.parametrize(("sql", "call"), [("SUM(born)", "sum(born)"), ("AVG(seen)", "avg(seen)")])
def test_a_sum_of_dates_says_what_a_date_column_answers(sql: str, call: str) -> None:
    column = call[4:-1]
    with pytest.raises(PolicyViolationError) as refused:
        moments(f"SELECT {sql} FROM visits")
    assert (refused.value.message, refused.value.hint) == (
        f'{call}: column "{column}" is not numeric',
        DATE_HINT,
    )


@pytest.mark.parametrize(
    ("sql", "message", "hint"),
    [
        (
            "SELECT MEDIAN(born) FROM visits",
            'median(born): column "born" has no declared bounds',
            "declare lower and upper dates for column born in the policy (veil.toml), e.g. lower = 2024-01-01, "
            "upper = 2025-12-31",
        ),
        (
            "SELECT MAX(seen) FROM visits",
            'max(seen): column "seen" has no declared bounds',
            "declare lower and upper timestamps for column seen in the policy (veil.toml), e.g. lower = "
            "2024-01-01T00:00:00, upper = 2025-12-31T23:59:59",
        ),
    ],
)
def test_a_quantile_of_dates_without_bounds_says_how_to_declare_them(
    sql: str, message: str, hint: str
) -> None:
    with pytest.raises(PolicyViolationError) as refused:
        moments(sql)
    assert (refused.value.message, refused.value.hint) == (message, hint)


@pytest.mark.parametrize(
    ("sql", "product"),
    [
        ("CORR(cost * 2, age)", "age * (cost * 2)"),
        ("CORR(v.cost, v.age)", "v.age * v.cost"),
        ("COVAR_POP(abs(cost), coalesce(age, (1)))", "abs(cost) * coalesce(age, (1))"),
        (
            "REGR_SXY(abs(cost) + abs(age), veil_clamp(patient_id, 0, 10))",
            "(abs(cost) + abs(age)) * veil_clamp(patient_id, 0, 10)",
        ),
        ("REGR_SXY(abs(cost) * 2, abs(age))", "abs(age) * (abs(cost) * 2)"),
    ],
)
def test_a_products_factors_are_parenthesized_unless_a_column_or_one_call(sql: str, product: str) -> None:
    """How ``veil explain`` and notices name the Σyx a pair aggregate measures: ``sum(age * (cost * 2))``
    — a factor that is an operation is parenthesized, a column or a single function call is not."""
    (aggregate,) = shape(f"SELECT {sql} FROM visits v").aggregates
    assert aggregate.pair is not None
    assert aggregate.pair.product.text == product


UNDERSCORE_POLICY = """
[datasets.d]
path = "d.duckdb"

[datasets.d.tables.t]
privacy_unit = "id"
max_contributions = 1

[datasets.d.tables.t.columns]
id = { type = "integer" }
_ = { type = "integer", lower = 0, upper = 10 }
x = { type = "integer", lower = 0, upper = 10 }
"""


def test_a_column_named_by_underscores_alone_is_a_column_in_a_products_label() -> None:
    """``_`` is an SQL identifier the policy accepts: a factor like any column, not an operation to
    parenthesize (``(_) * x`` before)."""
    dataset = parse_config(UNDERSCORE_POLICY, path=Path("/nonexistent/veil.toml")).dataset("d")
    assert dataset is not None
    (tree,) = parse_statements("SELECT CORR(_, x), CORR(t._, x) FROM t")
    statement = classify(tree, dataset)
    assert isinstance(statement, PrivateQuery)
    products = [aggregate.pair.product.text for aggregate in statement.shape.aggregates if aggregate.pair]
    assert products == ["_ * x", "t._ * x"]


def test_a_pair_input_clamped_to_two_ranges_is_two_inputs() -> None:
    """``cost`` masked by ``age`` is read once clamped to [0, 10] and once to [5, 10]: two inputs, which the
    engine must not key under one name; ``age`` masked by ``cost`` has the same bounds in both, one input."""
    first, second = shape(
        "SELECT CORR(veil_clamp(cost, 0, 10), age), CORR(veil_clamp(cost, 5, 10), age) FROM visits"
    ).aggregates
    assert first.pair is not None and second.pair is not None
    assert (first.pair.y.lower, second.pair.y.lower) == (0.0, 5.0)
    assert first.pair.y.name != second.pair.y.name
    assert first.pair.x.name == second.pair.x.name


@pytest.mark.parametrize(
    "clamp",
    [
        "veil_clamp(cost, 1, 2, 3)",
        "veil_clamp(cost, 10, 0)",
        "veil_clamp(cost, 1, 1)",
        "veil_clamp(cost, age, 2)",
    ],
)
def test_veil_clamp_takes_an_expression_and_two_increasing_constants(clamp: str) -> None:
    with pytest.raises(PolicyViolationError) as refused:
        classified(f"SELECT SUM({clamp}) FROM visits")
    assert refused.value.message == (
        "veil_clamp takes (expression, lower, upper) with constant numbers, lower < upper"
    )


def test_a_distinct_count_where_each_row_is_a_person_says_to_count_rows() -> None:
    with pytest.raises(PolicyViolationError) as refused:
        classified("SELECT COUNT(DISTINCT income) FROM people")
    assert (refused.value.message, refused.value.hint) == (
        "DISTINCT aggregates are only supported as COUNT(DISTINCT <privacy unit>)",
        "each row is one person: use COUNT(*)",
    )


def test_two_products_with_the_same_corners_are_two_inputs() -> None:
    """age · clamp(cost) and age · clamp(age) both lie in [0, 1000]: different values, so different names
    (the engine would otherwise sum one product for both Σyx)."""
    first, second = shape(
        "SELECT CORR(veil_clamp(cost, 0, 10), age), CORR(veil_clamp(age, 0, 10), age) FROM visits"
    ).aggregates
    assert first.pair is not None and second.pair is not None
    products = (first.pair.product, second.pair.product)
    assert [(product.lower, product.upper) for product in products] == [(0.0, 1000.0), (0.0, 1000.0)]
    assert [product.text for product in products] == [
        "age * veil_clamp(cost, 0, 10)",
        "age * veil_clamp(age, 0, 10)",
    ]
    assert first.pair.product.name != second.pair.product.name
