"""COPY's text and CSV encodings, COPY statements' options and refusals, and the grammar of cursor and
PREPARE/EXECUTE commands (proxy/wire/copy_out.py, proxy/analysis/copy.py, proxy/analysis/session_commands.py)."""

from __future__ import annotations

import datetime

import pytest

from proxy.analysis.copy import CopyOptions, copy_statement
from proxy.analysis.parse import parse_statements
from proxy.analysis.session_commands import (
    CloseCursor,
    DeclareCursor,
    ExecutePrepared,
    FetchCursor,
    PrepareStatement,
    command_of,
    execute_arguments,
)
from proxy.errors import (
    InvalidParameterValueError,
    PolicyViolationError,
    QuerySyntaxError,
    UnsupportedQueryError,
)
from proxy.wire.copy_out import copy_data, copy_data_messages, copy_out_response
from tests.unit.proxy.policy_fixture import clinic_policy


def lines(
    rows: list[tuple[object, ...]], options: CopyOptions, names: tuple[str, ...] = ("a", "b")
) -> list[str]:
    """The CopyData messages' payloads, one per line (the rows encoded two at a time, to cross chunks)."""
    columns = [list(column) for column in zip(*rows, strict=True)] or [[] for _ in names]
    csv, header, separator = options.format == "csv", options.header, options.separator
    data = b"".join(
        copy_data_messages(
            names, columns, len(rows), csv=csv, header=header, separator=separator, chunk_rows=2
        )
    )
    out = []
    while data:
        assert data[:1] == b"d"
        length = int.from_bytes(data[1:5], "big")
        out.append(data[5 : 1 + length].decode())
        data = data[1 + length :]
    return out


def test_text_format_escapes_like_postgresql() -> None:
    rows = [("tab\there", None), ("new\nline", "back\\slash"), ("plain", 3)]
    assert lines(rows, CopyOptions()) == ["tab\\there\t\\N\n", "new\\nline\tback\\\\slash\n", "plain\t3\n"]
    assert lines([("a|b", 1)], CopyOptions(delimiter="|")) == ["a\\|b|1\n"]


def test_csv_format_quotes_only_what_needs_quoting_and_writes_a_header() -> None:
    rows = [("x,y", None), ('say "hi"', ""), (datetime.date(2024, 3, 4), 1.5)]
    assert lines(rows, CopyOptions(format="csv", header=True)) == [
        "a,b\n",
        '"x,y",\n',
        '"say ""hi""",""\n',
        "2024-03-04,1.5\n",
    ]


def test_delimiters_postgresql_accepts_in_one_format_only() -> None:
    (text,) = parse_statements("COPY (SELECT 1) TO STDOUT (FORMAT csv, DELIMITER 'a')")
    assert copy_statement(text, clinic_policy()).options.separator == "a"  # type: ignore[arg-type]
    (text,) = parse_statements("COPY (SELECT 1) TO STDOUT (DELIMITER '\"')")
    assert copy_statement(text, clinic_policy()).options.separator == '"'  # type: ignore[arg-type]
    assert lines([('say "hi"', 1)], CopyOptions(delimiter='"')) == ['say \\"hi\\""1\n']


def test_header_line_in_text_format_and_a_lone_end_marker_quoted_in_one_column_csv() -> None:
    assert lines([("\\.", 1)], CopyOptions(header=True), ("a\tb", "c")) == ["a\\tb\tc\n", "\\\\.\t1\n"]
    one_column = [(value,) for value in ("\\.", "x\\.", "", None)]
    assert lines(one_column, CopyOptions(format="csv"), ("a",)) == ['"\\."\n', "x\\.\n", '""\n', "\n"]
    assert lines([("\\.", "\\.")], CopyOptions(format="csv")) == ["\\.,\\.\n"]


def test_null_booleans_and_mixed_types_in_one_column() -> None:
    rows = [(True, 1), (None, 2.5), (False, None), (True, "x")]
    assert lines(rows, CopyOptions()) == ["t\t1\n", "\\N\t2.5\n", "f\t\\N\n", "t\tx\n"]


def test_copy_messages_are_framed_as_the_protocol_says() -> None:
    assert copy_out_response(2) == b"H\x00\x00\x00\x0b\x00\x00\x02\x00\x00\x00\x00"
    assert copy_data(b"x\n") == b"d\x00\x00\x00\x06x\n"


def test_statements_after_a_move_or_close_in_one_query_are_read_too() -> None:
    trees = parse_statements("MOVE 2 IN c; CLOSE c; SELECT close FROM prices")
    assert [command_of(tree) for tree in trees[:2]] == [FetchCursor("c", 2, move=True), CloseCursor("c")]
    assert len(trees) == 3 and command_of(trees[2]) is None and trees[2].sql() == "SELECT close FROM prices"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("COPY (SELECT 1) TO STDOUT", CopyOptions()),
        ("COPY (SELECT 1) TO STDOUT CSV HEADER", CopyOptions(format="csv", header=True)),
        ("COPY (SELECT 1) TO STDOUT CSV DELIMITER ';'", CopyOptions("csv", False, ";")),
        ("COPY (SELECT 1) TO STDOUT CSV DELIMITER '|' HEADER", CopyOptions("csv", True, "|")),
        ("COPY (SELECT 1) TO STDOUT CSV HEADER DELIMITER ';'", CopyOptions("csv", True, ";")),
        ("COPY (SELECT 1) TO STDOUT DELIMITER ';' CSV HEADER", CopyOptions("csv", True, ";")),
        ("COPY (SELECT 1) TO STDOUT (FORMAT csv, HEADER, DELIMITER ';')", CopyOptions("csv", True, ";")),
        ("COPY (SELECT 1) TO STDOUT WITH (FORMAT text, HEADER false)", CopyOptions()),
        ("COPY (SELECT 1) TO STDOUT WITH DELIMITER '|'", CopyOptions(delimiter="|")),
    ],
)
def test_copy_options_in_every_spelling_psql_and_drivers_send(text: str, expected: CopyOptions) -> None:
    (tree,) = parse_statements(text)
    assert copy_statement(tree, clinic_policy()).options == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("COPY visits TO STDOUT", PolicyViolationError, "would reveal the private rows"),
        ("COPY visits FROM STDIN", UnsupportedQueryError, "COPY FROM is not supported"),
        ("COPY (SELECT 1) TO '/tmp/x'", UnsupportedQueryError, "server file"),
        ("COPY (SELECT 1) TO STDOUT (FORMAT binary)", UnsupportedQueryError, "format 'binary'"),
        ("COPY (SELECT 1) TO STDOUT (FREEZE)", UnsupportedQueryError, "option"),
        ("COPY (SELECT 1) TO STDOUT (DELIMITER 'é')", UnsupportedQueryError, "single one-byte character"),
        ("COPY (SELECT 1) TO STDOUT (DELIMITER 'a')", InvalidParameterValueError, 'cannot be "a"'),
        ("COPY (SELECT 1) TO STDOUT (DELIMITER '.')", InvalidParameterValueError, 'cannot be "."'),
        ("COPY (SELECT 1) TO STDOUT (FORMAT csv, DELIMITER '\"')", InvalidParameterValueError, "quote"),
        ("COPY (SELECT 1) TO STDOUT CSV DELIMITER", UnsupportedQueryError, "DELIMITER needs a value"),
        ("COPY (SELECT 1) TO STDOUT CSV DELIMITER ';' FREEZE", UnsupportedQueryError, "option 'FREEZE'"),
    ],
)
def test_copy_refusals_name_what_to_write_instead(text: str, error: type[Exception], message: str) -> None:
    (tree,) = parse_statements(text)
    with pytest.raises(error, match=message):
        copy_statement(tree, clinic_policy())  # type: ignore[arg-type]


def test_a_column_named_close_is_still_a_column() -> None:
    (tree,) = parse_statements("SELECT close FROM prices")
    assert command_of(tree) is None and tree.sql() == "SELECT close FROM prices"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "DECLARE _psql_cursor NO SCROLL CURSOR FOR SELECT 1",
            DeclareCursor("_psql_cursor", False, "SELECT 1"),
        ),
        ('DECLARE "Named" CURSOR WITH HOLD FOR SELECT 1', DeclareCursor("Named", True, "SELECT 1")),
        ("FETCH FORWARD 100 FROM _psql_cursor", FetchCursor("_psql_cursor", 100, move=False)),
        ("FETCH ALL IN c", FetchCursor("c", None, move=False)),
        ("FETCH C", FetchCursor("c", 1, move=False)),
        ("FETCH FORWARD FROM c", FetchCursor("c", 1, move=False)),
        ("FETCH NEXT c", FetchCursor("c", 1, move=False)),
        ('FETCH 2 FROM "Odd ""name"""', FetchCursor('Odd "name"', 2, move=False)),
        ("MOVE FORWARD 3 IN c", FetchCursor("c", 3, move=True)),
        ("CLOSE ALL", CloseCursor(None)),
        ("close c", CloseCursor("c")),
        (
            "PREPARE p (int, double precision) AS SELECT $1",
            PrepareStatement("p", ("int", "double precision"), "SELECT $1"),
        ),
        ("EXECUTE p(1, 'a')", ExecutePrepared("p", "1, 'a'")),
    ],
)
def test_session_commands_are_read_as_postgresql_writes_them(text: str, expected: object) -> None:
    (tree,) = parse_statements(text)
    assert command_of(tree) == expected


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("FETCH BACKWARD 2 FROM c", UnsupportedQueryError),
        ("FETCH PRIOR FROM c", UnsupportedQueryError),
        ("DECLARE c BINARY CURSOR FOR SELECT 1", UnsupportedQueryError),
        ("DECLARE c FOR SELECT 1", QuerySyntaxError),
        ("PREPARE p SELECT 1", QuerySyntaxError),
    ],
)
def test_unsupported_or_malformed_commands_are_refused(text: str, error: type[Exception]) -> None:
    (tree,) = parse_statements(text)
    with pytest.raises(error):
        command_of(tree)


def test_a_malformed_prepare_says_how_to_write_it() -> None:
    (tree,) = parse_statements("PREPARE p SELECT 1")
    with pytest.raises(QuerySyntaxError) as refused:
        command_of(tree)
    assert str(refused.value) == "syntax error in PREPARE"
    assert refused.value.hint == "PREPARE name [(type, …)] AS statement"


def test_execute_arguments_are_constants_as_bind_text() -> None:
    assert execute_arguments("1, -2.5, 'it''s', NULL, TRUE, CAST('2024-01-02' AS DATE)") == [
        "1", "-2.5", "it's", None, "true", "2024-01-02",
    ]  # fmt: skip
    with pytest.raises(UnsupportedQueryError, match="constants"):
        execute_arguments("1 + 1")


def test_wide_and_non_ascii_columns_keep_their_byte_lengths() -> None:
    rows = [("é" * 3000, 1), ("tab\tü", None)] * 3
    assert lines(rows, CopyOptions()) == ["é" * 3000 + "\t1\n", "tab\\tü\t\\N\n"] * 3
    assert lines([], CopyOptions()) == []
    assert lines([], CopyOptions(format="csv", header=True)) == ["a,b\n"]
