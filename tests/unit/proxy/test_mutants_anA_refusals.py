"""What Veil tells the analyst when an aggregate is refused (analysis/aggregates.py): the message names
the aggregate as written and the hint says what to write instead, word for word — and the inputs of the
aggregates it accepts (a mode's public candidates, a clamp's bounds) are the ones the analyst wrote."""

from __future__ import annotations

import hashlib

import pytest

from proxy.analysis.statements import PrivateQuery
from proxy.config import ColumnType
from proxy.errors import PolicyViolationError, ProxyError, UnsupportedQueryError
from tests.unit.proxy.test_mutants_an_joins import classified
from tests.unit.proxy.test_mutants_anA_aggregates import DATE_HINT, moments, shape
from tests.unit.proxy.test_per_person_values import PER_PATIENT

MODE_HINT = "write MODE() WITHIN GROUP (ORDER BY col) with a column declared public in the policy"


def refusal(error: type[ProxyError], sql: str) -> tuple[str, str | None]:
    with pytest.raises(error) as refused:
        classified(sql)
    return refused.value.message, refused.value.hint


def test_mode_as_a_plain_function_says_how_postgresql_writes_it() -> None:
    assert refusal(UnsupportedQueryError, "SELECT mode(region) FROM visits") == (
        "mode(col) is not PostgreSQL's MODE aggregate",
        "write MODE() WITHIN GROUP (ORDER BY col)",
    )


@pytest.mark.parametrize("order", ["region, sex", "age + 1"])
def test_a_mode_of_anything_but_one_column_is_refused(order: str) -> None:
    assert refusal(UnsupportedQueryError, f"SELECT MODE() WITHIN GROUP (ORDER BY {order}) FROM visits") == (
        "MODE() is answered only WITHIN GROUP (ORDER BY one column)",
        MODE_HINT,
    )


@pytest.mark.parametrize(("column", "name"), [("v.note", "note"), ("age", "age")])
def test_a_mode_of_a_column_without_public_values_says_how_to_declare_them(column: str, name: str) -> None:
    assert refusal(PolicyViolationError, f"SELECT MODE() WITHIN GROUP (ORDER BY {column}) FROM visits v") == (
        f'MODE() of "{column}": the column has no public value domain',
        f"the candidates of a DP mode must be public: declare {name} public with values = [...] or "
        "range = [start, stop, step] in the policy (veil.toml)",
    )


def test_a_mode_reads_its_column_with_its_public_candidates() -> None:
    (aggregate,) = shape("SELECT MODE() WITHIN GROUP (ORDER BY v.region) FROM visits v").aggregates
    assert aggregate.label == "mode(v.region)"
    assert aggregate.column is not None
    assert (aggregate.column.name, aggregate.column.type, aggregate.column.values) == (
        "region",
        ColumnType.TEXT,
        ("north", "south"),
    )


def test_a_mode_under_a_case_reads_the_rows_where_it_holds() -> None:
    (aggregate,) = shape(
        "SELECT MODE() WITHIN GROUP (ORDER BY CASE WHEN age > 3 THEN region END) FROM visits"
    ).aggregates
    assert aggregate.label == "mode(CASE WHEN age > 3 THEN region END)"
    assert aggregate.column is not None
    assert aggregate.column.expression.sql(dialect="postgres") == "CASE WHEN age > 3 THEN region END"
    assert aggregate.column.values == ("north", "south")


def test_an_unsupported_aggregate_is_named_by_its_function_alone() -> None:
    message, _ = refusal(PolicyViolationError, "SELECT string_agg(lower(note), ',') FROM visits")
    assert message == "aggregate string_agg() is not supported yet on private data"


@pytest.mark.parametrize(("sql", "call"), [("SUM(*)", "sum(*)"), ("SUM(v.*)", "sum(v.*)")])
def test_an_aggregate_of_every_column_says_to_aggregate_one(sql: str, call: str) -> None:
    assert refusal(PolicyViolationError, f"SELECT {sql} FROM visits v") == (
        f"{call} is not allowed",
        "aggregate a column or an expression of columns",
    )


def test_a_sum_of_text_says_to_count_it() -> None:
    assert refusal(PolicyViolationError, "SELECT SUM(note) FROM visits") == (
        'sum(note): column "note" is not numeric',
        "use COUNT instead",
    )


@pytest.mark.parametrize("order", ["age DESC", "age, cost"])
def test_a_percentile_needs_one_column_in_ascending_order(order: str) -> None:
    message, _ = refusal(
        PolicyViolationError, f"SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY {order}) FROM visits"
    )
    assert message == "PERCENTILE needs WITHIN GROUP (ORDER BY one column) in ascending order"


def test_a_date_computed_from_a_date_column_is_refused_saying_what_is_answered() -> None:
    with pytest.raises(PolicyViolationError) as refused:
        moments("SELECT MIN(born + 1) FROM visits")
    assert (refused.value.message, refused.value.hint) == (
        "min(born + 1): only a date or timestamp column itself is answered, not a date or timestamp computed "
        "from it",
        DATE_HINT,
    )


def test_one_input_clamped_to_different_ranges_is_as_many_inputs() -> None:
    """The engine keys clamped values by input name: each range its own name."""
    statement = classified(
        "SELECT SUM(veil_clamp(cost, 0, 10)), SUM(veil_clamp(cost, 5, 10)), SUM(veil_clamp(cost, 0, 20)) "
        "FROM visits"
    )
    assert isinstance(statement, PrivateQuery)
    read = [aggregate.column for aggregate in statement.shape.aggregates]
    assert [(source.lower, source.upper) for source in read if source] == [
        (0.0, 10.0),
        (5.0, 10.0),
        (0.0, 20.0),
    ]
    assert len({source.name for source in read if source}) == 3


def test_an_input_is_named_with_function_names_in_lower_case() -> None:
    (aggregate,) = shape("SELECT SUM(COALESCE(cost, 0)) FROM visits").aggregates
    assert aggregate.label == "sum(coalesce(cost, 0))"


def test_a_function_that_varies_per_row_is_refused_in_an_aggregates_expression() -> None:
    assert refusal(PolicyViolationError, "SELECT SUM(age + random()) FROM visits") == (
        "function rand() is not allowed in an aggregate of a query on private data",
        "use comparisons, arithmetic, CASE, CAST and common scalar functions",
    )


def test_integer_arithmetic_is_summed_as_an_integer() -> None:
    """The engine sums an INTEGER input exactly; a REAL one in floating point."""
    types = [
        (aggregate.label, aggregate.column.type)
        for aggregate in shape("SELECT SUM(age + 1), SUM(age + cost) FROM visits").aggregates
        if aggregate.column
    ]
    assert types == [("sum(age + 1)", ColumnType.INTEGER), ("sum(age + cost)", ColumnType.REAL)]


def test_a_date_column_is_named_as_written() -> None:
    statement = moments("SELECT COUNT(v.born), COUNT(v.seen) FROM visits v")
    assert isinstance(statement, PrivateQuery)
    assert [aggregate.label for aggregate in statement.shape.aggregates] == ["count(v.born)", "count(v.seen)"]


def test_a_filtered_per_person_value_is_bounded_over_the_people_the_filter_keeps() -> None:
    """``AVG(n) FILTER (WHERE n > 1)`` reads n only where n > 1: its bound is chosen from those people."""
    (aggregate,) = shape(f"SELECT AVG(n) FILTER (WHERE n > 1) {PER_PATIENT}").aggregates
    assert [source.value_bound for source in aggregate.inputs] == ["n FILTER (WHERE n > 1)"]


def test_an_expressions_name_is_a_digest_of_its_text_and_bounds() -> None:
    """``e_`` and 32 hex digits of SHA-256: the engine's aliases built on it (``_dp_sumsq_e_…``, 44
    characters) stay well within PostgreSQL's 63-byte identifiers."""
    (aggregate,) = shape("SELECT SUM(age + 1) FROM visits").aggregates
    assert aggregate.column is not None
    digest = hashlib.sha256(b"age + 1\x1f1.0\x1f101.0").hexdigest()
    assert aggregate.column.name == "e_" + digest[:32]
