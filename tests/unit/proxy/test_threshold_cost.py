"""The δ of τ-thresholding in what a release costs under zCDP accounting (release/cost.py).

A query whose keys come from the data releases a key only when its noisy people count passes τ; with
probability δ_τ a single person's key passes, and that δ is outside ρ: the zCDP accountant must add it
on top of the conversion of Σρ (budget/totals.py ``zcdp_delta``). Dropping it would let an analyst run
thresholded queries under ``accountant = "zcdp"`` for free in δ — a privacy failure, not a reporting one.
Found missing by ``make mutants`` (docs/testing.md).
"""

from __future__ import annotations

import functools
from decimal import Decimal

import pytest

from budget.accountants import get_accountant
from budget.loss import PrivacyLoss
from budget.totals import Totals
from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import PrivateQuery, classify
from proxy.release.cost import release_cost
from proxy.release.plan import ReleasePlan, price_query
from tests.unit.proxy.policy_fixture import clinic_policy

FROM_THE_DATA = "SELECT note, COUNT(*) FROM visits GROUP BY note"  # note has no public domain
PUBLIC_KEYS = "SELECT region, COUNT(*) FROM visits GROUP BY region"


def plan_for(sql: str, *, epsilon: float = 1.0, delta: float = 0.0, gaussian: bool = False) -> ReleasePlan:
    statement = classify(parse_statements(sql)[0], clinic_policy())
    assert isinstance(statement, PrivateQuery)
    return price_query(statement.shape, epsilon=epsilon, delta=delta, gaussian=gaussian)


def test_a_thresholded_laplace_release_keeps_all_its_delta_outside_rho() -> None:
    """With Laplace noise all of δ is the threshold's (``split_delta``), and none of it is in ρ."""
    plan = plan_for(FROM_THE_DATA, delta=1e-6)
    assert plan.threshold is not None
    cost = release_cost(plan)
    assert cost.rho_delta == 1e-6
    assert cost.rho_delta == cost.delta


def test_a_thresholded_gaussian_release_keeps_the_threshold_share_outside_rho() -> None:
    """With Gaussian noise ρ covers the Gaussian measurements' δ shares, not τ's: δ_τ stays outside."""
    plan = plan_for(FROM_THE_DATA, delta=1e-6, gaussian=True)
    assert plan.threshold is not None and plan.threshold_delta > 0
    gaussian_shares = [m.delta for m in plan.measurements if m.gaussian]
    assert gaussian_shares  # the split really shares δ
    assert release_cost(plan).rho_delta == plan.threshold_delta
    assert plan.threshold_delta + sum(gaussian_shares) == pytest.approx(1e-6, rel=1e-12)


def test_public_keys_spend_no_delta_outside_rho() -> None:
    """Without τ a Gaussian release's δ is all inside ρ."""
    plan = plan_for(PUBLIC_KEYS, delta=1e-6, gaussian=True)
    assert plan.threshold is None
    assert release_cost(plan).rho_delta == 0.0


@pytest.mark.parametrize("gaussian", [False, True])
def test_zcdp_charges_every_thresholded_release_its_delta(gaussian: bool) -> None:
    """Fifty thresholded answers at ε = 0.1, δ = 10⁻⁶ under a grant (100, 10⁻⁴): the zCDP total δ is the
    accountant's own slack (half the grant's δ, 5·10⁻⁵) *plus* 50·δ_τ — each answer may show one
    person's key with probability δ_τ, and those chances add up whatever ρ says."""
    plan = plan_for(FROM_THE_DATA, epsilon=0.1, delta=1e-6, gaussian=gaussian)
    assert plan.threshold is not None
    totals = functools.reduce(Totals.plus, [release_cost(plan)] * 50, Totals())
    spent = get_accountant("zcdp").spent(totals, grant=PrivacyLoss(100.0, 1e-4))
    floor = Decimal("0.00005") + 50 * Decimal(plan.threshold_delta)
    assert Decimal(spent.delta) >= floor
