"""Each unsupported construct has one message and one way out (analysis/refusals.py), documented."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.analysis.refusals import UNSUPPORTED, refuse_construct

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
