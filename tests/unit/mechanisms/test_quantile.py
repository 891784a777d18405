"""DP quantiles over a public grid: utility theorem, MIN/MAX, exact selection distribution, validation."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from budget.loss import PrivacyLoss
from mechanisms.errors import MechanismError
from mechanisms.quantile import (
    DEFAULT_GRID_SIZE,
    dp_quantile,
    dp_quantile_from_histogram,
    quantile_grid,
    quantile_privacy_loss,
    quantile_rank_error_bound,
)

SEED = 31337
N = 10_001


@pytest.fixture(scope="module")
def uniform_values() -> np.ndarray:
    return np.sort(np.random.default_rng(SEED).uniform(0.0, 1.0, N))


def rank_error(values: np.ndarray, y: float, q: float) -> float:
    return abs(int(np.searchsorted(values, y, side="left")) - q * len(values))


def best_grid_rank_error(values: np.ndarray, q: float, *, lower: float, upper: float) -> float:
    grid = quantile_grid(lower=lower, upper=upper, grid_size=DEFAULT_GRID_SIZE)
    return float(np.min(np.abs(np.searchsorted(values, grid, side="left") - q * len(values))))


def test_median_of_uniform_values_is_within_the_utility_bound(uniform_values: np.ndarray) -> None:
    # Utility theorem (module docstring): with probability >= 1 - β the rank error is at most the best grid
    # point's plus (2L/ε)·ln((G + 1)/β). With β = 1e-6 per run and 100 runs, the chance that any run
    # fails is <= 1e-4 (union bound). ε = 1, L = 1, G = 1000: 2·(ln 1001 + ln 1e6) = 41.4 ranks.
    rng = random.Random(SEED)
    best = best_grid_rank_error(uniform_values, 0.5, lower=0.0, upper=1.0)
    allowed = best + 2 * (math.log(DEFAULT_GRID_SIZE + 1) - math.log(1e-6))
    answers = [
        dp_quantile(uniform_values, q=0.5, lower=0.0, upper=1.0, epsilon=1.0, rng=rng) for _ in range(100)
    ]
    assert max(rank_error(uniform_values, y, 0.5) for y in answers) <= allowed
    # In value: 41 ranks of 10 001 uniform values is about 0.004, plus one grid step 0.001.
    assert max(abs(y - float(np.median(uniform_values))) for y in answers) < 0.01


def test_percentile_90(uniform_values: np.ndarray) -> None:
    # Same bound for q = 0.9 (an inexact binary fraction: q·n is handled as an exact rational).
    rng = random.Random(SEED + 1)
    best = best_grid_rank_error(uniform_values, 0.9, lower=0.0, upper=1.0)
    allowed = best + 2 * (math.log(DEFAULT_GRID_SIZE + 1) - math.log(1e-6))
    for _ in range(20):
        y = dp_quantile(uniform_values, q=0.9, lower=0.0, upper=1.0, epsilon=1.0, rng=rng)
        assert rank_error(uniform_values, y, 0.9) <= allowed


@pytest.mark.parametrize(("q", "extreme"), [(0.0, 0.0), (1.0, 100.0)])
def test_min_and_max_land_near_the_extremes(q: float, extreme: float) -> None:
    # Values uniform on [0, 100] fill the range, so the extreme ranks sit next to the bounds. With
    # β = 1e-6 at most 41.4 values lie beyond the released MIN/MAX; 42 of 10 001 uniform values span about
    # 0.42, plus a grid step of 0.1: the answer is within 1.0 of the bound.
    values = np.sort(np.random.default_rng(SEED).uniform(0.0, 100.0, N))
    rng = random.Random(SEED)
    for _ in range(20):
        y = dp_quantile(values, q=q, lower=0.0, upper=100.0, epsilon=1.0, rng=rng)
        assert 0.0 <= y <= 100.0
        assert abs(y - extreme) <= 1.0


def test_min_is_accurate_in_rank_not_in_value() -> None:
    # Documented limitation: data in [40, 60] with bounds [0, 100]. Every grid point <= 40 has the best
    # score, so the released MIN may be anywhere in [0, ~40] — but never far above the true minimum in rank.
    values = np.sort(np.random.default_rng(SEED).uniform(40.0, 60.0, N))
    rng = random.Random(SEED)
    allowed = 2 * (math.log(DEFAULT_GRID_SIZE + 1) - math.log(1e-6))
    answers = [dp_quantile(values, q=0.0, lower=0.0, upper=100.0, epsilon=1.0, rng=rng) for _ in range(50)]
    assert all(int(np.searchsorted(values, y, side="left")) <= allowed for y in answers)
    assert min(answers) < 30  # spread over [0, 40], not concentrated at 40


def test_selection_distribution_is_exact_on_a_tiny_case() -> None:
    # values (1, 2, 3), q = 0.5, grid 0..4 (G = 4): #{x < y} = 0, 0, 1, 2, 3 and q·n = 1.5, so the scores
    # are -1.5, -1.5, -0.5, -0.5, -1.5 (gaps 1, 1, 0, 0, 1) with Δ = 1, ε = 1: acceptance probabilities
    # e^-0.5 or 1. Exact permute-and-flip probabilities by enumerating the 120 visiting orders; chi-square
    # with 4 degrees of freedom over 20 000 draws, P(χ²₄ > 30) = 5e-6.
    accept = [math.exp(-0.5), math.exp(-0.5), 1.0, 1.0, math.exp(-0.5)]
    expected = [0.0] * 5
    for order in itertools.permutations(range(5)):
        survive = 1 / 120
        for candidate in order:
            expected[candidate] += survive * accept[candidate]
            survive *= 1 - accept[candidate]
    rng = random.Random(SEED)
    draws = 20_000
    counts = dict.fromkeys([0.0, 1.0, 2.0, 3.0, 4.0], 0)
    for _ in range(draws):
        counts[
            dp_quantile([1.0, 2.0, 3.0], q=0.5, lower=0.0, upper=4.0, epsilon=1.0, rng=rng, grid_size=4)
        ] += 1
    statistic = sum((counts[float(i)] - draws * p) ** 2 / (draws * p) for i, p in enumerate(expected))
    assert statistic < 30


def test_answers_are_grid_points() -> None:
    grid = set(quantile_grid(lower=-5.0, upper=5.0, grid_size=20).tolist())
    rng = random.Random(SEED)
    values = sorted(random.Random(1).uniform(-5, 5) for _ in range(100))
    for q in (0.0, 0.25, 0.5, 1.0):
        assert dp_quantile(values, q=q, lower=-5.0, upper=5.0, epsilon=0.5, rng=rng, grid_size=20) in grid


def test_grid_includes_both_bounds_exactly() -> None:
    grid = quantile_grid(lower=0.1, upper=0.7, grid_size=3)
    assert grid[0] == 0.1 and grid[-1] == 0.7 and len(grid) == 4


def test_empty_column_returns_a_grid_point() -> None:
    y = dp_quantile([], q=0.5, lower=0.0, upper=1.0, epsilon=1.0, rng=random.Random(SEED), grid_size=10)
    assert y in set(quantile_grid(lower=0.0, upper=1.0, grid_size=10).tolist())


def test_more_contributions_mean_a_wider_spread(uniform_values: np.ndarray) -> None:
    # Sensitivity L multiplies the noise in rank by L: the mean rank error at L = 50 must exceed L = 1's.
    def mean_error(contributions: int) -> float:
        rng = random.Random(SEED)
        answers = [
            dp_quantile(
                uniform_values,
                q=0.5,
                lower=0.0,
                upper=1.0,
                epsilon=1.0,
                rng=rng,
                max_contributions=contributions,
            )
            for _ in range(30)
        ]
        return sum(rank_error(uniform_values, y, 0.5) for y in answers) / len(answers)

    assert mean_error(50) > mean_error(1)


def test_privacy_loss_and_rank_bound() -> None:
    assert quantile_privacy_loss(epsilon=0.5) == PrivacyLoss(0.5, 0.0)
    assert quantile_rank_error_bound(epsilon=1.0) == pytest.approx(2 * math.log(1001 / 0.05), rel=1e-12)
    assert quantile_rank_error_bound(epsilon=0.5, max_contributions=3, grid_size=99) == pytest.approx(
        12 * math.log(100 / 0.05), rel=1e-12
    )


# --- validation ---------------------------------------------------------------------------------------------


def call(values: object = (0.2, 0.4), **overrides: object) -> float:
    arguments: dict[str, object] = {"q": 0.5, "lower": 0.0, "upper": 1.0, "epsilon": 1.0}
    arguments.update(overrides)
    return dp_quantile(values, rng=random.Random(SEED), **arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize("q", [-0.1, 1.5, math.nan, True])
def test_rejects_q_outside_0_1(q: float) -> None:
    with pytest.raises(MechanismError, match="q must be a number between 0 and 1"):
        call(q=q)


@pytest.mark.parametrize(("lower", "upper"), [(1.0, 1.0), (2.0, 1.0), (-math.inf, 1.0), (0.0, math.nan)])
def test_rejects_bad_bounds(lower: float, upper: float) -> None:
    with pytest.raises(MechanismError, match=r"lower must be less than upper|must be a finite number"):
        call(lower=lower, upper=upper)


@pytest.mark.parametrize("epsilon", [0.0, -1.0, math.inf])
def test_rejects_a_bad_epsilon(epsilon: float) -> None:
    with pytest.raises(MechanismError, match="epsilon must be a finite number greater than 0"):
        call(epsilon=epsilon)


@pytest.mark.parametrize(("name", "value"), [("max_contributions", 0), ("grid_size", 0), ("grid_size", 2.5)])
def test_rejects_bad_counts(name: str, value: object) -> None:
    with pytest.raises(MechanismError, match=f"{name} must be a whole number >= 1"):
        call(**{name: value})


def test_rejects_a_huge_grid() -> None:
    with pytest.raises(MechanismError, match="grid_size must be at most"):
        call(grid_size=10**7)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ((0.5, 0.123456789), "sorted ascending"),
        ((0.1, 5.123456789), "^sorted_values must lie within \\[lower, upper\\]$"),
        ((-3.987654321, 0.5), "^sorted_values must lie within \\[lower, upper\\]$"),
        ((0.1, math.nan), "^sorted_values must not contain NaN$"),
        ([[0.1, 0.2]], "one-dimensional"),
        (("a", "b"), "^sorted_values must be a sequence of numbers$"),
    ],
)
def test_rejects_bad_values_without_quoting_them(values: object, message: str) -> None:
    with pytest.raises(MechanismError, match=message) as caught:
        call(values)
    assert "123456789" not in str(caught.value) and "987654321" not in str(caught.value)
    assert caught.value.hint


def test_histogram_variant_matches_the_sorted_values_variant() -> None:
    """Same scores, same seed, same selection: the engine's histogram is just a faster way to count."""
    values = sorted(random.Random(5).uniform(0, 100) for _ in range(2001))
    grid_size = 100
    counts = [0] * grid_size
    for value in values:
        counts[min(grid_size - 1, int(value * grid_size / 100))] += 1
    for q in (0.0, 0.25, 0.5, 1.0):
        from_values = dp_quantile(
            values, q=q, lower=0, upper=100, epsilon=1.0, rng=random.Random(9), grid_size=grid_size
        )
        from_histogram = dp_quantile_from_histogram(
            counts, q=q, lower=0, upper=100, epsilon=1.0, sensitivity=1, rng=random.Random(9)
        )
        assert from_histogram == from_values


def test_histogram_median_is_near_the_true_median() -> None:
    counts = [0] * 1000
    counts[399] = counts[400] = 5_000  # half the mass just below 40.0, half just above
    for seed in range(20):
        median = dp_quantile_from_histogram(
            counts, q=0.5, lower=0, upper=100, epsilon=1.0, sensitivity=1, rng=random.Random(seed)
        )
        # every other grid point is >= 5,000 ranks off: the exact median grid point wins
        assert median == pytest.approx(40.0)


def test_histogram_rejects_fractional_counts() -> None:
    with pytest.raises(MechanismError, match="non-negative integers"):
        dp_quantile_from_histogram(
            [1, 2.5], q=0.5, lower=0, upper=1, epsilon=1.0, sensitivity=1, rng=random.Random(1)
        )  # type: ignore[list-item]
