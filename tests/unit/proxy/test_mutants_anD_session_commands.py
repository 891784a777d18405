"""Cursor and PREPARE/EXECUTE commands read as PostgreSQL reads them, and refused with words that say how
to write them (analysis/session_commands.py)."""

from __future__ import annotations

import pytest

from proxy.analysis.session_commands import (
    CloseCursor,
    DeclareCursor,
    ExecutePrepared,
    FetchCursor,
    PrepareStatement,
    SessionCommand,
    execute_arguments,
    session_command,
)
from proxy.errors import ProxyError, QuerySyntaxError, UnsupportedQueryError
from tests.unit.proxy.test_mutants_an_hints import command

FETCH_HINT = "FETCH [FORWARD] n FROM name"


def refused(error: type[ProxyError], verb: str, argument: str) -> ProxyError:
    with pytest.raises(error) as raised:
        session_command(verb, argument)
    return raised.value


def test_a_malformed_declare_says_how_to_write_one() -> None:
    error = refused(QuerySyntaxError, "DECLARE", "c FOR SELECT 1")
    assert (error.sqlstate, error.message, error.hint) == (
        "42601",
        "syntax error in DECLARE",
        "DECLARE name [NO SCROLL] CURSOR [WITH HOLD] FOR query",
    )


@pytest.mark.parametrize("options", ["BINARY", "no scroll binary", "Binary Insensitive"])
def test_a_binary_cursor_is_refused_whatever_else_it_declares(options: str) -> None:
    """Rows are sent in text format only: a BINARY cursor would be answered in the wrong format."""
    error = refused(UnsupportedQueryError, "DECLARE", f"c {options} CURSOR FOR SELECT 1")
    assert (error.sqlstate, error.message, error.hint) == (
        "0A000",
        "BINARY cursors are not supported",
        "declare the cursor without BINARY",
    )


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("Cur INSENSITIVE CURSOR FOR SELECT 2", DeclareCursor("cur", False, "SELECT 2")),
        ("c CURSOR WITHOUT HOLD FOR SELECT 3", DeclareCursor("c", False, "SELECT 3")),
        ("c CURSOR with hold FOR SELECT 4", DeclareCursor("c", True, "SELECT 4")),
        ("  c CURSOR FOR SELECT 5 ;  ", DeclareCursor("c", False, "SELECT 5")),
        ("c CURSOR FOR SELECT 6;;", DeclareCursor("c", False, "SELECT 6")),
    ],
)
def test_a_declared_cursor_keeps_its_name_lifetime_and_query(argument: str, expected: DeclareCursor) -> None:
    """WITH HOLD decides whether the cursor (and the answer already charged) survives COMMIT."""
    assert session_command("declare", argument) == expected


@pytest.mark.parametrize(
    ("verb", "argument", "expected"),
    [
        ("FETCH", "c", FetchCursor("c", 1, move=False)),
        ("fetch", "5 c", FetchCursor("c", 5, move=False)),
        ("FETCH", "ALL FROM c", FetchCursor("c", None, move=False)),
        ("FETCH", "all c", FetchCursor("c", None, move=False)),
        ("FETCH", "FORWARD ALL FROM c", FetchCursor("c", None, move=False)),
        ("FETCH", "forward 7 in c", FetchCursor("c", 7, move=False)),
        ("FETCH", "NEXT FROM c", FetchCursor("c", 1, move=False)),
        ("MOVE", "c", FetchCursor("c", 1, move=True)),
        ("move", "ALL IN c", FetchCursor("c", None, move=True)),
        ("MOVE", "12 c;", FetchCursor("c", 12, move=True)),
    ],
)
def test_fetch_and_move_walk_forward_by_the_amount_written(
    verb: str, argument: str, expected: FetchCursor
) -> None:
    """MOVE advances without returning rows: reading it as FETCH would send rows the client skips."""
    assert session_command(verb, argument) == expected


@pytest.mark.parametrize(("verb", "word"), [("FETCH", "FETCH"), ("MOVE", "MOVE")])
def test_a_malformed_fetch_or_move_is_named_in_its_syntax_error(verb: str, word: str) -> None:
    error = refused(QuerySyntaxError, verb, "FORWARD FORWARD c")
    assert (error.sqlstate, error.message, error.hint) == ("42601", f"syntax error in {word}", FETCH_HINT)


@pytest.mark.parametrize(
    ("argument", "direction"),
    [("BACKWARD 2 FROM c", "BACKWARD"), ("prior c", "PRIOR"), ("ABSOLUTE -1 c", "ABSOLUTE")],
)
def test_a_backward_fetch_is_refused_naming_its_direction(argument: str, direction: str) -> None:
    error = refused(UnsupportedQueryError, "FETCH", argument)
    assert (error.sqlstate, error.message, error.hint) == (
        "0A000",
        f"cursors here move forward only: FETCH {direction} is not supported",
        "FETCH [FORWARD] n | ALL; declare the query again to start over",
    )


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("ALL", CloseCursor(None)),
        ("all", CloseCursor(None)),
        ("All;", CloseCursor(None)),
        ("Cur", CloseCursor("cur")),
        ('"Cur"', CloseCursor("Cur")),
        ('"a""b"', CloseCursor('a"b')),
        ("c ;", CloseCursor("c")),
    ],
)
def test_close_names_one_cursor_or_all_of_them(argument: str, expected: CloseCursor) -> None:
    """CLOSE ALL is not a cursor named "all": reading it as one would leave every cursor open."""
    assert session_command("close", argument) == expected


@pytest.mark.parametrize("argument", ["1c", "a b", ""])
def test_close_of_something_that_is_no_name_is_a_syntax_error(argument: str) -> None:
    error = refused(QuerySyntaxError, "CLOSE", argument)
    assert (error.sqlstate, error.message, error.hint) == (
        "42601",
        "syntax error",
        "CLOSE name, or CLOSE ALL",
    )


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("Q AS SELECT 1", PrepareStatement("q", (), "SELECT 1")),
        ('"Q"(text) AS SELECT $1', PrepareStatement("Q", ("text",), "SELECT $1")),
        ("q ( int ,  , date ) AS SELECT $1, $2", PrepareStatement("q", ("int", "date"), "SELECT $1, $2")),
    ],
)
def test_a_prepared_statement_keeps_its_name_types_and_query(
    argument: str, expected: PrepareStatement
) -> None:
    assert session_command("PREPARE", argument) == expected


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("Q", ExecutePrepared("q", "")),
        ('"Q" ( 1, 2 ) ;', ExecutePrepared("Q", "1, 2")),
        ("q()", ExecutePrepared("q", "")),
    ],
)
def test_execute_names_the_statement_and_keeps_its_arguments(
    argument: str, expected: ExecutePrepared
) -> None:
    assert session_command("execute", argument) == expected


def test_a_malformed_execute_says_how_to_write_one() -> None:
    error = refused(QuerySyntaxError, "EXECUTE", "(1)")
    assert (error.sqlstate, error.message, error.hint) == (
        "42601",
        "syntax error in EXECUTE",
        "EXECUTE name [(argument, …)]",
    )


def test_other_verbs_are_not_session_commands() -> None:
    assert session_command("VACUUM", "c") is None


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("FETCH 3 FROM c", FetchCursor("c", 3, move=False)),
        ("MOVE ALL IN c", FetchCursor("c", None, move=True)),
        ("DECLARE c CURSOR FOR SELECT 1", DeclareCursor("c", False, "SELECT 1")),
        ("EXECUTE q (1)", ExecutePrepared("q", "1")),
    ],
)
def test_a_parsed_command_is_read_from_its_text(sql: str, expected: SessionCommand) -> None:
    assert command(sql) == expected


def test_execute_arguments_unwrap_casts_and_signs() -> None:
    """A cast's value is sent as its text (the statement's parameter type converts it), a negative
    number as its signed text: the values a Bind carrying them would hold."""
    assert execute_arguments("CAST(7 AS BIGINT), -3, CAST(-2 AS INT), FALSE, CAST(NULL AS TEXT)") == [
        "7", "-3", "-2", "false", None,
    ]  # fmt: skip
    assert execute_arguments("") == []


@pytest.mark.parametrize("argument", ["-x", "ABS(1)", "-'a'", "x"])
def test_execute_arguments_other_than_constants_are_refused_by_name(argument: str) -> None:
    """EXECUTE evaluates its arguments before the statement runs: a column or a function there has no
    value Veil could bind."""
    with pytest.raises(UnsupportedQueryError) as raised:
        execute_arguments(argument)
    assert raised.value.hint == "EXECUTE name(1, 'text', NULL)"
    assert raised.value.message.startswith("EXECUTE arguments must be constants, not ")
