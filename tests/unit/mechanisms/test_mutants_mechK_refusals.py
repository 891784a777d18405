"""Refusals of the mechanisms, word for word: the message names the argument that is wrong and quotes the
value (never a private one), and the hint says what to pass instead (the guide's rule for every error a
user sees; proxy/errors.py carries both to the client). A refusal that names the wrong argument or loses
its hint sends a user to fix the wrong thing. Found by a mutation run of mechanisms/ (seed 2126,
docs/testing.md)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from mechanisms.errors import MechanismError
from mechanisms.gaussian import (
    analytic_gaussian_delta,
    discrete_gaussian_upper_tail,
    gaussian_privacy_loss,
    gaussian_upper_tail,
)
from mechanisms.ttest import dp_group_sizes, dp_noise_scale, welch_df, welch_t


def refusal(call: Callable[[], object]) -> MechanismError:
    with pytest.raises(MechanismError) as refused:
        call()
    return refused.value


def test_analytic_delta_names_a_bad_sigma_and_says_what_it_is() -> None:
    error = refusal(lambda: analytic_gaussian_delta(sensitivity=1.0, sigma=0.0, epsilon=1.0))
    assert error.message == "sigma must be a finite number greater than 0, got 0.0"
    assert error.hint == "the noise's standard deviation"


def test_analytic_delta_names_a_negative_epsilon() -> None:
    error = refusal(lambda: analytic_gaussian_delta(sensitivity=1.0, sigma=1.0, epsilon=-1.0))
    assert error.message == "epsilon must be a finite number >= 0, got -1.0"
    assert error.hint == "spend a positive budget, e.g. epsilon=1.0"


WELCH_HINT = "add the dummy records to both groups first (dp_ttest does)"


@pytest.mark.parametrize("statistic", [welch_t, welch_df])
def test_welch_statistics_name_the_group_without_two_distinct_values(
    statistic: Callable[[list[float], list[float]], float],
) -> None:
    for bad, name in ((([1.0, 1.0], [2.0, 3.0]), "a"), (([2.0, 3.0], [4.0]), "b")):
        error = refusal(lambda bad=bad: statistic(*bad))
        assert (
            error.message == f"{name} needs at least 2 finite values with a positive variance for Welch's t"
        )
        assert error.hint == WELCH_HINT


@pytest.mark.parametrize("epsilon", [True, "1", None])
def test_analytic_delta_refuses_an_epsilon_that_is_no_number(epsilon: object) -> None:
    # True is an int in Python but never a meant ε; a string must be refused, not crash inside math
    error = refusal(lambda: analytic_gaussian_delta(sensitivity=1.0, sigma=1.0, epsilon=epsilon))  # type: ignore[arg-type]
    assert error.message == f"epsilon must be a finite number >= 0, got {epsilon!r}"


@pytest.mark.parametrize("probability", [True, "0.5", None])
def test_gaussian_tails_refuse_a_probability_that_is_no_number(probability: object) -> None:
    for tail in (discrete_gaussian_upper_tail, gaussian_upper_tail):
        error = refusal(
            lambda tail=tail: tail(sensitivity=1.0, epsilon=1.0, delta=1e-5, probability=probability)  # type: ignore[arg-type]
        )
        assert error.message == f"probability must be strictly between 0 and 1, got {probability!r}"
        assert error.hint == "the chance that noise may exceed the threshold, e.g. delta / max_contributions"


def test_pricing_a_noise_too_small_for_any_epsilon_says_so() -> None:
    # σ = 1e-300 on Δ = 1: δ(ε) stays 1 for every finite ε, so no ε can be charged
    error = refusal(lambda: gaussian_privacy_loss(sensitivity=1.0, sigma=1e-300, delta=1e-5))
    assert error.message == "the noise is too small for any finite epsilon at this delta"
    assert error.hint == "use a larger sigma or a larger delta"


def test_group_sizes_name_the_bad_count() -> None:
    for counts, message in (
        ((-1, 3), "n_a must be a whole number >= 0, got -1"),
        ((3, -1), "n_b must be a whole number >= 0, got -1"),
    ):
        error = refusal(lambda counts=counts: dp_group_sizes(*counts, epsilon=1.0, rng=random.Random(0)))
        assert error.message == message
        assert error.hint == "pass the group's record count"


def test_noise_scale_refuses_a_bad_epsilon_with_its_hint() -> None:
    error = refusal(lambda: dp_noise_scale(1.0, beta=0.1, epsilon=0.0, rng=random.Random(0)))
    assert error.message == "epsilon must be a finite number greater than 0, got 0.0"
    assert error.hint == "spend a positive budget, e.g. epsilon=0.1"
