"""Survivors of the second fresh mutation sample (seed 1145, docs/testing.md): GROUP BY by position."""

from __future__ import annotations

import pytest

from proxy.analysis.statements import PrivateQuery
from proxy.errors import UnknownColumnError
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
