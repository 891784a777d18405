"""Survivors of the fresh mutation sample (seed 1143) in mechanisms/gaussian.py and mechanisms/ttest.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mechanisms.gaussian import SMALL_SIGMA, discrete_gaussian_delta
from mechanisms.ttest import noise_parameters, smooth_sensitivity
from tests.unit.mechanisms.test_ttest import sound_bounds


def theorem_7_terms(*, sensitivity: int, sigma: float, epsilon: float) -> tuple[float, float, float]:
    """CKS 2020 Thm 7 by brute force (numpy, |y| <= 12σ, where f has fallen below e^-72): the exact δ and the
    two tails it is the difference of, P[Y >= m] and e^ε·P[Y >= m + Δ], m the first y of a positive term."""
    variance = sigma * sigma
    reach = int(12 * sigma) + sensitivity
    y = np.arange(-reach, reach + 1, dtype=np.float64)
    weight = np.exp(-y * y / (2 * variance))
    normaliser = float(weight.sum())
    terms = weight * -np.expm1(epsilon - sensitivity * (2 * y + sensitivity) / (2 * variance))
    positive = terms > 0
    first = int(np.argmax(positive))
    upper = float(weight[first:].sum()) / normaliser
    lower = math.exp(epsilon) * float(weight[first + sensitivity :].sum()) / normaliser
    return float(terms[positive].sum()) / normaliser, upper, lower


@pytest.mark.parametrize(("sigma", "epsilon"), [(1e5, 2e-5), (5e4, 4e-5)])
def test_the_midpoint_bound_keeps_its_documented_float_margin_above_theorem_7(
    sigma: float, epsilon: float
) -> None:
    """Above SMALL_SIGMA, with thresholds past σ + 1/2: the upper tail is pushed up and the subtracted one
    down by a relative 1e-9 (module docstring), so the δ bound exceeds the exact δ by at least that much —
    a margin for the erfc/exp error that does not shrink to the midpoint rule's own (far smaller) slack."""
    assert sigma > SMALL_SIGMA and epsilon * sigma > 1.5  # threshold εσ²/Δ well past σ + 1/2
    exact, upper, lower = theorem_7_terms(sensitivity=1, sigma=sigma, epsilon=epsilon)
    bound = discrete_gaussian_delta(sensitivity=1, sigma=sigma, epsilon=epsilon)
    assert bound - exact >= 0.9e-9 * (upper + lower)
    assert bound <= exact * (1 + 1e-3)


def test_a_sound_sensitivity_below_one_is_the_largest_smoothed_bound_not_one() -> None:
    """Two large groups with the same spread (t = 0) on [0, 200]: every e^{−βk}·U_k is below 1, and S is
    their maximum — the noise of the released t (S/α) is not inflated to a floor of 1/α."""
    values = np.linspace(0.0, 200.0, 1_000)
    _, beta = noise_parameters(epsilon=5.0, delta=0.01)
    bounds = sound_bounds(values, values, m=200.0, dummies=(90.0, 110.0), count=400)
    largest = max(math.exp(-beta * k) * bound for k, bound in enumerate(bounds))
    sensitivity = smooth_sensitivity(values, values, m=200.0, dummies=(90.0, 110.0), beta=beta)
    assert sensitivity == pytest.approx(largest, rel=1e-12)
    assert sensitivity < 0.8
