"""``veil_ttest`` before the ledger: which statements are t-tests, what is refused, and the engine query —
run on a real DuckDB file and checked against the same per-person values computed by hand."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import sqlglot

from proxy.analysis.statements import TTestStatement, classify
from proxy.config import parse_config
from proxy.errors import PolicyViolationError, ProxyError
from proxy.query.ttest import plan_ttest, ttest_cost
from tests.unit.proxy.policy_fixture import clinic_policy


def statement(sql: str) -> TTestStatement:
    classified = classify(sqlglot.parse_one(sql, read="postgres"), clinic_policy())
    assert isinstance(classified, TTestStatement)
    return classified


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT veil_ttest(note, sex = 'male') FROM visits", "not numeric with public bounds"),
        ("SELECT veil_ttest(cost + 1, sex = 'male') FROM visits", "must be a column"),
        ("SELECT veil_ttest(cost, sex = 'male'), COUNT(*) FROM visits", "only item"),
        ("SELECT veil_ttest(cost, sex = 'male') FROM visits GROUP BY region", "GROUP"),
        ("SELECT veil_ttest(cost, sex = 'male') FROM visits ORDER BY 1", "ORDER"),
        ("SELECT veil_ttest(cost) FROM visits", "takes a value column"),
        ("SELECT veil_ttest(cost, sex = 'male', 'median') FROM visits", "'p_value'"),
        (
            "SELECT veil_ttest(v.cost, sex = 'male') FROM visits v JOIN patients p USING (patient_id)",
            "no JOIN clause",
        ),
    ],
)
def test_refused_with_the_accepted_form_as_hint(sql: str, message: str) -> None:
    with pytest.raises(PolicyViolationError) as refused:
        classify(sqlglot.parse_one(sql, read="postgres"), clinic_policy())
    assert message in refused.value.message and "veil_ttest(value_column" in (refused.value.hint or "")


def test_names_and_predicates_go_through_the_ordinary_analysis() -> None:
    with pytest.raises(ProxyError) as unknown:
        classify(
            sqlglot.parse_one("SELECT veil_ttest(cost, nope = 1) FROM visits", read="postgres"),
            clinic_policy(),
        )
    assert unknown.value.sqlstate == "42703"


def test_delta_is_required_and_paper_mode_needs_research_modes() -> None:
    query = statement("SELECT veil_ttest(cost, sex = 'male') FROM visits").query
    with pytest.raises(ProxyError) as no_delta:
        plan_ttest(query, epsilon=1, delta=0, mode="sound", research_modes=False, dialect="duckdb")
    assert no_delta.value.sqlstate == "22023"
    with pytest.raises(PolicyViolationError):
        plan_ttest(query, epsilon=1, delta=1e-6, mode="paper", research_modes=False, dialect="duckdb")
    plan = plan_ttest(query, epsilon=1, delta=1e-6, mode="paper", research_modes=True, dialect="duckdb")
    assert plan.mode == "paper"


@pytest.mark.parametrize(("p_value", "shares"), [(False, (0.9, 0.1, 0.0)), (True, (0.8, 0.1, 0.1))])
def test_the_charge_is_the_sessions_epsilon_and_delta(p_value: bool, shares: tuple[float, ...]) -> None:
    option = ", 'p_value'" if p_value else ""
    query = statement(f"SELECT veil_ttest(cost, sex = 'male'{option}) FROM visits").query
    plan = plan_ttest(query, epsilon=2, delta=1e-6, mode="sound", research_modes=False, dialect="duckdb")
    assert plan.shares == pytest.approx(tuple(2 * share for share in shares))
    cost = ttest_cost(plan)
    assert (cost.epsilon, cost.delta, cost.rho_delta) == (2, 1e-6, 1e-6)
    assert cost.rho >= sum(share**2 / 2 for share in plan.shares)
    assert plan.dummies == pytest.approx((0.45 * 550.5, 0.55 * 550.5))  # cost bounds [-50, 500.5]


def test_the_engine_query_gives_one_clamped_shifted_value_per_person(tmp_path: Path) -> None:
    rows = [  # patient, cost, sex: patient 3 has rows in both groups and costs outside the bounds
        (1, 10.0, "male"), (1, 30.0, "male"), (2, 100.0, "female"), (3, -80.0, "female"),
        (3, 900.0, "male"), (4, None, "male"), (5, 0.0, None),
    ]  # fmt: skip
    database = tmp_path / "clinic.duckdb"
    with duckdb.connect(str(database)) as connection:
        connection.execute("CREATE TABLE visits (patient_id INTEGER, cost DOUBLE, sex VARCHAR, age INTEGER)")
        connection.executemany("INSERT INTO visits VALUES (?, ?, ?, 40)", rows)
    query = statement("SELECT veil_ttest(cost, sex = 'male') FROM visits WHERE age > 18").query
    plan = plan_ttest(query, epsilon=1, delta=1e-6, mode="sound", research_modes=False, dialect="duckdb")
    with duckdb.connect(str(database), read_only=True) as connection:
        got = connection.execute(plan.sql).fetchall()
    # shifted by +50: patient 1 mean 20 → 70 (A); 2: 150 (B); 3: mean of -50 and 500.5 → 225.25 + 50 (A,
    # a male row); 4: only NULL costs, left out; 5: NULL sex is not group A → 50 (B). Sorted by group, value.
    assert got == [(50.0, False), (150.0, False), (70.0, True), (275.25, True)]


ROW_LEVEL = """
[datasets.survey]
path = "survey.duckdb"

[datasets.survey.tables.answers]
privacy_unit = "row"

[datasets.survey.tables.answers.columns]
score = { type = "real", lower = 0, upper = 10 }
treated = { type = "boolean", public = true, values = [true, false] }
"""


def test_without_a_privacy_unit_each_row_is_one_clamped_shifted_value(tmp_path: Path) -> None:
    database = tmp_path / "survey.duckdb"
    with duckdb.connect(str(database)) as connection:
        connection.execute("CREATE TABLE answers (score DOUBLE, treated BOOLEAN)")
        connection.executemany("INSERT INTO answers VALUES (?, ?)", [(4.0, True), (12.0, True), (-1.0, None)])
    dataset = parse_config(ROW_LEVEL, path=tmp_path / "veil.toml").dataset("survey")
    assert dataset is not None
    classified = classify(sqlglot.parse_one("SELECT veil_ttest(score, treated) FROM answers"), dataset)
    assert isinstance(classified, TTestStatement)
    plan = plan_ttest(
        classified.query, epsilon=1, delta=1e-6, mode="sound", research_modes=False, dialect="duckdb"
    )
    with duckdb.connect(str(database), read_only=True) as connection:
        got = sorted(connection.execute(plan.sql).fetchall())
    assert got == [(0.0, False), (4.0, True), (10.0, True)]  # 12 clamped to 10; NULL group is not A
