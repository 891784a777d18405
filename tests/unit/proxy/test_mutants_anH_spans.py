"""Statement spans (analysis/parse.py ``statement_spans``): the analysis workers cut a simple-query text into
its statements by these spans, and the main process parses, refuses and logs each cut text on its own — a
span one character too long would carry the text after the last statement (a space, a comment's start)."""

from __future__ import annotations

import pytest

from proxy.analysis.parse import statement_spans
from proxy.server.analysis_pool import analyse_text
from tests.unit.proxy.policy_fixture import clinic_policy


@pytest.mark.parametrize(
    ("sql", "statements"),
    [
        ("SELECT 1; SELECT 2 ", ["SELECT 1", "SELECT 2"]),
        ("SELECT 1 -- the end", ["SELECT 1"]),
        ("SELECT 'a'\n", ["SELECT 'a'"]),
    ],
)
def test_the_last_statement_ends_at_its_last_token(sql: str, statements: list[str]) -> None:
    assert [sql[start:end] for start, end in statement_spans(sql)] == statements


def test_a_refused_last_statement_is_cut_without_what_follows_it() -> None:
    sql = "SELECT COUNT(*) FROM visits; SELECT nope FROM visits  "
    verdict = analyse_text(clinic_policy(), sql)
    assert verdict is not None
    [_, (start, end)] = [(s.start, s.end) for s in verdict.statements]
    assert sql[start:end] == "SELECT nope FROM visits"
