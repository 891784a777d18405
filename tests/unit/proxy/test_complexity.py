"""The complexity budget of a query on private data (analysis/complexity.py): each limit refuses with the
measure, the key to raise and its value, so that an administrator knows which setting to change."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.analysis.complexity import check_complexity
from proxy.config import QueryLimits
from proxy.errors import ProgramLimitExceededError

LIMITS = QueryLimits(max_literal_chars=5, max_nodes=40, max_depth=12, max_function_calls=3)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT 'abcdef'", "a literal of 6 characters, more than this dataset's max_literal_chars of 5"),
        ("SELECT " + ", ".join(["a"] * 20), "41 nodes, more than this dataset's max_nodes of 40"),
        (
            "SELECT " + "(" * 12 + "1" + ")" * 12,
            "expressions nested 14 deep, more than this dataset's max_depth of 12",
        ),
        (
            "SELECT abs(abs(abs(abs(a))))",
            "4 scalar function calls, more than this dataset's max_function_calls of 3",
        ),
    ],
)
def test_each_limit_names_its_measure_and_key(sql: str, message: str) -> None:
    with pytest.raises(ProgramLimitExceededError) as refused:
        check_complexity(sqlglot.parse_one(sql, read="postgres"), LIMITS)
    assert str(refused.value) == f"query too complex: {message}"


def test_a_query_within_every_limit_passes() -> None:
    check_complexity(sqlglot.parse_one("SELECT abs(abs(abs(a))) + 'abcde'", read="postgres"), LIMITS)
