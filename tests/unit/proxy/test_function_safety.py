"""The table of accepted functions (analysis/function_safety.py) is the allow-list, and nothing is
accepted on private values without a declared treatment on each engine."""

from __future__ import annotations

import inspect

import pytest
import sqlglot
from sqlglot import exp

from proxy.analysis import checks
from proxy.analysis.checks import SCALAR_NODES, check_predicate
from proxy.analysis.function_safety import FUNCTIONS, Treatment, families
from proxy.errors import PolicyViolationError


def test_the_allow_list_is_the_table() -> None:
    assert tuple(FUNCTIONS) == SCALAR_NODES


def _accepted(node_type: type[exp.Expression]) -> bool:
    """Whether check_predicate lets a (bare) node of this exact type through."""
    try:
        check_predicate(node_type(), clause="WHERE")
    except PolicyViolationError:
        return False
    return True


def test_no_node_type_is_accepted_without_a_declared_treatment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every sqlglot node type — including subclasses of listed ones, like JSONCast of Cast — is
    refused unless it is in the table itself (argument checks aside: bare nodes have no arguments)."""
    monkeypatch.setattr(checks, "check_constant_arguments", lambda node: None)
    node_types = [
        cls for _, cls in inspect.getmembers(exp, inspect.isclass) if issubclass(cls, exp.Expression)
    ]
    accepted = {cls for cls in node_types if _accepted(cls)}
    assert accepted == set(FUNCTIONS) | {exp.Column, exp.Identifier}


def test_a_subclass_of_an_accepted_type_is_refused() -> None:
    cast = exp.JSONCast(this=exp.column("note"), to=exp.DataType.build("INT"))
    with pytest.raises(PolicyViolationError, match=r"j_s_o_n_cast\(\) is not allowed in WHERE"):
        check_predicate(cast, clause="WHERE")


@pytest.mark.parametrize("safety", families(), ids=lambda safety: safety.family)
def test_every_family_says_how_each_engine_keeps_it_from_failing(safety: object) -> None:
    assert safety.family and safety.sql  # type: ignore[attr-defined]
    for handling in (safety.duckdb, safety.postgres):  # type: ignore[attr-defined]
        assert handling.treatment in Treatment
        assert handling.treatment is Treatment.TOTAL or handling.how, "say which rewrite"


def test_duckdb_needs_no_rewrite_of_its_own_beyond_try() -> None:
    """On DuckDB every rewrite is the one TRY(…) / TRY_CAST wrapping (rewrite/safe_predicates.py)."""
    for safety in families():
        if safety.duckdb.treatment is Treatment.REWRITTEN:
            assert "TRY" in safety.duckdb.how


@pytest.mark.parametrize(
    "sql",
    [
        "date_trunc('fortnight', born) IS NULL",
        "note LIKE note",
        "ROUND(cost, age) > 1",
        "CAST(age AS regclass) IS NULL",
    ],
)
def test_constant_arguments_are_checked_with_the_allow_list(sql: str) -> None:
    with pytest.raises(Exception, match=r"not recognized|must be|is not supported") as refused:
        check_predicate(sqlglot.parse_one(sql, dialect="postgres"), clause="WHERE")
    assert refused.value.sqlstate in ("0A000", "22023")  # type: ignore[attr-defined]
