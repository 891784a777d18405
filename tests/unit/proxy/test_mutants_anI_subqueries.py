"""Subqueries in FROM, WITH column lists and UNION ALL limits (analysis/row_subqueries.py, with_clauses.py,
per_person.py, set_operations.py): which query a folded subquery over a join becomes, and what a refused
one tells the analyst.

A folded subquery is the query Veil prices and runs, so a column of it that loses its name or keeps a
qualifier nothing defines any more turns a query Veil accepts into an engine error; a refusal that lost its
hint no longer says what to write instead.
"""

from __future__ import annotations

import pytest

from proxy.errors import PolicyViolationError, QuerySyntaxError, UnknownColumnError
from tests.unit.proxy.test_mutants_an_joins import classified
from tests.unit.proxy.test_mutants_an_per_person import refused
from tests.unit.proxy.test_mutants_anC_subqueries import folded, inlined

JOINED = "(SELECT * FROM visits v JOIN patients p ON v.patient_id = p.patient_id) AS s"


@pytest.mark.parametrize("column", ["cost", "s.cost"])
def test_a_column_of_a_star_over_a_join_is_read_from_the_joined_tables(column: str) -> None:
    """``SELECT *`` over a join passes every column of the joined tables; folded, the join's tables are
    named v and p, not s, so an outer reference (qualified with s or not) becomes the bare column name."""
    assert folded(f"SELECT COUNT(*) FROM {JOINED} WHERE {column} > 3") == (
        "SELECT COUNT(*) FROM visits AS v JOIN patients AS p ON v.patient_id = p.patient_id WHERE cost > 3"
    )


def test_a_joined_subquery_joined_again_is_refused_with_its_hint() -> None:
    """A subquery with a join of its own, joined to another table, is refused (not folded, not an internal
    error), and the hint says where the join belongs."""
    error = refused(f"SELECT COUNT(*) FROM {JOINED} JOIN patients q ON s.patient_id = q.patient_id")
    assert (error.sqlstate, error.message, error.hint) == (
        "42501",
        "a subquery cannot be joined in a query on private data",
        "join the tables themselves on the privacy unit (FROM a JOIN b ON a.unit = b.unit), or put the "
        "join inside the subquery",
    )


def test_a_column_list_over_a_star_says_to_list_the_columns() -> None:
    with pytest.raises(PolicyViolationError) as refusal:
        inlined("WITH t(a) AS (SELECT * FROM visits) SELECT COUNT(*) FROM t")
    error = refusal.value
    assert (error.sqlstate, error.message, error.hint) == (
        "42501",
        'the column list of "t" cannot rename *',
        'list the columns of "t" in its SELECT instead of *',
    )


def test_a_subquery_in_the_select_list_without_from_is_refused_not_an_internal_error() -> None:
    """No FROM to fold: the query reaches the classification, which refuses the select-list subquery."""
    error = refused("SELECT (SELECT COUNT(*) FROM visits)")
    assert (error.sqlstate, error.message, error.hint) == (
        "42501",
        "subqueries in the select list are not supported on private data",
        "put all the aggregates in one query, or combine queries with UNION ALL",
    )


def test_a_window_clause_in_a_subquery_is_refused_as_a_window_function() -> None:
    """``WINDOW w AS (…)`` defines a window even when no function uses it; it is refused as window
    functions are on private data, whether or not the subquery filters rows."""
    for where in ("", "WHERE age > 3 "):
        error = refused(
            f"SELECT COUNT(*) FROM (SELECT * FROM visits {where}WINDOW w AS (PARTITION BY region)) s"
        )
        assert (error.sqlstate, error.message) == (
            "42501",
            "window functions are not allowed on private data",
        )


def test_a_quoted_all_is_not_limit_all() -> None:
    """``LIMIT "ALL"`` names a column, not PostgreSQL's LIMIT ALL: a UNION ALL with it is refused, not
    answered without a limit."""
    with pytest.raises(QuerySyntaxError) as refusal:
        classified('SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*) FROM patients LIMIT "ALL"')
    assert (refusal.value.sqlstate, refusal.value.message) == (
        "42601",
        "LIMIT of a UNION ALL must be a non-negative integer constant",
    )


def test_an_unknown_column_of_an_unnamed_per_person_subquery_lists_its_columns() -> None:
    with pytest.raises(UnknownColumnError) as refusal:
        classified("SELECT AVG(zz) FROM (SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY patient_id)")
    assert (refusal.value.sqlstate, refusal.value.message, refusal.value.hint) == (
        "42703",
        'column "zz" does not exist',
        "columns of _dp_per_person: patient_id, n",
    )
