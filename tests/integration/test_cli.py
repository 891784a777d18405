"""The ``veil`` command line: in process (click's CliRunner) where no server is involved, as a
subprocess of the installed console script where one is."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner, Result

from proxy import __version__
from proxy.cli import main as veil_main
from tests.conftest import ALICE, Admin, Analyst, Demo, RunningServer, veil_command

SCORES_CSV = "person_id,city,score\n1,oslo,3\n1,oslo,5\n1,oslo,9\n2,bergen,7\n3,oslo,1\n"


def invoke(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(veil_main, list(args), input=input)


def veil(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*veil_command(), *args], capture_output=True, text=True, timeout=60, check=False)


def copy_demo(demo: Demo, target: Path) -> Demo:
    """A private copy of the served demo: policy and data as files, the live ledger via SQLite's backup."""
    target.mkdir()
    shutil.copy2(demo.config, target / demo.config.name)
    shutil.copy2(demo.database, target / demo.database.name)
    with (
        contextlib.closing(sqlite3.connect(demo.ledger)) as source,
        contextlib.closing(sqlite3.connect(target / demo.ledger.name)) as copy,
    ):
        source.backup(copy)
    return Demo(target)


def assert_one_error_line(result: Result, *mentions: str) -> str:
    """Exit status 1, an ``Error:`` line naming ``mentions``, at most a detail and a hint after it."""
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert lines and lines[0].startswith("Error: "), result.stderr
    assert all(line.startswith(("detail: ", "hint: ")) for line in lines[1:]), result.stderr
    for mention in mentions:
        assert mention in lines[0], lines[0]
    assert result.stdout == ""
    return lines[0]


# --- help and version ------------------------------------------------------------------------------------


def test_help_lists_the_commands() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("init-demo", "serve", "import", "analyst", "budget"):
        assert command in result.stdout
    assert invoke("-h").stdout == result.stdout


def test_version_of_the_installed_console_script() -> None:
    result = veil("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"veil, version {__version__}"


# --- analysts and budgets (no server) --------------------------------------------------------------------


def test_analyst_list_json_has_alice_and_no_secrets(admin: Admin) -> None:
    result = admin.check("analyst", "list", "--json")
    analysts = json.loads(result.stdout)
    assert "alice" in [analyst["name"] for analyst in analysts]
    assert all(set(analyst) == {"name", "created_at"} for analyst in analysts)
    assert "SCRAM" not in result.stdout


def test_a_new_analyst_appears_with_its_grant(admin: Admin) -> None:
    analyst = admin.add_analyst(0.75, prefix="listed")
    assert analyst.name in [a["name"] for a in json.loads(admin.check("analyst", "list", "--json").stdout)]
    assert admin.balance(analyst) == {
        "analyst": analyst.name,
        "dataset": "demo",
        "granted_epsilon": 0.75,
        "spent_epsilon": 0.0,
        "remaining_epsilon": 0.75,
        "granted_delta": 0.0,
        "spent_delta": 0.0,
        "remaining_delta": 0.0,
        "accountant": "basic",
        "renewal": None,
        "period_start": None,
        "releases": 0,
    }
    admin.check("budget", "grant", analyst.name, "demo", "0.25")  # grants accumulate
    assert admin.balance(analyst)["granted_epsilon"] == 1.0


def test_budget_grant_to_an_unknown_analyst_fails_in_one_line(admin: Admin) -> None:
    result = admin.run("budget", "grant", "nobody", "demo", "1.0")
    assert_one_error_line(result, '"nobody"', "does not exist")
    assert "nobody" not in admin.check("analyst", "list").stdout


def test_budget_grant_on_an_undeclared_dataset_names_the_datasets(admin: Admin) -> None:
    result = admin.run("budget", "grant", "alice", "elsewhere", "1.0")
    assert_one_error_line(result, '"elsewhere"')
    assert "hint: datasets: demo" in result.stderr


@pytest.mark.parametrize("epsilon", ["0", "nan", "inf"])
def test_budget_grant_refuses_an_epsilon_that_is_not_positive_and_finite(admin: Admin, epsilon: str) -> None:
    before = admin.balance(ALICE)["granted_epsilon"]
    assert_one_error_line(admin.run("budget", "grant", "alice", "demo", epsilon), "epsilon")
    assert admin.balance(ALICE)["granted_epsilon"] == before


def test_adding_an_existing_analyst_fails(admin: Admin) -> None:
    assert_one_error_line(
        admin.run("analyst", "add", "alice", "--password-stdin", input="x\n"), '"alice"', "already exists"
    )


@pytest.mark.parametrize(
    "command",
    [["budget", "show"], ["analyst", "list"], ["budget", "history", "alice"], ["serve", "--port", "0"]],
    ids=" ".join,
)
def test_a_missing_policy_file_is_named(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "nowhere" / "veil.toml"
    result = invoke(*command, "--config", str(missing))
    assert_one_error_line(result, str(missing))


def test_the_policy_file_can_come_from_VEIL_CONFIG(demo: Demo) -> None:
    result = CliRunner(env={"VEIL_CONFIG": str(demo.config)}).invoke(veil_main, ["analyst", "list", "--json"])
    assert result.exit_code == 0, result.output
    assert "alice" in [analyst["name"] for analyst in json.loads(result.stdout)]


def test_init_demo_refuses_a_directory_that_holds_a_demo(demo: Demo) -> None:
    before = demo.config.read_bytes(), demo.database.stat().st_mtime_ns
    result = invoke("init-demo", str(demo.directory), "--people", "100")
    assert result.exit_code == 1
    assert f"Error: {demo.directory} already holds a demo" in result.stderr
    assert (demo.config.read_bytes(), demo.database.stat().st_mtime_ns) == before


def test_init_demo_refusal_is_not_announced_as_a_build(demo: Demo) -> None:
    result = invoke("init-demo", str(demo.directory), "--people", "100")
    assert_one_error_line(result, "already holds a demo")


# --- budgets after queries (server, so the CLI runs as a subprocess) -------------------------------------


def query(server: RunningServer, analyst: Analyst, *statements: str) -> list[str]:
    """Run each statement on one connection → "ok" or the SQLSTATE of its error, in order."""
    outcomes = []
    with psycopg.connect(server.conninfo(analyst), prepare_threshold=None, autocommit=True) as connection:
        for sql in statements:
            try:
                connection.execute(sql)
                outcomes.append("ok")
            except psycopg.Error as error:
                outcomes.append(error.sqlstate or "?")
    return outcomes


def test_budget_show_json_reports_a_spend(veil_server: RunningServer, admin: Admin, demo: Demo) -> None:
    analyst = admin.add_analyst(1.0, prefix="shown")
    assert (
        query(veil_server, analyst, "SET veil.epsilon = 0.25", "SELECT COUNT(*) FROM patients") == ["ok"] * 2
    )

    result = veil("budget", "show", analyst.name, "--json", "--config", str(demo.config))

    assert result.returncode == 0, result.stderr
    (balance,) = json.loads(result.stdout)
    assert (balance["analyst"], balance["dataset"]) == (analyst.name, "demo")
    assert balance["spent_epsilon"] == 0.25
    assert balance["remaining_epsilon"] == 0.75


def test_budget_show_table_is_readable(veil_server: RunningServer, admin: Admin, demo: Demo) -> None:
    analyst = admin.add_analyst(1.0, prefix="table")
    assert query(veil_server, analyst, "SELECT COUNT(*) FROM patients") == ["ok"]
    result = veil("budget", "show", analyst.name, "--config", str(demo.config))
    assert result.returncode == 0, result.stderr
    header, rule, row = result.stdout.splitlines()
    assert header.split() == ["analyst", "dataset", "granted_epsilon", "spent_epsilon", "remaining_epsilon"]
    assert set(rule.replace(" ", "")) == {"-"}
    assert row.split() == [analyst.name, "demo", "1", "0.1", "0.9"]


def test_budget_history_lists_committed_spends_with_normalized_sql(
    veil_server: RunningServer, admin: Admin, demo: Demo
) -> None:
    analyst = admin.add_analyst(0.25, prefix="history")
    outcomes = query(
        veil_server,
        analyst,
        "select   count(*)\n  from patients   where age > 50",
        "SELECT * FROM visits",  # refused: never reserved
        "SELECT 1",  # free
        "SET veil.epsilon = 0.15",
        "select region, avg(cost) from visits group by region",
        "SELECT COUNT(*) FROM visits",  # exhausted: never reserved
    )
    assert outcomes == ["ok", "42501", "ok", "ok", "ok", "53Z01"]

    result = veil("budget", "history", analyst.name, "--json", "--config", str(demo.config))

    assert result.returncode == 0, result.stderr
    spends = json.loads(result.stdout)
    assert [(s["statement"], s["epsilon"], s["state"], s["dataset"]) for s in spends] == [
        ("SELECT COUNT(*) FROM patients WHERE age > 50", 0.1, "committed", "demo"),
        ("SELECT region, AVG(cost) FROM visits GROUP BY region", 0.15, "committed", "demo"),
    ]
    assert spends[0]["id"] < spends[1]["id"]
    assert all(s["analyst"] == analyst.name for s in spends)


def test_budget_history_of_an_unknown_analyst_fails(admin: Admin) -> None:
    assert_one_error_line(admin.run("budget", "history", "nobody", "--json"), '"nobody"')


# --- import ----------------------------------------------------------------------------------------------


def import_scores(config: Path, csv: Path, table: str = "scores") -> Result:
    return invoke(
        "import",
        str(csv),
        "--config",
        str(config),
        "--dataset",
        "demo",
        "--table",
        table,
        "--privacy-unit",
        "person_id",
        "--max-contributions",
        "2",
        "--public",
        "city=oslo,bergen",
        "--bounds",
        "score=0:10",
    )


def test_import_into_a_copy_then_budget_and_query_it(
    tmp_path: Path, demo: Demo, veil_server: RunningServer, serve: Callable[[Path], RunningServer]
) -> None:
    copy = copy_demo(demo, tmp_path / "copy")
    csv = tmp_path / "scores.csv"
    csv.write_text(SCORES_CSV)

    result = import_scores(copy.config, csv)

    assert result.exit_code == 0, result.output
    assert "as demo.scores: 3 columns, public: city" in result.stdout
    table = tomllib.loads(copy.config.read_text())["datasets"]["demo"]["tables"]["scores"]
    assert table["privacy_unit"] == "person_id"
    assert table["max_contributions"] == 2
    assert table["columns"]["city"] == {"type": "text", "public": True, "values": ["oslo", "bergen"]}
    assert table["columns"]["score"] == {"type": "integer", "lower": 0, "upper": 10}
    assert "public" not in table["columns"]["person_id"]
    assert "scores" not in tomllib.loads(demo.config.read_text())["datasets"]["demo"]["tables"]

    # The copied ledger still works with the rewritten policy.
    copy_admin = Admin(copy.config)
    assert copy_admin.balance(ALICE)["granted_epsilon"] == 10.0
    newcomer = copy_admin.add_analyst(1.0, prefix="importer")

    server = serve(copy.config)
    with psycopg.connect(server.conninfo(newcomer), prepare_threshold=None, autocommit=True) as connection:
        connection.execute("SET veil.epsilon = 1")
        rows = connection.execute("SELECT city, COUNT(*) FROM scores GROUP BY city").fetchall()
        assert [city for city, _ in rows] == ["oslo", "bergen"]
        assert all(isinstance(n, int) and abs(n) < 200 for _, n in rows)  # true counts are 3 and 1 (bounded)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            connection.execute("SELECT score FROM scores")
    assert copy_admin.balance(newcomer)["spent_epsilon"] == 1.0
    # The served demo's ledger knows nothing of the copy's analyst.
    assert "importer" not in Admin(demo.config).check("analyst", "list").stdout


def test_import_into_the_dataset_a_server_holds_is_refused(
    tmp_path: Path, demo: Demo, veil_server: RunningServer
) -> None:
    csv = tmp_path / "scores.csv"
    csv.write_text(SCORES_CSV)
    policy_before = demo.config.read_bytes()

    result = import_scores(demo.config, csv, table="locked_scores")

    assert_one_error_line(result, "in use by another process")
    assert demo.config.read_bytes() == policy_before


def test_import_names_an_unknown_column(tmp_path: Path, demo: Demo) -> None:
    copy = copy_demo(demo, tmp_path / "copy")
    csv = tmp_path / "scores.csv"
    csv.write_text(SCORES_CSV)
    policy_before = copy.config.read_bytes()
    result = invoke(
        "import", str(csv), "--config", str(copy.config), "--dataset", "demo", "--table", "scores",
        "--privacy-unit", "person_id", "--max-contributions", "1", "--public", "town=oslo",
    )  # fmt: skip
    assert_one_error_line(result, '"town"', "scores.csv")
    assert copy.config.read_bytes() == policy_before


def test_explain_prices_gaussian_noise_and_the_other_row_without_spending(demo: Demo) -> None:
    result = invoke(
        "explain", "SELECT region, COUNT(*) FROM visits GROUP BY region", "--dataset", "demo",
        "--config", str(demo.config), "--mechanism", "gaussian", "--delta", "1e-6", "--other-row", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    explanation = json.loads(result.stdout)
    assert explanation["delta"] == 1e-6
    assert [m["mechanism"] for m in explanation["measurements"]] == ["Gaussian on a 2^k grid"] * 2
    assert explanation["measurements"][1]["quantity"].endswith("(total, for the (other) row)")
