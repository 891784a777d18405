"""Exact discrete Laplace sampling (Canonne, Kamath & Steinke 2020): types, determinism, moments, pmf."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from mechanisms.discrete_laplace import sample_bernoulli_exp, sample_discrete_laplace
from mechanisms.errors import MechanismError

SEED = 20240521
DRAWS = 20_000


def discrete_laplace_moments(scale: float) -> tuple[float, float]:
    """(variance, fourth moment) of P(x) ∝ p^|x|, p = exp(-1/scale), on the integers.

    P(x) = (1-p)/(1+p)·p^|x|. With sum n²p^n = p(1+p)/(1-p)³ and sum n⁴p^n = p(1+p)(1+10p+p²)/(1-p)⁵:
    E[X²] = 2p/(1-p)² and E[X⁴] = 2p(1+10p+p²)/(1-p)⁴ (odd moments vanish by symmetry).
    """
    p = math.exp(-1 / scale)
    one_minus_p = -math.expm1(-1 / scale)
    return 2 * p / one_minus_p**2, 2 * p * (1 + 10 * p + p * p) / one_minus_p**4


def draws(scale: Fraction, count: int = DRAWS, seed: int = SEED) -> list[int]:
    rng = random.Random(seed)
    return [sample_discrete_laplace(scale, rng=rng) for _ in range(count)]


def test_samples_are_python_ints() -> None:
    assert all(type(x) is int for x in draws(Fraction(3), count=200))


def test_same_seed_gives_same_draws() -> None:
    assert draws(Fraction(7, 2), count=50) == draws(Fraction(7, 2), count=50)


def test_variance_matches_the_distribution() -> None:
    # The mean is known (0), so m2 = mean(x²) is an unbiased variance estimate with
    # Var[m2] = (E[X⁴] - σ⁴)/n. By the CLT m2 lies within 4 standard errors of σ² except with
    # probability ~6e-5; for scale 3 that is 4·sqrt((1926 - 318)/20000) ≈ 1.13 around σ² ≈ 17.83 (6.4%).
    variance, fourth = discrete_laplace_moments(3.0)
    second_moment = math.fsum(x * x for x in draws(Fraction(3))) / DRAWS
    assert abs(second_moment - variance) <= 4 * math.sqrt((fourth - variance**2) / DRAWS)


def test_mean_is_zero() -> None:
    # The sample mean has standard error sqrt(σ²/n); allow 4 of them.
    variance, _ = discrete_laplace_moments(3.0)
    mean = math.fsum(draws(Fraction(3))) / DRAWS
    assert abs(mean) <= 4 * math.sqrt(variance / DRAWS)


@pytest.mark.parametrize("scale", [Fraction(1), Fraction(5, 2), Fraction(1, 3)])
def test_zero_has_its_exact_probability(scale: Fraction) -> None:
    # P(0) = (1-p)/(1+p), p = exp(-1/scale): ≈ 0.462 for scale 1. Without rejecting "negative zero" it would
    # be the geometric's 1-p ≈ 0.632, far outside this binomial band of 4 standard errors (±0.014).
    # Scales 5/2 and 1/3 exercise floor(X/s) with s > 1 and a numerator t = 1.
    p = math.exp(-1 / scale)
    p_zero = (1 - p) / (1 + p)
    observed = sum(x == 0 for x in draws(scale)) / DRAWS
    assert abs(observed - p_zero) <= 4 * math.sqrt(p_zero * (1 - p_zero) / DRAWS)


def test_positive_and_negative_values_are_equally_likely() -> None:
    samples = draws(Fraction(1))
    nonzero = sum(x != 0 for x in samples)
    positive = sum(x > 0 for x in samples)
    assert abs(positive - nonzero / 2) <= 4 * math.sqrt(nonzero / 4)


def test_tiny_scale_gives_the_exact_answer() -> None:
    # P(x != 0) = 2p/(1+p) with p = exp(-2**32): zero in any float.
    assert draws(Fraction(1, 2**32), count=100) == [0] * 100


def test_huge_scale_is_sampled_without_iterating_over_it() -> None:
    assert max(abs(x) for x in draws(Fraction(2**80), count=100)) > 2**70


def test_accepts_an_int_scale() -> None:
    assert type(sample_discrete_laplace(2, rng=random.Random(SEED))) is int


def test_rejects_a_float_scale() -> None:
    with pytest.raises(MechanismError, match="scale must be an exact Fraction or int, got float"):
        sample_discrete_laplace(2.5, rng=random.Random(SEED))  # type: ignore[arg-type]


@pytest.mark.parametrize("scale", [Fraction(0), Fraction(-1, 2)])
def test_rejects_a_non_positive_scale(scale: Fraction) -> None:
    with pytest.raises(MechanismError, match="scale must be > 0"):
        sample_discrete_laplace(scale, rng=random.Random(SEED))


@pytest.mark.parametrize("gamma", [Fraction(1, 2), Fraction(1), Fraction(5, 2)])
def test_bernoulli_exp_has_probability_exp_minus_gamma(gamma: Fraction) -> None:
    rng = random.Random(SEED)
    expected = math.exp(-gamma)
    observed = sum(sample_bernoulli_exp(gamma, rng=rng) for _ in range(DRAWS)) / DRAWS
    assert abs(observed - expected) <= 4 * math.sqrt(expected * (1 - expected) / DRAWS)


def test_bernoulli_exp_of_zero_is_always_true() -> None:
    rng = random.Random(SEED)
    assert all(sample_bernoulli_exp(Fraction(0), rng=rng) for _ in range(100))


def test_bernoulli_exp_rejects_a_negative_gamma() -> None:
    with pytest.raises(MechanismError, match="gamma must be >= 0"):
        sample_bernoulli_exp(Fraction(-1), rng=random.Random(SEED))
