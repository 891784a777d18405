"""The exponential mechanism, sampled exactly: permute-and-flip with exact Bernoulli(exp(-γ)) coins.

What it is for: choosing one of finitely many public candidates (a category for MODE, a grid point for a
quantile) that scores well on the private data. Spec §4 ([L]; McSherry & Talwar 2007) defines the exponential
mechanism: release candidate r with probability ∝ exp(ε·u_r/(2Δ)), where u_r is an integer or rational
score and Δ bounds how much one privacy unit can change any score.

Why not the textbook implementation: ``random.choices(weights=[exp(ε·u/(2Δ)) ...])`` computes the weights in
floating point. Like float Laplace noise (Mironov 2012), the rounding of exp() and of the cumulative sums is
data-dependent, so the released distribution is not the one the proof is about, and scores far from the
maximum underflow to zero in ways an attacker can detect. Ilvento, "Implementing the Exponential Mechanism
with Base-2 Differential Privacy" (CCS 2020) shows the problem and fixes it with exact base-2 arithmetic.

What we do instead: the permute-and-flip mechanism of McKenna & Sheldon, "Permute-and-Flip: A new mechanism
for differentially private selection" (NeurIPS 2020). With u* = max_r u_r:

    visit the candidates in a uniformly random order; accept candidate r with probability
    p_r = exp(-ε·(u* - u_r)/(2Δ)) and stop; otherwise go on to the next candidate.

McKenna & Sheldon prove it is ε-DP for scores of sensitivity Δ (the same premise as the exponential
mechanism) and that its expected score is never worse than the exponential mechanism's, often better. A
top-scoring candidate has p = 1, so the walk always stops. Every coin is exact: the order is a Fisher-Yates
shuffle built from ``rng.randrange``, and γ_r = ε·(u* - u_r)/(2Δ) is an exact rational (a finite float ε is
a dyadic rational; Fraction scores are brought to a common denominator), so Bernoulli(exp(-γ_r)) is flipped
with Canonne, Kamath & Steinke's Algorithm 1 (2020; :mod:`mechanisms.discrete_laplace`) and no floating
point at all. The released index therefore has exactly the permute-and-flip distribution, whatever the
scores. (It is not the exponential mechanism's distribution: in spec test vector TV-EXP-1 the runner-up is
released with probability 0.00614, against 0.01213 for the exponential mechanism.)

Utility (spec §4, the exponential mechanism's theorem, which also holds here [derived]): let H = u*,
Y_H the top-scoring candidates and |Y| the number of candidates. A candidate r is released only if it
accepts before every top candidate has been visited, so P(r) <= p_r/(|Y_H| + 1). Summing over the
candidates with u_r <= H - (2Δ/ε)·(ln(|Y|/|Y_H|) + t) gives

    Pr[ u(released) <= H - (2Δ/ε)·(ln(|Y|/|Y_H|) + t) ] <= e^(-t).

Monotone scores (``monotone=True``): when adding one privacy unit can only raise every score (or leave it)
and removing one can only lower them — as for counts, the scores of MODE — the factor 2 is not needed:
accept with probability exp(-ε·(u* - u_r)/Δ). Permute-and-flip with acceptance exp(-λ·gap) has the
distribution of report-noisy-max with exponential noise of scale 1/λ (Ding et al., "The permute-and-flip
mechanism is identical to report-noisy-max with exponential noise", arXiv:2105.07260, 2021), and
report-noisy-max of monotone scores of sensitivity Δ is ε-DP at scale Δ/ε [derived, as for counting
queries in Dwork & Roth 2014, Claim 3.9]: fix the other candidates' noise; candidate i wins iff its noise
exceeds r* = max_{j≠i}(u_j + Z_j) - u_i, and since all scores move the same way by at most Δ, r* moves
by at most Δ, which changes the exponential tail probability by at most a factor e^ε. Utility improves
accordingly: the shortfall above is halved, (Δ/ε)·(ln(|Y|/|Y_H|) + t).

Cost: the walk stops at the latest at the first top candidate, so the expected number of candidates visited
is at most (|Y| + 1)/(|Y_H| + 1) (the expected position of the first of |Y_H| marked items in a random
order of |Y|). The worst case is one candidate far above all the others: about |Y|/2 visits. Each visit
costs one ``randrange`` call, which also supplies the digits of the first exp(-1) coins, so a candidate far
below the top is usually rejected without another call (about 1.15 calls per visit in that worst case).
When many candidates score close to the top the walk stops after a few visits. γ is computed once per
distinct score. Measured for 10^5 candidates with a single winner: about 0.15 s with ``random.Random`` or
``secrets.SystemRandom`` (docs/privacy.md). There is no exact shortcut for the worst case: skipping the
hopeless candidates in bulk would need exact Binomial(n, exp(-γ)) draws.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from fractions import Fraction

from budget.loss import PrivacyLoss
from mechanisms.discrete_laplace import _bernoulli_exp_at_most_one
from mechanisms.errors import MechanismError
from mechanisms.random_source import RandomSource
from mechanisms.validation import check_positive_finite

Score = int | Fraction
"""An exact score: floats are refused, so the caller decides how a real score is rounded."""


def exponential_mechanism(
    scores: Sequence[Score],
    *,
    sensitivity: int | Fraction | float,
    epsilon: float,
    rng: RandomSource,
    monotone: bool = False,
) -> int:
    """The index of a candidate chosen by permute-and-flip: ε-DP if every score has sensitivity <= Δ.

    ``scores[r]`` is the utility of candidate r (higher is better); ``sensitivity`` is Δ, the most one
    privacy unit can change any single score. Candidate r is accepted, in a random visiting order, with
    probability exactly exp(-ε·(max(scores) - scores[r])/(2Δ)) (McKenna & Sheldon 2020). ``monotone``:
    the caller guarantees that one unit moves all scores in the same direction (counts); the factor 2
    is then dropped and the choice is still ε-DP (module docstring). The privacy map is
    :func:`exponential_privacy_loss`.
    """
    exact = _exact_scores(scores)
    rate = _rate(sensitivity=sensitivity, epsilon=epsilon, monotone=monotone)
    # Fractions are brought to a common denominator so that every gap u* - u_r is an int; ε·gap/(2Δ) is
    # then the rational (rate.numerator·gap)/rate.denominator with the same value.
    scale = math.lcm(*{score.denominator for score in exact if type(score) is Fraction})
    if scale != 1:
        exact = [int(score * scale) for score in exact]
        rate /= scale
    best = max(exact)
    return _permute_and_flip([best - score for score in exact], rate, rng)


def exponential_privacy_loss(*, epsilon: float) -> PrivacyLoss:
    """Permute-and-flip (and the exponential mechanism) run with ε on scores of sensitivity Δ is (ε, 0)-DP."""
    check_positive_finite(epsilon, name="epsilon", hint=_EPSILON_HINT)
    return PrivacyLoss(float(epsilon), 0.0)


def exponential_error_bound(
    *,
    sensitivity: int | Fraction | float,
    epsilon: float,
    candidates: int,
    top: int = 1,
    confidence: float = 0.95,
    monotone: bool = False,
) -> float:
    """Score shortfall T with Pr[u(released) <= max score - T] <= 1 - confidence (spec §4 utility theorem).

    T = (2Δ/ε)·(ln(candidates/top) + ln(1/(1 - confidence))), ``top`` being the number of candidates that
    share the maximum score (1 is the worst case); Δ/ε instead of 2Δ/ε for ``monotone`` selections. Holds
    for permute-and-flip (module docstring).
    """
    rate = _rate(sensitivity=sensitivity, epsilon=epsilon, monotone=monotone)
    for name, count in (("candidates", candidates), ("top", top)):
        if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 1:
            raise MechanismError(
                f"{name} must be a whole number >= 1, got {count!r}",
                hint="count the candidates released from",
            )
    if top > candidates:
        raise MechanismError(
            f"top ({top}) cannot exceed candidates ({candidates})",
            hint="top counts the candidates that share the maximum score",
        )
    if not 0 < confidence < 1:
        raise MechanismError(
            f"confidence must be strictly between 0 and 1, got {confidence!r}",
            hint="use e.g. confidence=0.95",
        )
    return float(1 / rate) * (math.log(candidates / top) - math.log1p(-confidence))


def _permute_and_flip(gaps: list[int], rate: Fraction, rng: RandomSource) -> int:
    """Visit candidates in a lazily built uniform random order; accept r with probability exp(-rate·gap_r).

    The order is a Fisher-Yates shuffle performed one position at a time, so a walk that stops after k
    visits costs about k ``randrange`` calls, not len(gaps). Each visit makes one call,
    u = randrange(remaining · 720**4), and splits u exactly into the uniform position u // 720**4 and four
    independent uniform "blocks" below 720 that drive up to four Bernoulli(exp(-1)) coins
    (:func:`_exp_minus_one`); a candidate far below the top is rejected by them without another call.
    """
    order = list(range(len(gaps)))
    coins: dict[int, tuple[int, int]] = {}
    numerator, denominator = rate.numerator, rate.denominator
    for position in range(len(order)):
        offset, blocks = divmod(rng.randrange((len(order) - position) * _POOL), _POOL)
        pick = position + offset
        order[position], order[pick] = order[pick], order[position]
        candidate = order[position]
        gap = gaps[candidate]
        if gap == 0:
            return candidate
        coin = coins.get(gap)
        if coin is None:
            coin = coins[gap] = divmod(numerator * gap, denominator)
        whole, remainder = coin
        # Fast path, same outcome as _accepts: the first exp(-1) coin stops at K = 2 (reject) when its
        # randrange(2) draw, blocks % 2, is non-zero. That happens in half of the far-from-the-top visits.
        if whole and blocks & 1:
            continue
        if _accepts(whole, remainder, denominator, blocks, rng):
            return candidate
    raise AssertionError("unreachable: a top-scoring candidate always accepts")  # pragma: no cover


_BLOCK = 2 * 3 * 4 * 5 * 6
_BLOCKS_PER_VISIT = 4
_POOL = _BLOCK**_BLOCKS_PER_VISIT


def _accepts(whole: int, remainder: int, denominator: int, blocks: int, rng: RandomSource) -> bool:
    """Bernoulli(exp(-γ)) for γ = whole + remainder/denominator (remainder < denominator), exactly.

    exp(-γ) = exp(-1)^whole · exp(-remainder/denominator): ``whole`` exp(-1) coins, the first ones driven
    by the uniform blocks (``blocks`` is uniform below 720**4), then CKS Algorithm 1 for the remainder.
    """
    for used in range(whole):
        if used < _BLOCKS_PER_VISIT:
            blocks, block = divmod(blocks, _BLOCK)
        else:
            block = rng.randrange(_BLOCK)
        if not _exp_minus_one(block, rng):
            return False
    return _bernoulli_exp_at_most_one(remainder, denominator, rng)


def _exp_minus_one(block: int, rng: RandomSource) -> bool:
    """Bernoulli(exp(-1)): CKS Algorithm 1 with γ = 1, von Neumann's parity trick.

    K is the first k >= 2 for which a Bernoulli(1/k) trial fails, i.e. randrange(k) != 0 (the k = 1 trial
    always succeeds); P(K > k) = 1/k!, so P(K odd) = sum_j (-1)^j/j! = exp(-1). ``block``, uniform below
    720 = 2·3·4·5·6, supplies randrange(k) for k = 2..6 as its mixed-radix digits (independent and uniform);
    ``rng`` is asked only when K > 6, with probability 1/720.
    """
    for k in range(2, 7):
        block, draw = divmod(block, k)
        if draw:
            return k % 2 == 1
    k = 7
    while rng.randrange(k) == 0:
        k += 1
    return k % 2 == 1


def _exact_scores(scores: Sequence[Score]) -> list[Score]:
    """The scores as Python ints and Fractions; floats, bools, NaN-like and non-numbers are refused."""
    try:
        count = len(scores)
    except TypeError:
        count = -1
    if count < 1:
        raise MechanismError(
            "scores must be a non-empty sequence of integers or fractions.Fraction",
            hint="pass one score per public candidate; the candidate set must never be empty",
        )
    exact: list[Score] = []
    for score in scores:
        if type(score) is int or type(score) is Fraction:
            exact.append(score)
        elif isinstance(score, bool) or not isinstance(score, numbers.Rational):
            raise MechanismError(
                f"scores must be integers or fractions.Fraction, got {type(score).__name__}",
                hint="round real-valued scores to integers (or exact Fractions) before selecting; "
                "a float score would bring back floating-point sampling",
            )
        elif isinstance(score, numbers.Integral):
            exact.append(int(score))  # numpy integers and other Integral types
        else:
            exact.append(Fraction(score))
    return exact


def _rate(*, sensitivity: int | Fraction | float, epsilon: float, monotone: bool = False) -> Fraction:
    """ε/(2Δ), or ε/Δ for monotone scores, as an exact rational (every finite float is a dyadic
    rational, so Fraction() is exact)."""
    check_positive_finite(epsilon, name="epsilon", hint=_EPSILON_HINT)
    check_positive_finite(
        sensitivity,
        name="sensitivity",
        hint="the most one privacy unit can change a score, e.g. max_contributions",
    )
    return Fraction(epsilon) / ((1 if monotone else 2) * Fraction(sensitivity))


_EPSILON_HINT = "spend a positive budget, e.g. epsilon=1.0"
