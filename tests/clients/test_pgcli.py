"""pgcli against ``veil serve``, on both engines: its completion refresh (the catalog queries it sends
when it connects: schemata, tables, columns, views, functions, types, databases, foreign keys) fills its
completer with the demo's tables and columns at no cost, and ``pgcli -c`` prints a DP aggregate and a
refusal an analyst can read.

The refresh runs pgcli's own refreshers (``CompletionRefresher.refreshers``) in the test's thread rather
than pgcli's background one, so a failing catalog query fails the test instead of a thread.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATASET, Admin, Analyst, RunningServer, missing

pytestmark = pytest.mark.client

EPSILON = 1.0
DEMO_TABLES = {"patients", "visits", "zones"}
CATALOG_FALLBACK = "catalog query answered with no rows"  # the server's warning for an unanswered one


@pytest.fixture(scope="module")
def pgcli() -> str:
    executable = shutil.which("pgcli", path=str(Path(sys.executable).parent)) or shutil.which("pgcli")
    if importlib.util.find_spec("pgcli") is None or executable is None:
        missing("pgcli is not installed (pip install -e '.[dev]')")
    return str(executable)


def executor(server: RunningServer, analyst: Analyst) -> Any:
    from pgcli.pgexecute import PGExecute

    return PGExecute(
        database=DATASET,
        user=analyst.name,
        password=analyst.password,
        host=server.host,
        port=server.port,
        dsn="",
    )


def refreshed_completer(server: RunningServer, analyst: Analyst) -> Any:
    """What pgcli's background refresh builds after connecting: every refresher, in its order."""
    from pgcli.completion_refresher import CompletionRefresher
    from pgcli.pgcompleter import PGCompleter
    from pgspecial.main import PGSpecial

    completer = PGCompleter(smart_completion=True, pgspecial=PGSpecial(), settings={})
    pgexecute = executor(server, analyst)
    try:
        for refresh in CompletionRefresher.refreshers.values():
            refresh(completer, pgexecute)
    finally:
        pgexecute.conn.close()
    return completer


def completions(completer: Any, before: str, after: str = "") -> set[str]:
    """What pgcli offers with the cursor between ``before`` and ``after``."""
    from prompt_toolkit.document import Document

    document = Document(before + after, cursor_position=len(before))
    return {completion.text for completion in completer.get_completions(document, None)}


def test_completion_refresh_lists_the_demo_tables_and_columns_for_free(
    pgcli: str, veil_server: RunningServer, admin: Admin
) -> None:
    analyst = admin.add_analyst(1.0, prefix="pgcli")
    log_before = veil_server.output()

    completer = refreshed_completer(veil_server, analyst)

    assert completions(completer, "SELECT * FROM ") >= DEMO_TABLES
    columns = completions(completer, "SELECT ", " FROM visits")
    assert columns >= {"patient_id", "visit_date", "diagnosis", "cost"}
    assert "public" in completions(completer, "SELECT * FROM ")  # the schema, from schemata()
    added_log = veil_server.output()[len(log_before) :]
    assert CATALOG_FALLBACK not in added_log, added_log  # every refresh query was answered, none emptied
    assert admin.balance(analyst)["spent_epsilon"] == 0


def test_pgexecute_introspection_calls_answer_as_postgres_would(
    pgcli: str, veil_server: RunningServer, admin: Admin
) -> None:
    pgexecute = executor(veil_server, admin.add_analyst(1.0, prefix="pgexec"))
    try:
        assert pgexecute.search_path() == ["pg_catalog", "public"]
        assert "public" in list(pgexecute.schemata())
        assert {("public", table) for table in DEMO_TABLES} <= set(pgexecute.tables())
        columns = {(table, column): kind for _, table, column, kind, *_ in pgexecute.table_columns()}
        assert columns[("visits", "cost")] == "double precision"
        assert columns[("patients", "age")] == "bigint"
        assert list(pgexecute.databases()) == [DATASET]
        # Veil has no views, functions, user types or foreign keys of its own
        assert [view for view in pgexecute.views() if view[0] == "public"] == []
        assert list(pgexecute.functions()) == []
        assert list(pgexecute.datatypes()) == []
        assert list(pgexecute.foreignkeys()) == []
    finally:
        pgexecute.conn.close()


def test_pgcli_command_prints_a_dp_count_and_a_readable_refusal(
    pgcli: str, veil_server: RunningServer, admin: Admin, tmp_path: Path
) -> None:
    analyst = admin.add_analyst(5.0, prefix="pgclicmd")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PG")},
        "PGPASSWORD": analyst.password,
        "HOME": str(tmp_path),  # pgcli writes its config and history there
    }
    commands = [f"SET veil.epsilon = {EPSILON}", "SELECT COUNT(*) AS n FROM patients", "SELECT * FROM visits"]
    result = subprocess.run(
        [pgcli, "-h", veil_server.host, "-p", str(veil_server.port), "-U", analyst.name, DATASET]
        + ["--less-chatty", "--no-password"]
        + [argument for command in commands for argument in ("-c", command)],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Traceback" not in output
    assert "| n " in output and "differential privacy: this answer spent ε=1" in output
    assert "SELECT * would reveal private rows" in output
    assert "HINT:  queries on private tables must aggregate" in output
    assert admin.balance(analyst)["spent_epsilon"] == pytest.approx(EPSILON)
