"""Session statements as clients send them (analysis/statements.py): SET, RESET and the commands sqlglot
reads as generic commands. A setting named or valued wrongly changes how every later query is answered
(its ε, its rounding, its time zone), so the name and the value are checked exactly."""

from __future__ import annotations

import pytest

from proxy.analysis.statements import ResetStatement, SetStatement
from proxy.errors import UnsupportedQueryError
from tests.unit.proxy.test_mutants_an_hints import classified


def test_two_assignments_in_one_set_are_refused_with_the_form_that_works() -> None:
    with pytest.raises(UnsupportedQueryError) as refused:
        classified("SET a = 1, b = 2")
    assert (refused.value.sqlstate, refused.value.message, refused.value.hint) == (
        "0A000",
        "this form of SET is not supported",
        "use SET name = value",
    )


def test_a_set_to_a_word_keeps_the_name_and_every_letter_of_the_word() -> None:
    """A word starting with X is not trimmed: the value is the word itself."""
    assert classified("SET application_name = Xenon") == SetStatement("application_name", "Xenon")


@pytest.mark.parametrize(
    ("value", "expected"),
    [('"x y"', "x y"), ('"""x"""', '"x"'), ("TRUE", "true"), ("false", "false"), ("on", "on")],
)
def test_a_set_to_a_quoted_word_or_a_boolean_reads_as_postgresql_reads_it(value: str, expected: str) -> None:
    """What PostgreSQL 15's SHOW gives after each SET (checked with psql): a doubled quote inside a
    quoted word is one quote of the value, and a boolean is its lower-case word."""
    assert classified(f"SET application_name = {value}") == SetStatement("application_name", expected)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SET statement_timeout = 1 + 2", SetStatement("statement_timeout", "1 + 2")),
        # the text of the expression with its outer quotes removed, nothing more (an X stays)
        ("SET application_name = 'Xa' || 'b'", SetStatement("application_name", "Xa' || 'b")),
    ],
)
def test_a_value_that_is_no_constant_or_word_is_passed_on_as_its_postgresql_text(
    sql: str, expected: SetStatement
) -> None:
    assert classified(sql) == expected


def test_reset_of_a_quoted_name_resets_that_name() -> None:
    """PostgreSQL's xmloption starts with an X: only the double quotes are removed."""
    assert classified('RESET "XmlOption"') == ResetStatement("XmlOption")


@pytest.mark.parametrize("sql", ["SET SESSION TIME ZONE 'UTC'", "SET LOCAL TIME ZONE 'UTC'"])
def test_set_time_zone_with_a_scope_sets_the_time_zone(sql: str) -> None:
    """SQLAlchemy and JDBC drivers send the scoped form; its value is the last word."""
    assert classified(sql) == SetStatement("TimeZone", "UTC")


def test_only_set_reads_time_zone_as_a_setting() -> None:
    """DISCARD is refused as itself, even when its words end like SET TIME ZONE's."""
    with pytest.raises(UnsupportedQueryError) as refused:
        classified("DISCARD TIME ZONE x")
    assert (refused.value.sqlstate, refused.value.message) == (
        "0A000",
        "DISCARD statements are not supported",
    )
