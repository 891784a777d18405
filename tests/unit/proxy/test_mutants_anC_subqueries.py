"""Subqueries in FROM and WITH queries: what is folded or inlined, with which names, and what a refused one
tells the analyst (analysis/row_subqueries.py, with_clauses.py, per_person.py)."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.analysis.row_subqueries import fold_row_subqueries
from proxy.analysis.statements import PrivateQuery
from proxy.analysis.with_clauses import inline_with
from proxy.config import ColumnType
from proxy.errors import ProgramLimitExceededError
from tests.unit.proxy.test_mutants_an_joins import classified
from tests.unit.proxy.test_mutants_an_per_person import refused


def folded(sql: str) -> str:
    return fold_row_subqueries(sqlglot.parse_one(sql, read="postgres")).sql(dialect="postgres")


def inlined(sql: str, *, max_nodes: int = 2000) -> str:
    return inline_with(sqlglot.parse_one(sql, read="postgres"), max_nodes=max_nodes).sql(dialect="postgres")


def test_fetch_first_in_a_subquery_is_refused_as_fetch_not_as_limit() -> None:
    """FETCH FIRST keeps rows as LIMIT does, but the analyst wrote FETCH: the refusal names it and says
    what to write instead."""
    error = refused("SELECT COUNT(*) FROM (SELECT * FROM visits FETCH FIRST 3 ROWS ONLY) AS s")
    assert (error.sqlstate, error.message, error.hint) == (
        "42501",
        "FETCH FIRST is not supported on private data",
        "write LIMIT n",
    )


def test_a_folded_subquery_keeps_a_quoted_column_quoted() -> None:
    """PostgreSQL folds an unquoted name to lower case and keeps a quoted one as written: ``"Age"`` and
    ``Age`` are different columns, so the folded query must still say ``"Age"``."""
    assert folded('SELECT COUNT(*) FROM (SELECT * FROM visits WHERE "Age" > 3) AS v') == (
        'SELECT COUNT(*) FROM visits AS v WHERE "v"."Age" > 3'
    )


def test_a_column_list_on_a_cte_reference_renames_its_columns() -> None:
    """``FROM p AS q(u, m)`` renames p's columns for this reference only: the outer query reads m."""
    assert inlined(
        "WITH p AS (SELECT user_id, COUNT(*) AS n FROM ratings GROUP BY user_id) SELECT AVG(m) FROM p AS q(u, m)"
    ) == ("SELECT AVG(m) FROM (SELECT user_id AS u, COUNT(*) AS m FROM ratings GROUP BY user_id) AS q")


def test_a_column_list_on_a_union_renames_the_first_parts_items() -> None:
    """A UNION takes its column names from its first part, so that is the part renamed."""
    assert inlined(
        "WITH t(a) AS (SELECT age FROM visits UNION ALL SELECT age FROM patients) SELECT COUNT(*) FROM t"
    ) == ("SELECT COUNT(*) FROM (SELECT age AS a FROM visits UNION ALL SELECT age FROM patients) AS t")


def test_a_renamed_subquery_that_reads_a_cte_gets_the_cte_inlined() -> None:
    assert inlined(
        "WITH c AS (SELECT age, cost FROM visits) SELECT COUNT(*) FROM (SELECT age FROM c) AS s(a)"
    ) == ("SELECT COUNT(*) FROM (SELECT age AS a FROM (SELECT age, cost FROM visits) AS c) AS s")


def test_too_many_column_names_say_how_many_to_give() -> None:
    error = refused("SELECT COUNT(*) FROM (SELECT age FROM visits) AS s(a, b)")
    assert (error.message, error.hint) == (
        '"s" has 1 columns available but 2 columns specified',
        "give at most as many names as the subquery has columns",
    )


def test_copies_up_to_exactly_max_nodes_are_allowed() -> None:
    """The limit is on the nodes the copies add: a copy of exactly ``max_nodes`` nodes is still answered,
    one node fewer allowed is refused."""
    body = sqlglot.parse_one("SELECT age FROM visits", read="postgres")
    nodes = sum(1 for _ in body.walk())
    sql = "WITH c AS (SELECT age FROM visits) SELECT COUNT(*) FROM c"
    assert inlined(sql, max_nodes=nodes) == "SELECT COUNT(*) FROM (SELECT age FROM visits) AS c"
    with pytest.raises(ProgramLimitExceededError, match=f"max_nodes of {nodes - 1} nodes"):
        inlined(sql, max_nodes=nodes - 1)


@pytest.mark.parametrize(
    ("aggregate", "message", "hint"),
    [
        (
            "SUM(age + (SELECT 1))",
            "subqueries are not allowed in an aggregate of a query on private data",
            "filter with comparisons on the table's own columns",
        ),
        (
            "SUM(age + random())",
            "function rand() is not allowed in an aggregate of a query on private data",
            "use comparisons, arithmetic, CASE, CAST and common scalar functions",
        ),
    ],
)
def test_an_aggregated_expression_in_a_per_person_subquery_is_checked_as_an_aggregate(
    aggregate: str, message: str, hint: str
) -> None:
    error = refused(
        f"SELECT COUNT(*) FROM (SELECT patient_id, {aggregate} AS s FROM visits GROUP BY patient_id) p"
    )
    assert (error.sqlstate, error.message, error.hint) == ("42501", message, hint)


def test_a_per_person_total_of_integer_arithmetic_is_an_integer() -> None:
    """SUM(age * 2) of an integer column is an integer per person: its noisy totals are released as
    integers, not as reals."""
    statement = classified(
        "SELECT COUNT(*) FROM (SELECT patient_id, SUM(age * 2) AS s, SUM(cost * 2) AS c FROM visits "
        "GROUP BY patient_id) p"
    )
    assert isinstance(statement, PrivateQuery)
    columns = statement.shape.table.columns
    assert (columns["s"].type, columns["c"].type) == (ColumnType.INTEGER, ColumnType.REAL)


def per_person(items: str, where: str = "") -> PrivateQuery:
    statement = classified(
        f"SELECT COUNT(*) FROM (SELECT patient_id, {items} FROM visits {where} GROUP BY patient_id) p"
    )
    assert isinstance(statement, PrivateQuery)
    return statement


def test_the_per_person_query_keeps_its_where_and_its_plain_aggregates() -> None:
    """The engine computes each person's values with exactly the analyst's filter and aggregates: a SUM
    stays a SUM of every row (not of distinct values), and the WHERE is not lost."""
    statement = per_person("SUM(cost) AS s, COUNT(DISTINCT age) AS d", "WHERE age > 30")
    assert statement.shape.source is not None
    assert statement.shape.source.select.sql(dialect="postgres") == (
        "SELECT patient_id, SUM(cost) AS s, COUNT(DISTINCT age) AS d FROM visits WHERE age > 30 GROUP BY patient_id"
    )


def test_the_per_person_table_is_named_by_its_alias_and_keeps_the_units_type() -> None:
    statement = per_person("COUNT(*) AS n")
    table = statement.shape.table
    assert table.name == "p"
    assert table.columns["patient_id"].type is ColumnType.INTEGER


def test_a_total_of_values_that_are_never_positive_gets_a_negative_bound() -> None:
    """SUM(-age) is at most 0 for everyone: the bound chosen with DP is searched below zero (sign -1),
    where the totals are."""
    bounds = per_person("SUM(-age) AS s").shape.source.value_bounds  # type: ignore[union-attr]
    assert [(bound.column, bound.unit, bound.cap, bound.sign) for bound in bounds] == [("s", 100.0, 1000, -1)]


@pytest.mark.parametrize("value", ["MAX(patient_id)", "MAX(age * 0)"])
def test_a_per_person_value_without_a_real_range_has_no_bounds(value: str) -> None:
    """MAX of an unbounded column has no finite range, and MAX(age * 0) a range of one point: neither is
    a pair of bounds an outer AVG could be priced with, so the AVG is refused until it is clamped."""
    error = refused(f"SELECT AVG(m) FROM (SELECT patient_id, {value} AS m FROM visits GROUP BY patient_id) p")
    assert (error.message, error.hint) == (
        'avg(m): column "m" has no declared bounds',
        "declare lower and upper for column m in the policy (veil.toml)",
    )


@pytest.mark.parametrize(
    ("subquery", "message"),
    [
        # DISTINCT next to GROUP BY is not rewritten into a second GROUP BY item
        (
            "SELECT DISTINCT patient_id FROM visits GROUP BY patient_id",
            "DISTINCT is not allowed in a per-person subquery",
        ),
        # DISTINCT ON (age) keeps one row per age, not one per person
        (
            "SELECT DISTINCT ON (age) patient_id FROM visits",
            'a subquery over "visits" must GROUP BY its privacy unit "patient_id" alone',
        ),
        (
            "SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY patient_id OFFSET 2",
            "OFFSET is not allowed in a per-person subquery",
        ),
        (
            "SELECT patient_id, COUNT(*) AS n FROM visits JOIN patients USING (patient_id) GROUP BY patient_id",
            "JOIN is not allowed in a per-person subquery",
        ),
        (
            "SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY patient_id QUALIFY n > 1",
            "QUALIFY is not allowed in a per-person subquery",
        ),
        # QUALIFY filters rows: a subquery with it is not folded as a plain row filter (dropping it)
        (
            "SELECT age FROM visits QUALIFY age > 1",
            'a subquery over "visits" must GROUP BY its privacy unit "patient_id" alone',
        ),
    ],
)
def test_a_subquery_that_is_not_one_row_per_person_is_refused(subquery: str, message: str) -> None:
    error = refused(f"SELECT COUNT(*) FROM ({subquery}) p")
    assert (error.sqlstate, error.message, error.hint) == (
        "42501",
        message,
        "a subquery over private data must be per person: "
        "SELECT unit, COUNT(*) AS n, SUM(col) AS s FROM table [WHERE …] GROUP BY unit",
    )
