"""Refusals of the mechanisms name the bad argument and say how to fix it, and every privacy map gives its
exact numbers. Found missing by ``make mutants`` (docs/testing.md): mutants that dropped a hint, renamed the
argument in a message or broke an unused-by-the-proxy privacy map survived every test."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import pytest

from budget.loss import PrivacyLoss
from mechanisms.contribution_bound import bound_target, contribution_bound_privacy_loss
from mechanisms.discrete_laplace import sample_discrete_laplace
from mechanisms.errors import MechanismError
from mechanisms.exponential import exponential_error_bound
from mechanisms.gaussian import discrete_gaussian_privacy_loss
from mechanisms.laplace import laplace_error_bound
from mechanisms.quantile import dp_quantile
from mechanisms.ttest import dp_noise_scale, welch_df


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


# (the call, the start of its message, its hint): each refusal found without its exact hint by the
# fresh mutation sample of seed 1129 (docs/testing.md) — a hint replaced or dropped survived every test.
HINTED_REFUSALS = [
    pytest.param(
        lambda: bound_target(cells=1, epsilon_per_quantity=0.0),
        "epsilon must be a finite number > 0, got 0.0",
        "e.g. epsilon=0.1",
        id="contribution bound: epsilon",
    ),
    pytest.param(
        lambda: sample_discrete_laplace(0.5, rng=random.Random(0)),  # type: ignore[arg-type]
        "scale must be an exact Fraction or int, got float 0.5",
        "convert with fractions.Fraction, rounding a noise scale up, never down",
        id="discrete laplace: a float scale",
    ),
    pytest.param(
        lambda: exponential_error_bound(sensitivity=1, epsilon=1.0, candidates=0),
        "candidates must be a whole number >= 1, got 0",
        "count the candidates released from",
        id="exponential error bound: candidates",
    ),
    pytest.param(
        lambda: discrete_gaussian_privacy_loss(sensitivity=1, sigma=0.0, delta=1e-6),
        "sigma must be",
        "the noise's scale parameter",
        id="discrete gaussian loss: sigma",
    ),
    pytest.param(
        lambda: laplace_error_bound(sensitivity=1.0, epsilon=1.0, confidence=1.0),
        "confidence must be strictly between 0 and 1, got 1.0",
        "use e.g. confidence=0.95",
        id="laplace error bound: confidence",
    ),
    pytest.param(
        lambda: dp_quantile(np.ones((2, 2)), q=0.5, lower=0.0, upper=1.0, epsilon=1.0, rng=random.Random(0)),
        "sorted_values must be one-dimensional, got 2 dimensions",
        "pass one column of values",
        id="quantile: a matrix",
    ),
    pytest.param(
        lambda: dp_noise_scale(0.0, beta=0.1, epsilon=1.0, rng=random.Random(0)),
        "noise_sd must be",
        "pass TTestRelease.noise_sd",
        id="t-test noise scale: noise_sd",
    ),
]


@pytest.mark.parametrize(("call", "message", "hint"), HINTED_REFUSALS)
def test_each_refusal_says_how_to_fix_it(call: Callable[[], object], message: str, hint: str) -> None:
    with pytest.raises(MechanismError) as refused:
        call()
    assert refused.value.message.startswith(message), refused.value.message
    assert refused.value.hint == hint
