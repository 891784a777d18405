"""Per-person subqueries (analysis/per_person.py): which per-person values get bounds, and what a
refused subquery tells the analyst."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.analysis.per_person import per_person_table
from proxy.analysis.refusals import UNSUPPORTED
from proxy.analysis.statements import PrivateQuery
from proxy.errors import PolicyViolationError
from tests.unit.proxy.policy_fixture import clinic_policy
from tests.unit.proxy.test_mutants_an_joins import classified

PER_PERSON_HINT = (
    "a subquery over private data must be per person: "
    "SELECT unit, COUNT(*) AS n, SUM(col) AS s FROM table [WHERE …] GROUP BY unit"
)
UNBOUNDED_SUM = "(SELECT patient_id, SUM(patient_id) AS s FROM visits GROUP BY patient_id) p"


def refused(sql: str) -> PolicyViolationError:
    with pytest.raises(PolicyViolationError) as error:
        classified(sql)
    return error.value


def test_a_per_person_sum_of_an_unbounded_column_gets_no_bound_chosen_for_it() -> None:
    """No policy bounds patient_id, so no multiple of a unit can bound its sum: the outer SUM is refused
    until the analyst clamps it, rather than summed under a bound chosen on the wrong scale."""
    error = refused(f"SELECT SUM(s) FROM {UNBOUNDED_SUM}")
    assert (error.sqlstate, error.message) == ("42501", 'sum(s): column "s" has no declared bounds')
    counted = classified(f"SELECT COUNT(*) FROM {UNBOUNDED_SUM} WHERE s > 3")
    assert isinstance(counted, PrivateQuery)
    assert counted.shape.source is not None
    assert counted.shape.source.value_bounds == ()


def test_a_star_in_a_per_person_subquery_says_what_it_takes() -> None:
    error = refused("SELECT COUNT(*) FROM (SELECT visits.* FROM visits GROUP BY patient_id) p")
    assert error.message == "aggregates in a per-person subquery take a column or an expression of columns"
    assert error.hint == PER_PERSON_HINT


def test_a_union_inside_a_subquery_is_refused_as_a_nested_union() -> None:
    error = refused(
        "SELECT COUNT(*) FROM (SELECT patient_id FROM visits UNION ALL SELECT patient_id FROM patients) p"
    )
    assert (error.message, error.hint) == UNSUPPORTED["nested UNION ALL"]


def test_a_per_person_subquery_over_another_grouped_subquery_says_to_use_one_level() -> None:
    error = refused(
        "SELECT COUNT(*) FROM (SELECT patient_id, COUNT(*) AS n FROM "
        "(SELECT patient_id, COUNT(*) AS m FROM visits GROUP BY patient_id) q GROUP BY patient_id) p"
    )
    assert error.message == "a per-person subquery must read a table, not another grouped subquery"
    assert error.hint == (
        "compute each person's values in one subquery: SELECT unit, COUNT(*) AS n, SUM(x) AS s "
        "FROM table GROUP BY unit; only one level of per-person aggregation is answered"
    )


def test_a_per_person_subquery_over_values_is_refused_as_not_one_table() -> None:
    select = sqlglot.parse_one(
        "SELECT COUNT(*) FROM (SELECT patient_id, COUNT(*) AS n FROM (VALUES (1)) AS v(patient_id) "
        "GROUP BY patient_id) p",
        read="postgres",
    )
    with pytest.raises(PolicyViolationError) as error:
        per_person_table(select.args["from_"].this, clinic_policy())
    assert (error.value.message, error.value.hint) == (
        "a per-person subquery reads one table",
        PER_PERSON_HINT,
    )
