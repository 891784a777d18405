"""The values a conditional expression can return, and the kind it computes from them
(analysis/value_kinds.py): the rules that keep date arithmetic in range read every branch."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.analysis.key_types import expression_type
from proxy.analysis.value_kinds import Kind, choice_values, value_kind
from proxy.config import ColumnType
from tests.unit.proxy.people_fixture import people


def parsed(sql: str) -> sqlglot.exp.Expression:
    return sqlglot.parse_one(sql, dialect="postgres")


@pytest.mark.parametrize(
    ("sql", "values"),
    [
        ("IF(age > 1, NULL, born)", ["NULL", "born"]),
        ("IF(age > 1, born)", ["born"]),
        ("CASE WHEN age > 1 THEN note WHEN age > 2 THEN 'x' ELSE 'y' END", ["note", "'x'", "'y'"]),
        ("NULLIF(born, born)", ["born"]),
        ("GREATEST(NULL, born, born + 1)", ["NULL", "born", "born + 1"]),
    ],
)
def test_every_value_a_choice_can_return_is_read(sql: str, values: list[str]) -> None:
    """A branch left out would be a value never checked: ``IF(c, NULL, born + 99999)`` could then push a
    date out of range on PostgreSQL."""
    assert [value.sql(dialect="postgres") for value in choice_values(parsed(sql))] == values


def test_the_else_branch_of_an_if_gives_its_kind() -> None:
    node = parsed("IF(age > 1, NULL, born)")
    assert value_kind(node, table=people()) is Kind.DATE
    assert expression_type(node, people()) is ColumnType.DATE
