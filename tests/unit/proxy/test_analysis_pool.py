"""The analysis worker's verdict (proxy/server/analysis_pool.py), computed in this process: statement spans,
per-statement refusals, and the policy's trip through pickle."""

from __future__ import annotations

import pickle

import pytest

from proxy.analysis.parse import statement_spans
from proxy.server.analysis_pool import analyse_text
from tests.unit.proxy.policy_fixture import clinic_policy


@pytest.mark.parametrize(
    ("sql", "statements"),
    [
        ("SELECT 1", ["SELECT 1"]),
        ("SELECT 1;  select  2 ; ;", ["SELECT 1", "select  2"]),
        ("SELECT 'a;b' -- c;\n; SELECT $$x;y$$", ["SELECT 'a;b'", "SELECT $$x;y$$"]),
        (";;", []),
    ],
)
def test_statement_spans_split_where_the_parser_does(sql: str, statements: list[str]) -> None:
    assert [sql[start:end] for start, end in statement_spans(sql)] == statements


def test_each_statement_gets_its_own_verdict() -> None:
    heavy = "SELECT COUNT(*) FROM visits WHERE age IN ({})".format(", ".join(map(str, range(3000))))
    verdict = analyse_text(clinic_policy(), f"SELECT COUNT(*) FROM visits; {heavy}; SELECT nope FROM visits")
    assert verdict is not None and verdict.refusal is None
    refusals = [s.refusal.sqlstate if s.refusal else None for s in verdict.statements]
    assert refusals == [None, "54001", "42703"]


def test_a_syntax_error_refuses_the_whole_text_with_its_position() -> None:
    verdict = analyse_text(clinic_policy(), "SELECT COUNT(*) FROM visits; SELECT FROM FROM")
    assert verdict is not None and verdict.refusal is not None
    assert verdict.refusal.sqlstate == "42601" and verdict.refusal.position is not None


def test_a_statement_with_parameters_is_left_to_bind() -> None:
    verdict = analyse_text(clinic_policy(), "SELECT nope FROM visits WHERE age > $1")
    assert verdict is not None and [s.refusal for s in verdict.statements] == [None]


def test_the_policy_survives_pickle() -> None:
    policy = clinic_policy()
    assert pickle.loads(pickle.dumps(policy)) == policy
