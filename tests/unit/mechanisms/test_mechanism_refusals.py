"""Refusals of the mechanisms name the bad argument and say how to fix it, and every privacy map gives its
exact numbers. Found missing by ``make mutants`` (docs/testing.md): mutants that dropped a hint, renamed the
argument in a message or broke an unused-by-the-proxy privacy map survived every test."""

from __future__ import annotations

import random

import pytest

from budget.loss import PrivacyLoss
from mechanisms.contribution_bound import contribution_bound_privacy_loss
from mechanisms.errors import MechanismError
from mechanisms.quantile import dp_quantile
from mechanisms.ttest import welch_df


def test_the_contribution_bound_selection_costs_its_epsilon() -> None:
    """Choosing L is one permute-and-flip selection: (ε, 0)-DP, as the ledger charges it."""
    assert contribution_bound_privacy_loss(epsilon=0.3) == PrivacyLoss(0.3, 0.0)


@pytest.mark.parametrize("epsilon", [0.0, -1.0, float("inf")])
def test_a_quantile_refuses_a_non_positive_epsilon_with_a_hint(epsilon: float) -> None:
    with pytest.raises(MechanismError, match="epsilon must be a finite number greater than 0") as refused:
        dp_quantile([1.0, 2.0], q=0.5, lower=0.0, upper=3.0, epsilon=epsilon, rng=random.Random(0))
    assert refused.value.hint == "spend a positive budget, e.g. epsilon=1.0"


def test_welch_df_names_the_group_that_is_too_small() -> None:
    with pytest.raises(MechanismError, match=r"^b needs at least 2 finite values"):
        welch_df([1.0, 2.0, 4.0], [5.0])
    with pytest.raises(MechanismError, match=r"^a needs at least 2 finite values"):
        welch_df([1.0], [5.0, 6.0])
