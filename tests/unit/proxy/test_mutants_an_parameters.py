"""Parameters of the extended protocol (analysis/parameters.py): the types a client is told, and the
values bound as literals, so a bound statement is checked and priced as the typed one would be."""

from __future__ import annotations

import math

import pytest

from proxy.analysis.parameters import literal, parameterized_statement
from proxy.analysis.parse import parse_statements
from tests.unit.proxy.policy_fixture import clinic_policy


def prepared(sql: str):
    return parameterized_statement(parse_statements(sql), clinic_policy())


@pytest.mark.parametrize(
    ("sql", "types"),
    [
        ("SELECT COUNT(*) FROM visits WHERE (age) > $1", {1: "int8"}),
        ("SELECT COUNT(*) FROM visits WHERE ((cost)) BETWEEN $1 AND 10", {1: "float8"}),
        ("SELECT COUNT(*) FROM visits WHERE $1 > 2.5", {1: "numeric"}),
        ("SELECT COUNT(*) FROM visits WHERE age * $1 > 2 AND $2 < (1.5)", {1: "int8", 2: "numeric"}),
        ("SELECT COUNT(*) FROM visits WHERE $1 = 7", {1: "int8"}),
    ],
)
def test_a_parameter_takes_the_type_of_what_it_is_compared_with(sql: str, types: dict[int, str]) -> None:
    assert dict(prepared(sql).inferred_types) == types


def test_bind_puts_each_value_where_its_placeholder_stands() -> None:
    statement = prepared("SELECT COUNT(*) FROM visits WHERE age > $1 AND note = $2")
    bound = statement.bind([30, "x"])
    assert bound is not None
    assert bound.sql(dialect="postgres") == "SELECT COUNT(*) FROM visits WHERE age > 30 AND note = 'x'"
    assert "$1" in statement.tree.sql(dialect="postgres")  # the parsed statement is kept for the next Bind


@pytest.mark.parametrize(
    ("value", "sql"),
    [
        (math.inf, "CAST('Infinity' AS DOUBLE PRECISION)"),
        (-math.inf, "CAST('-Infinity' AS DOUBLE PRECISION)"),
        (math.nan, "CAST('NaN' AS DOUBLE PRECISION)"),
    ],
)
def test_a_non_finite_float_is_bound_as_postgresql_spells_it(value: float, sql: str) -> None:
    assert literal(value).sql(dialect="postgres") == sql
