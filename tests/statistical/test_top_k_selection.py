"""DP top-k (mechanisms/top_k.py) against its definition, on long seeded runs.

* On a small example the released ordered triples follow the peeling permute-and-flip distribution
  exactly: Pearson's χ² over every triple stays below the χ² quantile at 1 − 10⁻⁶ (the chance that this
  test fails although the sampler is right).
* Selection prefers high counts: the exact probability that a candidate is among the k released rises with
  its score, and the empirical frequencies stay within 4.5 standard errors of it. The exact probabilities
  come from a different route than the sampler: permute-and-flip at rate λ is report-noisy-max with
  Exponential(λ) noise (Ding et al. 2021), whose winning probabilities are one-dimensional integrals.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter

import pytest
from scipy import integrate, stats

from mechanisms.top_k import dp_top_k

pytestmark = pytest.mark.slow

SEED = 2019
FAILURE = 1e-6


def permute_and_flip(scores: list[int], rate: float) -> list[float]:
    best = max(scores)
    accept = [math.exp(-rate * (best - score)) for score in scores]
    orders = list(itertools.permutations(range(len(scores))))
    released = [0.0] * len(scores)
    for order in orders:
        reach = 1.0
        for candidate in order:
            released[candidate] += reach * accept[candidate] / len(orders)
            reach *= 1 - accept[candidate]
    return released


def noisy_max(scores: list[int], rate: float) -> list[float]:
    """P(candidate r has the largest score + Exponential(rate) noise), by integration over r's noise."""

    def below(t: float) -> float:
        return 1 - math.exp(-rate * t) if t > 0 else 0.0

    result = []
    for r, score in enumerate(scores):
        others = [s for i, s in enumerate(scores) if i != r]

        def density(z: float, score: int = score, others: list[int] = others) -> float:
            return rate * math.exp(-rate * z) * math.prod(below(score + z - other) for other in others)

        result.append(integrate.quad(density, 0, math.inf, limit=200, epsabs=1e-13)[0])
    return result


def peeling(scores: list[int], *, k: int, rate: float, one_round) -> dict[tuple[int, ...], float]:  # type: ignore[no-untyped-def]
    outcomes: dict[tuple[int, ...], float] = {(): 1.0}
    for _ in range(k):
        following: dict[tuple[int, ...], float] = {}
        for chosen, probability in outcomes.items():
            remaining = [i for i in range(len(scores)) if i not in chosen]
            for position, p in enumerate(one_round([scores[i] for i in remaining], rate)):
                following[(*chosen, remaining[position])] = probability * p
        outcomes = following
    return outcomes


def test_released_triples_follow_the_definition() -> None:
    # scores (6, 5, 3, 3, 1, 0), Δ = 1, ε = 3, k = 3, monotone: every round accepts with exp(-gap);
    # 120 ordered triples, 200 000 draws
    scores = [6, 5, 3, 3, 1, 0]
    exact = peeling(scores, k=3, rate=1.0, one_round=permute_and_flip)
    draws = 200_000
    rng = random.Random(SEED)
    counts = Counter(
        tuple(dp_top_k(scores, k=3, epsilon=3.0, sensitivity=1, rng=rng, monotone=True)) for _ in range(draws)
    )
    assert set(counts) <= set(exact)
    chi_square = sum((counts[t] - draws * p) ** 2 / (draws * p) for t, p in exact.items())
    assert chi_square <= stats.chi2.ppf(1 - FAILURE, df=len(exact) - 1)


def test_selection_prefers_high_counts() -> None:
    # ten candidates 0, 5, …, 45; Δ = 1, ε = 1.2, k = 3 (rate 0.4 per round, monotone); 60 000 draws
    scores = list(range(0, 50, 5))
    rate = 0.4
    exact = peeling(scores, k=3, rate=rate, one_round=noisy_max)
    included = [sum(p for t, p in exact.items() if i in t) for i in range(len(scores))]
    assert math.isclose(sum(included), 3.0, rel_tol=1e-6)
    assert all(a < b for a, b in itertools.pairwise(included))
    draws = 60_000
    rng = random.Random(SEED)
    counts: Counter[int] = Counter()
    for _ in range(draws):
        counts.update(dp_top_k(scores, k=3, epsilon=1.2, sensitivity=1, rng=rng, monotone=True))
    for i, p in enumerate(included):
        assert abs(counts[i] / draws - p) <= 4.5 * math.sqrt(p * (1 - p) / draws) + 1e-6, i
