"""Probes refused before any engine sees them, spending nothing (docs/privacy.md, "Side channels"):
an ε below the floor (4), the complexity budget (3b), and sampling clauses (6) — on both engines."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.config import DatasetPolicy
from proxy.errors import (
    ConfigError,
    InvalidParameterValueError,
    ProgramLimitExceededError,
    UnsupportedQueryError,
)
from tests.adversarial.probe_dataset import BACKENDS, TARGET, Probe, probe_policy, probe_service


@pytest.fixture(params=BACKENDS)
def probe(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    with probe_service(request.param, tmp_path, request) as probe:
        yield probe


def test_an_epsilon_below_the_floor_is_refused_with_22023(probe: Probe) -> None:
    with pytest.raises(
        InvalidParameterValueError, match=r"below this dataset's min_epsilon of 0\.001"
    ) as low:
        probe.run("SET veil.epsilon = 1e-9")
    assert low.value.sqlstate == "22023"
    probe.run("SET veil.epsilon = 0.001")  # the floor itself is allowed
    assert probe.run("SELECT COUNT(*) FROM people", veil_epsilon="0.001").table is not None
    with pytest.raises(InvalidParameterValueError, match="min_epsilon"):  # and at query time too
        probe.run("SELECT COUNT(*) FROM people", veil_epsilon="0.0001")
    assert probe.spent() == pytest.approx(0.001)


def test_the_floor_is_a_policy_setting(tmp_path: Path) -> None:
    dataset: DatasetPolicy = probe_policy({"path": "p.duckdb"}, min_epsilon=0.01)
    assert dataset.min_epsilon == 0.01
    assert probe_policy({"path": "p.duckdb"}).min_epsilon == 0.001
    with pytest.raises(ConfigError, match="min_epsilon: must not exceed default_epsilon"):
        probe_policy({"path": "p.duckdb"}, min_epsilon=0.5)


# the timing probe of the issue: string functions nested around a large literal, reached by one
# person's row only; each variant breaks one limit of the default complexity budget
_BIG = "x" * 5000
_CALLS = "concat(" + ", ".join(["upper(name)"] * 70) + ")"
_DEEP = "(" * 70 + "age" + ")" * 70
_MANY = " OR ".join(f"age = {i}" for i in range(700))
OVER_BUDGET = {
    "literal": (f"CASE WHEN id = {TARGET} THEN length('{_BIG}') ELSE 0 END > 0", "max_literal_chars"),
    "function calls": (
        f"CASE WHEN id = {TARGET} THEN length({_CALLS}) ELSE 0 END > 0",
        "max_function_calls",
    ),
    "depth": (f"{_DEEP} > 1", "max_depth"),
    "nodes": (_MANY, "max_nodes"),
}


@pytest.mark.parametrize("condition, limit", OVER_BUDGET.values(), ids=OVER_BUDGET.keys())
def test_a_query_over_the_complexity_budget_is_refused_with_54001(
    probe: Probe, condition: str, limit: str
) -> None:
    with pytest.raises(ProgramLimitExceededError, match=limit) as refused:
        probe.run(f"SELECT COUNT(*) FROM people WHERE {condition}")
    assert refused.value.sqlstate == "54001"
    assert probe.states() == []


def test_a_query_within_the_budget_is_answered(probe: Probe) -> None:
    condition = f"CASE WHEN id = {TARGET} THEN length(lower(upper(name))) ELSE 0 END > 0"
    assert probe.run(f"SELECT COUNT(*) FROM people WHERE {condition}").table is not None


def test_the_budget_is_a_policy_setting(tmp_path: Path) -> None:
    dataset = probe_policy({"path": "p.duckdb"}, limits={"max_function_calls": 2})
    assert dataset.limits.max_function_calls == 2
    with pytest.raises(ConfigError, match=r"limits\.max_depth: must be a positive integer"):
        probe_policy({"path": "p.duckdb"}, limits={"max_depth": 0})
    with pytest.raises(ConfigError, match=r"limits\.max_rows: unknown key"):
        probe_policy({"path": "p.duckdb"}, limits={"max_rows": 5})


SAMPLES = [
    "SELECT COUNT(*) FROM people TABLESAMPLE SYSTEM (10)",
    "SELECT COUNT(*) FROM people TABLESAMPLE BERNOULLI (50) REPEATABLE (7)",
    "SELECT COUNT(*) FROM people USING SAMPLE 10%",
    "SELECT COUNT(*) FROM people AS p TABLESAMPLE (5 ROWS)",
]


@pytest.mark.parametrize("sql", SAMPLES)
def test_sampling_a_private_table_is_refused_not_ignored(probe: Probe, sql: str) -> None:
    probe.run("SELECT COUNT(*) FROM people")  # the unsampled answer is in the cache
    with pytest.raises(
        UnsupportedQueryError, match="TABLESAMPLE and USING SAMPLE are not supported"
    ) as refused:
        probe.run(sql)
    assert refused.value.sqlstate == "0A000"
    assert probe.states() == ["committed"]  # the sampled query neither spent nor read the cache


@pytest.mark.parametrize("depth", [900, 3000])
def test_a_statement_nested_too_deeply_is_refused_with_54001_not_an_internal_error(
    probe: Probe, depth: int
) -> None:
    """Deeper than Python's stack lets sqlglot parse (3,000) or Veil's analysis walk (900): PostgreSQL's
    answer, 54001, before anything runs — never XX000."""
    with pytest.raises(ProgramLimitExceededError, match="nested") as refused:
        probe.run(f"SELECT COUNT(*) FROM people WHERE {'(' * depth}age{')' * depth} > 1")
    assert refused.value.sqlstate == "54001"
    assert probe.states() == []


@pytest.mark.parametrize(
    "condition",
    [" OR ".join(f"age = {i}" for i in range(20_000)), f"age IN ({', '.join(map(str, range(20_000)))})"],
    ids=["or-chain", "in-list"],
)
def test_a_statement_of_too_many_tokens_is_refused_before_it_is_parsed(probe: Probe, condition: str) -> None:
    """sqlglot's parser is super-linear on such chains; the tokens are counted first (max_tokens)."""
    with pytest.raises(
        ProgramLimitExceededError, match="more than this dataset's max_tokens of 10000"
    ) as refused:
        probe.run(f"SELECT COUNT(*) FROM people WHERE {condition}")
    assert refused.value.sqlstate == "54001"
    assert probe.states() == []
