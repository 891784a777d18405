"""Row-level subqueries and WITH column lists (analysis/row_subqueries.py, with_clauses.py): which query a
folded subquery over a join becomes, and what a refused one tells the analyst.

A folded subquery is the query Veil prices and runs, so a column of it that loses its name or keeps a
qualifier nothing defines any more turns a query Veil accepts into an engine error; a refusal that lost its
hint no longer says what to write instead.
"""

from __future__ import annotations

import pytest

from proxy.errors import PolicyViolationError
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
