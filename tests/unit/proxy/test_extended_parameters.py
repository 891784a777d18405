"""Parameters of the extended protocol: counted, typed from their place in the statement, bound as
literal nodes (never as text), and the prepared statements and portals that hold them."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest
from sqlglot import exp

from proxy.analysis.parameters import (
    bind_parameters,
    infer_parameter_types,
    parameter_count,
    parameterized_statement,
)
from proxy.analysis.parse import parse_statements
from proxy.errors import (
    DuplicatePortalError,
    DuplicatePreparedStatementError,
    InvalidBinaryRepresentationError,
    InvalidTextRepresentationError,
    ProtocolViolationError,
    QuerySyntaxError,
    UndefinedPortalError,
    UndefinedPreparedStatementError,
    UnsupportedQueryError,
)
from proxy.server.prepared import Portal, PreparedState, PreparedStatement, parameter_types
from proxy.wire import types
from tests.unit.proxy.policy_fixture import clinic_policy

CLINIC = clinic_policy()


def parse_one(sql: str) -> exp.Expression:
    (tree,) = parse_statements(sql)
    return tree


def sql_of(tree: exp.Expression) -> str:
    return tree.sql(dialect="postgres")


# --- counting and places ------------------------------------------------------------------------------------


def test_the_count_is_the_highest_parameter_number() -> None:
    assert parameter_count(parse_one("SELECT $2, $1, $2")) == 2
    assert parameter_count(parse_one("SELECT $3")) == 3
    assert parameter_count(parse_one("SELECT '$1'")) == 0


def test_parameter_zero_does_not_exist() -> None:
    with pytest.raises(QuerySyntaxError, match=r"there is no parameter \$0"):
        parameter_count(parse_one("SELECT $0"))


def test_a_parameter_cannot_stand_for_a_table() -> None:
    with pytest.raises(QuerySyntaxError, match=r'syntax error at or near "\$1"'):
        parameter_count(parse_one("SELECT COUNT(*) FROM $1"))


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT region, COUNT(*) FROM visits GROUP BY $1",
        "SELECT region, COUNT(*) FROM visits GROUP BY region ORDER BY $1",
        "SELECT region, COUNT(*) FROM visits GROUP BY region ORDER BY ($1) DESC",
    ],
)
def test_a_parameter_cannot_be_a_group_or_sort_item_that_would_become_a_position(sql: str) -> None:
    """Bound to 1, ``ORDER BY $1`` would sort by the first column — not what PostgreSQL means."""
    with pytest.raises(UnsupportedQueryError, match=r"\$1 cannot be a GROUP BY or ORDER BY item"):
        parameter_count(parse_one(sql))


def test_a_prepared_statement_holds_one_statement_at_most() -> None:
    with pytest.raises(QuerySyntaxError, match="cannot insert multiple commands into a prepared statement"):
        parameterized_statement(parse_statements("SELECT 1; SELECT 2"), CLINIC)
    empty = parameterized_statement(parse_statements(""), CLINIC)
    assert empty.tree is None and empty.bind([]) is None


# --- inference -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT COUNT(*) FROM visits WHERE age > $1", {1: "int8"}),
        ("SELECT COUNT(*) FROM visits WHERE $1 <= cost", {1: "float8"}),
        ("SELECT COUNT(*) FROM visits v WHERE v.region = $1", {1: "text"}),
        ("SELECT COUNT(*) FROM people WHERE smoker = $1", {1: "bool"}),
        ("SELECT COUNT(*) FROM visits WHERE age BETWEEN $1 AND $2", {1: "int8", 2: "int8"}),
        ("SELECT COUNT(*) FROM visits WHERE region IN ($1, $2)", {1: "text", 2: "text"}),
        ("SELECT COUNT(*) FROM visits WHERE note LIKE $1", {1: "text"}),
        ("SELECT region, COUNT(*) FROM visits GROUP BY region LIMIT $1 OFFSET $2", {1: "int8", 2: "int8"}),
        (
            "SELECT $1::date, CAST($2 AS NUMERIC), $3::timestamptz",
            {1: "date", 2: "numeric", 3: "timestamptz"},
        ),
        ("SELECT COUNT(*) * $1 FROM visits", {1: "int8"}),
        ("SELECT SUM(age) + $1 FROM visits", {1: "numeric"}),
        ("SELECT PERCENTILE_CONT($1) WITHIN GROUP (ORDER BY age) FROM visits", {1: "float8"}),
        ("SELECT COUNT(*) FROM visits WHERE age > ($1)", {1: "int8"}),
        ("SELECT $1", {}),
        ("SELECT COUNT(*) FROM visits WHERE nowhere = $1", {}),
    ],
)
def test_a_parameter_takes_the_type_its_place_implies(sql: str, expected: dict[int, str]) -> None:
    assert infer_parameter_types(parse_one(sql), CLINIC) == expected


# --- binding -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "values", "typed"),
    [
        ("SELECT COUNT(*) FROM visits WHERE age > $1", [30], "SELECT COUNT(*) FROM visits WHERE age > 30"),
        ("SELECT COUNT(*) FROM visits WHERE age > $1", [-5], "SELECT COUNT(*) FROM visits WHERE age > -5"),
        ("SELECT $1 - $1", [-5], "SELECT -5 - -5"),
        (
            "SELECT COUNT(*) FROM visits WHERE cost < $1",
            [2.5],
            "SELECT COUNT(*) FROM visits WHERE cost < 2.5",
        ),
        ("SELECT $1", [Decimal("-1.50")], "SELECT -1.50"),
        ("SELECT $1, $2", [True, None], "SELECT TRUE, NULL"),
        ("SELECT $1", ["it's"], "SELECT 'it''s'"),
        ("SELECT $1", [datetime.date(2024, 1, 31)], "SELECT CAST('2024-01-31' AS DATE)"),
        ("SELECT $1", [datetime.datetime(2024, 1, 31, 8)], "SELECT CAST('2024-01-31 08:00:00' AS TIMESTAMP)"),
        ("SELECT $1", [float("nan")], "SELECT CAST('NaN' AS DOUBLE PRECISION)"),
    ],
)
def test_a_bound_statement_is_the_statement_typed_with_the_value(
    template: str, values: list[object], typed: str
) -> None:
    bound = bind_parameters(parse_one(template), values)
    assert sql_of(bound) == typed
    assert bound == parse_one(typed)  # the same tree the analysis sees for the typed-in query


def test_a_string_value_stays_one_literal_whatever_it_holds() -> None:
    hostile = "x' OR 1=1; DROP TABLE visits; --"
    bound = bind_parameters(parse_one("SELECT COUNT(*) FROM visits WHERE region = $1"), [hostile])
    (literal,) = [node for node in bound.walk() if isinstance(node, exp.Literal) and node.is_string]
    assert literal.this == hostile
    assert len(parse_statements(sql_of(bound))) == 1


def test_binding_leaves_the_prepared_tree_unchanged() -> None:
    tree = parse_one("SELECT COUNT(*) FROM visits WHERE age > $1")
    bind_parameters(tree, [1])
    assert sql_of(tree) == "SELECT COUNT(*) FROM visits WHERE age > $1"


def test_bytea_values_are_refused() -> None:
    with pytest.raises(UnsupportedQueryError, match="bytea parameters are not supported"):
        bind_parameters(parse_one("SELECT $1"), [b"\x00"])


# --- prepared statements ---------------------------------------------------------------------------------


def prepared(sql: str, declared: list[int] | None = None, name: str = "") -> PreparedStatement:
    statement = parameterized_statement(parse_statements(sql), CLINIC)
    return PreparedStatement(name, sql, statement, parameter_types(declared or [], statement))


def test_declared_types_win_then_inferred_then_text() -> None:
    statement = prepared("SELECT COUNT(*) FROM visits WHERE age > $1 AND region = $2 AND $3", [types.NUMERIC])
    assert statement.parameter_types == (types.NUMERIC, types.TEXT, types.TEXT)
    assert prepared("SELECT COUNT(*) FROM visits WHERE age > $1").parameter_types == (types.INT8,)


def test_declared_types_beyond_the_highest_placeholder_still_count() -> None:
    assert prepared("SELECT 1", [types.INT4, types.INT4]).parameter_types == (types.INT4, types.INT4)


def test_parameters_are_decoded_as_the_reported_types() -> None:
    statement = prepared("SELECT COUNT(*) FROM visits WHERE age > $1 AND region = $2")
    assert statement.decode([0], [b"30", b"north"]) == (30, "north")
    assert statement.decode([1, 0], [(30).to_bytes(8, "big"), None]) == (30, None)


def test_a_bind_with_the_wrong_number_of_values_is_a_protocol_violation() -> None:
    statement = prepared("SELECT $1, $2", name="two")
    with pytest.raises(
        ProtocolViolationError, match='supplies 1 parameters, but prepared statement "two" requires 2'
    ):
        statement.decode([], [b"1"])


def test_invalid_parameters_are_22P02_or_22P03_naming_the_parameter() -> None:
    statement = prepared("SELECT COUNT(*) FROM visits WHERE age > $1")
    with pytest.raises(InvalidTextRepresentationError, match='for type bigint: "old"') as text:
        statement.decode([0], [b"old"])
    assert text.value.detail == "in parameter $1"
    with pytest.raises(InvalidBinaryRepresentationError, match="takes 8 bytes, not 2"):
        statement.decode([1], [b"\0\0"])


def test_probes_stand_in_for_each_type() -> None:
    statement = prepared("SELECT $1, $2", [types.DATE, types.UNSPECIFIED])
    assert statement.probes() == (datetime.date(2000, 1, 1), "0")


def test_named_statements_and_portals_must_be_closed_before_reuse() -> None:
    state = PreparedState()
    state.add_statement(prepared("SELECT 1", name="s1"))
    with pytest.raises(DuplicatePreparedStatementError, match='prepared statement "s1" already exists'):
        state.add_statement(prepared("SELECT 2", name="s1"))
    state.add_portal("p1", Portal(state.statement("s1"), (), []))
    with pytest.raises(DuplicatePortalError, match='portal "p1" already exists'):
        state.add_portal("p1", Portal(state.statement("s1"), (), []))
    state.close("S", "s1")
    state.close("S", "s1")  # closing what is gone is no error
    state.add_statement(prepared("SELECT 2", name="s1"))
    assert state.portal("p1").statement.query == "SELECT 1"  # a portal outlives its statement


def test_the_unnamed_statement_and_portal_are_replaced() -> None:
    state = PreparedState()
    state.add_statement(prepared("SELECT 1"))
    state.add_statement(prepared("SELECT 2"))
    state.add_portal("", Portal(state.statement(""), (), []))
    state.add_portal("", Portal(state.statement(""), (), [1]))
    assert state.statement("").query == "SELECT 2" and state.portal("").result_formats == [1]


def test_missing_statements_and_portals_are_26000_and_34000() -> None:
    state = PreparedState()
    with pytest.raises(UndefinedPreparedStatementError, match='prepared statement "nope" does not exist'):
        state.statement("nope")
    with pytest.raises(UndefinedPortalError, match='portal "nope" does not exist'):
        state.portal("nope")
    with pytest.raises(UndefinedPreparedStatementError):
        state.deallocate("nope")


def test_portals_end_with_their_transaction_and_statements_do_not() -> None:
    state = PreparedState()
    state.add_statement(prepared("SELECT 1", name="kept"))
    state.add_portal("cursor", Portal(state.statement("kept"), (), []))
    state.end_transaction()
    with pytest.raises(UndefinedPortalError):
        state.portal("cursor")
    assert state.statement("kept").query == "SELECT 1"


def test_deallocate_all_keeps_the_unnamed_statement() -> None:
    state = PreparedState()
    state.add_statement(prepared("SELECT 1", name="a"))
    state.add_statement(prepared("SELECT 2"))
    state.deallocate(None)
    assert state.statement("").query == "SELECT 2"
    with pytest.raises(UndefinedPreparedStatementError):
        state.statement("a")


def test_a_simple_query_forgets_the_unnamed_statement_and_portal() -> None:
    state = PreparedState()
    state.add_statement(prepared("SELECT 1"))
    state.add_portal("", Portal(state.statement(""), (), []))
    state.forget_unnamed()
    with pytest.raises(UndefinedPreparedStatementError):
        state.statement("")
    with pytest.raises(UndefinedPortalError):
        state.portal("")
