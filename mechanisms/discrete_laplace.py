"""Exact sampling of the discrete Laplace distribution, using integers only.

Why not ``value + random.laplace(scale)``: Mironov, "On Significance of the Least Significant Bits for
Differential Privacy" (CCS 2012) shows that textbook floating-point Laplace noise is not differentially
private. Floats are unevenly spaced and ``-scale * log(uniform)`` cannot produce every float, so the set of
reachable outputs depends on the private value; an attacker who sees the low-order bits of one answer can
often tell which of two neighbouring databases produced it.

What instead: Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020,
arXiv:2004.00010) give exact samplers that use nothing but uniform integers and rational arithmetic:

* Algorithm 1, Bernoulli(exp(-gamma)) for rational gamma, after von Neumann and Forsythe: count how many
  Bernoulli(gamma/k) successes happen in a row; the count is odd with probability exactly exp(-gamma).
* Algorithm 2, discrete Laplace with scale t/s: a geometric variable X with P(X = x) ∝ exp(-x/t), drawn
  fast as U + t·V (U uniform below t, kept with probability exp(-U/t); V counts Bernoulli(exp(-1))
  successes), then Y = floor(X/s) and a random sign, rejecting "negative zero" so 0 is not counted twice.

Every random choice goes through ``rng.randrange``, so the output distribution is exactly
P(x) ∝ exp(-|x|/scale) on the integers, whatever the source's float behaviour.
"""

from __future__ import annotations

import numbers
from fractions import Fraction

from mechanisms.errors import MechanismError
from mechanisms.random_source import RandomSource


def sample_bernoulli_exp(gamma: Fraction, *, rng: RandomSource) -> bool:
    """True with probability exactly exp(-gamma), for a rational gamma >= 0 (CKS 2020, Algorithm 1).

    gamma > 1 is split into floor(gamma) factors exp(-1) and one exp(-(gamma - floor(gamma))), because the
    parity trick needs gamma <= 1 for Bernoulli(gamma/k) to be a probability.
    """
    gamma = _exact_rational(gamma, name="gamma")
    if gamma < 0:
        raise MechanismError(
            f"gamma must be >= 0, got {gamma}", hint="exp(-gamma) is a probability only then"
        )
    whole, remainder = divmod(gamma.numerator, gamma.denominator)
    for _ in range(whole):
        if not _bernoulli_exp_at_most_one(1, 1, rng):
            return False
    return _bernoulli_exp_at_most_one(remainder, gamma.denominator, rng)


def sample_discrete_laplace(scale: Fraction, *, rng: RandomSource) -> int:
    """An integer x with probability proportional to exp(-|x|/scale) (CKS 2020, Algorithm 2).

    The expected number of ``randrange`` calls is a small constant independent of ``scale``: the fast
    geometric sampler draws the "fine" part U of X uniformly instead of stepping through it unit by unit.
    """
    scale = _exact_rational(scale, name="scale")
    if scale <= 0:
        raise MechanismError(f"scale must be > 0, got {scale}", hint="scale = sensitivity / epsilon")
    while True:
        magnitude = _geometric_floor(scale.numerator, scale.denominator, rng)
        negative = rng.randrange(2) == 1
        if not (negative and magnitude == 0):
            return -magnitude if negative else magnitude


def _geometric_floor(t: int, s: int, rng: RandomSource) -> int:
    """floor(X/s) with P(X = x) ∝ exp(-x/t), x >= 0; the result is geometric with P(y) ∝ exp(-y·s/t)."""
    while True:
        fine = rng.randrange(t)
        if _bernoulli_exp_at_most_one(fine, t, rng):
            break
    coarse = 0
    while _bernoulli_exp_at_most_one(1, 1, rng):
        coarse += 1
    return (fine + t * coarse) // s


def _bernoulli_exp_at_most_one(numerator: int, denominator: int, rng: RandomSource) -> bool:
    """Bernoulli(exp(-gamma)) for gamma = numerator/denominator in [0, 1].

    Draw Bernoulli(gamma/k) for k = 1, 2, ... until one fails; with K the index of that failure,
    P(K > k) = gamma^k / k!, so P(K odd) = sum (-gamma)^j / j! = exp(-gamma). Bernoulli(n/d) is
    ``randrange(d) < n``, exact for integers of any size.
    """
    k = 1
    while rng.randrange(denominator * k) < numerator:
        k += 1
    return k % 2 == 1


def _exact_rational(number: Fraction, *, name: str) -> Fraction:
    """Refuse floats: a float scale would bring back the rounding this module exists to avoid."""
    if isinstance(number, bool) or not isinstance(number, numbers.Rational):
        raise MechanismError(
            f"{name} must be an exact Fraction or int, got {type(number).__name__} {number!r}",
            hint="convert with fractions.Fraction, rounding a noise scale up, never down",
        )
    return Fraction(number)
