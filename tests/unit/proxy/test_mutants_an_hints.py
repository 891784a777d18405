"""What a refused statement tells the analyst (SQLSTATE, message, hint), and session commands read as
PostgreSQL reads them: analysis/argument_checks.py, copy.py, session_commands.py, statements.py."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.analysis.function_safety import check_argument_kinds
from proxy.analysis.parse import parse_statements
from proxy.analysis.session_commands import command_of, execute_arguments
from proxy.analysis.statements import SetStatement, classify
from proxy.errors import (
    InvalidParameterValueError,
    ProxyError,
    QuerySyntaxError,
    UnsupportedQueryError,
)
from tests.unit.proxy.people_fixture import people
from tests.unit.proxy.policy_fixture import clinic_policy
from tests.unit.proxy.test_argument_checks import check

INTERVAL_HINT = "write one whole number and one unit: INTERVAL '90 days', INTERVAL '3' MONTH"


def refusal(error: type[ProxyError], call: object, *args: object) -> ProxyError:
    with pytest.raises(error) as refused:
        call(*args)  # type: ignore[operator]
    return refused.value


def classified(sql: str) -> object:
    (tree,) = parse_statements(sql)
    return classify(tree, clinic_policy())


def command(sql: str) -> object:
    (tree,) = parse_statements(sql)
    return command_of(tree)


@pytest.mark.parametrize("interval", ["INTERVAL '-3' DAY", "INTERVAL '+3' DAY", "INTERVAL '-3 days'"])
def test_a_signed_whole_interval_moves_a_date(interval: str) -> None:
    check(f"born - {interval} < born")


def test_an_interval_that_is_not_a_number_is_refused_saying_how_to_write_one() -> None:
    error = refusal(UnsupportedQueryError, check, "born + INTERVAL 'X3' DAY > born")
    assert (error.sqlstate, error.hint) == ("0A000", INTERVAL_HINT)
    assert str(error) == "interval INTERVAL 'X3 DAY' is not supported in a query on private data"


def test_like_refusals_say_what_to_write() -> None:
    computed = refusal(UnsupportedQueryError, check, "name ILIKE name || '%'")
    assert computed.hint == "write the pattern itself: name ILIKE 'A%'"
    escape = refusal(InvalidParameterValueError, check, r"name LIKE 'a\'")
    assert (escape.sqlstate, escape.hint) == (
        "22023",
        "double the final backslash to match a backslash: '…\\\\'",
    )


def test_an_unknown_legacy_copy_option_lists_the_options_there_are() -> None:
    error = refusal(UnsupportedQueryError, classified, "COPY (SELECT 1) TO STDOUT OIDS")
    assert str(error) == "COPY option 'OIDS' is not supported"
    assert error.hint == "FORMAT text|csv, HEADER, DELIMITER 'x'"


def test_a_write_to_a_table_veil_does_not_know_is_refused_as_read_only() -> None:
    error = refusal(UnsupportedQueryError, classified, "DELETE FROM elsewhere")
    assert (error.sqlstate, str(error), error.hint) == (
        "0A000",
        "DELETE statements are not supported",
        "Veil is read-only",
    )


def test_execute_passes_false_as_false() -> None:
    assert execute_arguments("false, true, CAST(false AS boolean)") == ["false", "true", "false"]


def test_a_computed_execute_argument_says_what_constants_look_like() -> None:
    error = refusal(UnsupportedQueryError, execute_arguments, "age")
    assert (str(error), error.hint) == (
        "EXECUTE arguments must be constants, not age",
        "EXECUTE name(1, 'text', NULL)",
    )


def test_fetch_refusals_say_how_to_fetch() -> None:
    malformed = refusal(QuerySyntaxError, command, "FETCH 1 2 3 FROM c")
    assert (malformed.sqlstate, str(malformed), malformed.hint) == (
        "42601",
        "syntax error in FETCH",
        "FETCH [FORWARD] n FROM name",
    )
    backward = refusal(UnsupportedQueryError, command, "FETCH PRIOR FROM c")
    assert str(backward) == "cursors here move forward only: FETCH PRIOR is not supported"
    assert backward.hint == "FETCH [FORWARD] n | ALL; declare the query again to start over"


@pytest.mark.parametrize(
    ("sql", "value"),
    [("SET datestyle = iso", "iso"), ("SET enable_seqscan = on", "on"), ('SET a = "Foo Bar"', "Foo Bar")],
)
def test_a_set_to_a_word_keeps_the_word(sql: str, value: str) -> None:
    statement = classified(sql)
    assert isinstance(statement, SetStatement)
    assert statement.value == value


def test_scaling_an_interval_is_refused_in_words() -> None:
    with pytest.raises(UnsupportedQueryError) as refused:
        check_argument_kinds(
            sqlglot.parse_one("INTERVAL '1' DAY * age IS NULL", dialect="postgres"), table=people()
        )
    assert (
        str(refused.value)
        == "multiplying or dividing an interval is not supported in a query on private data"
    )
