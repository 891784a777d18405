"""Survivors of the second fresh mutation sample (seed 1145, docs/testing.md): GROUP BY by position, and the
kind of a CAST to a type Veil has no kind for."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.analysis.statements import PrivateQuery
from proxy.analysis.value_kinds import Kind, value_kind
from proxy.errors import UnknownColumnError, UnsupportedQueryError
from tests.unit.proxy.people_fixture import people
from tests.unit.proxy.test_mutants_an_joins import classified


@pytest.mark.parametrize(
    ("sql", "key"),
    [
        ("SELECT COUNT(*), region FROM visits GROUP BY 2", "region"),  # the last item of the select list
        ("SELECT region, COUNT(*) FROM visits GROUP BY 1", "region"),
        ("SELECT sex, region, COUNT(*) FROM visits GROUP BY 2, 1", "region"),
    ],
)
def test_a_group_by_position_names_that_item_of_the_select_list(sql: str, key: str) -> None:
    statement = classified(sql)
    assert isinstance(statement, PrivateQuery)
    assert statement.shape.group_keys[0].expression.sql() == key


@pytest.mark.parametrize("position", [0, 3])
def test_a_group_by_position_outside_the_select_list_is_refused_free(position: int) -> None:
    with pytest.raises(UnknownColumnError) as raised:
        classified(f"SELECT COUNT(*), region FROM visits GROUP BY {position}")
    assert (raised.value.sqlstate, raised.value.message) == (
        "42703",
        f"GROUP BY position {position} is not in select list",
    )


@pytest.mark.parametrize("target", ["uuid", "bytea", "json"])
def test_a_cast_to_a_type_without_a_kind_is_unknown_and_refused_in_a_private_query(target: str) -> None:
    """``value_kind`` is total (its callers treat UNKNOWN as untyped); the analysis refuses such a CAST
    over private data before any engine query, by its type."""
    node = sqlglot.parse_one(f"CAST(born AS {target.upper()})", dialect="postgres")
    assert value_kind(node, table=people()) is Kind.UNKNOWN
    with pytest.raises(UnsupportedQueryError) as raised:
        classified(f"SELECT COUNT(*) FROM visits WHERE CAST(note AS {target.upper()}) IS NULL")
    assert (raised.value.sqlstate, raised.value.message) == (
        "0A000",
        f"CAST to {target} is not supported in a query on private data",
    )
