"""Arguments checked before any engine query, on every engine (analysis/argument_checks.py)."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.analysis.checks import check_predicate
from proxy.analysis.function_safety import check_argument_kinds
from proxy.errors import InvalidParameterValueError, UnsupportedQueryError
from tests.unit.proxy.people_fixture import people


def check(sql: str) -> None:
    check_predicate(sqlglot.parse_one(sql, dialect="postgres"), clause="WHERE")


ACCEPTED = [
    "name LIKE 'A%'",
    r"name ILIKE 'a\\%'",  # an escaped backslash at the end is a backslash
    "ROUND(cost, 2) > 1",
    "ROUND(cost, -3) > 1",
    "ROUND(cost) > 1",
    "SUBSTRING(note, 1, 3) = 'a'",
    "SUBSTRING(note FROM -2 FOR 0) = ''",
    "EXTRACT(year FROM born) = 1",
    "date_part('dow', born) = 1",
    "date_trunc('month', born) IS NULL",
    "date_trunc('Years', born) IS NULL",
    "born + INTERVAL '90 days' > born",
    "born - INTERVAL '2000' YEAR < born",
    "CAST(age AS double precision) > 1",
    "cost < 1e308",
    "note = 'abc'",
    "cost * 'Infinity' > 1",
]


@pytest.mark.parametrize("sql", ACCEPTED)
def test_literal_arguments_both_engines_accept_pass(sql: str) -> None:
    check(sql)


INVALID = {  # a literal that would fail on the rows that reach it → 22023, as PostgreSQL says it
    r"name LIKE 'a\'": "LIKE pattern must not end with escape character",
    r"name ILIKE 'a\\\'": "ILIKE pattern must not end with escape character",
    "ROUND(cost, 101) > 1": "ROUND to 101 digits is out of range",
    "SUBSTRING(note, 1, -1) = 'a'": "SUBSTRING length -1",
    "SUBSTRING(note, 1, 3000000000) = 'a'": "out of range",
    "EXTRACT(fortnight FROM born) = 1": 'EXTRACT field "fortnight" is not recognized',
    "date_part(note, born) = 1": 'EXTRACT field "note" is not recognized',
    "EXTRACT(timezone FROM born) = 1": 'EXTRACT field "timezone" is not recognized',
    "date_trunc('fortnight', born) IS NULL": 'date_trunc unit "fortnight" is not recognized',
    "date_trunc(note, born) IS NULL": 'date_trunc unit "note" is not recognized',
    "born + INTERVAL '1000000 years' > born": "is out of range",
}


@pytest.mark.parametrize(("sql", "message"), INVALID.items())
def test_an_invalid_literal_argument_is_refused_with_22023(sql: str, message: str) -> None:
    with pytest.raises(InvalidParameterValueError, match=message.replace("(", r"\(")):
        check(sql)


UNSUPPORTED = {  # a computed argument, or a form only one engine has → 0A000
    "'abc' LIKE name": "the pattern of LIKE must be a string literal",
    "name LIKE name || '%'": "the pattern of LIKE must be a string literal",
    "ROUND(cost, age) > 1": "the digits of ROUND must be an integer literal",
    "SUBSTRING(note, age, 2) = 'a'": "the start and length of SUBSTRING must be integer literals",
    "SUBSTRING(note FROM '(') = 'a'": "the start and length of SUBSTRING must be integer literals",
    "date_trunc('day', born, 'UTC') IS NULL": "date_trunc with a time zone",
    "born + INTERVAL '1 year 2 months' > born": "is not supported",
    "born + INTERVAL (age) DAY > born": "is not supported",
    "age * 1e400 > 1": "out of the range Veil computes with",
    "age * '1e400' > 1": "out of the range Veil computes with",
    "note = '1e400'": "out of the range Veil computes with",  # either engine may read it as a number
    "CAST(age AS regclass) IS NULL": "CAST to regclass is not supported",
    "CAST(note AS json) IS NULL": "CAST to json is not supported",
}


@pytest.mark.parametrize(("sql", "message"), UNSUPPORTED.items())
def test_a_computed_or_foreign_argument_is_refused_with_0a000(sql: str, message: str) -> None:
    with pytest.raises(UnsupportedQueryError, match=message):
        check(sql)


KINDS = {  # checks that need the columns' types: run with the engine rewrite, on every engine
    "born + age > born": "moving a date by a computed or out-of-range number of days",
    "born + 1000001 > born": "moving a date by a computed or out-of-range number of days",
    "born + (born - born) > born": "moving a date by a computed or out-of-range number of days",
    "CAST(born AS TIMESTAMP) + (CAST(born AS TIMESTAMP) - CAST(born AS TIMESTAMP)) IS NULL": "computed interval",
    "INTERVAL '1' DAY * age IS NULL": "multiplying or dividing an interval",
    "INTERVAL '1' DAY / 2 IS NULL": "multiplying or dividing an interval",
    "EXTRACT(week FROM CAST(born AS TIMESTAMP) - CAST(born AS TIMESTAMP)) = 1": "EXTRACT of a interval",
    "date_trunc('week', note) IS NULL": "date_trunc of a text",
}


@pytest.mark.parametrize(("sql", "message"), KINDS.items())
def test_date_arithmetic_that_could_leave_the_range_is_refused(sql: str, message: str) -> None:
    with pytest.raises(UnsupportedQueryError, match=message):
        check_argument_kinds(sqlglot.parse_one(sql, dialect="postgres"), table=people())


@pytest.mark.parametrize(
    "sql", ["born + 30 > born", "born - 1000000 < born", "30 + born > born", "born - born > 1"]
)
def test_a_date_moved_by_a_literal_passes(sql: str) -> None:
    check_argument_kinds(sqlglot.parse_one(sql, dialect="postgres"), table=people())
