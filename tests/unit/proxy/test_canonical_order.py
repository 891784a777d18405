"""Filters that differ only in the order of AND-ed conditions or IN lists become one text."""

from __future__ import annotations

import pytest
from sqlglot import parse_one

from proxy.analysis.canonical_order import canonical_order


def canonical(sql: str) -> str:
    return canonical_order(parse_one(sql, dialect="postgres")).sql(dialect="postgres")


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("b > 2 AND a IN (3, 1)", "a IN (1, 3) AND b > 2"),
        ("x = 1 AND y = 2 AND z = 3", "z = 3 AND x = 1 AND y = 2"),
        ("region IN ('south', 'north') AND age < 40", "age < 40 AND region IN ('north', 'south')"),
        ("(a = 1 OR b = 2) AND c IN (2, 1)", "c IN (1, 2) AND (a = 1 OR b = 2)"),
    ],
)
def test_reordered_filters_have_one_canonical_text(first: str, second: str) -> None:
    assert canonical(first) == canonical(second)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("a = 1 OR b = 2", "b = 2 OR a = 1"),  # OR is left alone: only AND and IN are reordered
        ("a - b > 0", "b - a > 0"),
        ("a IN (1, 2)", "a IN (1, 3)"),
    ],
)
def test_other_differences_stay_different(first: str, second: str) -> None:
    assert canonical(first) != canonical(second)


def test_the_filter_keeps_its_meaning() -> None:
    assert canonical("b > 2 AND a IN (3, 1)") == "a IN (1, 3) AND b > 2"
