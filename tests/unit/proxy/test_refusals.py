"""Each unsupported construct has one message and one way out (analysis/refusals.py), documented."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.analysis.parse import parse_statements
from proxy.analysis.refusals import UNSUPPORTED, refuse_construct
from proxy.analysis.statements import classify
from proxy.errors import PolicyViolationError
from tests.unit.proxy.policy_fixture import clinic_policy

SQL_MD = Path(__file__).resolve().parents[3] / "docs" / "sql.md"


@pytest.mark.parametrize("construct", list(UNSUPPORTED))
def test_each_message_is_in_the_refused_table_of_sql_md(construct: str) -> None:
    message, _ = UNSUPPORTED[construct]
    assert f"`{message}`" in SQL_MD.read_text(encoding="utf-8")


@pytest.mark.parametrize("construct", list(UNSUPPORTED))
def test_each_refusal_is_42501_with_its_hint(construct: str) -> None:
    error = refuse_construct(construct)
    assert (error.sqlstate, error.message, error.hint) == ("42501", *UNSUPPORTED[construct])
    assert error.hint, "every refusal says what to write instead"


@pytest.mark.parametrize(
    ("grouping", "construct"),
    [
        ("GROUPING SETS ((region), ())", "GROUPING SETS"),
        ("ROLLUP (region)", "ROLLUP"),
        ("CUBE (region)", "CUBE"),
    ],
)
def test_grouping_extensions_are_refused_as_themselves(grouping: str, construct: str) -> None:
    (tree,) = parse_statements(f"SELECT region, COUNT(*) FROM visits GROUP BY {grouping}")
    with pytest.raises(PolicyViolationError) as refused:
        classify(tree, clinic_policy())
    assert (refused.value.message, refused.value.hint) == UNSUPPORTED[construct]
