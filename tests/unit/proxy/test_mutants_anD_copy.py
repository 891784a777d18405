"""COPY TO STDOUT: what it copies, the options it takes, and the refusals' exact words (analysis/copy.py)."""

from __future__ import annotations

import pytest

from proxy.analysis.copy import CopyOptions, CopyStatement, copy_statement
from proxy.analysis.parse import parse_statements
from proxy.errors import (
    InvalidParameterValueError,
    PolicyViolationError,
    ProxyError,
    UnsupportedQueryError,
)
from tests.unit.proxy.policy_fixture import clinic_policy

FILE_HINT = "COPY (…) TO STDOUT — in psql: \\copy (SELECT …) TO 'file.csv' CSV HEADER"
OPTION_HINT = "FORMAT text|csv, HEADER, DELIMITER 'x'"


def copied(sql: str) -> CopyStatement:
    (tree,) = parse_statements(sql)
    return copy_statement(tree, clinic_policy())  # type: ignore[arg-type]


def refusal(error: type[ProxyError], sql: str) -> ProxyError:
    with pytest.raises(error) as refused:
        copied(sql)
    return refused.value


@pytest.mark.parametrize(
    ("sql", "query"),
    [
        ("COPY zones TO STDOUT", "SELECT * FROM zones"),
        ("COPY zones (code, zone) TO STDOUT", "SELECT code, zone FROM zones"),
        ("COPY (SELECT code FROM zones) TO stdout", "SELECT code FROM zones"),
    ],
)
def test_a_public_table_is_copied_as_the_select_of_its_columns(sql: str, query: str) -> None:
    """The copied query is then answered as that SELECT would be (and a public table costs nothing)."""
    assert copied(sql).query.sql(dialect="postgres") == query


def test_copying_a_private_table_is_refused_with_the_aggregate_form() -> None:
    for sql in ("COPY visits TO STDOUT", "COPY visits (age) TO STDOUT"):
        error = refusal(PolicyViolationError, sql)
        assert (error.sqlstate, error.message, error.hint) == (
            "42501",
            'COPY visits TO would reveal the private rows of "visits"',
            "copy an aggregate: COPY (SELECT …, COUNT(*) FROM visits GROUP BY …) TO STDOUT",
        )


def test_copy_from_and_copy_to_a_file_say_what_veil_does_instead() -> None:
    from_ = refusal(UnsupportedQueryError, "COPY visits FROM STDIN")
    assert (from_.sqlstate, from_.message, from_.hint) == (
        "0A000",
        "COPY FROM is not supported",
        "Veil is read-only",
    )
    for target in ("'/tmp/x'", "PROGRAM 'ls'", "STDIN"):
        to_file = refusal(UnsupportedQueryError, f"COPY (SELECT 1) TO {target}")
        assert (to_file.message, to_file.hint) == (
            "COPY TO a server file or program is not allowed",
            FILE_HINT,
        )


def test_copy_of_something_that_is_neither_a_table_nor_a_query_is_refused() -> None:
    error = refusal(UnsupportedQueryError, "COPY (VALUES (1)) TO STDOUT")
    assert (error.message, error.hint) == ("COPY needs a table or a parenthesized query", None)


@pytest.mark.parametrize(
    ("options", "header"),
    [
        ("(HEADER)", True),
        ("(HEADER true)", True),
        ("(HEADER 1)", True),
        ("(HEADER 'on')", True),
        ("(HEADER on)", True),  # ON is a keyword: sqlglot reads it as a parameter of its own
        ("(HEADER false)", False),
        ("(HEADER off)", False),
        ("(HEADER 'OFF')", False),
        ("(HEADER 'false')", False),  # quoted: read as text, not as a boolean
        ("(HEADER 'TRUE')", True),
        ("(HEADER 0)", False),
    ],
)
def test_header_takes_postgresqls_boolean_spellings(options: str, header: bool) -> None:
    """A header line the client did not ask for would be read as a row of data."""
    assert copied(f"COPY (SELECT 1) TO STDOUT {options}").options == CopyOptions(header=header)


def test_on_is_header_on_only_right_after_header() -> None:
    """``ON`` alone is no option of its own: after anything but HEADER it is refused by name."""
    assert copied("COPY (SELECT 1) TO STDOUT (FORMAT csv, HEADER on)").options == CopyOptions(
        format="csv", header=True
    )
    error = refusal(UnsupportedQueryError, "COPY (SELECT 1) TO STDOUT (FORMAT csv, on)")
    assert error.message == "COPY option 'on' is not supported"


def test_a_header_value_that_is_no_boolean_is_refused_by_name() -> None:
    error = refusal(UnsupportedQueryError, "COPY (SELECT 1) TO STDOUT (HEADER maybe)")
    assert (error.message, error.hint) == ("HEADER 'maybe' is not supported", "HEADER true or false")


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("COPY (SELECT 1) TO STDOUT (FORMAT CSV)", CopyOptions(format="csv")),
        ("COPY (SELECT 1) TO STDOUT (FORMAT text)", CopyOptions()),
        ("COPY (SELECT 1) TO STDOUT CSV", CopyOptions(format="csv")),
        ("COPY (SELECT 1) TO STDOUT CSV header", CopyOptions(format="csv", header=True)),
        ("COPY (SELECT 1) TO STDOUT (DELIMITER '|')", CopyOptions(delimiter="|")),
        ("COPY (SELECT 1) TO STDOUT CSV DELIMITER ';'", CopyOptions(format="csv", delimiter=";")),
    ],
)
def test_copy_options_are_read_into_format_header_and_delimiter(sql: str, expected: CopyOptions) -> None:
    statement = copied(sql)
    assert statement.options == expected
    assert statement.query.sql(dialect="postgres") == "SELECT 1"


def test_the_separator_is_the_delimiter_or_the_formats_own() -> None:
    assert copied("COPY (SELECT 1) TO STDOUT CSV").options.separator == ","
    assert copied("COPY (SELECT 1) TO STDOUT").options.separator == "\t"
    assert copied("COPY (SELECT 1) TO STDOUT CSV DELIMITER '|'").options.separator == "|"


@pytest.mark.parametrize(
    ("sql", "message", "hint"),
    [
        ("COPY (SELECT 1) TO STDOUT BINARY", "COPY in binary format is not supported", "FORMAT text or csv"),
        (
            "COPY (SELECT 1) TO STDOUT (FORMAT binary)",
            "COPY format 'binary' is not supported",
            "FORMAT text or csv",
        ),
        ("COPY (SELECT 1) TO STDOUT (FORMAT)", "COPY format '' is not supported", "FORMAT text or csv"),
        ("COPY (SELECT 1) TO STDOUT FREEZE", "COPY option 'FREEZE' is not supported", OPTION_HINT),
        ("COPY (SELECT 1) TO STDOUT CSV FREEZE", "COPY option 'FREEZE' is not supported", OPTION_HINT),
        (
            "COPY (SELECT 1) TO STDOUT (DELIMITER 'ab')",
            "COPY delimiter must be a single one-byte character",
            None,
        ),
        (
            "COPY (SELECT 1) TO STDOUT (DELIMITER '')",
            "COPY delimiter must be a single one-byte character",
            None,
        ),
    ],
)
def test_unsupported_copy_options_are_refused_saying_which(sql: str, message: str, hint: str | None) -> None:
    error = refusal(UnsupportedQueryError, sql)
    assert (error.sqlstate, error.message, error.hint) == ("0A000", message, hint)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "COPY (SELECT 1) TO STDOUT (DELIMITER E'\\n')",
            "COPY delimiter cannot be newline or carriage return",
        ),
        (
            "COPY (SELECT 1) TO STDOUT (DELIMITER E'\\r')",
            "COPY delimiter cannot be newline or carriage return",
        ),
        (
            "COPY (SELECT 1) TO STDOUT (FORMAT csv, DELIMITER E'\\r')",
            "COPY delimiter cannot be newline or carriage return",
        ),
        ("COPY (SELECT 1) TO STDOUT (DELIMITER '7')", 'COPY delimiter cannot be "7"'),
        (
            "COPY (SELECT 1) TO STDOUT (FORMAT csv, DELIMITER '\"')",
            "COPY delimiter and quote must be different",
        ),
    ],
)
def test_delimiters_postgresql_refuses_are_refused_with_its_words(sql: str, message: str) -> None:
    """A delimiter that can be confused with a line break, an escape or CSV's quote makes the copied
    rows unreadable."""
    error = refusal(InvalidParameterValueError, sql)
    assert (error.sqlstate, error.message) == ("22023", message)


@pytest.mark.parametrize("delimiter", [".", "7", "\\", "x"])
def test_csv_takes_the_delimiters_only_the_text_format_refuses(delimiter: str) -> None:
    sql = f"COPY (SELECT 1) TO STDOUT (FORMAT csv, DELIMITER '{delimiter}')"
    assert copied(sql).options == CopyOptions(format="csv", delimiter=delimiter)
