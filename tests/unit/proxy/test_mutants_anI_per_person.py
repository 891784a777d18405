"""Per-person subqueries (analysis/per_person.py): which totals get a bound chosen with DP, and what a
refused select item tells the analyst.

A per-person SUM has no bound a policy could give, so one is chosen with DP in multiples of the largest
value one row can add. Rows that each add less than 1 (a rate, a share, a price in thousands) still make
a total that needs a bound: without one the outer SUM would be refused as if the column were unbounded.
"""

from __future__ import annotations

import pytest

from proxy.analysis.statements import PrivateQuery
from tests.unit.proxy.test_mutants_an_joins import classified
from tests.unit.proxy.test_mutants_an_per_person import refused


def test_a_total_of_values_below_one_still_gets_a_bound_chosen_with_dp() -> None:
    statement = classified(
        "SELECT SUM(s) FROM (SELECT patient_id, SUM(age * 0.005) AS s FROM visits GROUP BY patient_id) p"
    )
    assert isinstance(statement, PrivateQuery)
    bounds = statement.shape.value_bounds
    assert [(bound.column, bound.unit, bound.cap, bound.sign) for bound in bounds] == [("s", 0.5, 1000, 1)]


@pytest.mark.parametrize("item", ["COUNT(*)", "age + 1 AS a"])
def test_a_per_person_value_without_an_alias_or_aggregate_says_how_to_write_it(item: str) -> None:
    """An unnamed aggregate or a non-aggregated expression: the outer query could not name the value, or
    it would not be one per person; the refusal shows the form to write."""
    error = refused(f"SELECT COUNT(*) FROM (SELECT patient_id, {item} FROM visits GROUP BY patient_id) p")
    assert (error.sqlstate, error.message, error.hint) == (
        "42501",
        "each aggregate of a per-person subquery needs an alias: COUNT(*) AS n",
        "a subquery over private data must be per person: SELECT unit, COUNT(*) AS n, SUM(col) AS s FROM "
        "table [WHERE …] GROUP BY unit",
    )
