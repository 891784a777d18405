"""The Laplace mechanism (Dwork, McSherry, Nissim & Smith 2006) without floating-point noise.

Noise and privacy map live side by side, as in OpenDP: ``*_mechanism`` adds noise of scale
sensitivity/epsilon, ``laplace_privacy_loss`` says what a given scale costs. Sampling is exact and
integer-only (:mod:`mechanisms.discrete_laplace`, after Canonne, Kamath & Steinke 2020), because textbook
floating-point Laplace noise leaks the private value through its low-order bits (Mironov 2012).

Every rounding goes the safe way: noise scales are rounded *up* to a rational with denominator 2**32 (never
less noise than promised) and privacy losses are rounded *up* to the next float (never a smaller charge).
"""

from __future__ import annotations

import functools
import math
import numbers
import sys
from fractions import Fraction

from budget.loss import PrivacyLoss
from mechanisms.discrete_laplace import sample_discrete_laplace
from mechanisms.errors import MechanismError
from mechanisms.random_source import RandomSource
from mechanisms.validation import check_positive_finite

SCALE_DENOMINATOR = 2**32
"""Noise scales are rounded up to a multiple of 1/2**32: exact, and small integers for the sampler."""

GRID_BITS = 20
"""Real answers are snapped to a grid of step <= min(sensitivity, scale) / 2**GRID_BITS."""


def laplace_noise_scale(*, sensitivity: float, epsilon: float) -> float:
    """The Laplace scale R = sensitivity/epsilon ([L]; Dwork et al. 2006), rounded up to a float."""
    return _float_at_least(_exact_scale(sensitivity=sensitivity, epsilon=epsilon))


def laplace_privacy_loss(*, sensitivity: float, noise_scale: float) -> PrivacyLoss:
    """Laplace noise of scale R on a query of l1 sensitivity Δ is (Δ/R, 0)-DP; the ratio is rounded up."""
    check_positive_finite(sensitivity, name="sensitivity", hint=_SENSITIVITY_HINT)
    check_positive_finite(noise_scale, name="noise_scale", hint="noise_scale = sensitivity / epsilon")
    return PrivacyLoss(_float_at_least(Fraction(sensitivity) / Fraction(noise_scale)), 0.0)


def laplace_error_bound(
    *, sensitivity: float, epsilon: float, confidence: float = 0.95, outputs: int = 1
) -> float:
    """Half-width T with Pr(max_i |noise_i| > T) <= 1 - confidence over ``outputs`` independent outputs.

    Pr(|Lap(R)| > t·R) = exp(-t), plus a union bound over the outputs (spec §3):
    T = R·ln(outputs/(1-confidence)). This is the bound for continuous Laplace noise, which ``veil explain``
    reports. [derived] The discrete noise here has Pr(|X| >= m) = 2p^m/(1+p) with p = exp(-1/scale), which
    can exceed exp(-T/scale) (by a factor up to 2/(1+p)); T plus one grid step (1 for counts,
    :func:`laplace_grid_step` for sums) bounds it rigorously, since 2p/(1+p) <= 1.
    """
    scale = _exact_scale(sensitivity=sensitivity, epsilon=epsilon)
    if not 0 < confidence < 1:
        raise MechanismError(
            f"confidence must be strictly between 0 and 1, got {confidence!r}",
            hint="use e.g. confidence=0.95",
        )
    if isinstance(outputs, bool) or not isinstance(outputs, numbers.Integral) or outputs < 1:
        raise MechanismError(
            f"outputs must be a whole number >= 1, got {outputs!r}", hint="count the noisy values released"
        )
    return float(scale) * (math.log(outputs) - math.log1p(-confidence))


def discrete_laplace_mechanism(value: int, *, sensitivity: float, epsilon: float, rng: RandomSource) -> int:
    """value + discrete Laplace noise of scale ≥ sensitivity/epsilon: epsilon-DP for integer queries (counts).

    If neighbours change the count by at most Δ, then for every output x
    P(out = x | D) / P(out = x | D') <= exp(Δ/scale) <= exp(epsilon).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise MechanismError(
            f"value must be an int for the discrete Laplace mechanism, got {type(value).__name__} {value!r}",
            hint="use laplace_mechanism for real-valued answers such as sums",
        )
    scale = _round_up(_exact_scale(sensitivity=sensitivity, epsilon=epsilon))
    return int(value) + sample_discrete_laplace(scale, rng=rng)


def discrete_laplace_upper_tail(*, sensitivity: float, epsilon: float, probability: float) -> float:
    """t with P[discrete_laplace_mechanism(v, …) > v + t] <= ``probability`` for every integer v.

    The noise K of scale s has P[K >= m] = p^m/(1+p) for m >= 1, p = exp(-1/s), so t = m - 1 for the
    smallest such m. Why not the continuous t = s·ln(1/(2·probability)): P[K > t] = P[K >= ⌊t⌋ + 1] exceeds
    ½·exp(-t/s) by up to the factor 2/(1+p) when t is just below an integer — up to twice the probability
    asked for at large ε (τ-thresholding, docs/privacy.md).
    """
    scale = _round_up(_exact_scale(sensitivity=sensitivity, epsilon=epsilon))
    return float(_tail_point(scale, probability) - 1)


def laplace_upper_tail(*, sensitivity: float, epsilon: float, probability: float) -> float:
    """t with P[laplace_mechanism(v, …) > v + t] <= ``probability`` for every real v, snapping included.

    The output is γ·(round(v/γ) + K) <= v + γ/2 + γ·K with K discrete Laplace in grid units, so
    t = γ·(m - 1/2) for the smallest m with P[K >= m] <= ``probability`` — about
    (Δ/ε)·ln(1/(2·probability)), plus at most one grid step.
    """
    step, grid_scale = _grid(sensitivity, epsilon)
    return float(step * (_tail_point(grid_scale, probability) - Fraction(1, 2)))


_TAIL_SAFETY = 1e-9  # relative slack for the float evaluation of p^m/(1+p): the tail is never under-stated


def _tail_point(scale: Fraction, probability: float) -> int:
    """The smallest m >= 1 with P[K >= m] = p^m/(1+p) <= ``probability``, K discrete Laplace of ``scale``."""
    if not 0 < probability < 1:
        raise MechanismError(
            f"probability must be strictly between 0 and 1, got {probability!r}",
            hint="pass the share of delta the tail may exceed, e.g. delta / max_contributions",
        )
    s = float(scale)
    log_one_plus_p = math.log1p(math.exp(-1 / s))
    limit = math.log(probability) + math.log1p(-_TAIL_SAFETY)

    def exceeds(m: int) -> bool:  # log P[K >= m] > log(probability), with the safety slack
        return -m / s - log_one_plus_p > limit

    m = max(1, math.ceil(-(limit + log_one_plus_p) * s))
    while m > 1 and not exceeds(m - 1):
        m -= 1
    while exceeds(m):
        m += 1
    return m


def laplace_grid_step(*, sensitivity: float, epsilon: float) -> float:
    """The grid γ of :func:`laplace_mechanism`: the largest power of two <= min(Δ, Δ/epsilon) / 2**20.

    Why this grid: a power of two makes every grid point k·γ an exact float (beyond |k| = 2**53 float
    rounding is to a coarser power of two, still a multiple of γ). Bounding γ by both the sensitivity Δ and
    the scale Δ/epsilon keeps both costs of the grid below a millionth (2**-20) whatever epsilon is: the
    widened sensitivity Δ + γ adds at most γ/Δ <= 2**-20 to the noise scale, and snapping moves the answer
    by at most γ/2 <= scale/2**21. The sampler's cost does not depend on the grid-unit scale.
    """
    return float(_grid_step(sensitivity=sensitivity, epsilon=epsilon))


def laplace_mechanism(value: float, *, sensitivity: float, epsilon: float, rng: RandomSource) -> float:
    """value + Laplace-like noise of scale ≈ sensitivity/epsilon for real answers (sums), epsilon-DP.

    Integer-grid scaling (in the spirit of Mironov's snapping): round the value to k = round(value/γ) grid
    points, add discrete Laplace noise in grid units, return (k + noise)·γ. Rounding can move two
    neighbouring answers apart by up to one more grid step, so the grid-unit sensitivity is (Δ + γ)/γ and
    the grid-unit scale (Δ + γ)/(γ·epsilon), rounded up. Every output is a multiple of γ, and γ depends
    only on the public sensitivity and epsilon, so the set of possible outputs carries no trace of the
    private value (the leak Mironov 2012 found in float Laplace). The final float() is post-processing and
    costs no privacy.
    """
    _check_finite(value)
    step, grid_scale = _grid(sensitivity, epsilon)
    grid_value = round(Fraction(value) / step)
    return float((grid_value + sample_discrete_laplace(grid_scale, rng=rng)) * step)


@functools.lru_cache(maxsize=256)
def _grid(sensitivity: float, epsilon: float) -> tuple[Fraction, Fraction]:
    """The grid step and the grid-unit scale: exact rational work that depends only on public parameters,
    so one query's cells (and repeated queries) compute it once."""
    step = _grid_step(sensitivity=sensitivity, epsilon=epsilon)
    return step, _round_up((Fraction(sensitivity) + step) / (step * Fraction(epsilon)))


_SENSITIVITY_HINT = "check the column's lower/upper bounds and max_contributions"
_LARGEST_FLOAT = Fraction(sys.float_info.max)


def _exact_scale(*, sensitivity: float, epsilon: float) -> Fraction:
    """sensitivity/epsilon as an exact rational (every finite float is a dyadic rational)."""
    check_positive_finite(sensitivity, name="sensitivity", hint=_SENSITIVITY_HINT)
    check_positive_finite(epsilon, name="epsilon", hint="spend a positive budget, e.g. epsilon=1.0")
    scale = Fraction(sensitivity) / Fraction(epsilon)
    if scale > _LARGEST_FLOAT:
        raise MechanismError(
            f"noise scale sensitivity/epsilon = {sensitivity!r}/{epsilon!r} is too large for a float",
            hint="use a larger epsilon or tighter lower/upper bounds; this much noise would hide any answer",
        )
    return scale


def _grid_step(*, sensitivity: float, epsilon: float) -> Fraction:
    """The largest power of two <= min(Δ, Δ/epsilon) / 2**GRID_BITS, computed exactly from bit lengths."""
    width = min(_exact_scale(sensitivity=sensitivity, epsilon=epsilon), Fraction(sensitivity))
    exponent = width.numerator.bit_length() - width.denominator.bit_length()
    if Fraction(2) ** exponent > width:
        exponent -= 1
    return Fraction(2) ** (exponent - GRID_BITS)


def _round_up(scale: Fraction) -> Fraction:
    """The smallest multiple of 1/SCALE_DENOMINATOR that is >= scale: a little more noise, never less."""
    return Fraction(math.ceil(scale * SCALE_DENOMINATOR), SCALE_DENOMINATOR)


def _float_at_least(number: Fraction) -> float:
    """The smallest float >= number (float() rounds to nearest, which may be below)."""
    nearest = float(number)
    return math.nextafter(nearest, math.inf) if Fraction(nearest) < number else nearest


def _check_finite(value: float) -> None:
    if not math.isfinite(value):
        raise MechanismError(
            f"value must be a finite number, got {value!r}",
            hint="clamp the aggregate's inputs to finite lower/upper bounds before adding noise",
        )
