"""A name the table does not declare has no kind (analysis/value_kinds.py): ``value_kind`` answers
UNKNOWN for it, as for a combination the engine refuses, so the checks that read kinds (the error-free
rewrite, date ranges, the type of a GROUP BY key) treat it as untyped instead of failing inside Veil. The
analysis refuses unknown columns by name; this keeps the function total for its many callers."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.analysis.key_types import expression_type
from proxy.analysis.value_kinds import Kind, value_kind
from proxy.config import ColumnType
from tests.unit.proxy.people_fixture import people


@pytest.mark.parametrize("sql", ["nosuch", "(nosuch)", "-nosuch", "nosuch + 1", "born - nosuch"])
def test_an_undeclared_column_has_no_kind(sql: str) -> None:
    assert value_kind(sqlglot.parse_one(sql, dialect="postgres"), table=people()) is Kind.UNKNOWN


def test_a_choice_over_an_undeclared_column_takes_the_next_branchs_kind() -> None:
    node = sqlglot.parse_one("COALESCE(nosuch, born)", dialect="postgres")
    assert value_kind(node, table=people()) is Kind.DATE
    assert expression_type(node, people()) is ColumnType.DATE
