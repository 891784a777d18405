"""Session statements and constant queries as clients send them (analysis/statements.py, checks.py): the
value a SET stores is the one PostgreSQL would store (SHOW gives it back, and a reported parameter is sent
to the client), and a refused constant query says what Veil does answer without a table.

Values checked against PostgreSQL 15 (``SET application_name = …; SHOW application_name``)."""

from __future__ import annotations

import pytest

from proxy.analysis.statements import SetStatement
from proxy.errors import QuerySyntaxError, UnsupportedQueryError
from tests.unit.proxy.test_mutants_an_hints import classified


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("E'batch job'", "batch job"),
        (r"E'it\'s'", "it's"),
        (r"E'back\\slash'", "back\\slash"),
        (r"E'\x41\101\u0042'", "AAB"),
        (r"U&'d\0061t'", "dat"),
        (r"U&'d!0061t' UESCAPE '!'", "dat"),
        (r"U&'d!!t' UESCAPE '!'", "d!t"),
        (r"U&'\+01F600'", "\U0001f600"),
        (r"U&'\D83D\DE00'", "\U0001f600"),
    ],
)
def test_a_set_to_an_escaped_string_stores_the_text_postgresql_reads(value: str, expected: str) -> None:
    """E'…' and U&'…' are string constants with escapes; the value is the text they spell, not their
    SQL (Veil stored ``e'batch job`` for ``E'batch job'`` before)."""
    assert classified(f"SET application_name = {value}") == SetStatement("application_name", expected)


@pytest.mark.parametrize("value", [r"U&'\D83D'", r"U&'\+110000'"])
def test_a_unicode_escape_that_is_no_character_is_a_syntax_error(value: str) -> None:
    """Half a surrogate pair, or a code point above U+10FFFF: PostgreSQL refuses them too (42601)."""
    with pytest.raises(QuerySyntaxError) as refused:
        classified(f"SET application_name = {value}")
    assert (refused.value.sqlstate, refused.value.message) == ("42601", "invalid Unicode escape value")


def test_a_value_postgresql_would_not_take_is_passed_on_in_postgresql_spelling() -> None:
    """Not a constant or a word: the expression's PostgreSQL text, as SHOW then gives it back."""
    assert classified("SET application_name = ARRAY[1, 2]") == SetStatement("application_name", "ARRAY[1, 2]")


def test_set_time_zone_keeps_a_posix_zone_that_starts_with_x() -> None:
    """Only the quotes are removed: PostgreSQL takes the POSIX zone ``XST5`` and SHOW gives ``XST5``."""
    assert classified("SET TIME ZONE 'XST5'") == SetStatement("TimeZone", "XST5")


@pytest.mark.parametrize("sql", ["SELECT random()", "SELECT now()"])
def test_a_refused_constant_query_says_what_is_answered_without_a_table(sql: str) -> None:
    with pytest.raises(UnsupportedQueryError) as refused:
        classified(sql)
    assert refused.value.sqlstate == "0A000"
    assert refused.value.message.endswith("is not supported in a query without a table")
    assert refused.value.hint == (
        "Veil answers constant expressions, version(), current_user and current_database()"
    )
