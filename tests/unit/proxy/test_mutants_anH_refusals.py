"""Refusals of queries on private data that tell the analyst what went wrong (analysis/shape.py): a
refused operator is named as the analyst would look it up, and an unknown column's refusal lists the
table's columns, one name after another, so that the right one can be copied from it."""

from __future__ import annotations

import pytest

from proxy.errors import PolicyViolationError, UnknownColumnError
from tests.unit.proxy.test_mutants_an_joins import refusal


@pytest.mark.parametrize(
    ("sql", "label"),
    [
        ("SELECT COUNT(*) & 1 FROM visits", "BitwiseAnd"),
        ("SELECT COUNT(*) FROM visits ORDER BY COUNT(*) << 1", "BitwiseLeftShift"),
    ],
)
def test_an_operator_refused_after_aggregation_is_named_as_an_operator(sql: str, label: str) -> None:
    """An operator is no function: its name, without the "()" of a function call."""
    sqlstate, message, _ = refusal(sql, PolicyViolationError)
    assert sqlstate == "42501"
    assert (
        message
        == f"{label} is not supported in the select list, HAVING or ORDER BY of a query on private data"
    )


@pytest.mark.parametrize(
    "sql", ["SELECT COUNT(nope) FROM visits", "SELECT COUNT(*) FROM visits WHERE nope > 1"]
)
def test_an_unknown_column_is_refused_with_the_tables_columns(sql: str) -> None:
    assert refusal(sql, UnknownColumnError) == (
        "42703",
        'column "nope" does not exist',
        "columns of visits: patient_id, age, cost, note, region, sex",
    )
