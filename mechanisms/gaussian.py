"""The Gaussian mechanism for (ε, δ)-DP, with exact discrete Gaussian noise and sound calibration.

Spec §5 ([L]; Dwork & Roth 2014, Thm A.1): adding N(0, σ²) with σ >= c·Δ₂/ε, c = sqrt(2·ln(1.25/δ)), is
(ε, δ)-DP for a query of ℓ2 sensitivity Δ₂, but only for ε < 1. Three improvements, each with its paper:

1. Calibration: the *analytic Gaussian mechanism* of Balle & Wang, "Improving the Gaussian Mechanism for
   Differential Privacy: Analytical Calibration and Optimal Denoising" (ICML 2018), Theorem 8. N(0, σ²) noise
   is (ε, δ)-DP if and only if

       Φ(Δ/(2σ) - εσ/Δ) - e^ε·Φ(-Δ/(2σ) - εσ/Δ) <= δ,

   valid for every ε > 0 and never needing more noise than the classical bound. :func:`analytic_gaussian_sigma`
   finds the smallest such σ by bisection, keeping the upper end (σ is rounded *up*).
   :func:`classical_gaussian_sigma` is kept for the spec's test vector TV-GAU-1 and refuses ε >= 1.

2. Noise: floats are not used (Mironov 2012). Integer answers get *discrete* Gaussian noise,
   P(x) ∝ exp(-x²/(2σ²)) on the integers, sampled exactly (:mod:`mechanisms.discrete_gaussian`, Canonne,
   Kamath & Steinke 2020, Algorithm 3). Real answers are snapped to a power-of-two grid first, as in
   :mod:`mechanisms.laplace`.

3. What the discrete Gaussian guarantees. Its privacy is close to, but not the same as, the continuous one
   (for Δ = 1, δ = 1e-5, ε = 1 it needs σ = 3.740 where the continuous needs 3.731), so the discrete
   mechanisms are calibrated with the discrete Gaussian's *own* exact privacy curve, CKS 2020 Theorem 7:
   adding N_Z(0, σ²) to an integer query of sensitivity Δ (an integer) is (ε, δ)-DP for

       δ = P[Y > εσ²/Δ - Δ/2] - e^ε·P[Y > εσ²/Δ + Δ/2],   Y ~ N_Z(0, σ²),

   and no smaller δ works. :func:`discrete_gaussian_delta` evaluates an upper bound on it (below) and
   :func:`discrete_gaussian_sigma` bisects on σ. That curve is not monotone in σ for σ below about 1 (the
   floor inside the tails jumps), so the bisection only ever keeps a σ whose bound was checked to be <= δ;
   the result is always sound, if not always the smallest. For accounting by composition, the discrete
   Gaussian is also Δ²/(2σ²)-zCDP, exactly like the continuous one (CKS 2020: the Rényi divergences of
   shifted discrete Gaussians are at most those of continuous ones), so
   :func:`gaussian_rho` applies to both, and ρ-zCDP implies (ρ + 2·sqrt(ρ·ln(1/δ)), δ)-DP (Bun & Steinke,
   "Concentrated Differential Privacy: Simplifications, Extensions, and Lower Bounds", TCC 2016, Prop. 1.3):
   :func:`zcdp_to_approx_dp`.

How Theorem 7's δ is evaluated [derived]. Write f(y) = exp(-y²/(2σ²)), Z = Σ_y f(y), and the δ as the sum of
the positive terms p(y) - e^ε·p(y + Δ) over y > εσ²/Δ - Δ/2.

* σ <= 256: sum the terms directly (numpy), from one integer below the threshold with negative terms clipped
  to 0 (so a float error in the threshold can only add zeros), up to 38σ past 0, where f underflows; the
  rest of the tail is bounded by its integral. Z is a truncated sum of positive terms, so a lower bound.
* σ > 256: the midpoint rule with a remainder bound. For M - 1/2 >= σ,
  Σ_{y>=M} f(y) = ∫_{M-1/2}^∞ f ± E(M), since f(y) - ∫_{y-1/2}^{y+1/2} f = -f''(ξ)/24, and
  |f''(t)| <= (t² + σ²)·f(t)/σ⁴, decreasing for t >= σ, gives E(M) in closed form; the integrals are normal
  tails Q. By Poisson summation Z = σ√(2π)·Σ_k exp(-2π²σ²k²) >= σ√(2π). The error is a relative
  O((m/σ)²/σ²) of each tail: on the calibrated σ's it overstates δ by under 4% (σ ≈ 450-2500) and by
  about 1e-12 on the 2^20-step grids of the real mechanism. Thresholds below σ + 1/2 (very large δ) fall
  back to the cruder Q(m/σ) <= P[Y >= m]·(1 + 3·exp(-2π²σ²)) and P[Y >= m] <= Q(m/σ) + f(m)/(σ√(2π)).
  The bound is taken at the three integers around the threshold and the largest kept, so a float error in
  the threshold cannot make it smaller.
* Every float result is pushed up by a relative 10^-9 (upper terms) or down (subtracted terms), far more than
  the few-ulp error of erfc/exp/log.

The ledger side: ``discrete_gaussian_mechanism``/``gaussian_mechanism`` called with (ε, δ) cost
``PrivacyLoss(ε, δ)``; :func:`discrete_gaussian_privacy_loss` prices a given discrete σ and
:func:`gaussian_privacy_loss` a given continuous σ (Balle & Wang's condition). These mechanisms are scalar:
for a vector (e.g. a histogram, Δ₂ = L·sqrt(L0)) add independent noise per coordinate and account with
zCDP (:func:`gaussian_rho` on Δ₂, then :func:`zcdp_to_approx_dp`), because Theorem 7 is one-dimensional.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable
from fractions import Fraction
from statistics import NormalDist

import numpy as np

from budget.loss import PrivacyLoss
from mechanisms.discrete_gaussian import sample_discrete_gaussian
from mechanisms.errors import MechanismError
from mechanisms.random_source import RandomSource
from mechanisms.validation import check_positive_finite

GRID_BITS = 20
"""Real answers are snapped to a grid of step <= min(sensitivity, σ) / 2**GRID_BITS (as for Laplace)."""

SMALL_SIGMA = 256.0
"""Up to this σ, Theorem 7's δ is summed term by term; above, it is bounded with integrals."""

_SAFETY = 1e-9
"""Relative margin on every float evaluation of a δ (erfc, exp and log are accurate to a few ulps)."""

_CALIBRATION_MARGIN = 1e-10
"""σ is calibrated for δ·(1 - 1e-10), so that pricing it (a bisection on ε over the same float curve)
lands clearly at or below ε: at δ itself, ulp-level jitter of the curve could tip the answer one way or
the other."""

_SENSITIVITY_HINT = "the query's l2 sensitivity; check lower/upper bounds and max_contributions"
_EPSILON_HINT = "spend a positive budget, e.g. epsilon=1.0"
_DELTA_HINT = "delta is a small probability such as 1e-6, well below 1/(number of privacy units)"


# --- calibration: continuous Gaussian ----------------------------------------------------------------------


def classical_gaussian_sigma(*, sensitivity: float, epsilon: float, delta: float) -> float:
    """σ = sqrt(2·ln(1.25/δ))·Δ₂/ε (Dwork & Roth 2014, Thm A.1; spec §5), rounded up; only for ε < 1.

    Spec TV-GAU-1: δ = 1e-5, Δ₂ = 1, ε = 0.5 gives σ = 9.689611.
    """
    _check_parameters(sensitivity=sensitivity, epsilon=epsilon, delta=delta)
    if epsilon >= 1:
        raise MechanismError(
            f"the classical Gaussian calibration is only valid for epsilon < 1, got {epsilon!r}",
            hint="use analytic_gaussian_sigma (Balle & Wang 2018), which is valid for every epsilon > 0",
        )
    return _up(math.sqrt(2 * math.log(1.25 / delta)) * sensitivity / epsilon)


def analytic_gaussian_delta(*, sensitivity: float, sigma: float, epsilon: float) -> float:
    """The smallest δ for which N(0, σ²) noise on a query of ℓ2 sensitivity Δ is (ε, δ)-DP (rounded up).

    Balle & Wang 2018, Theorem 8: δ = Φ(Δ/(2σ) - εσ/Δ) - e^ε·Φ(-Δ/(2σ) - εσ/Δ).
    """
    check_positive_finite(sensitivity, name="sensitivity", hint=_SENSITIVITY_HINT)
    check_positive_finite(sigma, name="sigma", hint="the noise's standard deviation")
    _check_non_negative_finite(epsilon, name="epsilon", hint=_EPSILON_HINT)
    return _analytic_delta(float(sensitivity), float(sigma), float(epsilon))


@functools.lru_cache(maxsize=256)
def analytic_gaussian_sigma(*, sensitivity: float, epsilon: float, delta: float) -> float:
    """The smallest σ (up to float precision, rounded up) meeting Balle & Wang's exact condition.

    Valid for every ε > 0; never above :func:`classical_gaussian_sigma`.
    """
    _check_parameters(sensitivity=sensitivity, epsilon=epsilon, delta=delta)
    sensitivity, epsilon = float(sensitivity), float(epsilon)
    target = delta * (1 - _CALIBRATION_MARGIN)
    return _bisect_sigma(
        lambda sigma: _analytic_delta(sensitivity, sigma, epsilon), target, start=sensitivity
    )


def gaussian_privacy_loss(*, sensitivity: float, sigma: float, delta: float) -> PrivacyLoss:
    """(ε, δ) of N(0, σ²) noise on a query of ℓ2 sensitivity Δ: the smallest ε (rounded up) at this δ.

    The inverse of :func:`analytic_gaussian_sigma`: pricing the σ it returns never charges more than the
    ε it was asked for. For the *discrete* mechanisms use :func:`discrete_gaussian_privacy_loss`.
    """
    check_positive_finite(sensitivity, name="sensitivity", hint=_SENSITIVITY_HINT)
    check_positive_finite(sigma, name="sigma", hint="the noise's standard deviation")
    _check_delta(delta)
    sensitivity, sigma = float(sensitivity), float(sigma)
    epsilon = _bisect_epsilon(lambda eps: _analytic_delta(sensitivity, sigma, eps), delta)
    return PrivacyLoss(epsilon, float(delta))


# --- zCDP -----------------------------------------------------------------------------------------------------


def gaussian_rho(*, sensitivity: float, sigma: float) -> float:
    """ρ = Δ₂²/(2σ²), rounded up: Gaussian noise, continuous or discrete (CKS 2020), is ρ-zCDP."""
    check_positive_finite(sensitivity, name="sensitivity", hint=_SENSITIVITY_HINT)
    check_positive_finite(sigma, name="sigma", hint="the noise's standard deviation")
    return _float_at_least(Fraction(sensitivity) ** 2 / (2 * Fraction(sigma) ** 2))


def zcdp_to_approx_dp(rho: float, delta: float) -> float:
    """ε such that ρ-zCDP implies (ε, δ)-DP: ρ + 2·sqrt(ρ·ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3), rounded up."""
    _check_non_negative_finite(rho, name="rho", hint="rho = sensitivity**2 / (2 * sigma**2)")
    _check_delta(delta)
    if rho == 0:
        return 0.0
    return _up(rho + 2 * math.sqrt(rho * -math.log(delta)))


# --- calibration: discrete Gaussian (CKS 2020, Theorem 7) ---------------------------------------------------


def discrete_gaussian_delta(*, sensitivity: int, sigma: float, epsilon: float) -> float:
    """An upper bound (tight to about 1e-9 relative for σ <= 256) on the smallest δ for which adding
    N_Z(0, σ²) to an integer query of integer sensitivity Δ is (ε, δ)-DP (CKS 2020, Theorem 7)."""
    integer_sensitivity = _integer_sensitivity(sensitivity)
    check_positive_finite(sigma, name="sigma", hint="the noise's scale parameter")
    _check_non_negative_finite(epsilon, name="epsilon", hint=_EPSILON_HINT)
    return _discrete_delta(integer_sensitivity, float(sigma), float(epsilon))


@functools.lru_cache(maxsize=256)
def discrete_gaussian_sigma(*, sensitivity: float, epsilon: float, delta: float) -> float:
    """A σ (a float, so σ² is an exact rational) with :func:`discrete_gaussian_delta` <= δ, found by bisection.

    A non-integer sensitivity is rounded up: an integer query moves by whole units.
    """
    _check_parameters(sensitivity=sensitivity, epsilon=epsilon, delta=delta)
    integer_sensitivity = _integer_sensitivity(sensitivity)
    epsilon = float(epsilon)
    start = analytic_gaussian_sigma(sensitivity=float(integer_sensitivity), epsilon=epsilon, delta=delta)
    target = delta * (1 - _CALIBRATION_MARGIN)
    return _bisect_sigma(
        lambda sigma: _discrete_delta(integer_sensitivity, sigma, epsilon), target, start=start
    )


def discrete_gaussian_privacy_loss(*, sensitivity: int, sigma: float, delta: float) -> PrivacyLoss:
    """(ε, δ) of discrete Gaussian noise N_Z(0, σ²) on an integer query: the smallest ε (rounded up) whose
    Theorem 7 bound is <= δ. Pricing :func:`discrete_gaussian_sigma`'s σ never charges more than its ε."""
    integer_sensitivity = _integer_sensitivity(sensitivity)
    check_positive_finite(sigma, name="sigma", hint="the noise's scale parameter")
    _check_delta(delta)
    sigma = float(sigma)
    epsilon = _bisect_epsilon(lambda eps: _discrete_delta(integer_sensitivity, sigma, eps), delta)
    return PrivacyLoss(epsilon, float(delta))


# --- mechanisms -----------------------------------------------------------------------------------------------


def discrete_gaussian_mechanism(
    value: int, *, sensitivity: float, epsilon: float, delta: float, rng: RandomSource
) -> int:
    """value + N_Z(0, σ²) with σ = :func:`discrete_gaussian_sigma`: (ε, δ)-DP for an integer query (a count)
    whose value moves by at most ``sensitivity`` between neighbours. Costs ``PrivacyLoss(ε, δ)``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise MechanismError(
            f"value must be an int for the discrete Gaussian mechanism, got {type(value).__name__} {value!r}",
            hint="use gaussian_mechanism for real-valued answers such as sums",
        )
    sigma = discrete_gaussian_sigma(sensitivity=sensitivity, epsilon=epsilon, delta=delta)
    return int(value) + sample_discrete_gaussian(Fraction(sigma) ** 2, rng=rng)


def gaussian_grid_step(*, sensitivity: float, epsilon: float, delta: float) -> float:
    """The grid γ of :func:`gaussian_mechanism`: the largest power of two <= min(Δ, σ)/2**20, σ analytic."""
    return float(_grid_step(sensitivity=sensitivity, epsilon=epsilon, delta=delta))


def gaussian_mechanism(
    value: float, *, sensitivity: float, epsilon: float, delta: float, rng: RandomSource
) -> float:
    """value + Gaussian-like noise of σ ≈ :func:`analytic_gaussian_sigma` for real answers, (ε, δ)-DP.

    As :func:`mechanisms.laplace.laplace_mechanism`: snap to k = round(value/γ), add discrete Gaussian noise
    in grid units and return (k + noise)·γ. Snapping can move neighbouring answers up to one extra step
    apart, so in grid units the sensitivity is the integer floor(Δ/γ) + 1, and σ is calibrated for it with
    Theorem 7. Outputs are multiples of γ, which depends only on public parameters.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise MechanismError(
            f"value must be a finite number, got {value!r}",
            hint="clamp the aggregate's inputs to finite lower/upper bounds before adding noise",
        )
    step, sigma = _grid_noise(sensitivity=sensitivity, epsilon=epsilon, delta=delta)
    grid_value = round(Fraction(value) / step)
    return float((grid_value + sample_discrete_gaussian(Fraction(sigma) ** 2, rng=rng)) * step)


# --- upper tails: thresholds that noise exceeds only with a given probability ------------------------------


def discrete_gaussian_upper_tail(
    *, sensitivity: float, epsilon: float, delta: float, probability: float
) -> int:
    """t with P[discrete_gaussian_mechanism(v, …) > v + t] <= ``probability`` for every v, as small as the
    tail bound allows: for releasing a count only when it passes a threshold (τ-thresholding).

    The noise is Y ~ N_Z(0, σ²); t = m - 1 for the smallest m with an upper bound on P[Y >= m] at most
    ``probability`` (Q(m/σ) + f(m)/(σ√(2π)), module docstring) — about σ·Φ⁻¹(1 - probability).
    """
    sigma = discrete_gaussian_sigma(sensitivity=sensitivity, epsilon=epsilon, delta=delta)
    return _tail_point(sigma, probability) - 1


def gaussian_upper_tail(*, sensitivity: float, epsilon: float, delta: float, probability: float) -> float:
    """t with P[gaussian_mechanism(v, …) > v + t] <= ``probability`` for every real v, snapping included.

    The output is γ·(round(v/γ) + Y) <= v + γ/2 + γ·Y with Y ~ N_Z(0, σ_γ²) in grid units, so
    t = γ·(m - 1/2) for the smallest m with P[Y >= m] <= ``probability`` — about σ·Φ⁻¹(1 - probability)
    in value, plus at most one grid step.
    """
    step, sigma = _grid_noise(sensitivity=sensitivity, epsilon=epsilon, delta=delta)
    return float(step * (_tail_point(sigma, probability) - Fraction(1, 2)))


# --- numerics -------------------------------------------------------------------------------------------------


def _analytic_delta(sensitivity: float, sigma: float, epsilon: float) -> float:
    shift = sensitivity / (2 * sigma)
    centre = epsilon * sigma / sensitivity
    first = _normal_tail(centre - shift) * (1 + _SAFETY)
    second = _times_exp(epsilon, _normal_tail(centre + shift)) * (1 - _SAFETY)
    return min(1.0, max(0.0, first - second))


def _discrete_delta(sensitivity: int, sigma: float, epsilon: float) -> float:
    if sigma <= SMALL_SIGMA:
        return _discrete_delta_by_summation(sensitivity, sigma, epsilon)
    return _discrete_delta_by_integrals(sensitivity, sigma, epsilon)


def _discrete_delta_by_summation(sensitivity: int, sigma: float, epsilon: float) -> float:
    variance = sigma * sigma
    threshold = math.floor(epsilon * variance / sensitivity - sensitivity / 2)  # one below the first y
    reach = math.ceil(38 * sigma) + 2  # f(38σ) = exp(-722) is below the smallest float's square root
    stop = max(threshold, 0) + reach
    y = np.arange(threshold, stop + 1, dtype=np.float64)
    loss = sensitivity * (2 * y + sensitivity) / (2 * variance)  # ln p(y)/p(y + Δ)
    terms = np.maximum(np.exp(-y * y / (2 * variance)) * -np.expm1(epsilon - loss), 0.0)
    numerator = float(terms.sum()) + sigma * math.sqrt(2 * math.pi) * _normal_tail(stop / sigma)
    half = np.arange(1, reach + 1, dtype=np.float64)
    normaliser = 1.0 + 2.0 * float(np.exp(-half * half / (2 * variance)).sum())
    return min(1.0, numerator / normaliser * (1 + _SAFETY))


def _discrete_delta_by_integrals(sensitivity: int, sigma: float, epsilon: float) -> float:
    threshold = math.floor(epsilon * sigma * sigma / sensitivity - sensitivity / 2) + 1
    best = 0.0
    for first in (threshold - 1, threshold, threshold + 1):
        if first - 0.5 >= sigma:
            bound = _tail_difference_by_midpoints(first, sensitivity, sigma, epsilon)
        else:
            bound = _dg_tail_upper(first, sigma) - _times_exp(
                epsilon, _dg_tail_lower(first + sensitivity, sigma)
            )
        best = max(best, bound)
    return min(1.0, best)


def _tail_difference_by_midpoints(first: int, sensitivity: int, sigma: float, epsilon: float) -> float:
    """An upper bound on P[Y >= m] - e^ε·P[Y >= m + Δ] for σ <= m - 1/2, by the midpoint rule.

    f(y) = ∫_{y-1/2}^{y+1/2} f - f''(ξ)/24 and |f''(t)| <= h(t) = (t² + σ²)·f(t)/σ⁴, which decreases for
    t >= σ, so Σ_{y>=M} f(y) = ∫_{M-1/2}^∞ f ± E(M), E(M) = (h(a) + ∫_a^∞ h)/24 with a = M - 1/2 and
    ∫_a^∞ h = (a·f(a) + 2σ√(2π)·Q(a/σ))/σ². Divided by Z >= σ√(2π). E is a relative O((m/σ)²/σ²) error,
    where the cruder f(m) slack of :func:`_dg_tail_upper` would be O((m/σ)/σ) of a much larger term.
    """
    mass = sigma * math.sqrt(2 * math.pi)

    def midpoint_sum(start: int) -> tuple[float, float]:
        a = start - 0.5
        density = math.exp(-((a / sigma) ** 2) / 2)
        tail = mass * _normal_tail(a / sigma)
        error = ((a * a + sigma * sigma) * density / sigma**4 + (a * density + 2 * tail) / sigma**2) / 24
        return tail, error

    first_tail, first_error = midpoint_sum(first)
    second_tail, second_error = midpoint_sum(first + sensitivity)
    upper = (first_tail + first_error) * (1 + _SAFETY)
    lower = max(0.0, (second_tail - second_error) * (1 - _SAFETY))
    return max(0.0, upper - _times_exp(epsilon, lower)) / mass


def _dg_tail_upper(m: int, sigma: float) -> float:
    """An upper bound on P[Y >= m], Y ~ N_Z(0, σ²): Q(m/σ) + f(m)/(σ√(2π)) for m >= 1 (module docstring)."""
    if m <= 0:
        return 1.0 - _dg_tail_lower(1 - m, sigma)
    density = math.exp(-((m / sigma) ** 2) / 2) / (sigma * math.sqrt(2 * math.pi))
    return min(1.0, (_normal_tail(m / sigma) + density) * (1 + _SAFETY))


def _dg_tail_lower(m: int, sigma: float) -> float:
    """A lower bound on P[Y >= m], Y ~ N_Z(0, σ²): Q(m/σ)/(1 + 3·exp(-2π²σ²)) for m >= 1."""
    if m <= 0:
        return max(0.0, 1.0 - _dg_tail_upper(1 - m, sigma))
    poisson = 1 + 3 * math.exp(-2 * math.pi**2 * sigma * sigma)
    return _normal_tail(m / sigma) / poisson * (1 - _SAFETY)


def _normal_tail(x: float) -> float:
    """Q(x) = P[N(0, 1) > x] = erfc(x/√2)/2, accurate in the far tail (no 1 - Φ cancellation)."""
    return math.erfc(x / math.sqrt(2)) / 2


def _times_exp(epsilon: float, probability: float) -> float:
    """e^ε·probability without overflowing e^ε (the product is at most about 1 where it is used)."""
    if probability <= 0:
        return 0.0
    return math.exp(min(epsilon + math.log(probability), 700.0))


def _bisect_sigma(delta_of: Callable[[float], float], delta: float, *, start: float) -> float:
    """A σ with delta_of(σ) <= δ, as small as bisection finds; only checked values are ever returned."""
    high = start
    for _ in range(2100):
        if delta_of(high) <= delta:
            break
        high *= 2
    else:  # pragma: no cover - δ → 0 as σ → ∞ for every curve used here
        raise MechanismError("no noise scale meets this delta", hint=_DELTA_HINT)
    low = high
    while low > 1e-300 and delta_of(low) <= delta:
        low /= 2
    return _smallest_passing(lambda sigma: delta_of(sigma) <= delta, low, high, steps=200, relative=2.0**-44)


def _bisect_epsilon(delta_of: Callable[[float], float], delta: float) -> float:
    """The smallest ε (to float precision) with delta_of(ε) <= δ; only checked values are returned."""
    if delta_of(0.0) <= delta:
        return 0.0
    high = 1.0
    while delta_of(high) > delta:
        high *= 2
        if high > 1e300:
            raise MechanismError(
                "the noise is too small for any finite epsilon at this delta",
                hint="use a larger sigma or a larger delta",
            )
    return _smallest_passing(lambda epsilon: delta_of(epsilon) <= delta, 0.0, high, steps=2100)


def _smallest_passing(
    passes: Callable[[float], bool], low: float, high: float, *, steps: int, relative: float = 0.0
) -> float:
    """Bisection that only ever returns a value it checked: ``high`` passes on entry and on exit."""
    for _ in range(steps):
        middle = (low + high) / 2
        if not low < middle < high:
            break
        if passes(middle):
            high = middle
        else:
            low = middle
        if high - low <= high * relative:
            break
    return high


def _grid_noise(*, sensitivity: float, epsilon: float, delta: float) -> tuple[Fraction, float]:
    """γ and the discrete σ in grid units of :func:`gaussian_mechanism`: snapping can move neighbouring
    answers one extra step apart, so the grid sensitivity is the integer floor(Δ/γ) + 1."""
    step = _grid_step(sensitivity=sensitivity, epsilon=epsilon, delta=delta)
    grid_sensitivity = math.floor(Fraction(sensitivity) / step) + 1
    return step, discrete_gaussian_sigma(sensitivity=grid_sensitivity, epsilon=epsilon, delta=delta)


def _tail_point(sigma: float, probability: float) -> int:
    """The smallest m >= 1 with :func:`_dg_tail_upper` (m, σ) <= probability, by bisection on the integers
    (the bound decreases in m), starting from the continuous quantile σ·Φ⁻¹(1 - probability)."""
    if isinstance(probability, bool) or not isinstance(probability, numbers.Real) or not 0 < probability < 1:
        raise MechanismError(
            f"probability must be strictly between 0 and 1, got {probability!r}",
            hint="the chance that noise may exceed the threshold, e.g. delta / max_contributions",
        )
    high = max(1, math.ceil(-sigma * NormalDist().inv_cdf(probability)))
    while _dg_tail_upper(high, sigma) > probability:
        high *= 2
    low = 0  # never returned: m >= 1
    while high - low > 1:
        middle = (low + high) // 2
        if _dg_tail_upper(middle, sigma) <= probability:
            high = middle
        else:
            low = middle
    return high


def _grid_step(*, sensitivity: float, epsilon: float, delta: float) -> Fraction:
    sigma = analytic_gaussian_sigma(sensitivity=sensitivity, epsilon=epsilon, delta=delta)
    width = min(Fraction(sensitivity), Fraction(sigma))
    exponent = width.numerator.bit_length() - width.denominator.bit_length()
    if Fraction(2) ** exponent > width:
        exponent -= 1
    return Fraction(2) ** (exponent - GRID_BITS)


def _integer_sensitivity(sensitivity: float) -> int:
    check_positive_finite(sensitivity, name="sensitivity", hint=_SENSITIVITY_HINT)
    return max(1, math.ceil(Fraction(sensitivity)))


def _check_parameters(*, sensitivity: float, epsilon: float, delta: float) -> None:
    check_positive_finite(sensitivity, name="sensitivity", hint=_SENSITIVITY_HINT)
    check_positive_finite(epsilon, name="epsilon", hint=_EPSILON_HINT)
    _check_delta(delta)


def _check_delta(delta: float) -> None:
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real) or not 0 < delta < 1:
        raise MechanismError(
            f"delta must be a number strictly between 0 and 1, got {delta!r}", hint=_DELTA_HINT
        )


def _check_non_negative_finite(number: float, *, name: str, hint: str) -> None:
    if (
        isinstance(number, bool)
        or not isinstance(number, numbers.Real)
        or not math.isfinite(number)
        or number < 0
    ):
        raise MechanismError(f"{name} must be a finite number >= 0, got {number!r}", hint=hint)


def _up(number: float, ulps: int = 4) -> float:
    """A few ulps above a float computed with a handful of correctly or nearly correctly rounded steps."""
    for _ in range(ulps):
        number = math.nextafter(number, math.inf)
    return number


def _float_at_least(number: Fraction) -> float:
    """The smallest float >= number (float() rounds to nearest, which may be below)."""
    nearest = float(number)
    return math.nextafter(nearest, math.inf) if Fraction(nearest) < number else nearest
