"""The ``veil`` command line: in process (click's CliRunner) where no server is involved, as a
subprocess of the installed console script where one is."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import shutil
import sqlite3
import subprocess
import tomllib
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import click
import psycopg
import pytest
import tomli_w
from click.testing import CliRunner, Result

from budget.audit import AuditEntry, Decision
from budget.ledger import Ledger
from proxy import __version__
from proxy.cli.main import main as veil_main
from tests.conftest import ALICE, Admin, Analyst, Demo, RunningServer, schema_in, veil_command

SCORES_CSV = "person_id,city,score\n1,oslo,3\n1,oslo,5\n1,oslo,9\n2,bergen,7\n3,oslo,1\n"


def invoke(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(veil_main, list(args), input=input, prog_name="veil")


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


def edit_policy(config: Path, **dataset: Any) -> None:
    """Set keys of the demo dataset in a (copied) policy file."""
    document = tomllib.loads(config.read_text())
    document["datasets"]["demo"].update(dataset)
    config.write_text(tomli_w.dumps(document))


@pytest.fixture
def private(tmp_path: Path, demo: Demo) -> Admin:
    """The CLI on a private copy of the demo, for commands that would disturb the served one (caps)."""
    return Admin(copy_demo(demo, tmp_path / "private").config)


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
    for command in ("init-demo", "serve", "import", "explain", "analyst", "budget", "policy", "audit"):
        assert command in result.stdout
    assert invoke("-h").stdout == result.stdout


def _all_commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, command in group.commands.items():
        found.append((*path, name))
        if isinstance(command, click.Group):
            found += _all_commands(command, (*path, name))
    return found


@pytest.mark.parametrize("command", _all_commands(veil_main), ids=" ".join)
def test_every_command_has_help_with_an_example(command: tuple[str, ...]) -> None:
    result = invoke(*command, "--help")
    assert result.exit_code == 0, result.output
    assert f"veil {' '.join(command)}" in result.stdout  # the usage line
    node: Any = veil_main
    for part in command:
        node = node.commands[part]
    if not isinstance(node, click.Group):
        assert "Example:" in result.stdout
        assert f"veil {' '.join(command)} " in result.stdout.split("Example:")[1], "an example of itself"


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
        "cap_epsilon": None,
        "cap_delta": None,
        "cap_remaining_epsilon": None,
        "reserved_epsilon": None,
        "partitions": [],  # no statement was pinned to a partition (parallel composition)
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


@pytest.mark.parametrize("epsilon", ["0", "-1", "-0.5", "nan", "inf"])
def test_budget_grant_refuses_an_epsilon_that_is_not_positive_and_finite(admin: Admin, epsilon: str) -> None:
    before = admin.balance(ALICE)["granted_epsilon"]
    assert_one_error_line(admin.run("budget", "grant", "alice", "demo", epsilon), "epsilon")
    assert admin.balance(ALICE)["granted_epsilon"] == before


@pytest.mark.parametrize("delta", ["1", "1.5", "-1e-6", "nan"])
def test_budget_grant_refuses_a_delta_outside_0_to_1(admin: Admin, delta: str) -> None:
    before = admin.balance(ALICE)
    line = assert_one_error_line(
        admin.run("budget", "grant", "alice", "demo", "1", "--delta", delta), "delta"
    )
    assert "less than 1" in line
    assert admin.balance(ALICE) == before


def test_adding_an_existing_analyst_fails(admin: Admin) -> None:
    assert_one_error_line(
        admin.run("analyst", "add", "alice", "--password-stdin", input="x\n"), '"alice"', "already exists"
    )


@pytest.mark.parametrize(
    "command",
    [
        ["budget", "show"],
        ["budget", "grant", "alice", "demo", "1"],
        ["budget", "revoke", "alice", "demo"],
        ["budget", "cap"],
        ["budget", "history", "alice"],
        ["analyst", "list"],
        ["analyst", "add", "bob", "--password-stdin"],
        ["analyst", "passwd", "alice", "--password-stdin"],
        ["analyst", "remove", "alice", "--yes"],
        ["policy", "validate"],
        ["policy", "show"],
        ["audit"],
        ["serve", "--port", "0"],
    ],
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
    assert [cell.strip() for cell in header.split("  ") if cell] == [
        "analyst", "dataset", "granted ε", "spent ε", "remaining ε", "accountant"
    ]  # fmt: skip
    assert set(rule.replace(" ", "")) == {"-"}
    assert row.split() == [analyst.name, "demo", "1", "0.1", "0.9", "basic"]
    assert len({len(line) for line in (header, rule)}) == 1  # aligned


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


# --- analyst passwd and remove ---------------------------------------------------------------------------


def verifier(admin: Admin, name: str) -> str | None:
    ledger = Ledger.open(Demo(admin.config.parent).ledger)
    try:
        return ledger.verifier(name)
    finally:
        ledger.close()


def test_analyst_add_and_passwd_take_the_password_from_a_variable(
    veil_server: RunningServer, admin: Admin
) -> None:
    runner = CliRunner(env={"NEW_PASSWORD": "first secret"})
    name = "passwd1"
    result = runner.invoke(
        veil_main, ["analyst", "add", name, "--password-env", "NEW_PASSWORD", "--config", str(admin.config)]
    )
    assert result.exit_code == 0, result.output
    admin.check("budget", "grant", name, "demo", "1")
    before = verifier(admin, name)

    result = CliRunner(env={"NEW_PASSWORD": "second secret"}).invoke(
        veil_main,
        ["analyst", "passwd", name, "--password-env", "NEW_PASSWORD", "--config", str(admin.config)],
    )

    assert result.exit_code == 0, result.output
    assert result.stdout == f"password of analyst {name} changed\n"
    assert verifier(admin, name) not in (None, before)
    assert "secret" not in result.output
    # the server authenticates against the ledger: the new password works, the old one no longer does
    assert query(veil_server, Analyst(name, "second secret"), "SELECT 1") == ["ok"]
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        query(veil_server, Analyst(name, "first secret"), "SELECT 1")


def test_analyst_passwd_prompts_twice(admin: Admin, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("proxy.cli.main._has_terminal", lambda: True)  # CliRunner's input stands in for one
    analyst = admin.add_analyst(0.1, prefix="prompted")
    before = verifier(admin, analyst.name)
    result = admin.run("analyst", "passwd", analyst.name, input="new one\nnew one\n")
    assert result.exit_code == 0, result.output
    assert verifier(admin, analyst.name) != before
    mismatch = admin.run("analyst", "passwd", analyst.name, input="a\nb\na\na\n")
    assert "do not match" in mismatch.output


def test_without_a_terminal_the_password_options_are_named_not_a_getpass_warning(admin: Admin) -> None:
    result = admin.run("analyst", "add", "noterminal")  # CliRunner's stdin is not a terminal
    assert result.exit_code == 2
    assert "--password-stdin or --password-env" in result.output and "Warning" not in result.output


@pytest.mark.parametrize(
    ("arguments", "environ", "mention"),
    [
        (["nobody", "--password-stdin"], {}, '"nobody"'),
        (["alice", "--password-env", "UNSET_VARIABLE"], {}, "UNSET_VARIABLE"),
        (["alice", "--password-env", "EMPTY"], {"EMPTY": ""}, "EMPTY"),
        (["alice", "--password-env", "SET", "--password-stdin"], {"SET": "x"}, "not both"),
        (["alice", "--password-stdin"], {}, "must not be empty"),
    ],
    ids=["unknown analyst", "unset variable", "empty variable", "two sources", "empty password"],
)
def test_analyst_passwd_errors_are_one_line(
    admin: Admin, arguments: list[str], environ: dict[str, str], mention: str
) -> None:
    before = verifier(admin, "alice")
    result = CliRunner(env=environ).invoke(
        veil_main, ["analyst", "passwd", *arguments, "--config", str(admin.config)], input="\n"
    )
    assert_one_error_line(result, mention)
    assert verifier(admin, "alice") == before


def test_analyst_remove_asks_first_and_keeps_the_record(admin: Admin) -> None:
    analyst = admin.add_analyst(0.5, prefix="removed")
    admin.check("budget", "revoke", analyst.name, "demo", "--epsilon", "0.2")

    declined = admin.run("analyst", "remove", analyst.name, input="n\n")
    assert declined.exit_code == 1
    assert "grants and spends stay on record" in declined.stderr
    assert analyst.name in admin.check("analyst", "list").stdout

    result = admin.run("analyst", "remove", analyst.name, input="y\n")
    assert result.exit_code == 0, result.output
    assert "stay on record" in result.stdout
    assert analyst.name not in admin.check("analyst", "list").stdout
    assert analyst.name not in admin.check("budget", "show").stdout
    assert_one_error_line(admin.run("budget", "show", analyst.name), f'"{analyst.name}"', "does not exist")

    # added again under the same name, the analyst finds the same balance: spending is never forgotten
    admin.check("analyst", "add", analyst.name, "--password-stdin", input="again\n")
    assert admin.balance(analyst)["granted_epsilon"] == 0.3


def test_analyst_remove_yes_skips_the_question(admin: Admin) -> None:
    analyst = admin.add_analyst(0.5, prefix="scripted")
    result = admin.run("analyst", "remove", analyst.name, "--yes")
    assert result.exit_code == 0, result.output
    assert analyst.name not in admin.check("analyst", "list").stdout


def test_analyst_remove_of_an_unknown_analyst_asks_nothing(admin: Admin) -> None:
    assert_one_error_line(admin.run("analyst", "remove", "nobody"), '"nobody"', "does not exist")


# --- budget grant --renew, revoke, cap ---------------------------------------------------------------------


def balance_json(admin: Admin, *args: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(admin.check("budget", *args, "--json").stdout)
    return result


def test_budget_grant_renews_per_period_until_told_otherwise(admin: Admin) -> None:
    analyst = admin.add_analyst(0.5, prefix="renewing")
    monthly = balance_json(admin, "grant", analyst.name, "demo", "1", "--renew", "month")
    today = datetime.now(UTC).date()
    assert (monthly["renewal"], monthly["period_start"]) == ("month", today.replace(day=1).isoformat())
    assert monthly["granted_epsilon"] == 1.5

    topped_up = balance_json(admin, "grant", analyst.name, "demo", "0.5", "--delta", "1e-6")
    assert (topped_up["renewal"], topped_up["granted_epsilon"], topped_up["granted_delta"]) == (
        "month",
        2.0,
        1e-6,
    )

    weekly = balance_json(admin, "grant", analyst.name, "demo", "0.5", "--renew", "week")
    assert date.fromisoformat(weekly["period_start"]).weekday() == 0
    never = balance_json(admin, "grant", analyst.name, "demo", "0.5", "--renew", "never")
    assert (never["renewal"], never["period_start"]) == (None, None)


def test_budget_grant_table_shows_the_new_balance(admin: Admin) -> None:
    analyst = admin.add_analyst(0.5, prefix="granted")
    result = admin.check("budget", "grant", analyst.name, "demo", "0.25", "--renew", "day")
    header, _, row = result.stdout.splitlines()
    assert "renewal" in header and "period from" in header
    assert row.split()[:6] == [analyst.name, "demo", "0.75", "0", "0.75", "basic"]


def test_budget_revoke_takes_back_part_then_all_that_is_left(
    veil_server: RunningServer, admin: Admin
) -> None:
    analyst = admin.add_analyst(1.0, prefix="revoked")
    admin.check("budget", "grant", analyst.name, "demo", "0.01", "--delta", "1e-5")
    assert (
        query(veil_server, analyst, "SET veil.epsilon = 0.25", "SELECT COUNT(*) FROM patients") == ["ok"] * 2
    )

    partly = balance_json(admin, "revoke", analyst.name, "demo", "--epsilon", "0.5")
    assert (partly["granted_epsilon"], partly["spent_epsilon"], partly["remaining_epsilon"]) == (
        0.51,
        0.25,
        0.26,
    )
    assert partly["remaining_delta"] == 1e-5

    only_delta = balance_json(admin, "revoke", analyst.name, "demo", "--delta", "4e-6")
    assert (only_delta["remaining_epsilon"], only_delta["remaining_delta"]) == (0.26, 6e-6)

    everything = balance_json(admin, "revoke", analyst.name, "demo")
    assert (everything["granted_epsilon"], everything["remaining_epsilon"]) == (0.25, 0.0)
    assert everything["remaining_delta"] == 0.0
    assert query(veil_server, analyst, "SELECT COUNT(*) FROM patients") == ["53Z01"]

    more_than_left = balance_json(admin, "revoke", analyst.name, "demo", "--epsilon", "5")
    assert more_than_left["granted_epsilon"] == 0.25  # what was spent stays spent


@pytest.mark.parametrize(
    ("arguments", "mention"),
    [
        (["alice", "demo", "--epsilon", "-1"], "epsilon"),
        (["alice", "demo", "--delta", "1"], "delta"),
        (["nobody", "demo"], '"nobody"'),
        (["alice", "elsewhere"], '"elsewhere"'),
    ],
    ids=["negative epsilon", "delta of 1", "unknown analyst", "undeclared dataset"],
)
def test_budget_revoke_errors_are_one_line(admin: Admin, arguments: list[str], mention: str) -> None:
    before = admin.balance(ALICE)
    assert_one_error_line(admin.run("budget", "revoke", *arguments), mention)
    assert admin.balance(ALICE) == before


def test_budget_cap_sets_shows_and_removes_a_dataset_cap(private: Admin) -> None:
    edit_policy(private.config, accountant="advanced")

    (listed,) = json.loads(private.check("budget", "cap", "--json").stdout)
    spent = listed["spent_epsilon"]  # by the copied demo's analysts so far
    assert listed == {
        "dataset": "demo", "cap_epsilon": None, "cap_delta": None, "spent_epsilon": spent, "spent_delta": 0.0,
        "remaining_epsilon": None, "remaining_delta": None, "accountant": "advanced",
    }  # fmt: skip

    capped = json.loads(
        private.check("budget", "cap", "demo", "--epsilon", "20", "--delta", "1e-5", "--json").stdout
    )
    assert (capped["cap_epsilon"], capped["cap_delta"]) == (20.0, 1e-5)
    assert capped["remaining_epsilon"] == pytest.approx(20.0 - capped["spent_epsilon"])
    assert json.loads(private.check("budget", "cap", "DEMO", "--json").stdout) == [capped]
    balance = private.balance(ALICE)
    assert (balance["cap_epsilon"], balance["cap_remaining_epsilon"]) == (20.0, capped["remaining_epsilon"])
    assert private.balance(ALICE)["accountant"] == "advanced"
    table = private.check("budget", "cap").stdout.splitlines()
    assert table[0].split()[:3] == ["dataset", "cap", "ε"] and table[2].split()[:2] == ["demo", "20"]

    removed = json.loads(private.check("budget", "cap", "demo", "--remove", "--json").stdout)
    assert (removed["cap_epsilon"], removed["remaining_epsilon"]) == (None, None)
    assert private.balance(ALICE)["cap_epsilon"] is None


@pytest.mark.parametrize(
    ("arguments", "mention"),
    [
        (["demo", "--epsilon", "-2"], "epsilon"),
        (["demo", "--epsilon", "0"], "epsilon"),
        (["demo", "--epsilon", "2", "--delta", "1"], "delta"),
        (["demo", "--delta", "1e-6"], "--epsilon"),
        (["demo", "--epsilon", "2", "--remove"], "not both"),
        (["--epsilon", "2"], "DATASET"),
        (["elsewhere", "--epsilon", "2"], '"elsewhere"'),
        (["elsewhere"], '"elsewhere"'),
    ],
    ids=[
        "negative epsilon", "zero epsilon", "delta of 1", "delta alone", "remove and epsilon",
        "no dataset", "undeclared dataset", "show undeclared dataset",
    ],
)  # fmt: skip
def test_budget_cap_errors_are_one_line(private: Admin, arguments: list[str], mention: str) -> None:
    assert_one_error_line(private.run("budget", "cap", *arguments), mention)
    assert json.loads(private.check("budget", "cap", "--json").stdout)[0]["cap_epsilon"] is None


def test_budget_show_uses_each_datasets_accountant(private: Admin) -> None:
    edit_policy(private.config, accountant="zcdp")
    (balance,) = [
        b for b in json.loads(private.check("budget", "show", "--json").stdout) if b["analyst"] == "alice"
    ]
    assert balance["accountant"] == "zcdp"
    assert set(balance) >= {
        "granted_epsilon", "spent_epsilon", "remaining_epsilon", "granted_delta", "spent_delta",
        "remaining_delta", "accountant", "renewal", "period_start", "cap_epsilon", "cap_delta",
    }  # fmt: skip


def test_budget_history_table_and_dataset_filter(veil_server: RunningServer, admin: Admin) -> None:
    analyst = admin.add_analyst(1.0, prefix="historic")
    assert query(veil_server, analyst, "SELECT COUNT(*) FROM visits") == ["ok"]
    header, _, row = admin.check("budget", "history", analyst.name).stdout.splitlines()
    assert header.split() == ["id", "dataset", "ε", "state", "created_at", "statement"]
    assert row.split()[1:3] == ["demo", "0.1"] and row.endswith("SELECT COUNT(*) FROM visits")
    assert (
        json.loads(admin.check("budget", "history", analyst.name, "--dataset", "other", "--json").stdout)
        == []
    )


# --- policy validate and show ------------------------------------------------------------------------------


def test_policy_validate_passes_on_the_demo(demo: Demo) -> None:
    result = invoke("policy", "validate", "--config", str(demo.config))
    assert result.exit_code == 0, result.output
    header, _, dataset, ledger = result.stdout.splitlines()
    assert header.split() == ["check", "status", "detail"]
    assert dataset.split()[:4] == ["dataset", "demo", "ok", "duckdb"]
    assert "2 tables" in dataset
    assert ledger.split()[:2] == ["ledger", "ok"] and "running totals consistent" in ledger


def test_policy_validate_reports_every_problem_then_fails(tmp_path: Path, demo: Demo) -> None:
    copy = copy_demo(demo, tmp_path / "broken")
    document = tomllib.loads(copy.config.read_text())
    document["ledger"] = {"path": "missing.sqlite"}
    visits = document["datasets"]["demo"]["tables"]["visits"]
    visits["columns"]["colour"] = {"type": "text"}
    document["datasets"]["demo"]["tables"]["surgeries"] = visits
    document["datasets"]["gone"] = {"path": "gone.duckdb"}
    copy.config.write_text(tomli_w.dumps(document))

    result = invoke("policy", "validate", "--config", str(copy.config))

    assert result.exit_code == 1
    lines = result.stdout.splitlines()[2:]
    assert [line.split("  ")[0] for line in lines] == ["dataset demo", "dataset gone", "ledger"]
    assert all("  PROBLEM  " in line for line in lines)
    assert "tables not found: surgeries" in lines[0] and "columns not found: visits.colour" in lines[0]
    assert "gone.duckdb does not exist" in lines[1]
    assert "missing.sqlite" in lines[2]
    error, hint = result.stderr.splitlines()
    assert error == f"Error: {copy.config}: 3 of 3 checks failed"
    assert hint.startswith("hint: dataset demo: ")

    checks = json.loads(invoke("policy", "validate", "--config", str(copy.config), "--json").stdout)
    assert [(c["subject"], c["ok"]) for c in checks] == [
        ("dataset demo", False),
        ("dataset gone", False),
        ("ledger", False),
    ]


def test_policy_validate_checks_a_spark_datasets_sources_without_starting_spark(
    tmp_path: Path, demo: Demo
) -> None:
    copy = copy_demo(demo, tmp_path / "lake")
    document = tomllib.loads(copy.config.read_text())
    dataset = document["datasets"]["demo"]
    (
        dataset.pop("path"),
        dataset.update(backend="spark", sources={"patients": "p.parquet", "visits": "visits/"}),
    )
    copy.config.write_text(tomli_w.dumps(document))
    (copy.directory / "p.parquet").write_bytes(b"")

    result = invoke("policy", "validate", "--config", str(copy.config))
    assert result.exit_code == 1
    assert "spark: sources not found: visits (" in result.stdout.splitlines()[2]
    (copy.directory / "visits").mkdir()
    result = invoke("policy", "validate", "--config", str(copy.config))
    assert result.exit_code == 0, result.output
    assert "spark local[*]: 2 local sources present" in result.stdout.splitlines()[2]
    shown = json.loads(invoke("policy", "show", "--config", str(copy.config), "--json").stdout)
    assert shown["datasets"]["demo"]["spark_master"] == "local[*]"
    assert shown["datasets"]["demo"]["sources"]["visits"] == str((copy.directory / "visits").resolve())


def test_policy_validate_of_an_invalid_file_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "veil.toml"
    config.write_text('[datasets.demo]\npath = "demo.duckdb"\naccountant = "renyi"\n')
    assert_one_error_line(invoke("policy", "validate", "--config", str(config)), "datasets.demo.accountant")


def test_policy_show_prints_the_effective_policy(demo: Demo) -> None:
    policy = json.loads(invoke("policy", "show", "--config", str(demo.config), "--json").stdout)
    assert policy["ledger"] == {
        "store": "sqlite", "path": str(demo.ledger), "dsn": None, "dsn_env": None, "schema": None
    }  # fmt: skip
    dataset = policy["datasets"]["demo"]
    assert (dataset["backend"], dataset["accountant"], dataset["answer_cache"]) == ("duckdb", "basic", True)
    visits = dataset["tables"]["visits"]
    assert (visits["privacy_unit"], visits["max_contributions"]) == ("patient_id", 10)
    assert visits["columns"]["cost"] == {
        "type": "real",
        "public": False,
        "lower": 0,
        "upper": 5000,
        "values": None,
    }
    assert visits["columns"]["region"]["values"][:2] == ["capital", "north"]

    text = invoke("policy", "show", "--config", str(demo.config)).stdout
    assert f"ledger  SQLite file {demo.ledger}" in text
    assert "accountant basic; answer cache on" in text
    assert any(line.split()[:2] == ["visits", "cost"] and "0 … 5000" in line for line in text.splitlines())


def test_policy_show_never_prints_a_secret(tmp_path: Path) -> None:
    config = tmp_path / "veil.toml"
    document = {
        "ledger": {"dsn_env": "LEDGER_DSN", "schema": "budgets"},
        "datasets": {
            "clinic": {
                "backend": "postgres",
                "dsn_env": "CLINIC_DSN",
                "accountant": "zcdp",
                "answer_cache": False,
            },
            "lab": {"backend": "postgres", "dsn": "host=db dbname=lab user=reader"},
        },
    }
    config.write_text(tomli_w.dumps(document))
    environ = {"LEDGER_DSN": "postgresql://v:hunter2@db/veil", "CLINIC_DSN": "postgresql://r:hunter2@db/c"}
    for extra in ([], ["--json"]):
        result = CliRunner(env=environ).invoke(veil_main, ["policy", "show", "--config", str(config), *extra])
        assert result.exit_code == 0, result.output
        assert "hunter2" not in result.output
        assert "LEDGER_DSN" in result.output and "CLINIC_DSN" in result.output
    policy = json.loads(result.stdout)
    assert policy["ledger"]["schema"] == "budgets"
    assert (policy["datasets"]["clinic"]["accountant"], policy["datasets"]["clinic"]["answer_cache"]) == (
        "zcdp",
        False,
    )
    assert policy["datasets"]["lab"]["dsn"] == "host=db dbname=lab user=reader"


# --- audit -------------------------------------------------------------------------------------------------


def test_audit_lists_the_statements_of_an_analyst(veil_server: RunningServer, admin: Admin) -> None:
    analyst = admin.add_analyst(1.0, prefix="audited")
    statements = ("SELECT COUNT(*) FROM patients", "SELECT * FROM visits")
    assert query(veil_server, analyst, *statements) == ["ok", "42501"]

    entries = json.loads(admin.check("audit", "--analyst", analyst.name, "--json").stdout)

    assert [(e["statement"], e["decision"], e["epsilon"]) for e in entries] == [
        ("SELECT COUNT(*) FROM patients", "answered", 0.1),
        ("SELECT * FROM visits", "refused", 0.0),
    ]
    assert entries[1]["sqlstate"] == "42501"
    assert all(e["analyst"] == analyst.name and e["dataset"] == "demo" for e in entries)


AUDIT_TIMES = [datetime(2025, 5, day, 12, 30, tzinfo=UTC) for day in (1, 2, 3)]


@pytest.fixture
def audited(tmp_path: Path) -> Admin:
    """A policy without datasets whose new ledger's audit log holds three entries, a day apart."""
    config = tmp_path / "veil.toml"
    config.write_text('[ledger]\npath = "ledger.sqlite"\n')
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    try:
        ledger.audit_log.append(
            *(
                AuditEntry(
                    at,
                    "alice" if i < 2 else "bob",
                    "127.0.0.1:5000",
                    "demo",
                    f"SELECT {i}",
                    Decision.ANSWERED,
                    0.1 * i,
                )
                for i, at in enumerate(AUDIT_TIMES)
            )
        )
    finally:
        ledger.close()
    return Admin(config)


def test_audit_filters_by_analyst_time_and_count(audited: Admin) -> None:
    def statements(*args: str) -> list[str]:
        return [e["statement"] for e in json.loads(audited.check("audit", "--json", *args).stdout)]

    assert statements() == ["SELECT 0", "SELECT 1", "SELECT 2"]
    assert statements("--analyst", "alice") == ["SELECT 0", "SELECT 1"]
    assert statements("--since", "2025-05-02") == ["SELECT 1", "SELECT 2"]
    assert statements("--since", "2025-05-02T12:30:00") == ["SELECT 1", "SELECT 2"]
    assert statements("--since", "2025-05-02T14:30:01+02:00") == ["SELECT 2"]
    assert statements("--limit", "2") == ["SELECT 1", "SELECT 2"]  # the most recent, oldest first
    assert statements("--analyst", "alice", "--since", "2025-05-02", "--limit", "5") == ["SELECT 1"]
    assert statements("--analyst", "nobody") == []


def test_audit_exports_csv_and_a_table(audited: Admin) -> None:
    rows = list(csv.DictReader(io.StringIO(audited.check("audit", "--csv").stdout)))
    assert [row["statement"] for row in rows] == ["SELECT 0", "SELECT 1", "SELECT 2"]
    assert rows[0]["at"] == AUDIT_TIMES[0].isoformat()
    assert (rows[2]["analyst"], rows[2]["decision"], float(rows[2]["epsilon"])) == ("bob", "answered", 0.2)
    assert list(rows[0]) == [
        "id", "at", "analyst", "client", "dataset", "decision", "outcome", "epsilon", "delta", "accountant", "mechanisms",
        "sqlstate", "statement", "error",
    ]  # fmt: skip

    header, _, first, *_ = audited.check("audit").stdout.splitlines()
    assert header.split() == ["id", "at", "analyst", "client", "dataset", "decision", "ε", "statement"]
    assert "2025-05-01 12:30:00  alice" in first


@pytest.mark.parametrize(
    ("arguments", "mention"),
    [
        (["--json", "--csv"], "not both"),
        (["--since", "last tuesday"], "--since"),
        (["--limit", "0"], "--limit"),
    ],
    ids=["json and csv", "bad since", "zero limit"],
)
def test_audit_errors_are_one_line(admin: Admin, arguments: list[str], mention: str) -> None:
    assert_one_error_line(admin.run("audit", *arguments), mention)


# --- a PostgreSQL ledger -----------------------------------------------------------------------------------


def test_a_postgres_ledger_from_dsn_env(tmp_path: Path, demo: Demo, postgres_dsn: str) -> None:
    copy = copy_demo(demo, tmp_path / "shared")
    with schema_in(postgres_dsn) as schema:
        edit_ledger = tomllib.loads(copy.config.read_text())
        edit_ledger["ledger"] = {"dsn_env": "VEIL_LEDGER_DSN", "schema": f"{schema}_ledger"}
        copy.config.write_text(tomli_w.dumps(edit_ledger))
        runner = CliRunner(env={"VEIL_LEDGER_DSN": postgres_dsn})

        def run(*args: str, input: str | None = None) -> Result:
            return runner.invoke(veil_main, [*args, "--config", str(copy.config)], input=input)

        try:
            assert run("analyst", "add", "pat", "--password-stdin", input="pw\n").exit_code == 0
            assert run("budget", "grant", "pat", "demo", "2", "--renew", "week").exit_code == 0
            (balance,) = json.loads(run("budget", "show", "pat", "--json").stdout)
            assert (balance["granted_epsilon"], balance["renewal"]) == (2.0, "week")
            validated = run("policy", "validate")
            assert validated.exit_code == 0, validated.output
            assert (
                f"PostgreSQL the connection string in $VEIL_LEDGER_DSN, schema {schema}_ledger"
                in validated.stdout
            )

            unset = CliRunner(env={"VEIL_LEDGER_DSN": ""}).invoke(
                veil_main, ["budget", "show", "--config", str(copy.config)]
            )
            assert_one_error_line(unset, "ledger.dsn_env", "VEIL_LEDGER_DSN")
        finally:
            with psycopg.connect(postgres_dsn, autocommit=True) as connection:
                connection.execute(f'DROP SCHEMA IF EXISTS "{schema}_ledger" CASCADE')


def test_an_unreachable_ledger_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "veil.toml"
    config.write_text('[ledger]\ndsn = "host=127.0.0.1 port=9 dbname=veil user=veil connect_timeout=2"\n')
    line = assert_one_error_line(invoke("budget", "show", "--config", str(config)), "ledger")
    assert "127.0.0.1" in line
    result = invoke("policy", "validate", "--config", str(config))
    assert result.exit_code == 1 and "ledger  PROBLEM" in result.stdout


def test_a_ledger_that_does_not_exist_yet_says_who_creates_it(tmp_path: Path) -> None:
    config = tmp_path / "veil.toml"
    config.write_text("")
    result = invoke("analyst", "list", "--config", str(config))
    assert_one_error_line(result, f"there is no ledger at {tmp_path / 'ledger.sqlite'} yet")
    assert "hint: the first `veil analyst add NAME` creates it" in result.stderr
    assert not (tmp_path / "ledger.sqlite").exists()


def test_a_ledger_dsn_env_must_name_a_database(tmp_path: Path) -> None:
    config = tmp_path / "veil.toml"
    config.write_text('[ledger]\ndsn_env = "LEDGER_DSN"\n')
    result = CliRunner(env={"LEDGER_DSN": "host=db user=veil password=hunter2"}).invoke(
        veil_main, ["budget", "show", "--config", str(config)]
    )
    assert_one_error_line(result, "ledger.dsn_env", "LEDGER_DSN", "does not name a database")
    assert "hunter2" not in result.output


def test_policy_validate_checks_a_postgres_dataset(tmp_path: Path, postgres_dsn: str) -> None:
    config = tmp_path / "veil.toml"
    with schema_in(postgres_dsn) as schema:
        with psycopg.connect(postgres_dsn, autocommit=True) as connection:
            connection.execute(f'CREATE TABLE "{schema}".people (person_id integer, age integer)')
        columns = {"person_id": {"type": "integer"}, "age": {"type": "integer", "lower": 0, "upper": 100}}
        table = {"privacy_unit": "person_id", "max_contributions": 1, "columns": columns}
        document = {
            "datasets": {
                "here": {
                    "backend": "postgres",
                    "dsn_env": "PG",
                    "schema": schema,
                    "tables": {"people": table},
                },
                "nowhere": {"backend": "postgres", "dsn_env": "PG", "schema": f"{schema}_missing"},
                "unset": {"backend": "postgres", "dsn_env": "UNSET_PG"},
            }
        }
        config.write_text(tomli_w.dumps(document))
        result = CliRunner(env={"PG": postgres_dsn}).invoke(
            veil_main, ["policy", "validate", "--config", str(config), "--json"]
        )
    assert result.exit_code == 1
    checks = {c["subject"]: c for c in json.loads(result.stdout)}
    assert checks["dataset here"]["ok"], checks["dataset here"]
    assert "1 table, 2 columns" in checks["dataset here"]["detail"]
    assert f'schema "{schema}_missing" does not exist' in checks["dataset nowhere"]["detail"]
    assert "UNSET_PG is not set" in checks["dataset unset"]["detail"]
    assert not checks["ledger"]["ok"]  # no ledger.sqlite next to this policy


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
    assert "as demo.scores: 5 rows, 3 columns, public: city" in result.stdout
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


def test_import_adds_the_section_its_dry_run_shows_and_keeps_the_rest(tmp_path: Path, demo: Demo) -> None:
    copy = copy_demo(demo, tmp_path / "copy")
    original = "# reviewed by the DPO\n" + copy.config.read_text()
    copy.config.write_text(original)
    csv = tmp_path / "scores.csv"
    csv.write_text(SCORES_CSV)
    planned = invoke(
        "import", str(csv), "--config", str(copy.config), "--dataset", "demo", "--table", "scores",
        "--privacy-unit", "person_id", "--max-contributions", "2", "--public", "city=oslo,bergen",
        "--bounds", "score=0:10", "--dry-run", "--json",
    )  # fmt: skip
    assert planned.exit_code == 0, planned.output
    assert import_scores(copy.config, csv).exit_code == 0
    # the demo's policy ends with its dataset's tables: the new one comes last
    assert (
        copy.config.read_text() == original.rstrip("\n") + "\n\n" + json.loads(planned.stdout)["policy_toml"]
    )


def test_import_dry_run_prints_types_and_the_section_and_changes_nothing(tmp_path: Path, demo: Demo) -> None:
    copy = copy_demo(demo, tmp_path / "copy")
    csv = tmp_path / "scores.csv"
    csv.write_text(SCORES_CSV)
    before = copy.config.read_bytes()
    result = invoke(
        "import", str(csv), "--config", str(copy.config), "--dataset", "demo", "--table", "scores",
        "--privacy-unit", "person_id", "--max-contributions", "2", "--public", "city=oslo,bergen", "--dry-run",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert copy.config.read_bytes() == before
    lines = result.stdout.splitlines()
    assert lines[0] == f"dry run: nothing was changed; {csv} (CSV, delimiter ',', utf-8) has 5 rows"
    assert lines[2].split() == ["column", "file", "type", "type", "stored", "as", "(duckdb)", "policy"]
    assert lines[4].split() == ["person_id", "BIGINT", "integer", "BIGINT", "privacy", "unit"]
    assert lines[5].split() == ["city", "VARCHAR", "text", "VARCHAR", "public,", "2", "values"]
    assert (
        '\n[datasets.demo.tables.scores]\nprivacy_unit = "person_id"\nmax_contributions = 2\n'
        in result.stdout
    )
    assert 'city = { type = "text", public = true, values = ["oslo", "bergen"] }' in result.stdout


def test_import_dry_run_json(tmp_path: Path, demo: Demo) -> None:
    csv = tmp_path / "zones.csv"
    csv.write_text("code,zone\nnorth,N\nsouth,S\n")
    result = invoke(
        "import", str(csv), "--config", str(demo.config), "--dataset", "demo", "--table", "zones",
        "--public-table", "--key", "code", "--dry-run", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert (plan["dry_run"], plan["rows"], plan["table"], plan["public_table"]) == (True, 2, "zones", True)
    assert plan["columns"][0] == {
        "name": "code",
        "file_type": "VARCHAR",
        "type": "text",
        "stored_as": "VARCHAR",
    }
    assert plan["policy"] == {
        "public": True,
        "key": "code",
        "columns": {"code": {"type": "text"}, "zone": {"type": "text"}},
    }
    assert tomllib.loads(plan["policy_toml"])["datasets"]["demo"]["tables"]["zones"] == plan["policy"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param([], "--privacy-unit is required", id="no privacy unit"),
        pytest.param(
            ["--public-table", "--privacy-unit", "row"], "--public-table takes no --privacy-unit", id="both"
        ),
        pytest.param(
            ["--privacy-unit", "row", "--key", "code"], "--key is only used with --public-table", id="key"
        ),
    ],
)
def test_import_option_mistakes_are_usage_errors(
    tmp_path: Path, demo: Demo, options: list[str], message: str
) -> None:
    csv = tmp_path / "zones.csv"
    csv.write_text("code,zone\nnorth,N\n")
    result = invoke(
        "import", str(csv), "--config", str(demo.config), "--dataset", "demo", "--table", "t", *options
    )
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Usage: veil import" in result.stderr


def test_import_of_a_csv_with_an_unclosed_quote_fails(tmp_path: Path, demo: Demo) -> None:
    copy = copy_demo(demo, tmp_path / "copy")
    csv = tmp_path / "scores.csv"
    csv.write_text('person_id,city,score\n1,"oslo,3\n2,bergen,7\n')
    before = copy.config.read_bytes()
    result = import_scores(copy.config, csv)
    assert_one_error_line(result, "scores.csv: line 2 has a quote that never closes")
    assert copy.config.read_bytes() == before


def test_import_a_lookup_table_then_join_it(
    tmp_path: Path, demo: Demo, veil_server: RunningServer, serve: Callable[[Path], RunningServer]
) -> None:
    copy = copy_demo(demo, tmp_path / "copy")
    csv = tmp_path / "zones.csv"
    csv.write_text("code,zone\ncapital,inland\nnorth,inland\nsouth,inland\neast,inland\nwest,coastal\n"
                   "coast,coastal\nislands,coastal\n")  # fmt: skip
    result = invoke(
        "import", str(csv), "--config", str(copy.config), "--dataset", "demo", "--table", "zones",
        "--public-table", "--key", "code",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "as demo.zones: 7 rows, 2 columns, a public lookup table" in result.stdout
    again = invoke(
        "import", str(csv), "--config", str(copy.config), "--dataset", "demo", "--table", "zones2",
        "--public-table", "--key", "code", "--json",
    )  # fmt: skip
    assert again.exit_code == 0, again.output
    assert {k: json.loads(again.stdout)[k] for k in ("dry_run", "rows", "table")} == {
        "dry_run": False,
        "rows": 7,
        "table": "zones2",
    }
    newcomer = Admin(copy.config).add_analyst(1.0, prefix="importer")
    server = serve(copy.config)
    with psycopg.connect(server.conninfo(newcomer), prepare_threshold=None, autocommit=True) as connection:
        assert connection.execute(
            "SELECT zone, COUNT(*) FROM zones GROUP BY zone ORDER BY zone"
        ).fetchall() == [
            ("coastal", 3),
            ("inland", 4),
        ]  # a public table: exact, free
        connection.execute("SET veil.epsilon = 1")
        rows = connection.execute(
            "SELECT z.zone, COUNT(*) FROM patients p JOIN zones z ON p.region = z.code GROUP BY z.zone"
        ).fetchall()
        assert sorted(zone for zone, _ in rows) == ["coastal", "inland"]


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
