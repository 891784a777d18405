"""An administrator's first ``veil`` command on a ledger made by an older Veil upgrades it and says so;
``veil budget show`` and ``history`` then print the numbers the old ledger held."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from proxy.cli.main import main as veil_main
from tests.conftest import build_demo
from tests.unit.budget.ledger_v4 import SPENDS, make_version_4_ledger


def test_the_first_command_upgrades_a_version_4_ledger_and_says_so(tmp_path: Path) -> None:
    demo = build_demo(tmp_path / "demo", people=100)
    demo.ledger.unlink()
    make_version_4_ledger(str(demo.ledger), None)
    runner = CliRunner()
    shown = runner.invoke(veil_main, ["budget", "show", "alice", "--json", "--config", str(demo.config)])
    assert shown.exit_code == 0, shown.output
    assert f"upgraded the ledger at {demo.ledger} from schema version 4 to 5" in shown.stderr
    (row,) = [row for row in json.loads(shown.stdout) if row["dataset"] == "demo"]
    assert (row["granted_epsilon"], row["spent_epsilon"], row["remaining_epsilon"]) == (1.2, 0.57, 0.63)
    assert (row["granted_delta"], row["spent_delta"], row["reserved_epsilon"]) == (1.0000001e-05, 1e-12, 0.25)
    history = runner.invoke(veil_main, ["budget", "history", "alice", "--json", "--config", str(demo.config)])
    assert history.exit_code == 0 and "upgraded" not in history.stderr  # once only
    spends = json.loads(history.stdout)
    alice = [spend for spend in SPENDS if spend[1] == "alice" and spend[2] == "demo"]
    assert [(s["id"], s["epsilon"], s["delta"], s["state"]) for s in spends if s["dataset"] == "demo"] == [
        (spend[0], spend[4], spend[5], spend[9]) for spend in alice
    ]
