"""Syntax errors as PostgreSQL reports them (analysis/parse.py): the message, and the 1-based position of
the offending token in the whole query text, which clients use to point at the error."""

from __future__ import annotations

import pytest
from sqlglot.errors import ParseError

from proxy.analysis.function_safety import TOTAL, TRY
from proxy.analysis.parse import _describe, _position, parse_statements
from proxy.errors import QuerySyntaxError


def test_the_position_of_an_error_on_a_later_line_counts_the_line_breaks() -> None:
    sql = "SELECT 1;\nSELECT * FROM FROM"
    with pytest.raises(QuerySyntaxError) as refused:
        parse_statements(sql)
    assert str(refused.value) == 'syntax error at or near "FROM"'
    assert refused.value.position == sql.rindex("FROM") + 1 == 25  # the second FROM, 1-based


def test_an_error_without_a_highlighted_token_is_a_plain_syntax_error() -> None:
    assert _describe(ParseError("no details")) == "syntax error"


@pytest.mark.parametrize(("line", "column"), [(1, None), (None, 3)])
def test_an_error_without_a_line_and_a_column_has_no_position(line: int | None, column: int | None) -> None:
    error = ParseError.new("m", description="m", line=line, col=column, highlight="x")
    assert _position("SELECT x", error) is None


def test_an_error_without_a_highlight_points_at_its_column() -> None:
    """The position is where the highlighted token starts; without one, at the column itself."""
    error = ParseError.new("m", description="m", line=1, col=3, highlight=None)
    assert _position("SELECT x", error) == 4


def test_a_handling_reads_as_its_treatment_and_how() -> None:
    """The text docs/sql.md shows for each engine (proxy/cli/reference_docs.py)."""
    assert str(TRY) == "total after rewrite: evaluated under TRY(…): a failure becomes NULL"
    assert str(TOTAL) == "total as is"
