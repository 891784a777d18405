"""Choose a contribution bound L with differential privacy (for ``max_contributions = "auto"``).

The bound should be a high quantile (q = 0.99 by default) of how many rows each person has: large
enough to keep almost everyone's rows, small enough not to scale the noise to the heaviest user.
Each person is one count, so the histogram of counts has sensitivity 1.

Two changes from a plain quantile (``quantile.py``), both data-independent so the privacy proof is
the exponential mechanism's: candidates are a geometric grid 1, 2, 3, 4, 6, 8, 12, 16, … up to the
cap (relative resolution matters for a bound, not absolute), and each step up the grid costs
``⌈0.5/ε⌉`` ranks of score. When many candidates are equally good in rank — everyone has 4 rows, so
every L ≥ 4 keeps all of them — the smallest wins instead of a uniform draw among them, which would
inflate the noise for nothing. The rank error bound of the exponential mechanism grows by at most
``⌈0.5/ε⌉`` per grid step between the chosen and the best bound. Cf. Wilson et al. 2020 and Amin et
al. 2019 ("Bounding user contributions"), which also choose the bound with a DP quantile.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

from budget.loss import PrivacyLoss
from mechanisms.errors import MechanismError
from mechanisms.exponential import exponential_mechanism, exponential_privacy_loss
from mechanisms.random_source import RandomSource


def bound_candidates(cap: int) -> list[int]:
    """1, 2, 3, 4, 6, 8, 12, 16, 24, … (powers of two and 1.5 times them), then the cap itself."""
    if cap < 1:
        raise MechanismError(f"the contribution cap must be at least 1, got {cap}", hint="use e.g. 1000")
    candidates = {1}
    power = 2
    while power <= cap:
        candidates.update(c for c in (power, power * 3 // 2) if c <= cap)
        power *= 2
    candidates.add(cap)
    return sorted(candidates)


def dp_contribution_bound(
    people_by_count: Mapping[int, int], *, cap: int, epsilon: float, rng: RandomSource, q: float = 0.99
) -> int:
    """``people_by_count[c]``: how many people have c rows (counts above ``cap`` reported as ``cap``)."""
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise MechanismError(f"epsilon must be a finite number > 0, got {epsilon!r}", hint="e.g. epsilon=0.1")
    if not 0 < q < 1:
        raise MechanismError(f"q must be strictly between 0 and 1, got {q!r}", hint="e.g. q=0.99")
    candidates = bound_candidates(cap)
    target = Fraction(q)
    total = sum(people_by_count.values())
    step_penalty = math.ceil(0.5 / epsilon)
    scores = []
    for index, candidate in enumerate(candidates):
        kept = sum(people for count, people in people_by_count.items() if count <= candidate)
        rank_gap = abs(target.denominator * kept - target.numerator * total)
        scores.append(-rank_gap - target.denominator * step_penalty * index)
    chosen = exponential_mechanism(scores, sensitivity=target.denominator, epsilon=epsilon, rng=rng)
    return candidates[chosen]


def contribution_bound_privacy_loss(*, epsilon: float) -> PrivacyLoss:
    return exponential_privacy_loss(epsilon=epsilon)
