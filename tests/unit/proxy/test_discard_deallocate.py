"""DISCARD and DEALLOCATE, which connection pools and drivers send: classified, never refused."""

from __future__ import annotations

import pytest

from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import DeallocateStatement, DiscardStatement, classify
from proxy.errors import QuerySyntaxError, UnsupportedQueryError
from tests.unit.proxy.policy_fixture import clinic_policy


def classify_sql(sql: str) -> object:
    (tree,) = parse_statements(sql)
    return classify(tree, clinic_policy())


@pytest.mark.parametrize(
    ("sql", "statement"),
    [
        ("DISCARD ALL", DiscardStatement("ALL")),
        ("discard all", DiscardStatement("ALL")),
        ("DISCARD PLANS", DiscardStatement("PLANS")),
        ("DISCARD SEQUENCES", DiscardStatement("SEQUENCES")),
        ("DISCARD TEMPORARY", DiscardStatement("TEMP")),
        ("DISCARD TEMP", DiscardStatement("TEMP")),
        ("DEALLOCATE ALL", DeallocateStatement(None)),
        ("DEALLOCATE PREPARE ALL", DeallocateStatement(None)),
        ("DEALLOCATE _pg3_0", DeallocateStatement("_pg3_0")),
        ("DEALLOCATE Stmt1", DeallocateStatement("stmt1")),
        ('DEALLOCATE PREPARE "Stmt1"', DeallocateStatement("Stmt1")),
    ],
)
def test_classifies_session_reset_commands(sql: str, statement: object) -> None:
    assert classify_sql(sql) == statement


def test_refuses_an_unknown_discard() -> None:
    with pytest.raises(UnsupportedQueryError, match="DISCARD statements are not supported"):
        classify_sql("DISCARD EVERYTHING")


def test_refuses_a_deallocate_without_a_name() -> None:
    with pytest.raises(QuerySyntaxError, match="DEALLOCATE"):
        classify_sql("DEALLOCATE")


def test_columns_named_like_the_commands_still_parse() -> None:
    (tree,) = parse_statements("SELECT discard, t.deallocate FROM t")
    assert tree.sql() == "SELECT discard, t.deallocate FROM t"
