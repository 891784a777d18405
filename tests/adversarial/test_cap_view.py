"""The dataset cap does not show other analysts' single spends (docs/privacy.md, "Side channels" 5):
neither in ``veil.budget`` nor through refusals probed with different ε; ``cap_visibility = "exact"``
opts in, and administrators always see the exact figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from budget.errors import BudgetExhaustedError
from budget.loss import PrivacyLoss
from tests.adversarial.probe_dataset import BACKENDS, Probe, probe_service

CAP = 2.0


def cap_columns(probe: Probe) -> tuple[Any, ...]:
    outcome = probe.run("SELECT cap_epsilon, cap_remaining_epsilon, cap_binds FROM veil.budget")
    assert outcome.table is not None
    (row,) = outcome.table.rows
    return row


def spend(probe: Probe, analyst: str, epsilon: float) -> None:
    reservation = probe.ledger.reserve(
        analyst, "probe", PrivacyLoss(epsilon, 0), statement="x", cap_step=probe.service.dataset.cap_step
    )
    probe.ledger.commit(reservation)


@pytest.fixture(params=BACKENDS)
def probe(tmp_path: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    with probe_service(request.param, tmp_path, request) as probe:
        probe.ledger.set_cap("probe", PrivacyLoss(CAP, 1e-4))
        yield probe


def test_another_analysts_single_spend_does_not_move_the_cap_view(probe: Probe) -> None:
    probe.run("SELECT COUNT(*) FROM people", analyst="bob", veil_epsilon="0.01")  # an answer from the engine
    before = cap_columns(probe)
    probe.run("SELECT COUNT(*) FROM people WHERE age > 30", analyst="bob", veil_epsilon="0.01")
    assert probe.ledger.cap("probe").spent_epsilon == pytest.approx(0.02)
    assert cap_columns(probe) == before == (CAP, pytest.approx(1.9), True)


def test_the_view_moves_in_steps_of_five_percent(probe: Probe) -> None:
    spend(probe, "bob", 0.11)  # past the first step of 0.1
    assert cap_columns(probe)[1] == pytest.approx(1.8)


def test_refusals_at_the_cap_do_not_locate_a_single_spend(probe: Probe) -> None:
    """Probing with ε in small steps finds the same boundary whether bob spent 0.01 or 0.03."""

    def largest_accepted() -> float:
        accepted = 0.0
        for asked in (round(1.80 + 0.01 * i, 2) for i in range(21)):
            try:
                probe.ledger.reserve(
                    "alice", "probe", PrivacyLoss(asked, 0), statement="probe", cap_step=0.05
                )
            except BudgetExhaustedError:
                continue
            accepted = asked
            probe.ledger.cancel(probe.ledger.history("alice", "probe")[-1].id)
        return accepted

    spend(probe, "bob", 0.01)
    first = largest_accepted()
    spend(probe, "bob", 0.02)
    assert largest_accepted() == first == pytest.approx(1.9)


def test_the_cap_is_never_exceeded(probe: Probe) -> None:
    spend(probe, "bob", 1.95)
    with pytest.raises(BudgetExhaustedError, match="capped"):
        spend(probe, "alice", 0.05)  # 1.95 rounds up to 2.0: nothing is left in view


def test_exact_visibility_is_an_opt_in(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    with probe_service("duckdb", tmp_path, request, cap_visibility="exact") as probe:
        probe.ledger.set_cap("probe", PrivacyLoss(CAP, 1e-4))
        spend(probe, "bob", 0.01)
        assert cap_columns(probe) == (CAP, pytest.approx(1.99), True)
        assert probe.ledger.cap("probe").spent_epsilon == pytest.approx(0.01)  # what the admin CLI shows
