"""What analysts are told and what Veil derives, for cases a fresh mutation sample (seed 1143) found
unpinned: COPY's HEADER refusal, syntax errors at the very start of a statement, bounds through a modulo
and past a bounded date column, per-person subqueries (SELECT DISTINCT, WHERE checks), a join beside a
folded subquery, veil.budget misuse, ``SELECT r, *`` over a ranking subquery, and the WITH expansion
limit."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlglot

from proxy.analysis.copy import copy_statement
from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import PrivateQuery, classify
from proxy.analysis.with_clauses import inline_with
from proxy.config import DatasetPolicy, parse_config
from proxy.errors import (
    PolicyViolationError,
    ProgramLimitExceededError,
    QuerySyntaxError,
    UnsupportedQueryError,
)
from tests.unit.proxy.policy_fixture import clinic_policy
from tests.unit.proxy.test_dates_and_pairs import lab
from tests.unit.proxy.test_dates_and_pairs import shape_of as lab_shape_of
from tests.unit.proxy.test_row_subqueries import folded
from tests.unit.proxy.test_top_k import POLICY as SHOP_POLICY
from tests.unit.proxy.test_top_k import shape_of as shop_shape_of


def classified(sql: str) -> object:
    (tree,) = parse_statements(sql)
    return classify(tree, clinic_policy())


def shop() -> DatasetPolicy:
    policy = parse_config(SHOP_POLICY, path=Path("/nonexistent/veil.toml")).dataset("shop")
    assert policy is not None
    return policy


# --- COPY ---------------------------------------------------------------------------------------------------


def test_a_header_value_copy_does_not_know_is_named_with_what_to_write() -> None:
    (tree,) = parse_statements("COPY (SELECT 1) TO STDOUT WITH (FORMAT csv, HEADER maybe)")
    with pytest.raises(UnsupportedQueryError) as refused:
        copy_statement(tree, clinic_policy())  # type: ignore[arg-type]
    assert refused.value.message == "HEADER 'maybe' is not supported"
    assert refused.value.hint == "HEADER true or false"


# --- syntax errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("sql", "near"), [("WHERE", "WHERE"), (") SELECT 1", ")")])
def test_a_syntax_error_at_the_first_character_points_at_position_one(sql: str, near: str) -> None:
    """PostgreSQL's ErrorResponse P field is 1-based: an error in the first token is at position 1, and
    the message quotes the token as PostgreSQL does."""
    with pytest.raises(QuerySyntaxError) as raised:
        parse_statements(sql)
    assert raised.value.message == f'syntax error at or near "{near}"'
    assert raised.value.position == 1
    assert raised.value.hint == "check the SQL near the position shown"


def test_a_syntax_error_later_in_the_statement_quotes_the_token_and_its_position() -> None:
    with pytest.raises(QuerySyntaxError) as raised:
        parse_statements("SELECT * FROM t WHERE")
    assert raised.value.message == 'syntax error at or near "WHERE"'
    assert raised.value.position == len("SELECT * FROM t ") + 1


# --- bounds derived for aggregate inputs --------------------------------------------------------------------


def test_a_modulo_is_bounded_by_its_divisors_magnitude() -> None:
    """``x % d`` lies within ±max(|d|): SUM(y % 3) needs no explicit clamp."""
    shape = lab_shape_of("SELECT SUM(y % 3) FROM m")
    (aggregate,) = shape.aggregates
    assert aggregate.column is not None
    assert (aggregate.column.lower, aggregate.column.upper) == (-3, 3)
    shape = lab_shape_of("SELECT SUM(y % (x - 5)) FROM m")  # x - 5 in [-8, -3]
    (aggregate,) = shape.aggregates
    assert aggregate.column is not None
    assert (aggregate.column.lower, aggregate.column.upper) == (-8, 8)


def test_a_bounded_date_column_gives_no_numeric_bounds_to_an_expression() -> None:
    """A date column's declared bounds are dates: an expression of it has no derived numeric range, so
    SUM asks for a clamp and COUNT needs none — never an internal error."""
    with pytest.raises(PolicyViolationError) as refused:
        classify(parse_statements("SELECT SUM(day - day) FROM m")[0], lab())
    assert refused.value.message == "sum(day - day): the range of day - day cannot be derived from the policy"
    shape = lab_shape_of("SELECT COUNT(CASE WHEN x > 0 THEN day END) FROM m")
    (aggregate,) = shape.aggregates
    assert aggregate.column is not None
    assert (aggregate.column.lower, aggregate.column.upper) == (None, None)


# --- per-person subqueries ----------------------------------------------------------------------------------


def test_select_distinct_privacy_unit_is_a_per_person_subquery() -> None:
    """``SELECT DISTINCT unit FROM t`` has one row per person, like ``GROUP BY unit``: answered."""
    statement = classified("SELECT COUNT(*) FROM (SELECT DISTINCT patient_id FROM visits) AS p")
    assert isinstance(statement, PrivateQuery)
    assert statement.shape.output_names == ("count",)


def test_a_per_person_subquerys_where_names_the_clause_it_refuses_a_function_in() -> None:
    with pytest.raises(PolicyViolationError) as refused:
        classified(
            "SELECT AVG(n) FROM (SELECT patient_id, COUNT(*) AS n FROM visits WHERE age > random()"
            " GROUP BY patient_id) AS p"
        )
    assert refused.value.message == "function rand() is not allowed in WHERE of a query on private data"


# --- row-level subqueries beside a join ---------------------------------------------------------------------


def test_a_joined_tables_column_named_like_a_subquery_output_stays_that_tables() -> None:
    """``z.zone`` is the zones table's column, not the subquery's ``region AS zone``."""
    assert (
        folded(
            "SELECT COUNT(*) FROM (SELECT region AS zone FROM visits) AS v JOIN zones AS z ON v.zone = z.code"
            " WHERE z.zone = 'a'"
        )
        == "SELECT COUNT(*) FROM visits AS v JOIN zones AS z ON v.region = z.code WHERE z.zone = 'a'"
    )


# --- veil.budget --------------------------------------------------------------------------------------------


def test_veil_budget_read_with_a_private_table_says_how_to_read_it() -> None:
    with pytest.raises(UnsupportedQueryError) as refused:
        classified("SELECT * FROM veil.budget JOIN visits ON true")
    assert refused.value.message == "veil.budget can only be read on its own, with SELECT"
    assert refused.value.hint == "SELECT * FROM veil.budget — or SHOW veil.budget"


# --- top-k --------------------------------------------------------------------------------------------------


def test_a_star_after_other_items_over_a_ranking_subquery_keeps_those_items() -> None:
    """``SELECT r, *`` over the ranked noisy table answers r and then every column of the subquery."""
    shape = shop_shape_of(
        "SELECT r, * FROM (SELECT region, genre, COUNT(*) AS n, ROW_NUMBER() OVER (PARTITION BY region"
        " ORDER BY COUNT(*) DESC) AS r FROM buys GROUP BY region, genre) AS ranked WHERE r <= 2",
        shop(),
    )
    assert shape.output_names == ("r", "region", "genre", "n", "r")


# --- WITH ---------------------------------------------------------------------------------------------------


def test_with_copies_past_the_node_limit_are_refused_with_what_to_do() -> None:
    tree = sqlglot.parse_one(
        "WITH c AS (SELECT * FROM visits WHERE age > 30) SELECT COUNT(*) FROM c, c AS d, c AS e",
        read="postgres",
    )
    with pytest.raises(ProgramLimitExceededError) as refused:
        inline_with(tree, max_nodes=10)
    assert refused.value.message == (
        "query too complex: its WITH queries expand to more than this dataset's max_nodes of 10 nodes"
    )
    assert refused.value.detail == "each reference to a WITH query is answered as a copy of it"
    assert refused.value.hint == "read each WITH query once, or simplify the query"
