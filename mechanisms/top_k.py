"""Differentially private top-k selection: the exponential mechanism with peeling, sampled exactly.

What it is for: releasing *which* k of many candidates (group keys) have the largest counts, when one
privacy unit can move every count by at most Δ (its ℓ∞ sensitivity) — e.g. COUNT(DISTINCT person) per
key, where Δ = 1 however many keys a person has. Noisy counts of every candidate would need noise scaled
to the ℓ1 sensitivity (how many keys a person may touch); a selection needs only Δ.

The mechanism (peeling): k rounds; round i releases one candidate among those not yet released, with the
exponential mechanism at ε/k on the same scores. Each round is ε/k-DP given the earlier rounds' outputs,
so the k rounds together are ε-DP by (adaptive) sequential composition. Durfee & Rogers, "Practical
Differentially Private Top-k Selection with Pay-what-you-get Composition" (NeurIPS 2019), show that
adding Gumbel noise of scale Δ/(ε/k) to every score once and keeping the k largest ("one-shot") has
exactly the distribution of peeling with the exponential mechanism, so the two are one mechanism with
one guarantee: pure ε-DP (their bounded-range analysis is tighter only for (ε, δ)).

Why permute-and-flip and not Gumbel noise: Gumbel samples are floats, and like float Laplace noise
(Mironov 2012) or float exponential weights (Ilvento 2020) their rounding depends on the data. Each round
here is :func:`mechanisms.exponential.exponential_mechanism` — permute-and-flip (McKenna & Sheldon 2020)
with exact Bernoulli(exp(-γ)) coins and no floating point at all — so the released tuple has exactly the
distribution of peeling permute-and-flip. That is not the one-shot Gumbel distribution (permute-and-flip
is not the exponential mechanism), but the privacy argument is the same — each round is ε/k-DP — and each
round's expected score is never worse (McKenna & Sheldon). For counts, adding a person can only raise
scores (``monotone=True``): each round then accepts with exp(-(ε/k)·gap/Δ), without the factor 2
(proof in mechanisms/exponential.py).

Utility: in round i at most i - 1 < k candidates are gone, so the best remaining score is at least u_(k),
the k-th largest score. By the exponential mechanism's theorem per round (mechanisms/exponential.py) and
a union bound over the k rounds, with probability at least 1 - β every released candidate scores at
least ``u_(k) - (k·Δ/ε)·(ln(n) + ln(k/β))`` (twice that without monotonicity); n = number of candidates.
:func:`top_k_score_gap_bound` returns the subtracted term.

Cost: k calls of the exponential mechanism over at most n candidates each; with n = 10^5 and one
candidate far ahead, about 0.1 s per round (docs/privacy.md, "Exponential mechanism").
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from fractions import Fraction

from budget.loss import PrivacyLoss
from mechanisms.errors import MechanismError
from mechanisms.exponential import Score, exponential_error_bound, exponential_mechanism
from mechanisms.random_source import RandomSource
from mechanisms.validation import check_positive_finite


def dp_top_k(
    scores: Sequence[Score],
    *,
    k: int,
    epsilon: float,
    sensitivity: int | Fraction | float,
    rng: RandomSource,
    monotone: bool = False,
) -> list[int]:
    """Indices of min(k, len(scores)) distinct candidates, in the order the rounds chose them.

    Round i runs the exponential mechanism (permute-and-flip, exact) at :func:`top_k_round_epsilon`
    (ε, rounds) over the candidates not chosen yet. ε-DP in total when every score has sensitivity
    <= ``sensitivity``; ``monotone`` as in :func:`mechanisms.exponential.exponential_mechanism`.
    """
    _check_whole(k, name="k", hint="the number of candidates to release, e.g. 10")
    if isinstance(scores, str | bytes) or not isinstance(scores, Sequence) or not scores:
        raise MechanismError(
            "scores must be a non-empty sequence of integers or fractions.Fraction",
            hint="pass one score per candidate; the candidate set must never be empty",
        )
    rounds = min(k, len(scores))
    share = top_k_round_epsilon(epsilon, rounds)
    remaining = list(range(len(scores)))
    chosen: list[int] = []
    for _ in range(rounds):
        pick = exponential_mechanism(
            [scores[index] for index in remaining],
            sensitivity=sensitivity,
            epsilon=share,
            rng=rng,
            monotone=monotone,
        )
        chosen.append(remaining.pop(pick))
    return chosen


def top_k_round_epsilon(epsilon: float, rounds: int) -> float:
    """The ε of one round: the largest float e with rounds·e <= ε exactly, so that the k rounds never
    spend more than the ε they are charged."""
    check_positive_finite(epsilon, name="epsilon", hint="spend a positive budget, e.g. epsilon=1.0")
    _check_whole(rounds, name="rounds", hint="one round per released candidate")
    share = float(Fraction(epsilon) / rounds)
    while Fraction(share) * rounds > Fraction(epsilon):
        share = math.nextafter(share, 0.0)
    if share <= 0:
        raise MechanismError(
            f"epsilon {epsilon!r} is too small to split over {rounds} rounds",
            hint="spend more epsilon or ask for fewer candidates",
        )
    return share


def top_k_privacy_loss(*, epsilon: float) -> PrivacyLoss:
    """:func:`dp_top_k` run with ε is (ε, 0)-DP: k rounds at ε/k each, composed."""
    check_positive_finite(epsilon, name="epsilon", hint="spend a positive budget, e.g. epsilon=1.0")
    return PrivacyLoss(float(epsilon), 0.0)


def top_k_rho(*, epsilon: float, rounds: int) -> float:
    """zCDP of :func:`dp_top_k`: each ε_r-DP round is ε_r²/2-zCDP (Bun & Steinke 2016, Prop. 1.4), so
    the k rounds are k·ε_r²/2 = ε²/(2k) — a k-th of what one ε-DP release would be charged. Rounded up."""
    share = top_k_round_epsilon(epsilon, rounds)
    return math.nextafter(rounds * share * share / 2, math.inf)


def top_k_score_gap_bound(
    *,
    epsilon: float,
    sensitivity: int | Fraction | float,
    k: int,
    candidates: int,
    confidence: float = 0.95,
    monotone: bool = False,
    outputs: int = 1,
) -> float:
    """G with: with probability >= ``confidence``, every released candidate (of ``outputs`` independent
    selections of k each) scores at least the k-th largest score minus G (module docstring).

    G = (k·Δ/ε)·(ln(candidates) + ln(k·outputs/(1 − confidence))), or 2k·Δ/ε without ``monotone``.
    """
    _check_whole(candidates, name="candidates", hint="the number of candidates selected from")
    _check_whole(outputs, name="outputs", hint="the number of independent selections, e.g. 1")
    rounds = min(k, candidates)
    _check_whole(rounds, name="k", hint="the number of candidates to release, e.g. 10")
    if not 0 < confidence < 1:
        raise MechanismError(
            f"confidence must be strictly between 0 and 1, got {confidence!r}",
            hint="use e.g. confidence=0.95",
        )
    # the per-round theorem at confidence 1 − β/(rounds·outputs), β = 1 − confidence: a union bound
    per_round = 1 - (1 - confidence) / (rounds * outputs)
    return exponential_error_bound(
        sensitivity=sensitivity,
        epsilon=top_k_round_epsilon(epsilon, rounds),
        candidates=candidates,
        confidence=per_round,
        monotone=monotone,
    )


def _check_whole(count: object, *, name: str, hint: str) -> None:
    if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 1:
        raise MechanismError(f"{name} must be a whole number >= 1, got {count!r}", hint=hint)
