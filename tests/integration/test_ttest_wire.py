"""``veil_ttest`` through the wire (docs/sql.md): psycopg (simple and extended protocol) and psql against the
demo on DuckDB, with the ledger's debit, the answer cache, refusals that spend nothing, and the research
mode switch."""

from __future__ import annotations

import math
import shutil
import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
import tomli_w

from tests.conftest import DATASET, Admin, Analyst, Demo, RunningServer, missing

TTEST = "SELECT veil_ttest(income, sex = 'female') FROM patients"
COLUMNS = ["t", "noise_sd", "epsilon", "delta", "mode"]


def analyst_with_delta(admin: Admin, prefix: str) -> Analyst:
    analyst = admin.add_analyst(4.0, prefix=prefix)
    admin.check("budget", "grant", analyst.name, DATASET, "1", "--delta", "1e-4")  # 5 ε in all
    return analyst


def session(server: RunningServer, analyst: Analyst, **settings: str) -> psycopg.Connection[Any]:
    connection = psycopg.connect(server.conninfo(analyst), autocommit=True)
    for name, value in {"veil.epsilon": "1", "veil.delta": "1e-6", **settings}.items():
        connection.execute(f"SET {name} = '{value}'")
    return connection


def test_a_ttest_answers_one_row_and_is_charged_its_epsilon_and_delta(
    veil_server: RunningServer, admin: Admin
) -> None:
    analyst = analyst_with_delta(admin, "ttest")
    with session(veil_server, analyst) as connection:
        cursor = connection.execute(TTEST)
        row = cursor.fetchone()
        names = [column.name for column in cursor.description or []]
        notices: list[str] = []
        connection.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        again = connection.execute(TTEST).fetchone()  # the stored answer: same row, nothing spent
    assert names == COLUMNS and row is not None
    t, noise_sd, epsilon, delta, mode = row
    assert math.isfinite(t) and noise_sd > 0 and (epsilon, delta, mode) == (1.0, 1e-6, "sound")
    assert again == row and any("spent nothing" in notice for notice in notices)
    balance = admin.balance(analyst)
    assert balance["spent_epsilon"] == pytest.approx(1.0) and balance["spent_delta"] == pytest.approx(1e-6)


def test_the_p_value_comes_with_noisy_group_sizes_and_a_warning(
    veil_server: RunningServer, admin: Admin
) -> None:
    analyst = analyst_with_delta(admin, "pvalue")
    notices: list[str] = []
    with session(veil_server, analyst) as connection:
        connection.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        cursor = connection.execute(TTEST.replace("'female')", "'female', 'p_value')"), prepare=True)
        row = dict(zip([c.name for c in cursor.description or []], cursor.fetchone() or (), strict=True))
    assert list(row) == [*COLUMNS, "p_value", "df", "n_a", "n_b"]
    assert 0 <= row["p_value"] <= 1 and row["df"] >= 1
    assert any("does not account for the noise" in notice for notice in notices)


@pytest.mark.parametrize(
    ("sql", "settings", "sqlstate"),
    [
        (TTEST, {"veil.delta": "0"}, "22023"),  # no δ: refused before anything is read
        ("SELECT veil_ttest(patient_id, sex = 'female') FROM patients", {}, "42501"),  # no bounds
        ("SELECT veil_ttest(income, sex = 'female'), COUNT(*) FROM patients", {}, "42501"),
        ("SELECT veil_ttest(income, sex = 'female') FROM patients GROUP BY region", {}, "42501"),
        ("SELECT veil_ttest(income, sex = 'female', 'pvalue') FROM patients", {}, "42501"),
        ("SELECT veil_ttest(income, nope = 1) FROM patients", {}, "42703"),
        (TTEST, {"veil.ttest_mode": "paper"}, "42501"),  # research modes are off on the demo
    ],
)
def test_refusals_spend_nothing(
    veil_server: RunningServer, admin: Admin, sql: str, settings: dict[str, str], sqlstate: str
) -> None:
    analyst = analyst_with_delta(admin, "refused")
    with session(veil_server, analyst, **settings) as connection, pytest.raises(psycopg.Error) as refused:
        connection.execute(sql)
    assert refused.value.sqlstate == sqlstate, refused.value
    assert admin.balance(analyst)["spent_epsilon"] == 0


def test_psql_prints_the_row(veil_server: RunningServer, admin: Admin) -> None:
    psql = shutil.which("psql")
    if psql is None:
        missing("psql is not installed")  # a failure in CI (VEIL_REQUIRE_CLIENTS=1), not a skip
    analyst = analyst_with_delta(admin, "psql")
    commands = f"SET veil.epsilon = 1; SET veil.delta = 1e-6; {TTEST};"
    result = subprocess.run(
        [psql, veil_server.url(analyst.name), "-X", "-A", "-F", ",", "-c", commands],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PGPASSWORD": analyst.password, "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()  # SET, SET, then the header, the row and "(1 row)"
    row = lines[lines.index(",".join(COLUMNS)) + 1]
    assert row.endswith(",1,1e-06,sound") and lines[-1] == "(1 row)"


def test_paper_mode_where_the_policy_allows_research_modes(
    demo: Demo, serve: Callable[[Path], RunningServer], tmp_path: Path
) -> None:
    document = tomllib.loads(demo.config.read_text(encoding="utf-8"))
    document["datasets"][DATASET]["research_modes"] = True
    config = demo.config.with_name("research.toml")
    config.write_text(tomli_w.dumps(document), encoding="utf-8")
    server = serve(config)
    analyst = analyst_with_delta(Admin(config), "paper")
    with session(server, analyst, **{"veil.ttest_mode": "paper"}) as connection:
        row = connection.execute(TTEST).fetchone()
    assert row is not None and row[4] == "paper" and row[1] > 0


def test_explain_shows_the_price_and_the_noise_floor_without_spending(admin: Admin) -> None:
    shown = admin.check("explain", TTEST, "--dataset", DATASET, "--epsilon", "1", "--delta", "1e-6").stdout
    assert "charge: ε = 1, δ = 1e-06" in shown and "smooth-sensitivity gaussian" in shown
    assert "data-dependent" in shown and "noise s.d. is at least 59.9" in shown  # 2/α at ε 0.9, δ 1e-6
    assert "BOOL_OR" in shown  # the per-person engine query
