"""What the argument checks tell the analyst, word for word, and where their limits lie
(analysis/argument_checks.py). The checks refuse, before any engine runs, the arguments that could make a
function fail on one person's row only; the refusal must say which SQLSTATE, what and how to write it
instead — the same for every query alike, so that the refusal itself reveals nothing about the data."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.analysis.argument_checks import canonical_unit, integer_literal
from proxy.analysis.function_safety import check_argument_kinds
from proxy.errors import InvalidParameterValueError, ProxyError, UnsupportedQueryError
from tests.unit.proxy.people_fixture import people
from tests.unit.proxy.test_argument_checks import check

ROW_DEPENDENT = "an argument computed from a row could be invalid for one person's row only"
Refusal = tuple[str, str, str | None, str | None]  # SQLSTATE, message, detail, hint


def refusal(error: type[ProxyError], sql: str, *, kinds: bool = False) -> Refusal:
    """The refusal of ``sql`` as a WHERE condition (``kinds``: by the checks that need column types)."""
    with pytest.raises(error) as refused:
        if kinds:
            check_argument_kinds(sqlglot.parse_one(sql, dialect="postgres"), table=people())
        else:
            check(sql)
    return refused.value.sqlstate, refused.value.message, refused.value.detail, refused.value.hint


def accepted(sql: str, *, kinds: bool = False) -> None:
    if kinds:
        check_argument_kinds(sqlglot.parse_one(sql, dialect="postgres"), table=people())
    else:
        check(sql)


def test_a_cast_to_a_type_of_one_engine_names_the_types_it_can_cast_to() -> None:
    assert refusal(UnsupportedQueryError, "CAST(age AS regclass) IS NULL") == (
        "0A000",
        "CAST to regclass is not supported in a query on private data",
        None,
        "cast to smallint, integer, bigint, real, double precision, numeric, text, varchar, date, timestamp, "
        "boolean or interval",
    )


def test_an_unknown_date_part_is_named_in_lower_case_with_the_parts_there_are() -> None:
    assert refusal(InvalidParameterValueError, "EXTRACT(Fortnight FROM born) = 1") == (
        "22023",
        'EXTRACT field "fortnight" is not recognized',
        None,
        "use one of: year, quarter, month, week, day, dow, isodow, doy, isoyear, decade, century, millennium, "
        "epoch, julian, hour, minute, second, milliseconds, microseconds",
    )


def test_an_unknown_truncation_unit_is_named_in_lower_case_with_the_units_there_are() -> None:
    assert refusal(InvalidParameterValueError, "date_trunc('Fortnight', born) IS NULL") == (
        "22023",
        'date_trunc unit "fortnight" is not recognized',
        None,
        "use one of: microseconds, milliseconds, second, minute, hour, day, week, month, quarter, year, "
        "decade, century, millennium",
    )


def test_a_truncation_in_a_time_zone_says_to_truncate_in_the_sessions() -> None:
    assert refusal(UnsupportedQueryError, "date_trunc('day', born, 'UTC') IS NULL") == (
        "0A000",
        "date_trunc with a time zone is not supported in a query on private data",
        None,
        "truncate in the session's time zone: date_trunc('day', born)",
    )


@pytest.mark.parametrize("unit", ["Days", "days", "DAY", "day"])
def test_a_unit_is_read_in_any_case_and_in_the_plural(unit: str) -> None:
    assert canonical_unit(unit) == "DAY"
    accepted(f"date_trunc('{unit}', born) IS NULL")
    accepted(f"EXTRACT({unit} FROM born) = 1")


def test_a_unit_without_a_plural_is_its_upper_case_name() -> None:
    assert canonical_unit("dow") == "DOW"
    assert canonical_unit("Quarter") == "QUARTER"


def test_an_interval_beyond_two_thousand_years_is_out_of_range() -> None:
    assert refusal(InvalidParameterValueError, "born + INTERVAL '999999' DAY > born") == (
        "22023",
        "interval INTERVAL '999999 DAY' is out of range",
        None,
        "use intervals of at most 2000 years",
    )


@pytest.mark.parametrize(
    ("interval", "shown"),
    [
        # a unit no engine reads the same way
        ("INTERVAL '1 fortnight'", "INTERVAL '1 FORTNIGHT'"),
        # 21 digits: not read as a number at all (20 digits are, and are then out of range)
        ("INTERVAL '123456789012345678901' DAY", "INTERVAL '123456789012345678901 DAY'"),
    ],
)
def test_an_interval_that_is_not_one_whole_number_and_one_unit_is_not_supported(
    interval: str, shown: str
) -> None:
    assert refusal(UnsupportedQueryError, f"born + {interval} > born") == (
        "0A000",
        f"interval {shown} is not supported in a query on private data",
        None,
        "write one whole number and one unit: INTERVAL '90 days', INTERVAL '3' MONTH",
    )


def test_an_interval_of_twenty_digits_is_a_number_out_of_range() -> None:
    error = refusal(InvalidParameterValueError, "born + INTERVAL '12345678901234567890' DAY > born")
    assert error[1] == "interval INTERVAL '12345678901234567890 DAY' is out of range"


def test_a_computed_like_pattern_says_why_it_must_be_a_literal() -> None:
    assert refusal(UnsupportedQueryError, "name LIKE name || '%'") == (
        "0A000",
        "the pattern of LIKE must be a string literal in a query on private data",
        ROW_DEPENDENT,
        "write the pattern itself: name LIKE 'A%'",
    )


@pytest.mark.parametrize(
    ("pattern", "refused"),
    [
        ("a\\", True),  # one backslash at the end: an escape with nothing to escape
        ("a\\\\", False),  # an escaped backslash
        ("a\\\\\\", True),
        ("a\\\\\\\\", False),
        ("a\\\\\\\\\\", True),  # five: the fifth escapes nothing
        ("\\%", False),  # an escaped percent sign, not a trailing backslash
    ],
)
def test_a_like_pattern_is_refused_only_when_an_odd_number_of_backslashes_ends_it(
    pattern: str, refused: bool
) -> None:
    sql = f"name LIKE '{pattern}'"
    if refused:
        assert refusal(InvalidParameterValueError, sql) == (
            "22023",
            "LIKE pattern must not end with escape character",
            None,
            "double the final backslash to match a backslash: '…\\\\'",
        )
    else:
        accepted(sql)


def test_computed_digits_of_round_say_why_they_must_be_a_literal() -> None:
    assert refusal(UnsupportedQueryError, "ROUND(cost, age) > 1") == (
        "0A000",
        "the digits of ROUND must be an integer literal in a query on private data",
        ROW_DEPENDENT,
        "write them as a number: ROUND(x, 2)",
    )


@pytest.mark.parametrize("digits", ["-age", "'2'", "2.5", "-(age)"])
def test_digits_of_round_that_are_not_an_integer_literal_are_refused(digits: str) -> None:
    """A string or a fraction is not an integer literal (each engine would read it its own way), and the
    negation of a column is computed."""
    error = refusal(UnsupportedQueryError, f"ROUND(cost, {digits}) > 1")
    assert error[1] == "the digits of ROUND must be an integer literal in a query on private data"


def test_an_integer_literal_is_read_through_parentheses_and_signs() -> None:
    assert integer_literal(sqlglot.parse_one("-(5)")) == -5
    assert integer_literal(sqlglot.parse_one("((7))")) == 7
    assert integer_literal(sqlglot.parse_one("-age")) is None
    assert integer_literal(sqlglot.parse_one("'5'")) is None
    assert integer_literal(None) is None


def test_round_to_too_many_digits_says_how_many_it_takes() -> None:
    assert refusal(InvalidParameterValueError, "ROUND(cost, -101) > 1") == (
        "22023",
        "ROUND to -101 digits is out of range",
        None,
        "round to between -100 and 100 digits",
    )
    accepted("ROUND(cost, 100) > 1")
    accepted("ROUND(cost, -100) > 1")


@pytest.mark.parametrize("sql", ["SUBSTRING(note, age, 2) = 'a'", "SUBSTRING(note, 1, age) = 'a'"])
def test_computed_substring_positions_say_why_they_must_be_literals(sql: str) -> None:
    assert refusal(UnsupportedQueryError, sql) == (
        "0A000",
        "the start and length of SUBSTRING must be integer literals in a query on private data",
        ROW_DEPENDENT,
        "write them as numbers: SUBSTRING(name, 1, 3); patterns (FROM 'regex') are not supported",
    )


@pytest.mark.parametrize("sql", ["SUBSTRING(note, 1, 0) = ''", "SUBSTRING(note, 3) = 'a'"])
def test_a_substring_of_length_zero_or_to_the_end_is_accepted(sql: str) -> None:
    accepted(sql)


def test_a_substring_position_out_of_range_names_both_positions() -> None:
    assert refusal(InvalidParameterValueError, "SUBSTRING(note, 2147483648, 1) = 'a'") == (
        "22023",
        "SUBSTRING length 1 or start 2147483648 is out of range",
        None,
        "use a length of at least 0 and positions below 2147483648",
    )


@pytest.mark.parametrize(
    ("number", "shown"),
    [
        ("1e400", "1e400"),
        # 43 characters: the first 40, then an ellipsis
        ("123456789012345678901234567890123456789e300", "123456789012345678901234567890123456789e…"),
        # exactly 40 characters: shown whole
        ("123456789012345678901234567890123456e300", "123456789012345678901234567890123456e300"),
    ],
)
def test_a_number_out_of_range_is_shown_up_to_forty_characters(number: str, shown: str) -> None:
    assert refusal(UnsupportedQueryError, f"age * {number} > 1") == (
        "0A000",
        f"the number {shown} is out of the range Veil computes with",
        None,
        "write numbers of at most 400 characters and magnitude at most 1e308",
    )


MOVED = (
    "0A000",
    "moving a date by a computed or out-of-range number of days is not supported in a query on private data",
    "a number of days computed from a row could leave the date range for that row only",
    "add a literal of at most 1000000 days (born + 30), or an interval literal",
)


@pytest.mark.parametrize("sql", ["born + age > born", "born + 1000001 > born", "born - (-1000001) > born"])
def test_a_date_moved_by_a_computed_or_huge_number_of_days_is_refused(sql: str) -> None:
    assert refusal(UnsupportedQueryError, sql, kinds=True) == MOVED


@pytest.mark.parametrize(
    "sql", ["born + 1000000 > born", "age + 1000001 > 1", "age + cost > 1", "age - age > 1", "1 + 2 > age"]
)
def test_numbers_that_move_no_date_are_not_limited(sql: str) -> None:
    accepted(sql, kinds=True)


def test_arithmetic_on_a_computed_interval_says_to_move_by_a_literal() -> None:
    sql = "CAST(born AS TIMESTAMP) + (CAST(born AS TIMESTAMP) - CAST(born AS TIMESTAMP)) IS NULL"
    assert refusal(UnsupportedQueryError, sql, kinds=True) == (
        "0A000",
        "arithmetic on a computed interval is not supported in a query on private data",
        "its result could leave the timestamp range for one person's value only",
        "move dates by an interval literal: born + INTERVAL '30' DAY",
    )


@pytest.mark.parametrize("sql", ["born + INTERVAL '3' DAY > born", "born - -(INTERVAL '3' DAY) > born"])
def test_a_date_moved_by_an_interval_literal_is_accepted(sql: str) -> None:
    accepted(sql, kinds=True)


@pytest.mark.parametrize("sql", ["INTERVAL '1' DAY * age IS NULL", "age * INTERVAL '1' DAY IS NULL"])
def test_a_scaled_interval_says_to_write_the_interval_itself(sql: str) -> None:
    assert refusal(UnsupportedQueryError, sql, kinds=True) == (
        "0A000",
        "multiplying or dividing an interval is not supported in a query on private data",
        "the result could leave the interval range for one person's value only",
        "write the interval itself: INTERVAL '90' DAY",
    )


@pytest.mark.parametrize(
    ("sql", "function", "kind"),
    [
        ("EXTRACT(year FROM note) = 1", "EXTRACT", "text"),
        ("EXTRACT(week FROM CAST(born AS TIMESTAMP) - CAST(born AS TIMESTAMP)) = 1", "EXTRACT", "interval"),
        ("date_trunc('week', note) IS NULL", "date_trunc", "text"),
    ],
)
def test_extract_and_date_trunc_of_what_is_not_a_moment_name_the_function(
    sql: str, function: str, kind: str
) -> None:
    assert refusal(UnsupportedQueryError, sql, kinds=True) == (
        "0A000",
        f"{function} of a {kind} is not supported in a query on private data",
        None,
        f"use {function} on dates and timestamps",
    )


@pytest.mark.parametrize("sql", ["EXTRACT(year FROM born) = 1", "date_trunc('week', born) IS NULL"])
def test_extract_and_date_trunc_of_a_date_are_accepted(sql: str) -> None:
    accepted(sql, kinds=True)
