"""DP top-k selection (peeling permute-and-flip): its exact distribution on a tiny example, the e^ε bound
on neighbours, its utility bound, privacy map and validation."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from fractions import Fraction

import pytest

from budget.loss import PrivacyLoss
from mechanisms.errors import MechanismError
from mechanisms.top_k import (
    dp_top_k,
    top_k_privacy_loss,
    top_k_rho,
    top_k_round_epsilon,
    top_k_score_gap_bound,
)

SEED = 1618


def permute_and_flip(scores: list[int], rate: float) -> dict[int, float]:
    """The exact distribution of one permute-and-flip round: candidate r is released when it is visited
    before a candidate accepts and accepts itself, with probability exp(-rate·gap) — averaged over every
    visiting order."""
    best = max(scores)
    accept = [math.exp(-rate * (best - score)) for score in scores]
    orders = list(itertools.permutations(range(len(scores))))
    released = dict.fromkeys(range(len(scores)), 0.0)
    for order in orders:
        reach = 1.0
        for candidate in order:
            released[candidate] += reach * accept[candidate] / len(orders)
            reach *= 1 - accept[candidate]
    return released


def peeling(scores: list[int], *, k: int, epsilon: float, sensitivity: int, monotone: bool) -> dict:
    """The exact distribution of the ordered k-tuple dp_top_k releases (the definition, round by round)."""
    rate = (epsilon / k) / ((1 if monotone else 2) * sensitivity)
    outcomes: dict[tuple[int, ...], float] = {(): 1.0}
    for _ in range(k):
        following: dict[tuple[int, ...], float] = {}
        for chosen, probability in outcomes.items():
            remaining = [i for i in range(len(scores)) if i not in chosen]
            for position, p in permute_and_flip([scores[i] for i in remaining], rate).items():
                following[(*chosen, remaining[position])] = probability * p
        outcomes = following
    return outcomes


def test_the_released_tuples_follow_the_definition_on_a_tiny_example() -> None:
    # scores (3, 2, 0, 0), Δ = 1, ε = 2, k = 2, monotone: each round accepts with exp(-gap). 40 000 draws;
    # each of the 12 ordered pairs within 4.5 standard errors of its exact probability (a false alarm
    # somewhere has probability < 12·7e-6).
    scores = [3, 2, 0, 0]
    exact = peeling(scores, k=2, epsilon=2.0, sensitivity=1, monotone=True)
    assert math.isclose(sum(exact.values()), 1.0)
    rng = random.Random(SEED)
    draws = 40_000
    counts = Counter(
        tuple(dp_top_k(scores, k=2, epsilon=2.0, sensitivity=1, rng=rng, monotone=True)) for _ in range(draws)
    )
    assert set(counts) <= set(exact)
    for outcome, probability in exact.items():
        error = 4.5 * math.sqrt(probability * (1 - probability) / draws)
        assert abs(counts[outcome] / draws - probability) <= error, outcome


def test_without_monotonicity_the_rounds_use_half_the_rate() -> None:
    # scores (4, 0), Δ = 1, ε = 2, k = 1, general: the loser is released with e^-(2·4/2)/2 = e^-4/2 = 0.00916
    rng = random.Random(SEED)
    draws = 40_000
    losers = sum(dp_top_k([4, 0], k=1, epsilon=2.0, sensitivity=1, rng=rng)[0] for _ in range(draws))
    p = math.exp(-4) / 2
    assert abs(losers / draws - p) <= 4.5 * math.sqrt(p * (1 - p) / draws)


@pytest.mark.parametrize("monotone", [True, False])
def test_neighbouring_scores_change_every_tuple_by_at_most_e_to_the_epsilon(monotone: bool) -> None:
    # Exact distributions of random neighbours: one person adds at most Δ to scores (monotone), or moves
    # each score by at most Δ either way (general). Every ordered tuple's probability ratio <= e^ε.
    rng = random.Random(SEED)
    epsilon, sensitivity = 1.5, 2
    for _ in range(40):
        scores = [rng.randrange(12) for _ in range(4)]
        low = 0 if monotone else -sensitivity
        neighbour = [score + rng.randint(low, sensitivity) for score in scores]
        first = peeling(scores, k=2, epsilon=epsilon, sensitivity=sensitivity, monotone=monotone)
        second = peeling(neighbour, k=2, epsilon=epsilon, sensitivity=sensitivity, monotone=monotone)
        for outcome, p in first.items():
            q = second[outcome]
            assert max(p / q, q / p) <= math.exp(epsilon) * (1 + 1e-9), (scores, neighbour, outcome)


def test_selection_prefers_high_counts() -> None:
    # scores 0, 10, 20, 30, 40 (Δ = 1, ε = 1, k = 2, monotone: rate 0.5 per round). The exact probability
    # that each candidate is among the two released rises with its score; 20 000 draws reproduce each
    # within 4.5 standard errors, which keeps the empirical order too (the exact gaps are > 9 errors).
    scores = [0, 10, 20, 30, 40]
    exact = peeling(scores, k=2, epsilon=1.0, sensitivity=1, monotone=True)
    included = [sum(p for outcome, p in exact.items() if i in outcome) for i in range(5)]
    assert included == sorted(included)
    rng = random.Random(SEED)
    draws = 20_000
    counts = Counter()
    for _ in range(draws):
        counts.update(dp_top_k(scores, k=2, epsilon=1.0, sensitivity=1, rng=rng, monotone=True))
    for i, p in enumerate(included):
        assert abs(counts[i] / draws - p) <= 4.5 * math.sqrt(p * (1 - p) / draws)


def test_a_clear_top_k_is_released_in_order() -> None:
    # gaps of 1 000 at Δ = 1, ε = 1, k = 3 (rate 1/3): a wrong pick has probability < 10·e^-333
    rng = random.Random(SEED)
    scores = [5, 3000, 10, 2000, 0, 1000, 7]
    assert {
        tuple(dp_top_k(scores, k=3, epsilon=1.0, sensitivity=1, rng=rng, monotone=True)) for _ in range(30)
    } == {(1, 3, 5)}


def test_asking_for_more_than_there_are_releases_every_candidate_once() -> None:
    rng = random.Random(SEED)
    released = dp_top_k([Fraction(1, 3), 2, 0], k=10, epsilon=1.0, sensitivity=1, rng=rng)
    assert sorted(released) == [0, 1, 2]


def test_round_epsilon_never_overspends() -> None:
    for epsilon, rounds in [(0.1, 3), (1.0, 7), (0.3, 10), (2.0, 1)]:
        share = top_k_round_epsilon(epsilon, rounds)
        assert Fraction(share) * rounds <= Fraction(epsilon)
        assert share == pytest.approx(epsilon / rounds, rel=1e-15)


def test_privacy_map_and_zcdp() -> None:
    assert top_k_privacy_loss(epsilon=0.5) == PrivacyLoss(0.5, 0.0)
    # ten rounds at 0.1 each: 10 · 0.1²/2 = 0.05, a tenth of one ε = 1 release's 0.5
    assert top_k_rho(epsilon=1.0, rounds=10) == pytest.approx(0.05, rel=1e-12)
    assert top_k_rho(epsilon=1.0, rounds=10) >= 10 * top_k_round_epsilon(1.0, 10) ** 2 / 2


def test_score_gap_bound_formula() -> None:
    # (k·Δ/ε)·(ln n + ln(k·outputs/β)) = (5·2/1)·(ln 100 + ln(5·3/0.05))
    bound = top_k_score_gap_bound(
        epsilon=1.0, sensitivity=2, k=5, candidates=100, outputs=3, monotone=True, confidence=0.95
    )
    assert bound == pytest.approx(10 * (math.log(100) + math.log(300)), rel=1e-9)
    general = top_k_score_gap_bound(epsilon=1.0, sensitivity=2, k=5, candidates=100, outputs=3)
    assert general == pytest.approx(2 * bound, rel=1e-9)


def test_score_gap_bound_holds_empirically() -> None:
    # 50 candidates: five at 100, the rest at 0; k = 5, ε = 2, Δ = 1, confidence 0.9: G = 2.5·(ln 50 +
    # ln 50) = 19.6 < 100, so a 0 may be released in at most 10% of the draws — in fact with probability
    # below 5·45·e^-40 per draw, so in none of 2 000.
    scores = [100] * 5 + [0] * 45
    bound = top_k_score_gap_bound(
        epsilon=2.0, sensitivity=1, k=5, candidates=50, confidence=0.9, monotone=True
    )
    assert bound < 100
    rng = random.Random(SEED)
    for _ in range(2000):
        assert sorted(dp_top_k(scores, k=5, epsilon=2.0, sensitivity=1, rng=rng, monotone=True)) == [
            0,
            1,
            2,
            3,
            4,
        ]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"scores": [1, 2], "k": 0}, "k must be a whole number >= 1"),
        ({"scores": [1, 2], "k": True}, "k must be a whole number >= 1"),
        ({"scores": [], "k": 1}, "non-empty sequence"),
        ({"scores": [1.5, 2], "k": 1}, "integers or fractions.Fraction, got float"),
        ({"scores": [1, 2], "k": 1, "epsilon": 0.0}, "epsilon must be a finite number greater than 0"),
        ({"scores": [1, 2], "k": 1, "sensitivity": math.inf}, "sensitivity must be a finite number"),
    ],
)
def test_refuses_bad_parameters(arguments: dict, message: str) -> None:
    parameters = {"epsilon": 1.0, "sensitivity": 1, **arguments}
    with pytest.raises(MechanismError, match=message):
        dp_top_k(rng=random.Random(SEED), **parameters)
