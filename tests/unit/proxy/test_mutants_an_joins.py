"""Joins of private tables are accepted on the privacy unit only (analysis/unit_join.py, lookup_join.py):
a join that could pair one person's rows with another's would let one person change many rows."""

from __future__ import annotations

import pytest

from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import PrivateQuery, classify
from proxy.errors import PolicyViolationError, ProxyError
from tests.unit.proxy.policy_fixture import clinic_policy

JOIN_HINT = (
    "private tables can be joined on their privacy unit: FROM a JOIN b ON a.<privacy unit> = "
    "b.<privacy unit> (or JOIN b USING (<privacy unit>))"
)


def classified(sql: str) -> object:
    (tree,) = parse_statements(sql)
    return classify(tree, clinic_policy())


def refusal(sql: str, kind: type[ProxyError]) -> tuple[str, str, str | None]:
    """The SQLSTATE, message and hint of the ``kind`` of error the clinic's analysis refuses ``sql`` with."""
    with pytest.raises(kind) as refused:
        classified(sql)
    return refused.value.sqlstate, refused.value.message, refused.value.hint


@pytest.mark.parametrize(
    "sql",
    [
        # the unit of the joined table against a column that is not a unit: rows of different people meet
        "SELECT COUNT(*) FROM visits v JOIN patients p ON p.patient_id = v.age",
        # the third table's condition does not name it: a cross join of everyone's visits
        "SELECT COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id "
        "JOIN visits w ON v.patient_id = p.patient_id",
    ],
)
def test_a_join_not_on_the_joined_tables_privacy_unit_is_refused(sql: str) -> None:
    with pytest.raises(PolicyViolationError) as refused:
        classified(sql)
    assert refused.value.sqlstate == "42501"
    assert refused.value.message == "the join condition must be one equality of the two tables' privacy units"
    assert refused.value.hint == JOIN_HINT


def test_an_explicit_inner_join_on_the_unit_is_a_join_of_private_tables() -> None:
    statement = classified(
        "SELECT COUNT(*) FROM visits v INNER JOIN patients p ON p.patient_id = v.patient_id"
    )
    assert isinstance(statement, PrivateQuery)
    assert statement.shape.table.privacy_unit == "v__patient_id"
    assert statement.shape.table.max_contributions == 3 * 1


def test_three_tables_joined_on_the_unit_bound_a_person_by_the_product_of_their_bounds() -> None:
    statement = classified(
        "SELECT COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id "
        "JOIN visits w ON w.patient_id = p.patient_id"
    )
    assert isinstance(statement, PrivateQuery)
    assert statement.shape.table.max_contributions == 3 * 1 * 3


def test_a_lookup_join_off_the_lookup_tables_key_says_how_to_join_it() -> None:
    with pytest.raises(PolicyViolationError) as refused:
        classified("SELECT COUNT(*) FROM visits v JOIN zones z ON v.note = z.zone")
    assert refused.value.message == 'the join must use the key "z.code" of the lookup table'
    assert refused.value.hint == (
        "join public lookup tables on their key: "
        "FROM private_table p JOIN lookup_table l ON p.column = l.<declared key>"
    )
