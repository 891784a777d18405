"""The discrete Gaussian's privacy curve above SMALL_SIGMA, where δ comes from the midpoint rule with a
remainder bound (mechanisms/gaussian.py, module docstring), checked where that bound is tightest.

The calibrated σ of every Gaussian quantity with Δ = 1 and a small ε lies above 256, so this bound decides
how much noise a real release gets: if it ever fell below CKS 2020 Theorem 7's exact δ, Veil would
under-charge δ. The exact δ is summed by brute force (``theorem_7_delta`` of test_gaussian.py). The
thresholds tried put the first positive term of the sum just above σ (the smallest start where the
midpoint rule is used), where the remainder term matters most. Also here: the crude tails used for starts
below σ + 1/2 (the largest of the three starts around the threshold is kept), pricing at ε = 0 (a σ whose δ
is met there costs no ε), and the noise thresholds at probability 1/2. Found by a mutation run of
mechanisms/ (seed 2126, docs/testing.md).
"""

from __future__ import annotations

import math

import pytest

from budget.loss import PrivacyLoss
from mechanisms.gaussian import (
    SMALL_SIGMA,
    analytic_gaussian_delta,
    discrete_gaussian_delta,
    discrete_gaussian_privacy_loss,
    discrete_gaussian_sigma,
    discrete_gaussian_upper_tail,
    gaussian_grid_step,
    gaussian_privacy_loss,
    gaussian_upper_tail,
)
from tests.unit.mechanisms.test_gaussian import theorem_7_delta


def epsilon_with_threshold_just_above(sigma: float, sensitivity: int) -> float:
    """The ε whose first positive term of Theorem 7's sum is y = ⌊σ⌋ + 2: εσ²/Δ − Δ/2 = ⌊σ⌋ + 1.5, so the
    three starts tried (y − 1, y, y + 1) all lie at least σ + 1/2 out (the midpoint branch)."""
    return (math.floor(sigma) + 1.5 + sensitivity / 2) * sensitivity / sigma**2


@pytest.mark.parametrize("sigma", [257.0, 300.0, 446.5, 1000.0])
@pytest.mark.parametrize("sensitivity", [1, 3])
def test_the_midpoint_bound_is_never_below_the_exact_delta(sigma: float, sensitivity: int) -> None:
    assert sigma > SMALL_SIGMA
    epsilon = epsilon_with_threshold_just_above(sigma, sensitivity)
    exact = theorem_7_delta(sensitivity=sensitivity, sigma=sigma, epsilon=epsilon)
    bound = discrete_gaussian_delta(sensitivity=sensitivity, sigma=sigma, epsilon=epsilon)
    # sound, and tight: the docstring's relative O((m/σ)²/σ²) error is below 0.3 % here
    assert exact <= bound <= exact * 1.003


@pytest.mark.parametrize("sigma", [300.0, 1000.0])
def test_a_sigma_above_small_sigma_is_priced_at_epsilon_zero_when_delta_allows(sigma: float) -> None:
    # At ε = 0 (the first point the pricing tries) and εσ² < 1/2 with Δ = 1 the sum's first term is y = -1,
    # whose lower tail P[Y >= 0] is taken as 1 - P[Y >= 1] (the m <= 0 branch of the bounds).
    exact = theorem_7_delta(sensitivity=1, sigma=sigma, epsilon=0.0)  # = P[Y = 0]
    bound = discrete_gaussian_delta(sensitivity=1, sigma=sigma, epsilon=0.0)
    assert exact <= bound <= 2.01 * exact  # the crude tails of the branch: about twice P[Y = 0]
    assert discrete_gaussian_delta(sensitivity=1, sigma=sigma, epsilon=0.4 / sigma**2) <= bound
    assert discrete_gaussian_privacy_loss(sensitivity=1, sigma=sigma, delta=0.01) == PrivacyLoss(0.0, 0.01)


def test_a_delta_met_at_epsilon_zero_is_priced_at_epsilon_zero() -> None:
    # δ equal to the curve's own δ at ε = 0 is met there: no ε is charged (not the smallest positive float)
    continuous = analytic_gaussian_delta(sensitivity=1.0, sigma=1.0, epsilon=0.0)
    assert gaussian_privacy_loss(sensitivity=1.0, sigma=1.0, delta=continuous) == PrivacyLoss(0.0, continuous)
    discrete = discrete_gaussian_delta(sensitivity=1, sigma=1.0, epsilon=0.0)
    assert discrete_gaussian_privacy_loss(sensitivity=1, sigma=1.0, delta=discrete) == PrivacyLoss(
        0.0, discrete
    )


def discrete_gaussian_survival(t: int, sigma: float) -> float:
    """P[Y > t] for Y ~ N_Z(0, σ²), summed exactly enough over |y| <= 60σ + 10."""
    reach = int(60 * sigma) + 10
    weight = {y: math.exp(-y * y / (2 * sigma * sigma)) for y in range(-reach, reach + 1)}
    return math.fsum(w for y, w in weight.items() if y > t) / math.fsum(weight.values())


def test_the_median_is_a_valid_tail_probability() -> None:
    # probability 0.5 is where the continuous quantile Φ⁻¹(1 − p) the search starts from is 0
    sigma = discrete_gaussian_sigma(sensitivity=1.0, epsilon=1.0, delta=1e-5)
    t = discrete_gaussian_upper_tail(sensitivity=1.0, epsilon=1.0, delta=1e-5, probability=0.5)
    assert t == 0  # P[Y > 0] = (1 − P[Y = 0])/2 < 1/2, and t >= 0 always (m >= 1)
    assert discrete_gaussian_survival(t, sigma) <= 0.5
    step = gaussian_grid_step(sensitivity=1.0, epsilon=1.0, delta=1e-5)
    # γ·(m − 1/2) for the smallest m >= 1 whose tail bound is <= 1/2: m is 1 or 2 at σ ≈ 4·10⁶ grid units
    assert gaussian_upper_tail(sensitivity=1.0, epsilon=1.0, delta=1e-5, probability=0.5) in (
        0.5 * step,
        1.5 * step,
    )


@pytest.mark.parametrize(
    ("sensitivity", "sigma", "epsilon", "pinned"),
    [
        (1, 300.0, 0.002, 0.0016757697629910528),  # starts below σ + 1/2: the crude tails
        (3, 300.0, 0.01, 0.0016492673358874665),
        (1, 500.0, 0.01, 1.1018828295628645e-10),  # the midpoint rule
        (2, 500.0, 0.001, 0.0019196728963283838),
    ],
)
def test_the_bound_keeps_the_largest_of_the_starts_around_the_threshold(
    sensitivity: int, sigma: float, epsilon: float, pinned: float
) -> None:
    # The docstring's rule: the bound is taken at the three integers around the float threshold and the
    # largest kept, so a threshold rounded one too high cannot drop the sum's first term. Here the largest
    # is the start below the threshold; without it the bound falls by 2·10⁻⁴ to 10⁻³ (still sound at these
    # points, not at a threshold within rounding of an integer). Pinned to 10⁻⁶, far above float noise.
    exact = theorem_7_delta(sensitivity=sensitivity, sigma=sigma, epsilon=epsilon)
    bound = discrete_gaussian_delta(sensitivity=sensitivity, sigma=sigma, epsilon=epsilon)
    assert exact <= bound == pytest.approx(pinned, rel=1e-6)
