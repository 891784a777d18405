"""Allow-list and complexity refusals (analysis/checks.py, complexity.py) and column resolution in joins
(shape.py): each says what was refused and what to do, and a qualified column is looked up in its own
table only."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.analysis.complexity import check_complexity
from proxy.config import QueryLimits
from proxy.errors import (
    AmbiguousColumnError,
    ProgramLimitExceededError,
    UnknownColumnError,
    UnsupportedQueryError,
)
from tests.unit.proxy.test_mutants_an_joins import classified


def test_a_window_over_a_public_table_is_refused_saying_what_is_allowed() -> None:
    with pytest.raises(UnsupportedQueryError) as refused:
        classified("SELECT ROW_NUMBER() OVER () FROM zones")
    assert (refused.value.sqlstate, refused.value.message, refused.value.hint) == (
        "0A000",
        "Window is not supported in a query on public tables",
        "use plain SELECT with joins, filters, grouping and common functions",
    )


def test_a_complexity_refusal_says_why_and_which_setting_raises_the_limit() -> None:
    """54001 with the reason (a row could change the running time) and the policy section to change."""
    with pytest.raises(ProgramLimitExceededError) as refused:
        check_complexity(
            sqlglot.parse_one("SELECT 'abcdef'", read="postgres"), QueryLimits(max_literal_chars=5)
        )
    assert refused.value.sqlstate == "54001"
    assert refused.value.detail == (
        "a query on private data must be small enough that no single row can change how long it runs by much"
    )
    assert (
        refused.value.hint
        == "simplify the query; an administrator can raise [datasets.NAME.limits] in the policy"
    )


def test_a_qualified_column_is_looked_up_in_its_own_table_only() -> None:
    """``v.p__age``: visits (v) has no column p__age. Joined columns are stored as ``<alias>__<column>``, so
    ``v__p__age`` is the age of the table aliased ``v__p`` — a lookup by that stored name alone would
    read another table's column under the name the analyst gave."""
    with pytest.raises(UnknownColumnError) as refused:
        classified(
            "SELECT COUNT(*) FROM visits v JOIN patients v__p ON v.patient_id = v__p.patient_id "
            "WHERE v.p__age > 3"
        )
    assert (refused.value.sqlstate, refused.value.message) == ("42703", 'column "v.p__age" does not exist')


def test_an_ambiguous_column_says_how_to_qualify_it() -> None:
    with pytest.raises(AmbiguousColumnError) as refused:
        classified(
            "SELECT COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id WHERE age > 3"
        )
    assert (refused.value.sqlstate, refused.value.message, refused.value.hint) == (
        "42702",
        'column reference "age" is ambiguous',
        "qualify it: v.age",
    )


def test_a_query_exactly_as_deep_as_max_depth_passes() -> None:
    """The limit is the deepest nesting allowed, not the first one refused (``SELECT ((…(1)…))``: the
    select, then one level per parenthesis, then the literal)."""
    limits = QueryLimits(max_depth=12)
    check_complexity(sqlglot.parse_one("SELECT " + "(" * 10 + "1" + ")" * 10, read="postgres"), limits)
    with pytest.raises(ProgramLimitExceededError, match="expressions nested 13 deep"):
        check_complexity(sqlglot.parse_one("SELECT " + "(" * 11 + "1" + ")" * 11, read="postgres"), limits)
