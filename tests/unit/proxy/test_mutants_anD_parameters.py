"""Parameters of the extended protocol (analysis/parameters.py): where a ``$n`` may stand, the type a
client is told for it, and the literal a bound value becomes."""

from __future__ import annotations

import datetime
import math
from decimal import Decimal

import pytest

from proxy.analysis.parameters import ParameterizedStatement, literal, parameterized_statement
from proxy.analysis.parse import parse_statements
from proxy.errors import ProxyError, QuerySyntaxError, UnsupportedQueryError
from tests.unit.proxy.policy_fixture import clinic_policy

JOIN = "SELECT COUNT(*) FROM patients p JOIN visits v ON p.patient_id = v.patient_id WHERE "


def prepared(sql: str) -> ParameterizedStatement:
    return parameterized_statement(parse_statements(sql), clinic_policy())


def refusal(error: type[ProxyError], sql: str) -> ProxyError:
    with pytest.raises(error) as refused:
        prepared(sql)
    return refused.value


@pytest.mark.parametrize(
    ("sql", "types"),
    [
        ("SELECT PERCENTILE_CONT($1) WITHIN GROUP (ORDER BY age) FROM visits", {1: "float8"}),
        ("SELECT COUNT(*) FROM visits WHERE age BETWEEN $1 AND 10", {1: "int8"}),
        ("SELECT COUNT(*) FROM visits WHERE $1 BETWEEN cost AND 10", {1: "float8"}),
        ("SELECT COUNT(*) FROM visits WHERE cost IN ($1, 2)", {1: "float8"}),
        ("SELECT COUNT(*) FROM visits WHERE $1 > CAST(note AS DATE)", {1: "date"}),
        ("SELECT COUNT(*) FROM visits WHERE CAST($1 AS DATE) > age", {1: "date"}),
        ("SELECT COUNT(*) FROM visits WHERE note LIKE $1", {1: "text"}),
        ("SELECT COUNT(*) FROM visits WHERE $1 > COUNT(*)", {1: "int8"}),
        ("SELECT COUNT(*) FROM visits WHERE $1 > SUM(age)", {1: "numeric"}),
        ("SELECT COUNT(*) FROM visits WHERE $1 = TRUE", {1: "bool"}),
        ("SELECT COUNT(*) FROM visits WHERE $1 = -age", {1: "numeric"}),
        ("SELECT COUNT(*) FROM visits WHERE V.age > $1", {1: "int8"}),
        ("SELECT COUNT(*) FROM visits LIMIT $2 OFFSET $1", {1: "int8", 2: "int8"}),
        ("SELECT COUNT(*) FROM visits WHERE age > $1 AND note = $1", {1: "int8"}),
        (JOIN + "v.cost > $1", {1: "float8"}),
        (JOIN + "cost > $1", {1: "float8"}),
    ],
)
def test_a_parameter_is_typed_from_where_it_stands(sql: str, types: dict[int, str]) -> None:
    """The type the client is told decides how it encodes the value: a wrong one binds another value."""
    assert dict(prepared(sql).inferred_types) == types


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM visits WHERE COALESCE(age, $1) > 3",
        "SELECT COUNT(*) FROM visits WHERE ABS($1) > 3",
        "SELECT COUNT(*) FROM visits WHERE $1 IN (age, 2)",
        JOIN + "p.cost > $1",  # patients has no cost: visits' is not the one meant
        JOIN + "patients.cost > $1",
    ],
)
def test_a_parameter_whose_place_implies_no_type_is_left_untyped(sql: str) -> None:
    """Left out, the parameter is reported as text, as PostgreSQL resolves an unknown literal — rather
    than typed after another table's column of the same name."""
    assert dict(prepared(sql).inferred_types) == {}


def test_a_parameter_numbered_zero_does_not_exist() -> None:
    error = refusal(QuerySyntaxError, "SELECT COUNT(*) FROM visits WHERE age > $0")
    assert (error.sqlstate, error.message) == ("42601", "there is no parameter $0")


def test_the_first_parameter_is_counted() -> None:
    statement = prepared("SELECT COUNT(*) FROM visits WHERE age > $1")
    assert statement.parameter_count == 1


@pytest.mark.parametrize("sql", ["SELECT COUNT(*) FROM $1", "SELECT $1.age FROM visits"])
def test_a_parameter_in_the_place_of_a_name_is_a_syntax_error(sql: str) -> None:
    error = refusal(QuerySyntaxError, sql)
    assert (error.message, error.hint) == (
        'syntax error at or near "$1"',
        "a parameter can only stand for a value",
    )


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM visits GROUP BY $1",
        "SELECT COUNT(*) FROM visits GROUP BY ($1)",
        "SELECT COUNT(*) FROM visits ORDER BY $1 DESC",
    ],
)
def test_a_parameter_cannot_be_a_grouping_or_sorting_item(sql: str) -> None:
    """``GROUP BY 1`` names the first output column: a bound integer would group by another column than
    the one the statement was checked with."""
    error = refusal(UnsupportedQueryError, sql)
    assert (error.sqlstate, error.message, error.detail, error.hint) == (
        "0A000",
        "$1 cannot be a GROUP BY or ORDER BY item",
        "bound to an integer, it would name an output column by its position",
        "group or sort by a column or an expression",
    )


def test_two_statements_cannot_be_one_prepared_statement() -> None:
    error = refusal(QuerySyntaxError, "SELECT 1; SELECT 2")
    assert error.message == "cannot insert multiple commands into a prepared statement"


def test_an_empty_query_string_is_a_statement_without_parameters() -> None:
    statement = prepared("")
    assert (statement.tree, statement.parameter_count, dict(statement.inferred_types)) == (None, 0, {})
    assert statement.bind([]) is None


def test_only_placeholders_are_bound_not_parenthesized_numbers() -> None:
    statement = prepared("SELECT COUNT(*) FROM visits WHERE age > (1) AND cost < $1")
    assert statement.parameter_count == 1
    bound = statement.bind([7])
    assert bound is not None
    assert bound.sql(dialect="postgres") == "SELECT COUNT(*) FROM visits WHERE age > (1) AND cost < 7"


@pytest.mark.parametrize(
    ("value", "sql"),
    [
        (datetime.datetime(2024, 1, 31, 12, 30), "CAST('2024-01-31 12:30:00' AS TIMESTAMP)"),
        (
            datetime.datetime(2024, 1, 31, 12, 30, tzinfo=datetime.UTC),
            "CAST('2024-01-31 12:30:00+00:00' AS TIMESTAMPTZ)",
        ),
        (datetime.date(2024, 1, 31), "CAST('2024-01-31' AS DATE)"),
        (Decimal("-1.50"), "-1.50"),
        (Decimal("NaN"), "CAST('NaN' AS DECIMAL)"),
        (-3, "-3"),
        (2.5, "2.5"),
        (None, "NULL"),
        (False, "FALSE"),
        ("it's", "'it''s'"),
    ],
)
def test_a_bound_value_is_the_literal_postgresql_would_read(value: object, sql: str) -> None:
    assert literal(value).sql(dialect="postgres") == sql


def test_a_non_finite_float_is_cast_to_double_precision() -> None:
    assert literal(math.inf).sql(dialect="postgres") == "CAST('Infinity' AS DOUBLE PRECISION)"


def test_bytes_and_unknown_values_are_refused() -> None:
    with pytest.raises(UnsupportedQueryError) as refused:
        literal(b"\x00")
    assert (refused.value.message, refused.value.hint) == (
        "bytea parameters are not supported",
        "declare the parameter as text and send text",
    )
    with pytest.raises(TypeError) as unknown:
        literal([1])
    assert str(unknown.value) == "no SQL literal for a list"
