"""Choose a contribution bound L with differential privacy (for ``max_contributions = "auto"``).

What L trades off. A query's noisy totals lose ``Σ_u max(0, N_u − L)`` rows to the bound (person u has
N_u rows) and carry noise of scale ``L/ε_q`` in each of its ``cells`` group cells per quantity measured
at ``ε_q``. The sum of the two — the expected ℓ1 error of the group vector, up to the overlap of bias and
noise — falls with L while more than ``C = cells/ε_q`` people have more than L rows, and rises after: the
best L is the smallest with at most C people above it (the bias-variance trade-off of Amin, Kulesza,
Muñoz Medina and Vassilvitskii, "Bounding user contributions", ICML 2019). So the target is a rank
counted *from the top* that depends on the query's ε and cells — at ε = 10 on 12 cells about one person
may be cut, at ε = 0.1 about a hundred and fifty — not a fixed quantile such as 0.99, which is too
large a bound at small ε (its noise swamps everything) and too small at large ε.

The selection is permute-and-flip (the exponential mechanism's better sibling, ``exponential.py``) over
a geometric grid of candidates 1, 2, 3, 4, 6, 8, 12, … up to the policy's cap, with score

    u_i = −max(A_i − C, 0) − max(C − A_{i−1}, 0) − p·|i − h|

where ``A_i`` is the number of people with more than ``L_i`` rows (``A_{−1}`` = everyone). The first two
terms are 0 exactly when the C-th largest count falls in (L_{i−1}, L_i] — the grid's best L — and
otherwise count how many people the rank is off by. Sensitivity 1: adding one person with N rows
raises A_i and A_{i−1} together (for L_i < N) or A_{i−1} alone (for L_{i−1} < N ≤ L_i), and the two
terms move in opposite directions, so no score moves by more than 1. Unlike ``−|A_i − C|`` the score
separates a candidate that covers the largest count from the empty candidates above it: when everyone
has 4 rows, 4 scores 0 and 6, 8, … score −C.

The last term is a data-independent prior, so the privacy proof is the exponential mechanism's: ``p``
is ``⌈0.5/ε⌉`` ranks per grid step away from the anchor ``h`` — the grid point nearest the policy's
``contribution_hint`` when it declares one, else the smallest candidate. Each step away costs a factor
e^−0.25 in acceptance at every ε; when the rank signal is strong (ε·people large) the data decide,
when it is weak the draw stays near the anchor instead of spreading over the whole grid. Without a hint
the anchor is 1, which keeps a table whose people all have a few rows at a small L; a hint helps the
heavy-tailed tables at small ε, and costs accuracy where it is wrong.

The share of the query's ε spent here grows as ε shrinks (:func:`selection_share`): 10 % at ε ≥ 1, up
to 30 % at ε ≤ 0.1, where a tenth of ε locates no rank on a few hundred people (the rank error of the
selection is about 2·ln(candidates)/ε_selection people). Cf. Wilson et al. 2020, which also chooses the
bound with a DP quantile.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

from budget.loss import PrivacyLoss
from mechanisms.errors import MechanismError
from mechanisms.exponential import exponential_mechanism, exponential_privacy_loss
from mechanisms.random_source import RandomSource

SHARE_AT_LARGE_EPSILON = Fraction(1, 10)
SHARE_AT_SMALL_EPSILON = Fraction(3, 10)
PRIOR_RANKS_PER_STEP = 0.5  # ⌈0.5/ε⌉ ranks of score per grid step away from the anchor


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


def selection_share(epsilon: float) -> Fraction:
    """The share of a query's ε spent choosing L: 0.1/√ε in hundredths, between 1/10 and 3/10.

    1/10 at ε ≥ 1, 0.14 at ε = 0.5, 0.22 at ε = 0.2, 3/10 at ε ≤ 0.11. Data-independent: it depends on
    the query's ε only. Why it grows: the selection must place a rank among the people to within about
    C (above) to help, and its rank error is about 2·ln(candidates)/ε_selection. On MovieLens (671
    people) at ε = 0.1, a tenth of ε put L anywhere from 1 to 1000; 0.3 keeps most draws within a
    factor of two of the best bound (docs/benchmarks.md)."""
    _check_epsilon(epsilon)
    share = Fraction(round(100 * 0.1 / math.sqrt(epsilon)), 100)
    return min(SHARE_AT_SMALL_EPSILON, max(SHARE_AT_LARGE_EPSILON, share))


def dp_contribution_bound(
    people_by_count: Mapping[int, int],
    *,
    cap: int,
    epsilon: float,
    rng: RandomSource,
    target: int,
    hint: int | None = None,
) -> int:
    """``people_by_count[c]``: how many people have c rows (counts above ``cap`` reported as ``cap``).
    ``target``: C, how many people may keep more than L rows (``bound_target``); ``hint``: the policy's
    guess of L, the anchor of the prior (None: the smallest candidate). ``epsilon`` is what this
    selection spends (:func:`contribution_bound_privacy_loss`)."""
    scores = bound_scores(people_by_count, cap=cap, epsilon=epsilon, target=target, hint=hint)
    chosen = exponential_mechanism(scores, sensitivity=1, epsilon=epsilon, rng=rng)
    return bound_candidates(cap)[chosen]


def bound_scores(
    people_by_count: Mapping[int, int], *, cap: int, epsilon: float, target: int, hint: int | None = None
) -> list[int]:
    """The score of each candidate of :func:`bound_candidates` (module docstring); adding or removing
    one person changes none of them by more than 1."""
    _check_epsilon(epsilon)
    if target < 0:
        raise MechanismError(f"target must be >= 0 people, got {target}", hint="use bound_target()")
    candidates = bound_candidates(cap)
    if hint is not None and not 1 <= hint <= cap:
        raise MechanismError(
            f"the contribution hint must be between 1 and the cap {cap}, got {hint}",
            hint="declare contribution_hint within [1, contribution_cap]",
        )
    anchor = 0 if hint is None else nearest_candidate(candidates, hint)
    penalty = math.ceil(PRIOR_RANKS_PER_STEP / epsilon)
    above_previous = sum(people_by_count.values())  # everyone has more than 0 rows
    scores = []
    for index, candidate in enumerate(candidates):
        above = sum(people for count, people in people_by_count.items() if count > candidate)
        rank_gap = max(above - target, 0) + max(target - above_previous, 0)
        scores.append(-rank_gap - penalty * abs(index - anchor))
        above_previous = above
    return scores


def bound_target(*, cells: int, epsilon_per_quantity: float) -> int:
    """C = cells/ε_q, rounded: how many people may have rows beyond L at the bias-variance optimum
    of the query's noisy totals (module docstring)."""
    _check_epsilon(epsilon_per_quantity)
    if cells < 1:
        raise MechanismError(f"cells must be >= 1, got {cells}", hint="count the released group cells")
    return round(cells / epsilon_per_quantity)


def nearest_candidate(candidates: list[int], value: int) -> int:
    """The index of the candidate nearest ``value`` in ratio (the grid is geometric)."""
    return min(range(len(candidates)), key=lambda i: (abs(math.log(candidates[i] / value)), i))


def contribution_bound_privacy_loss(*, epsilon: float) -> PrivacyLoss:
    return exponential_privacy_loss(epsilon=epsilon)


def _check_epsilon(epsilon: float) -> None:
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise MechanismError(f"epsilon must be a finite number > 0, got {epsilon!r}", hint="e.g. epsilon=0.1")
