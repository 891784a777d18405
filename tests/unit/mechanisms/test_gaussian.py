"""Gaussian mechanism: TV-GAU-1, analytic calibration, discrete Gaussian sampler and its privacy curve, zCDP."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from budget.loss import PrivacyLoss
from mechanisms import gaussian
from mechanisms.discrete_gaussian import sample_discrete_gaussian
from mechanisms.errors import MechanismError
from mechanisms.gaussian import (
    SMALL_SIGMA,
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
    discrete_gaussian_delta,
    discrete_gaussian_mechanism,
    discrete_gaussian_privacy_loss,
    discrete_gaussian_sigma,
    discrete_gaussian_upper_tail,
    gaussian_grid_step,
    gaussian_mechanism,
    gaussian_privacy_loss,
    gaussian_rho,
    gaussian_upper_tail,
    zcdp_to_approx_dp,
)

SEED = 8128
DRAWS = 20_000


def balle_wang_delta(*, sensitivity: float, sigma: float, epsilon: float) -> float:
    """Balle & Wang 2018, Thm 8, evaluated independently with scipy: Φ(Δ/2σ - εσ/Δ) - e^ε Φ(-Δ/2σ - εσ/Δ)."""
    a, b = sensitivity / (2 * sigma), epsilon * sigma / sensitivity
    return float(norm.cdf(a - b) - math.exp(epsilon) * norm.cdf(-a - b))


def theorem_7_delta(*, sensitivity: int, sigma: float, epsilon: float) -> float:
    """CKS 2020 Thm 7 by brute force: Σ_y max(0, p(y) - e^ε p(y + Δ)) over |y| <= 60σ + Δ, p ∝ exp(-y²/2σ²)."""
    variance = sigma * sigma
    reach = int(60 * sigma) + sensitivity + 10
    weight = {y: math.exp(-y * y / (2 * variance)) for y in range(-reach, reach + sensitivity + 1)}
    normaliser = math.fsum(weight[y] for y in range(-reach, reach + 1))
    positive = (
        max(0.0, weight[y] - math.exp(epsilon) * weight[y + sensitivity]) for y in range(-reach, reach + 1)
    )
    return math.fsum(positive) / normaliser


# --- spec TV-GAU-1 and the classical calibration -------------------------------------------------------------


def test_tv_gau_1() -> None:
    # δ = 1e-5: c = sqrt(2 ln 125000) = 4.844805; Δ₂ = 1, ε = 0.5 → σ = 9.689611.
    sigma = classical_gaussian_sigma(sensitivity=1.0, epsilon=0.5, delta=1e-5)
    assert round(sigma, 6) == 9.689611
    assert round(sigma * 0.5, 6) == 4.844805
    assert sigma >= math.sqrt(2 * math.log(125_000)) / 0.5


@pytest.mark.parametrize("epsilon", [1.0, 1.5, 10.0])
def test_classical_calibration_refuses_epsilon_of_one_or_more(epsilon: float) -> None:
    with pytest.raises(MechanismError, match="only valid for epsilon < 1") as caught:
        classical_gaussian_sigma(sensitivity=1.0, epsilon=epsilon, delta=1e-5)
    assert caught.value.hint is not None and "analytic_gaussian_sigma" in caught.value.hint


# --- analytic calibration (Balle & Wang 2018) ---------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.05, 0.5, 0.99])
@pytest.mark.parametrize("delta", [1e-5, 1e-10])
def test_analytic_sigma_is_below_the_classical_one(epsilon: float, delta: float) -> None:
    analytic = analytic_gaussian_sigma(sensitivity=1.0, epsilon=epsilon, delta=delta)
    assert analytic < classical_gaussian_sigma(sensitivity=1.0, epsilon=epsilon, delta=delta)


@pytest.mark.parametrize(
    ("sensitivity", "epsilon", "delta"),
    [
        (1.0, 0.5, 1e-5),
        (1.0, 0.1, 1e-6),
        (3.0, 1.0, 1e-5),
        (1.0, 4.0, 1e-9),
        (0.25, 20.0, 1e-6),
        (2.0, 0.01, 0.1),
    ],
)
def test_analytic_sigma_meets_the_exact_condition_tightly(
    sensitivity: float, epsilon: float, delta: float
) -> None:
    sigma = analytic_gaussian_sigma(sensitivity=sensitivity, epsilon=epsilon, delta=delta)
    assert balle_wang_delta(sensitivity=sensitivity, sigma=sigma, epsilon=epsilon) <= delta
    # Smallest up to the bisection's resolution: 1e-6 less noise already breaks the condition.
    assert balle_wang_delta(sensitivity=sensitivity, sigma=sigma * (1 - 1e-6), epsilon=epsilon) > delta


def test_analytic_sigma_reference_value() -> None:
    # ε = 1, δ = 1e-5, Δ = 1: σ ≈ 3.7306 (Balle & Wang's calibration; classical would be 4.8448 at ε < 1).
    assert analytic_gaussian_sigma(sensitivity=1.0, epsilon=1.0, delta=1e-5) == pytest.approx(
        3.73063, abs=1e-5
    )


def test_analytic_delta_matches_scipy() -> None:
    # Equal up to the deliberate 1e-9 relative margins on its two terms (δ is 14 times smaller than the
    # first term here, so the margins show as ~3e-8 of δ), and never below.
    ours = analytic_gaussian_delta(sensitivity=1.0, sigma=4.0, epsilon=0.7)
    assert ours == pytest.approx(balle_wang_delta(sensitivity=1.0, sigma=4.0, epsilon=0.7), rel=1e-7)
    assert ours >= balle_wang_delta(sensitivity=1.0, sigma=4.0, epsilon=0.7)


@settings(max_examples=60, deadline=None)
@given(
    sensitivity=st.floats(min_value=1e-3, max_value=1e3),
    epsilon=st.floats(min_value=1e-2, max_value=30),
    delta=st.floats(min_value=1e-12, max_value=0.5),
)
def test_pricing_the_analytic_sigma_never_charges_more_than_epsilon(
    sensitivity: float, epsilon: float, delta: float
) -> None:
    sigma = analytic_gaussian_sigma(sensitivity=sensitivity, epsilon=epsilon, delta=delta)
    loss = gaussian_privacy_loss(sensitivity=sensitivity, sigma=sigma, delta=delta)
    assert loss.delta == delta
    assert epsilon * (1 - 1e-6) <= loss.epsilon <= epsilon


def test_privacy_loss_of_a_large_sigma_is_zero() -> None:
    # δ(ε = 0) is the total variation distance 2Φ(Δ/2σ) - 1 ≈ 4e-7 < δ = 1e-6 for σ = 10^6.
    assert gaussian_privacy_loss(sensitivity=1.0, sigma=1e6, delta=1e-6) == PrivacyLoss(0.0, 1e-6)


# --- zCDP ---------------------------------------------------------------------------------------------------


def test_gaussian_rho() -> None:
    assert gaussian_rho(sensitivity=1.0, sigma=2.0) == 0.125
    rho = gaussian_rho(sensitivity=1.0, sigma=3.0)  # 1/18 is not a float: rounded up
    assert Fraction(rho) > Fraction(1, 18) and rho == math.nextafter(1 / 18, math.inf)
    assert gaussian_rho(sensitivity=math.sqrt(18), sigma=1.0) >= 9.0


def test_zcdp_to_approx_dp() -> None:
    # ρ = 0.125, δ = 1e-5: 0.125 + 2·sqrt(0.125·ln 1e5) = 2.524263 (Bun & Steinke 2016, Prop. 1.3).
    epsilon = zcdp_to_approx_dp(0.125, 1e-5)
    assert round(epsilon, 6) == 2.524263
    assert epsilon >= 0.125 + 2 * math.sqrt(0.125 * math.log(1e5))
    assert zcdp_to_approx_dp(0.0, 1e-5) == 0.0


def test_zcdp_conversion_is_looser_than_the_analytic_curve() -> None:
    # The same noise priced through zCDP must cost at least the exact (analytic) epsilon.
    sigma = 5.0
    exact = gaussian_privacy_loss(sensitivity=1.0, sigma=sigma, delta=1e-6).epsilon
    assert zcdp_to_approx_dp(gaussian_rho(sensitivity=1.0, sigma=sigma), 1e-6) > exact


# --- the discrete Gaussian sampler (CKS 2020, Algorithm 3) ----------------------------------------------------


def gaussian_draws(sigma_squared: Fraction, count: int = DRAWS) -> list[int]:
    rng = random.Random(SEED)
    return [sample_discrete_gaussian(sigma_squared, rng=rng) for _ in range(count)]


def test_samples_are_ints() -> None:
    assert all(type(x) is int for x in gaussian_draws(Fraction(9, 4), count=200))


def test_variance_is_sigma_squared() -> None:
    # σ² = 100: the discrete Gaussian's variance equals σ²(1 - O(e^{-2π²σ²})), i.e. 100 here, and its fourth
    # moment 3σ⁴ likewise, so mean(x²) has standard error σ²·sqrt(2/n) = 1.0; allow 4 (±4%).
    samples = gaussian_draws(Fraction(100))
    second_moment = math.fsum(x * x for x in samples) / DRAWS
    assert abs(second_moment - 100) <= 4 * 100 * math.sqrt(2 / DRAWS)
    # Mean 0 with standard error sqrt(σ²/n) = 0.07; allow 4.
    assert abs(math.fsum(samples) / DRAWS) <= 4 * math.sqrt(100 / DRAWS)


@pytest.mark.parametrize("sigma_squared", [Fraction(1, 2), Fraction(2), Fraction(7, 3)])
def test_zero_has_its_exact_probability(sigma_squared: Fraction) -> None:
    # P(0) = 1/Σ_y exp(-y²/(2σ²)); binomial band of 4 standard errors over 20 000 draws.
    normaliser = math.fsum(math.exp(-y * y / (2 * float(sigma_squared))) for y in range(-60, 61))
    p_zero = 1 / normaliser
    observed = sum(x == 0 for x in gaussian_draws(sigma_squared)) / DRAWS
    assert abs(observed - p_zero) <= 4 * math.sqrt(p_zero * (1 - p_zero) / DRAWS)


def test_huge_sigma_is_sampled_quickly() -> None:
    assert max(abs(x) for x in gaussian_draws(Fraction(2**120), count=50)) > 2**50


@pytest.mark.parametrize("bad", [0, Fraction(-1), 2.5, True])
def test_sampler_rejects_a_bad_variance(bad: object) -> None:
    with pytest.raises(MechanismError, match="sigma_squared must be"):
        sample_discrete_gaussian(bad, rng=random.Random(SEED))  # type: ignore[arg-type]


# --- the discrete Gaussian's privacy curve (CKS 2020, Theorem 7) ---------------------------------------------


@pytest.mark.parametrize(
    ("sensitivity", "sigma", "epsilon"),
    [(1, 0.6, 2.0), (1, 3.0, 1.0), (1, 7.0, 0.5), (2, 5.0, 0.5), (3, 20.0, 0.2), (1, 40.0, 0.05)],
)
def test_delta_bound_matches_theorem_7_by_brute_force(sensitivity: int, sigma: float, epsilon: float) -> None:
    exact = theorem_7_delta(sensitivity=sensitivity, sigma=sigma, epsilon=epsilon)
    bound = discrete_gaussian_delta(sensitivity=sensitivity, sigma=sigma, epsilon=epsilon)
    assert exact <= bound <= exact * (1 + 1e-7)


def test_integral_bound_above_small_sigma_is_sound_and_tight() -> None:
    # σ > SMALL_SIGMA uses the midpoint-rule bound; compare with brute force on a calibrated σ ≈ 446.
    sigma = 446.5
    assert sigma > SMALL_SIGMA
    exact = theorem_7_delta(sensitivity=1, sigma=sigma, epsilon=0.005)
    bound = discrete_gaussian_delta(sensitivity=1, sigma=sigma, epsilon=0.005)
    assert exact <= bound <= exact * 1.05


@pytest.mark.parametrize(
    ("epsilon", "delta"), [(0.5, 1e-5), (1.0, 1e-5), (0.1, 1e-6), (5.0, 1e-6), (2.0, 1e-9)]
)
def test_discrete_sigma_meets_theorem_7_and_is_close_to_the_analytic_sigma(
    epsilon: float, delta: float
) -> None:
    sigma = discrete_gaussian_sigma(sensitivity=1, epsilon=epsilon, delta=delta)
    assert theorem_7_delta(sensitivity=1, sigma=sigma, epsilon=epsilon) <= delta
    analytic = analytic_gaussian_sigma(sensitivity=1.0, epsilon=epsilon, delta=delta)
    assert abs(sigma / analytic - 1) < 0.05


def test_discrete_needs_more_noise_than_continuous_at_epsilon_one() -> None:
    # Why the discrete mechanism is not calibrated with the continuous formula: at Δ = 1, ε = 1, δ = 1e-5
    # the continuous σ ≈ 3.7306 would give the discrete Gaussian δ > 1e-5 (it needs σ ≈ 3.7405).
    analytic = analytic_gaussian_sigma(sensitivity=1.0, epsilon=1.0, delta=1e-5)
    assert theorem_7_delta(sensitivity=1, sigma=analytic, epsilon=1.0) > 1e-5
    assert discrete_gaussian_sigma(sensitivity=1, epsilon=1.0, delta=1e-5) == pytest.approx(3.7405, abs=1e-4)


@settings(max_examples=15, deadline=None)
@given(
    sensitivity=st.integers(min_value=1, max_value=5),
    epsilon=st.floats(min_value=0.05, max_value=5),
    delta=st.floats(min_value=1e-10, max_value=1e-2),
)
def test_pricing_the_discrete_sigma_never_charges_more_than_epsilon(
    sensitivity: int, epsilon: float, delta: float
) -> None:
    sigma = discrete_gaussian_sigma(sensitivity=sensitivity, epsilon=epsilon, delta=delta)
    assert discrete_gaussian_delta(sensitivity=sensitivity, sigma=sigma, epsilon=epsilon) <= delta
    loss = discrete_gaussian_privacy_loss(sensitivity=sensitivity, sigma=sigma, delta=delta)
    assert loss.epsilon <= epsilon and loss.delta == delta


def test_non_integer_sensitivity_is_rounded_up() -> None:
    assert discrete_gaussian_sigma(sensitivity=1.5, epsilon=1.0, delta=1e-5) == discrete_gaussian_sigma(
        sensitivity=2, epsilon=1.0, delta=1e-5
    )


# --- mechanisms ---------------------------------------------------------------------------------------------


def test_discrete_mechanism_returns_ints_centred_on_the_value() -> None:
    # σ ≈ 3.74 (ε = 1, δ = 1e-5): the mean of 5 000 outputs is within 4·σ/sqrt(5000) = 0.21 of the value.
    rng = random.Random(SEED)
    outputs = [
        discrete_gaussian_mechanism(500, sensitivity=1, epsilon=1.0, delta=1e-5, rng=rng) for _ in range(5000)
    ]
    assert all(type(x) is int for x in outputs)
    sigma = discrete_gaussian_sigma(sensitivity=1, epsilon=1.0, delta=1e-5)
    assert abs(math.fsum(outputs) / len(outputs) - 500) <= 4 * sigma / math.sqrt(len(outputs))


def test_discrete_mechanism_rejects_a_float_value() -> None:
    with pytest.raises(MechanismError, match="value must be an int") as caught:
        discrete_gaussian_mechanism(2.5, sensitivity=1, epsilon=1.0, delta=1e-5, rng=random.Random(SEED))  # type: ignore[arg-type]
    assert caught.value.hint is not None and "gaussian_mechanism" in caught.value.hint


def test_grid_mechanism_outputs_multiples_of_the_grid_step() -> None:
    step = Fraction(gaussian_grid_step(sensitivity=1.0, epsilon=1.0, delta=1e-5))
    assert step == Fraction(1, 2**20)  # min(Δ = 1, σ ≈ 3.73) = 1, over 2^20
    rng = random.Random(SEED)
    for _ in range(50):
        output = gaussian_mechanism(0.123456789, sensitivity=1.0, epsilon=1.0, delta=1e-5, rng=rng)
        assert type(output) is float
        assert (Fraction(output) / step).denominator == 1


def test_grid_mechanism_has_the_analytic_variance() -> None:
    # The grid noise is γ·N_Z(0, σ_g²) with σ_g calibrated for the grid sensitivity floor(Δ/γ) + 1, i.e.
    # Δ(1 + 2^-20): its standard deviation is the analytic σ within ~1e-6. For n = 4000 draws mean(x²) has
    # standard error σ²·sqrt(2/n); allow 4 (±9%).
    sigma = analytic_gaussian_sigma(sensitivity=1.0, epsilon=0.5, delta=1e-5)
    rng = random.Random(SEED)
    draws = 4000
    noise = [
        gaussian_mechanism(10.0, sensitivity=1.0, epsilon=0.5, delta=1e-5, rng=rng) - 10.0
        for _ in range(draws)
    ]
    second_moment = math.fsum(x * x for x in noise) / draws
    assert abs(second_moment - sigma**2) <= 4 * sigma**2 * math.sqrt(2 / draws)


def test_grid_mechanism_is_calibrated_with_theorem_7_on_the_grid_sensitivity() -> None:
    step = Fraction(gaussian_grid_step(sensitivity=3.0, epsilon=0.3, delta=1e-6))
    grid_sensitivity = math.floor(Fraction(3) / step) + 1
    sigma = discrete_gaussian_sigma(sensitivity=grid_sensitivity, epsilon=0.3, delta=1e-6)
    assert discrete_gaussian_delta(sensitivity=grid_sensitivity, sigma=sigma, epsilon=0.3) <= 1e-6
    loss = discrete_gaussian_privacy_loss(sensitivity=grid_sensitivity, sigma=sigma, delta=1e-6)
    assert loss.epsilon <= 0.3
    # And in real units it is essentially the continuous analytic σ for Δ = 3.
    assert float(sigma * step) == pytest.approx(
        analytic_gaussian_sigma(sensitivity=3.0, epsilon=0.3, delta=1e-6), rel=1e-5
    )


@pytest.mark.parametrize("value", [math.inf, math.nan, "1"])
def test_grid_mechanism_rejects_a_non_finite_value(value: object) -> None:
    with pytest.raises(MechanismError, match="value must be a finite number"):
        gaussian_mechanism(value, sensitivity=1.0, epsilon=1.0, delta=1e-5, rng=random.Random(SEED))  # type: ignore[arg-type]


# --- validation ---------------------------------------------------------------------------------------------

CALIBRATIONS = [
    classical_gaussian_sigma,
    analytic_gaussian_sigma,
    discrete_gaussian_sigma,
    gaussian_grid_step,
]


@pytest.mark.parametrize("calibrate", CALIBRATIONS)
@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-5, math.nan, math.inf])
def test_rejects_a_bad_delta(calibrate, delta: float) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MechanismError, match="delta must be a number strictly between 0 and 1"):
        calibrate(sensitivity=1.0, epsilon=0.5, delta=delta)


@pytest.mark.parametrize("calibrate", CALIBRATIONS)
@pytest.mark.parametrize("epsilon", [0.0, -0.5, math.nan, math.inf])
def test_rejects_a_bad_epsilon(calibrate, epsilon: float) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MechanismError, match="epsilon must be a finite number greater than 0"):
        calibrate(sensitivity=1.0, epsilon=epsilon, delta=1e-5)


@pytest.mark.parametrize("calibrate", CALIBRATIONS)
@pytest.mark.parametrize("sensitivity", [0.0, -1.0, math.nan, math.inf])
def test_rejects_a_bad_sensitivity(calibrate, sensitivity: float) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MechanismError, match="sensitivity must be a finite number greater than 0"):
        calibrate(sensitivity=sensitivity, epsilon=0.5, delta=1e-5)


@pytest.mark.parametrize("sigma", [0.0, -1.0, math.inf])
def test_privacy_maps_reject_a_bad_sigma(sigma: float) -> None:
    for price in (gaussian_privacy_loss, discrete_gaussian_privacy_loss):
        with pytest.raises(MechanismError, match="sigma must be a finite number greater than 0"):
            price(sensitivity=1, sigma=sigma, delta=1e-5)
    with pytest.raises(MechanismError, match="sigma must be a finite number greater than 0"):
        gaussian_rho(sensitivity=1.0, sigma=sigma)


def test_zcdp_conversion_rejects_bad_arguments() -> None:
    with pytest.raises(MechanismError, match="rho must be a finite number >= 0"):
        zcdp_to_approx_dp(-0.1, 1e-5)
    with pytest.raises(MechanismError, match="delta must be a number strictly between 0 and 1"):
        zcdp_to_approx_dp(0.1, 0.0)


# --- upper tails (τ-thresholding) ----------------------------------------------------------------------------


def discrete_gaussian_tail(sigma: float, m: int) -> float:
    """P[Y >= m], Y ~ N_Z(0, σ²), by brute-force summation."""
    reach = int(60 * sigma) + abs(m) + 10
    weight = {y: math.exp(-y * y / (2 * sigma * sigma)) for y in range(-reach, reach + 1)}
    return math.fsum(w for y, w in weight.items() if y >= m) / math.fsum(weight.values())


@pytest.mark.parametrize(("sensitivity", "probability"), [(1.0, 1e-7), (2.0, 1e-3), (3.0, 0.05)])
def test_discrete_upper_tail_is_exceeded_at_most_with_the_probability(
    sensitivity: float, probability: float
) -> None:
    sigma = discrete_gaussian_sigma(sensitivity=sensitivity, epsilon=0.5, delta=1e-6)
    tail = discrete_gaussian_upper_tail(
        sensitivity=sensitivity, epsilon=0.5, delta=1e-6, probability=probability
    )
    assert discrete_gaussian_tail(sigma, tail + 1) <= probability, "P[value + Y > value + t] <= probability"
    # and not much more than needed: the continuous quantile σ·Φ⁻¹(1 − p), within one unit
    assert abs(tail - sigma * norm.isf(probability)) <= 1.0


def test_grid_upper_tail_is_the_continuous_quantile_plus_at_most_a_grid_step() -> None:
    for sensitivity in (1.0, math.sqrt(3), 300.0):
        sigma = analytic_gaussian_sigma(sensitivity=sensitivity, epsilon=0.5, delta=1e-6)
        tail = gaussian_upper_tail(sensitivity=sensitivity, epsilon=0.5, delta=1e-6, probability=1e-7)
        step = gaussian_grid_step(sensitivity=sensitivity, epsilon=0.5, delta=1e-6)
        quantile = sigma * norm.isf(1e-7)
        assert quantile * (1 - 1e-5) <= tail <= quantile * (1 + 1e-5) + 2 * step


def test_grid_upper_tail_bounds_the_noise_of_the_grid_mechanism() -> None:
    # P[noise > t] <= 0.02 at Δ = 1: over 4 000 draws at most 80 expected; a binomial 4-s.e. ceiling.
    tail = gaussian_upper_tail(sensitivity=1.0, epsilon=1.0, delta=1e-5, probability=0.02)
    rng = random.Random(SEED)
    above = sum(
        gaussian_mechanism(0.3, sensitivity=1.0, epsilon=1.0, delta=1e-5, rng=rng) > 0.3 + tail
        for _ in range(4000)
    )
    assert above <= 80 + 4 * math.sqrt(4000 * 0.02 * 0.98)


@pytest.mark.parametrize("probability", [0.0, 1.0, -0.5, float("nan")])
def test_upper_tails_reject_a_bad_probability(probability: float) -> None:
    for tail in (gaussian_upper_tail, discrete_gaussian_upper_tail):
        with pytest.raises(MechanismError, match="probability must be strictly between 0 and 1"):
            tail(sensitivity=1.0, epsilon=1.0, delta=1e-6, probability=probability)


@pytest.mark.parametrize(("m", "sigma"), [(1, 0.5), (2, 0.4), (1, 2.0)])
def test_the_discrete_tails_lower_bound_is_canonne_kamath_steinkes(m: int, sigma: float) -> None:
    """P[Y >= m] >= Q(m/σ)/(1 + 3·exp(−2π²σ²)) for Y ~ N_Z(0, σ²) (the module docstring's bound), less the
    float margin — and below the exact tail. At small σ the Poisson factor is far from 1 (1.02 at σ = 0.5):
    a bound without it is not the proven one, even where it happens to hold (fresh mutation sample, seed
    1129)."""
    expected = norm.sf(m / sigma) / (1 + 3 * math.exp(-2 * math.pi**2 * sigma**2)) * (1 - 1e-9)
    assert gaussian._dg_tail_lower(m, sigma) == pytest.approx(expected, rel=1e-12)
    weights = {k: math.exp(-(k**2) / (2 * sigma**2)) for k in range(-60, 61)}
    exact = sum(w for k, w in weights.items() if k >= m) / sum(weights.values())
    assert gaussian._dg_tail_lower(m, sigma) <= exact
