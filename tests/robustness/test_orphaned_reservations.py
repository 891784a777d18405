"""Reservations a crash left behind (docs/admin.md): listed, shown apart in ``veil budget show``, and
resolved by an administrator — released or kept — with the decision in the audit log. The reservation
here is made as a crashed server leaves it: reserved, never committed nor cancelled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from tests.conftest import DATASET, Admin
from tests.integration.slow_dataset import build_slow_dataset


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
