"""A dataset's cap checked in steps (``cap_step``): it still binds the δ, and it composes under the
accountant the dataset uses.

Found by mutation testing of budget/ledger.py (issue 21): the stepped cap was only tested for ε under
basic composition."""

from __future__ import annotations

import pytest

from budget.accountants import get_accountant
from budget.errors import BudgetExhaustedError
from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from budget.totals import Release
from tests.unit.budget import test_ledger
from tests.unit.budget.test_ledger import spend

ledgers = test_ledger.ledgers
ledger = test_ledger.ledger
capped = test_ledger.capped


def test_a_stepped_cap_still_refuses_a_delta_past_the_cap(capped: Ledger) -> None:
    """Steps coarsen only the ε others spent; the δ of all analysts together stays within the cap's
    10⁻⁵ — bob's 6·10⁻⁶ and alice's 6·10⁻⁶ would pass it, though their ε is far below the cap."""
    spend(capped, 0.1, 6e-6, analyst="bob")
    with pytest.raises(BudgetExhaustedError) as refused:
        capped.reserve("alice", "demo", PrivacyLoss(0.1, 6e-6), statement="SELECT 1", cap_step=0.5)
    assert str(refused.value).startswith('privacy budget exhausted: dataset "demo" is capped at')
    capped.reserve("alice", "demo", PrivacyLoss(0.1, 4e-6), statement="SELECT 1", cap_step=0.5)
    assert capped.cap("demo").spent_delta == 1e-5


def test_a_stepped_cap_composes_under_the_datasets_accountant(capped: Ledger) -> None:
    """Under zCDP the ε spent depends on the cap's δ (a share of it pays for converting ρ): the cap is
    passed to the accountant both before and after the new release."""
    zcdp = get_accountant("zcdp")
    release = Release(0.3, 0.0, rho=0.001)
    for analyst in ("bob", "alice", "alice"):
        capped.reserve(analyst, "demo", release, statement="SELECT 1", accountant=zcdp, cap_step=0.25)
    spent = capped.cap("demo", accountant=zcdp).spent_epsilon
    assert 0 < spent < 0.9  # zCDP's composition of three ρ of 0.001, far below their ε sum of 0.9
    assert [reserved.analyst for reserved in capped.reservations("demo")] == ["bob", "alice", "alice"]
