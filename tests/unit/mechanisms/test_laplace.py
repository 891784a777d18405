"""Laplace mechanism: privacy map, error bound (spec §3 test vectors), discrete and grid mechanisms."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from budget.loss import PrivacyLoss
from mechanisms.errors import MechanismError
from mechanisms.laplace import (
    SCALE_DENOMINATOR,
    _round_up,
    discrete_laplace_mechanism,
    laplace_error_bound,
    laplace_grid_step,
    laplace_mechanism,
    laplace_noise_scale,
    laplace_privacy_loss,
)

SEED = 1729
DRAWS = 20_000


def grid_draws(value: float, *, sensitivity: float, epsilon: float, count: int = DRAWS) -> list[float]:
    rng = random.Random(SEED)
    return [laplace_mechanism(value, sensitivity=sensitivity, epsilon=epsilon, rng=rng) for _ in range(count)]


# --- privacy map -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sensitivity", "noise_scale", "epsilon"),
    [(1.0, 10.0, 0.1), (100.0, 1000.0, 0.1), (2.0, 4.0, 0.5), (1.0, 1.0, 1.0), (0.001, 0.01, 0.1)],
)
def test_privacy_loss_is_sensitivity_over_scale(
    sensitivity: float, noise_scale: float, epsilon: float
) -> None:
    # float(1/10) = 0.1 is already above the exact 1/10, so rounding up keeps it.
    assert laplace_privacy_loss(sensitivity=sensitivity, noise_scale=noise_scale) == PrivacyLoss(epsilon, 0.0)


def test_privacy_loss_rounds_up_an_inexact_ratio() -> None:
    # float(1/3) = 0.333...3148 is below 1/3, so the charge is the next float up.
    loss = laplace_privacy_loss(sensitivity=1.0, noise_scale=3.0)
    assert loss == PrivacyLoss(math.nextafter(1 / 3, math.inf), 0.0)
    assert Fraction(loss.epsilon) > Fraction(1, 3)


def test_noise_scale_is_sensitivity_over_epsilon_rounded_up() -> None:
    assert laplace_noise_scale(sensitivity=1.0, epsilon=0.1) == 10.0
    assert Fraction(laplace_noise_scale(sensitivity=1.0, epsilon=3.0)) > Fraction(1, 3)


@given(
    sensitivity=st.floats(min_value=1e-6, max_value=1e6),
    epsilon=st.floats(min_value=1e-6, max_value=1e3),
)
def test_pricing_the_noise_scale_never_charges_more_than_epsilon(sensitivity: float, epsilon: float) -> None:
    scale = laplace_noise_scale(sensitivity=sensitivity, epsilon=epsilon)
    assert laplace_privacy_loss(sensitivity=sensitivity, noise_scale=scale).epsilon <= epsilon


def test_mechanism_scale_is_rounded_up_to_a_dyadic_rational() -> None:
    rounded = _round_up(Fraction(1, 3))
    assert rounded >= Fraction(1, 3)
    assert rounded - Fraction(1, 3) < Fraction(1, SCALE_DENOMINATOR)
    assert SCALE_DENOMINATOR % rounded.denominator == 0


# --- error bound: spec §3.1, domain [0, 100], epsilon 0.1, 95% ----------------------------------------------


@pytest.mark.parametrize(
    ("sensitivity", "expected", "digits"),
    [
        pytest.param(100 / 100, 29.957, 3, id="TV-LAP-1"),
        pytest.param(100 / 1000, 2.9957, 4, id="TV-LAP-2"),
        pytest.param(100 / 100_000, 0.029957, 6, id="TV-LAP-3"),
        pytest.param(100.0, 2995.73, 2, id="TV-LAP-4"),
    ],
)
def test_error_bound_matches_spec_vectors(sensitivity: float, expected: float, digits: int) -> None:
    assert round(laplace_error_bound(sensitivity=sensitivity, epsilon=0.1), digits) == expected


def test_error_bound_uses_a_union_bound_over_outputs() -> None:
    bound = laplace_error_bound(sensitivity=1.0, epsilon=0.1, confidence=0.95, outputs=20)
    assert bound == pytest.approx(10 * math.log(20 / 0.05), rel=1e-12)


# --- discrete mechanism (counts) ---------------------------------------------------------------------------


def test_discrete_mechanism_returns_a_python_int() -> None:
    rng = random.Random(SEED)
    outputs = [discrete_laplace_mechanism(42, sensitivity=1.0, epsilon=0.5, rng=rng) for _ in range(200)]
    assert all(type(x) is int for x in outputs)


def test_discrete_mechanism_is_centred_on_the_value() -> None:
    # Noise variance ≈ 2·scale² = 8 (scale 2); the mean of n draws is within 4·sqrt(8/n) of the value.
    rng = random.Random(SEED)
    outputs = [discrete_laplace_mechanism(1000, sensitivity=1.0, epsilon=0.5, rng=rng) for _ in range(DRAWS)]
    assert abs(math.fsum(outputs) / DRAWS - 1000) <= 4 * math.sqrt(8 / DRAWS)


def test_discrete_mechanism_rejects_a_float_value() -> None:
    with pytest.raises(MechanismError, match="value must be an int") as caught:
        discrete_laplace_mechanism(3.5, sensitivity=1.0, epsilon=1.0, rng=random.Random(SEED))  # type: ignore[arg-type]
    assert caught.value.hint == "use laplace_mechanism for real-valued answers such as sums"


# --- grid mechanism (real sums) ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sensitivity", "epsilon", "step"),
    [
        pytest.param(1.0, 0.1, 2.0**-20, id="sensitivity-smaller"),
        pytest.param(1.0, 10.0, 2.0**-24, id="scale-smaller"),
        pytest.param(1.0, 1.0, 2.0**-20, id="exact-power"),
        pytest.param(3.0, 1.0, 2.0**-19, id="rounds-down"),
        pytest.param(2.0**20, 0.5, 1.0, id="unit-grid"),
    ],
)
def test_grid_step_is_the_largest_power_of_two_below_min_of_sensitivity_and_scale_over_2_to_20(
    sensitivity: float, epsilon: float, step: float
) -> None:
    assert laplace_grid_step(sensitivity=sensitivity, epsilon=epsilon) == step


@pytest.mark.parametrize("value", [0.3, -1234.56789, 1e-9, 1e20])
def test_grid_output_is_a_multiple_of_the_grid_step(value: float) -> None:
    step = Fraction(laplace_grid_step(sensitivity=2.0**20, epsilon=1.0))
    for output in grid_draws(value, sensitivity=2.0**20, epsilon=1.0, count=50):
        assert (Fraction(output) / step).denominator == 1


def test_grid_variance_is_twice_the_scale_squared() -> None:
    # For Laplace noise of scale b, E[X²] = 2b² and E[X⁴] = 24b⁴, so m2 = mean(x²) has standard error
    # sqrt((24 - 4)/n)·b² = sqrt(20/n)·b²; allow 4 of them (6.3% of 2b² at n = 20 000). The grid noise is
    # γ·DLap((Δ+γ)/(γε)) with γ <= Δ/2**20: its variance differs from 2b² by <= ~2**-19 relative, negligible.
    scale = 10.0
    outputs = grid_draws(0.0, sensitivity=1.0, epsilon=0.1)
    second_moment = math.fsum(x * x for x in outputs) / DRAWS
    assert abs(second_moment - 2 * scale**2) <= 4 * math.sqrt(20 / DRAWS) * scale**2


def test_grid_mechanism_is_centred_on_the_value() -> None:
    # Standard error of the mean: sqrt(2b²/n) with b = 10; allow 4.
    outputs = grid_draws(1234.5678, sensitivity=1.0, epsilon=0.1)
    assert abs(math.fsum(outputs) / DRAWS - 1234.5678) <= 4 * math.sqrt(200 / DRAWS)


def test_grid_mechanism_returns_a_float() -> None:
    assert type(laplace_mechanism(5, sensitivity=1.0, epsilon=1.0, rng=random.Random(SEED))) is float


def test_tail_fraction_matches_the_utility_theorem() -> None:
    # Spec §3 "Statistical test": scale R = 10, Pr(|r| > R·ln 20 = 29.957) = 0.05; 200 000 draws, tolerance
    # 0.0015 ≈ 3 binomial standard errors (sqrt(0.05·0.95/200 000) ≈ 0.00049). Runs in ~5 s.
    outputs = grid_draws(0.0, sensitivity=1.0, epsilon=0.1, count=200_000)
    assert abs(sum(abs(x) > 29.957 for x in outputs) / len(outputs) - 0.05) <= 0.0015


# --- parameter validation ----------------------------------------------------------------------------------

BAD_POSITIVE = [0.0, -1.0, math.inf, math.nan]


@pytest.mark.parametrize("epsilon", BAD_POSITIVE)
def test_mechanisms_reject_a_bad_epsilon(epsilon: float) -> None:
    rng = random.Random(SEED)
    match = "epsilon must be a finite number greater than 0"
    with pytest.raises(MechanismError, match=match):
        laplace_mechanism(1.0, sensitivity=1.0, epsilon=epsilon, rng=rng)
    with pytest.raises(MechanismError, match=match):
        discrete_laplace_mechanism(1, sensitivity=1.0, epsilon=epsilon, rng=rng)
    with pytest.raises(MechanismError, match=match):
        laplace_error_bound(sensitivity=1.0, epsilon=epsilon)


@pytest.mark.parametrize("sensitivity", BAD_POSITIVE)
def test_mechanisms_reject_a_bad_sensitivity(sensitivity: float) -> None:
    rng = random.Random(SEED)
    match = "sensitivity must be a finite number greater than 0"
    with pytest.raises(MechanismError, match=match):
        laplace_mechanism(1.0, sensitivity=sensitivity, epsilon=1.0, rng=rng)
    with pytest.raises(MechanismError, match=match):
        discrete_laplace_mechanism(1, sensitivity=sensitivity, epsilon=1.0, rng=rng)
    with pytest.raises(MechanismError, match=match):
        laplace_privacy_loss(sensitivity=sensitivity, noise_scale=1.0)


@pytest.mark.parametrize("noise_scale", BAD_POSITIVE)
def test_privacy_loss_rejects_a_bad_noise_scale(noise_scale: float) -> None:
    with pytest.raises(MechanismError, match="noise_scale must be a finite number greater than 0"):
        laplace_privacy_loss(sensitivity=1.0, noise_scale=noise_scale)


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_grid_mechanism_rejects_a_non_finite_value(value: float) -> None:
    with pytest.raises(MechanismError, match="value must be a finite number") as caught:
        laplace_mechanism(value, sensitivity=1.0, epsilon=1.0, rng=random.Random(SEED))
    assert caught.value.hint is not None and "lower/upper" in caught.value.hint


def test_rejects_a_scale_too_large_for_a_float() -> None:
    with pytest.raises(MechanismError, match="too large for a float"):
        laplace_noise_scale(sensitivity=1e300, epsilon=1e-300)


@pytest.mark.parametrize("confidence", [0.0, 1.0, 1.5, math.nan])
def test_error_bound_rejects_a_confidence_outside_0_1(confidence: float) -> None:
    with pytest.raises(MechanismError, match="confidence must be strictly between 0 and 1"):
        laplace_error_bound(sensitivity=1.0, epsilon=1.0, confidence=confidence)


@pytest.mark.parametrize("outputs", [0, -3, 2.5])
def test_error_bound_rejects_a_bad_output_count(outputs: int) -> None:
    with pytest.raises(MechanismError, match="outputs must be a whole number >= 1"):
        laplace_error_bound(sensitivity=1.0, epsilon=1.0, outputs=outputs)


@pytest.mark.parametrize(
    ("sensitivity", "noise_scale", "hint"),
    [
        (0.0, 1.0, "check the column's lower/upper bounds and max_contributions"),
        (1.0, -2.0, "noise_scale = sensitivity / epsilon"),
    ],
)
def test_privacy_loss_refusals_say_how_to_fix_them(sensitivity: float, noise_scale: float, hint: str) -> None:
    with pytest.raises(MechanismError, match="must be a finite number greater than 0") as refused:
        laplace_privacy_loss(sensitivity=sensitivity, noise_scale=noise_scale)
    assert refused.value.hint == hint
