"""Refusals say what was refused and how to fix it — the message and the hint, not only the class. Found
missing by ``make mutants`` (docs/testing.md): mutants that emptied or garbled a hint survived."""

from __future__ import annotations

import pytest

from mechanisms.errors import MechanismError
from mechanisms.top_k import top_k_score_gap_bound
from proxy.analysis.copy import copy_statement
from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import classify
from proxy.errors import ProxyError
from tests.unit.proxy.policy_fixture import clinic_policy


@pytest.mark.parametrize(
    ("text", "message", "hint"),
    [
        ("COPY visits FROM STDIN", "COPY FROM is not supported", "Veil is read-only"),
        ("COPY (SELECT 1) TO STDOUT BINARY", "COPY in binary format is not supported", "FORMAT text or csv"),
        (
            "COPY visits TO STDOUT",
            'COPY visits TO would reveal the private rows of "visits"',
            "copy an aggregate: COPY (SELECT …, COUNT(*) FROM visits GROUP BY …) TO STDOUT",
        ),
    ],
)
def test_copy_refusals_carry_their_hint(text: str, message: str, hint: str) -> None:
    (tree,) = parse_statements(text)
    with pytest.raises(ProxyError) as refused:
        copy_statement(tree, clinic_policy())  # type: ignore[arg-type]
    assert (str(refused.value), refused.value.hint) == (message, hint)


def test_a_malformed_deallocate_is_a_syntax_error_with_a_hint() -> None:
    with pytest.raises(ProxyError, match=r"^syntax error in DEALLOCATE$") as refused:
        for tree in parse_statements("DEALLOCATE a b"):
            classify(tree, clinic_policy())
    assert refused.value.hint == "DEALLOCATE name, or DEALLOCATE ALL"


def test_the_top_k_gap_bound_refuses_a_fractional_number_of_outputs() -> None:
    with pytest.raises(MechanismError, match="outputs") as refused:
        top_k_score_gap_bound(epsilon=1.0, sensitivity=1, k=2, candidates=10, outputs=1.5)  # type: ignore[arg-type]
    assert refused.value.hint == "the number of independent selections, e.g. 1"


def test_a_statement_nested_past_the_parser_s_stack_is_refused_with_a_hint() -> None:
    """PostgreSQL answers 54001 where its stack runs out; sqlglot's recursive parser runs out first."""
    with pytest.raises(ProxyError) as refused:
        parse_statements("SELECT " + "(" * 500 + "1" + ")" * 500)
    assert (refused.value.sqlstate, str(refused.value)) == ("54001", "statement is nested too deeply")
    assert refused.value.hint == "flatten the expression (fewer nested parentheses, subqueries or CASEs)"


def test_the_top_k_gap_bound_names_a_fractional_number_of_candidates() -> None:
    with pytest.raises(MechanismError, match=r"^candidates ") as refused:
        top_k_score_gap_bound(epsilon=1.0, sensitivity=1, k=2, candidates=10.5, outputs=1)  # type: ignore[arg-type]
    assert refused.value.hint == "the number of candidates selected from"
