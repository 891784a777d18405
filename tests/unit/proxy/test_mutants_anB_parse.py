"""Syntax errors as PostgreSQL reports them (analysis/parse.py): the message, and the 1-based position of
the offending token in the whole query text, which clients use to point at the error."""

from __future__ import annotations

import pytest
from sqlglot.errors import ParseError

from proxy.analysis.function_safety import TOTAL, TRY
from proxy.analysis.parse import _describe, _position, parse_statements
from proxy.analysis.session_commands import CloseCursor, FetchCursor, command_of
from proxy.analysis.statements import ConstantQuery, classify
from proxy.errors import ProgramLimitExceededError, QuerySyntaxError
from tests.unit.proxy.policy_fixture import clinic_policy


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


@pytest.mark.parametrize(
    ("sql", "message", "hint"),
    [
        ("SELECT 'abc", "syntax error: Error tokenizing", None),
        (
            'SET a = ""',
            "syntax error: Cannot convert empty name",
            "check the SQL: a double-quoted name cannot be empty (strings take single quotes)",
        ),
    ],
)
def test_text_the_parser_cannot_read_is_a_syntax_error_saying_what(
    sql: str, message: str, hint: str | None
) -> None:
    """The message is sqlglot's own description after PostgreSQL's words (only its start is checked)."""
    with pytest.raises(QuerySyntaxError) as refused:
        parse_statements(sql)
    assert (refused.value.sqlstate, refused.value.hint) == ("42601", hint)
    assert str(refused.value).startswith(message)


def test_a_statement_over_max_tokens_is_refused_before_it_is_parsed() -> None:
    """54001 naming the count, the limit and the setting that raises it."""
    with pytest.raises(ProgramLimitExceededError) as refused:
        parse_statements("SELECT 1, 2, 3", max_tokens=3)
    assert (refused.value.sqlstate, str(refused.value)) == (
        "54001",
        "statement too long: 6 tokens, more than this dataset's max_tokens of 3",
    )
    assert refused.value.hint == (
        "shorten the statement (an IN list or an OR chain of thousands of terms); an administrator can raise "
        "[datasets.NAME.limits] max_tokens"
    )


@pytest.mark.parametrize(
    ("sql", "message", "hint"),
    [
        ("CLOSE", "syntax error", "CLOSE name, or CLOSE ALL"),
        ("MOVE", "syntax error in MOVE", "FETCH [FORWARD] n FROM name"),
    ],
)
def test_a_cursor_command_without_its_words_is_read_then_refused_as_a_syntax_error(
    sql: str, message: str, hint: str
) -> None:
    """The bare command is one token: nothing after it becomes its argument."""
    (tree,) = parse_statements(sql)
    with pytest.raises(QuerySyntaxError) as refused:
        command_of(tree)
    assert (str(refused.value), refused.value.hint) == (message, hint)


def test_a_cursor_commands_argument_ends_before_the_semicolon() -> None:
    trees = parse_statements("CLOSE ALL; CLOSE c")
    assert [command_of(tree) for tree in trees] == [CloseCursor(None), CloseCursor("c")]


def test_a_parenthesis_outside_copy_options_is_left_as_written() -> None:
    """Only ``COPY … TO STDOUT (`` gets the WITH sqlglot needs: anywhere else the error names the token."""
    with pytest.raises(QuerySyntaxError) as refused:
        parse_statements("SELECT (")
    assert (str(refused.value), refused.value.position) == ('syntax error at or near "("', 8)


def test_a_select_item_without_a_name_is_called_column() -> None:
    """PostgreSQL's name for an unnamed computed column, which clients show as the header."""
    statement = classify(parse_statements("SELECT 1 + 1 AS x, 2")[0], clinic_policy())
    assert isinstance(statement, ConstantQuery)
    assert statement.output_names == ("x", "?column?")


@pytest.mark.parametrize(
    ("sql", "command"),
    [("CLOSE c-- done", CloseCursor("c")), ("MOVE 2 IN c/* x */", FetchCursor("c", 2, move=True))],
)
def test_a_comment_right_after_a_cursor_command_is_not_part_of_it(sql: str, command: object) -> None:
    """psql scripts comment their commands; the argument is the text up to the last token, not a
    character further."""
    (tree,) = parse_statements(sql)
    assert command_of(tree) == command
