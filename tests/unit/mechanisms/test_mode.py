"""DP MODE over a public domain: the monotone selection, its utility bound, its privacy map, validation."""

from __future__ import annotations

import math
import random

import pytest

from budget.loss import PrivacyLoss
from mechanisms.errors import MechanismError
from mechanisms.mode import dp_mode_from_histogram, mode_count_gap_bound, mode_privacy_loss

SEED = 2718


def test_a_clear_majority_is_chosen() -> None:
    # gap 800 rows at L = 1, ε = 1: a wrong answer has probability <= 2·e^-800
    rng = random.Random(SEED)
    assert {
        dp_mode_from_histogram([200, 1000, 200], epsilon=1.0, sensitivity=1, rng=rng) for _ in range(50)
    } == {1}


def test_an_empty_histogram_gives_every_value_alike() -> None:
    # 3 values, 6 000 draws: 2 000 expected each, standard error 36.5; allow 4 (±146)
    rng = random.Random(SEED)
    draws = [dp_mode_from_histogram([0, 0, 0], epsilon=1.0, sensitivity=5, rng=rng) for _ in range(6000)]
    assert all(abs(draws.count(value) - 2000) <= 146 for value in range(3))


def test_the_loser_of_two_has_the_monotone_probability() -> None:
    # counts (K·10, 0) with sensitivity K·10, ε = 1: the loser is released with e^-1/2 = 0.18394 (monotone
    # permute-and-flip, mechanisms/exponential.py); 20 000 draws, standard error 0.0027, allow 4
    rng = random.Random(SEED)
    draws = 20_000
    losers = sum(
        dp_mode_from_histogram([25_200, 0], epsilon=1.0, sensitivity=25_200, rng=rng) for _ in range(draws)
    )
    assert abs(losers / draws - math.exp(-1) / 2) <= 4 * math.sqrt(0.184 * 0.816 / draws)


def test_count_gap_bound_formula() -> None:
    # (L/ε)·ln(candidates·outputs/(1 − confidence)) = (3/0.5)·ln(3·4/0.05)
    bound = mode_count_gap_bound(epsilon=0.5, max_contributions=3, candidates=3, outputs=4)
    assert bound == pytest.approx(6 * math.log(240), rel=1e-12)


def test_count_gap_bound_holds_empirically() -> None:
    # counts (100, 90, 0) at L = 5, ε = 1, confidence 0.9: G = 5·ln(30) = 17.0, so releasing 90 (a gap of
    # 10) is allowed but releasing 0 (a gap of 100) must happen in at most 10% of the draws — in fact with
    # probability <= e^-20/2, so in none of 5 000 draws except with probability 5e-6.
    bound = mode_count_gap_bound(epsilon=1.0, max_contributions=5, candidates=3, confidence=0.9)
    assert 10 < bound < 100
    rng = random.Random(SEED)
    draws = [dp_mode_from_histogram([100, 90, 0], epsilon=1.0, sensitivity=5, rng=rng) for _ in range(5000)]
    assert draws.count(2) == 0


def test_privacy_loss_is_epsilon_pure() -> None:
    assert mode_privacy_loss(epsilon=0.25) == PrivacyLoss(0.25, 0.0)


@pytest.mark.parametrize("counts", [[], [1, -1], [1.5, 2], [True, 3]])
def test_rejects_counts_that_are_not_non_negative_integers(counts: list[object]) -> None:
    with pytest.raises(MechanismError, match="non-negative integers"):
        dp_mode_from_histogram(counts, epsilon=1.0, sensitivity=1, rng=random.Random(SEED))  # type: ignore[arg-type]


@pytest.mark.parametrize("sensitivity", [0, -1, 1.5, True])
def test_rejects_a_bad_sensitivity(sensitivity: object) -> None:
    with pytest.raises(MechanismError, match="sensitivity must be a whole number"):
        dp_mode_from_histogram([1, 2], epsilon=1.0, sensitivity=sensitivity, rng=random.Random(SEED))  # type: ignore[arg-type]


def test_rejects_a_bad_epsilon() -> None:
    with pytest.raises(MechanismError, match="epsilon"):
        dp_mode_from_histogram([1, 2], epsilon=0.0, sensitivity=1, rng=random.Random(SEED))


def test_gap_bound_validates_its_counts() -> None:
    with pytest.raises(MechanismError, match="outputs must be a whole number"):
        mode_count_gap_bound(epsilon=1.0, max_contributions=1, candidates=3, outputs=0)
    with pytest.raises(MechanismError, match="candidates must be a whole number"):
        mode_count_gap_bound(epsilon=1.0, max_contributions=1, candidates=0)
    with pytest.raises(MechanismError, match="confidence"):
        mode_count_gap_bound(epsilon=1.0, max_contributions=1, candidates=3, confidence=1.0)
