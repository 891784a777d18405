"""Reservations a crash left behind (docs/admin.md): listed, shown apart in ``veil budget show``, and
resolved by an administrator — released or kept — with the decision in the audit log. The reservations
here are made as a crashed server leaves them: reserved, never committed nor cancelled — directly in
the ledger, and by killing a real server (SIGKILL) while its statement runs."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from tests.conftest import DATASET, Admin, start_server, wait_until_ready
from tests.integration.slow_dataset import SLOW_QUERY, build_slow_dataset, connect


def orphan(config: Path, analyst: str, epsilon: float) -> int:
    ledger = Ledger.open(config.with_name("ledger.sqlite"))
    try:
        return ledger.reserve(analyst, DATASET, PrivacyLoss(epsilon, 0), statement=f"SELECT {epsilon}")
    finally:
        ledger.close()


@pytest.fixture
def admin(tmp_path: Path) -> Admin:
    return Admin(build_slow_dataset(tmp_path / "slow"))


@pytest.mark.parametrize(
    "decision, state, spent", [("--release", "cancelled", 0.0), ("--keep", "committed", 0.25)]
)
def test_an_orphaned_reservation_is_listed_shown_and_resolved(
    admin: Admin, decision: str, state: str, spent: float
) -> None:
    analyst = admin.add_analyst(1.0, prefix="crashed")
    reservation = orphan(admin.config, analyst.name, 0.25)
    (listed,) = json.loads(admin.check("budget", "reservations", "--json").stdout)
    assert (listed["id"], listed["analyst"], listed["epsilon"]) == (reservation, analyst.name, 0.25)
    (shown,) = json.loads(admin.check("budget", "show", analyst.name, "--json").stdout)
    assert (shown["spent_epsilon"], shown["reserved_epsilon"]) == (0.25, 0.25)  # fail-closed until resolved
    resolved = json.loads(admin.check("budget", "resolve", str(reservation), decision, "--json").stdout)
    assert resolved["state"] == state
    assert json.loads(admin.check("budget", "reservations", "--json").stdout) == []
    assert admin.balance(analyst)["spent_epsilon"] == spent
    (entry,) = json.loads(admin.check("audit", "--analyst", analyst.name, "--json").stdout)
    outcome = "released after a crash" if decision == "--release" else "kept after a crash"
    assert (entry["client"], entry["outcome"], entry["epsilon"]) == ("veil budget resolve", outcome, spent)


def test_resolving_needs_a_decision_and_an_open_reservation(admin: Admin) -> None:
    analyst = admin.add_analyst(1.0, prefix="undecided")
    reservation = orphan(admin.config, analyst.name, 0.1)
    assert admin.run("budget", "resolve", str(reservation)).exit_code != 0
    admin.check("budget", "resolve", str(reservation), "--keep")
    again = admin.run("budget", "resolve", str(reservation), "--release")
    assert again.exit_code != 0 and "Traceback" not in again.output
    assert admin.balance(analyst)["spent_epsilon"] == 0.1


def test_a_server_killed_mid_statement_leaves_a_reservation_to_resolve(tmp_path: Path) -> None:
    """kill -9 while an engine query runs: the reservation stays, counted as spent (fail-closed), is
    listed with its statement, and an administrator releases it."""
    config = build_slow_dataset(tmp_path / "slow")
    admin = Admin(config)
    analyst = admin.add_analyst(1.0, prefix="killed")
    process = start_server(config, tmp_path / "serve.log")
    try:
        server = wait_until_ready(process, tmp_path / "serve.log")
        connection = connect(server, analyst)
        running = threading.Thread(target=lambda: _swallow(connection, SLOW_QUERY), daemon=True)
        running.start()
        listed = _wait_for_reservation(admin)
        process.kill()  # SIGKILL: nothing in the server runs after this
        process.wait(timeout=10)
        running.join(10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert listed["analyst"] == analyst.name and "medium" not in listed["statement"]
    assert "events" in listed["statement"]
    assert json.loads(admin.check("budget", "reservations", "--json").stdout) == [listed]
    (shown,) = json.loads(admin.check("budget", "show", analyst.name, "--json").stdout)
    assert shown["reserved_epsilon"] == shown["spent_epsilon"] == listed["epsilon"] > 0
    admin.check("budget", "resolve", str(listed["id"]), "--release")
    assert admin.balance(analyst)["spent_epsilon"] == 0


def _swallow(connection: psycopg.Connection[Any], sql: str) -> None:
    with contextlib.suppress(psycopg.Error):
        connection.execute(sql)


def _wait_for_reservation(admin: Admin) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        reservations = json.loads(admin.check("budget", "reservations", "--json").stdout)
        if reservations:
            (reservation,) = reservations
            return dict(reservation)
        time.sleep(0.2)
    pytest.fail("the statement never reserved its budget")
