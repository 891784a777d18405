"""A differentially private Welch t-test: dummy records plus smooth-sensitivity Gaussian noise.

What the mechanism is (spec ``dp-ttest-dummy.md``, after [D] chapter 7). Two groups A and B of values in a
public range [0, m] (the caller clamps and shifts them, spec §1). Both *dummy records* r_1 ≠ r_2 are added to
**both** groups (Algorithm 8, steps 2-3), so every reachable group has two distinct values and a positive
variance, which makes the local sensitivity of Welch's t finite (spec §2). The release is

    t̃ = t(A ∪ r, B ∪ r) + (S/α)·N(0, 1),    α = ε/(5·sqrt(2 ln(2/δ))),  β = ε/(4·(1 + ln(2/δ)))

(Thm 7.2 with k = 1; Nissim, Raskhodnikova & Smith, "Smooth Sensitivity and Sampling in Private Data
Analysis", STOC 2007), which is (ε, δ)-DP for replace neighbours (a record may change value *and* group)
whenever S is a β-smooth upper bound on the local sensitivity: S(D) >= LS(D) and S(D) <= e^β·S(D') for
neighbours D, D'. The dummies are constants chosen without looking at the data, so this is ordinary
(ε, δ)-DP of the query D ↦ t(D ∪ r) (spec §3).

Errata followed (spec §4, §5 notes, §10): the noise is scaled by S of the *input* (Thm 7.2 prints D');
Algorithm 8 returns t of the *augmented* groups (it prints q(D)) and needs δ as an input; the noise
parameter S/α is a standard deviation, not a variance (§10 item 6); Thm 7.4 is applied in its case-1
form to both groups, over non-dummy records only, since its case-2 term has the wrong sign and never
dominates (§4). The printed Thm 7.3 (including its too-small case-2 mean shift 2m/min(n_A, n_B)) is kept
*only* in ``mode="paper"``, which reproduces Algorithm 8.

Two ways to compute S:

* ``mode="sound"`` (default; spec §6). For k = 0, 1, 2, … let U_k be an upper bound on LS(D') for *every*
  D' at distance k from D:

      U_k = sqrt(N)·num_k / sqrt(s²_min(k+1)),
      num_k = min(m, |μ_A − μ_B| + (k+1)·m·(1/(n_A−k−1) + 1/(n_B−k−1)))   (m if a denominator is <= 0),
      s²_min(j) = min over X of W_X(j) / min(n_X + j − 1, N − 3),

  where W_X(j) is the smallest sum of squares SS(window ∪ {r_1, r_2}) over windows of ν_X − j consecutive
  sorted real values of X (the dummies alone if ν_X − j <= 0), and S = max_k e^{−βk}·U_k.

  Proof sketch [derived]. (1) For any two datasets whose group variances are >= s² and whose four group
  means lie in an interval of length L, |t| <= L·C_1/s with C_1 = sqrt(n_A n_B/N) <= sqrt(N)/2 for every
  split of N, so |t − t'| <= |t| + |t'| <= sqrt(N)·L/s — whether or not a record changed group, which is
  why no case split of Thm 7.3 is needed.
  (2) Means: j changes (in-place replacements, moves in or out) shift a group mean by at most
  j·m/(n_X − j), and every mean lies in [0, m], so for D' at distance k and its neighbour D'' (distance
  <= k+1) the four means lie in an interval of length <= num_k. (3) Variances: a group after <= j changes
  contains at least ν_X − j of its original real values and both dummies; SS of a set is at least SS of a
  subset; the smallest SS of a fixed-size subset (plus the fixed dummies) is a contiguous window of the
  sorted values (for a fixed centre c, the values nearest c minimise Σ(x − c)², and they are contiguous);
  and a group has at most n_X + j and at most N − 2 records (the other group keeps its two dummies), hence
  variance >= s²_min(j). So U_k >= LS(D') for every D' at distance k; in particular S >= U_0 >= LS(D).
  (4) U_k is non-decreasing in k (num_k grows, W_X(j) shrinks as windows shrink, denominators grow).
  (5) For a neighbour D' of D: |μ'_X − μ_X| <= m/(n_X − 1) and n'_X >= n_X − 1, so num_k(D') <=
  num_{k+1}(D); a window of ν'_X − j values of D' contains at least ν_X − (j+1) values of D while its
  denominator is at most D's at j + 1, so s²_min(j; D') >= s²_min(j+1; D). Hence U_k(D') <= U_{k+1}(D) and
  S(D') = max_k e^{−βk}U_k(D') <= e^β·max_k e^{−β(k+1)}U_{k+1}(D) <= e^β·S(D): S is β-smooth.
  The loop stops once e^{−βk}·U_∞ <= S, where U_∞ = sqrt(N)·m/sqrt(SS(r)/(N − 3)) bounds every U_k, so
  the early stop never changes S. (The cap N − 3 on the denominator is ours: without it s²_min(∞) = 0 and
  the stop rule of spec §6 could never fire; it only makes U_k smaller, and step (5) still holds.)

* ``mode="paper"`` (spec §5): Algorithm 8 as printed — follow one greedy path D_0, D_1, …, each step
  replacing the real record farthest from its group mean by the mean of the others in the group whose
  case-1 variance (s²_X)' is smaller, and take S = max_i LS_i·e^{−β·H(D_0, D_i)} with LS_i the printed
  Thm 7.3 bound. This is **not** a proof of β-smoothness (spec §6): LS must be bounded over *all* D' at
  each distance, but other paths can shrink a variance faster than the greedy one or push |μ_A − μ_B| up
  (the greedy path never increases it on purpose), and the printed case-2 term is too small. A brute-force
  search on m = 4, r = (1, 3) finds neighbours D = (A: 2, 3; B: 3) and D' = (A: 2, 0; B: 3) whose paper
  S differ by a factor 1.27 > e^β = 1.22 (ε = 5, δ = 0.01). It exists to reproduce [D] Table 7.1 (§8). The loop is not stopped early: the Hamming distance H(D_0, D_i) can
  in principle fall back when a record returns to its original value, so no bound on later terms is
  certain, and the whole loop is O(N log N) anyway (heaps for the extreme records, running sums).

Empty real groups are allowed [decision]: each augmented group still holds the two distinct dummies, so
its variance is positive, every denominator above (n_X − 1, n_X + j − 1, N − 3) is at least 1, and a record
that moves into the empty group is covered like any other change. With both groups empty there is no
record to protect and S is still finite.

Floating point. Sums of squares come from prefix sums of values centred on the dummies' midpoint and are
clamped below by SS(r) = (r_1 − r_2)²/2, which every group contains; their rounding error (about
2⁻⁵²·ν·m²) is negligible unless the dummies are closer than about 10⁻⁶·m.

The noise: an exact discrete Gaussian (:mod:`mechanisms.discrete_gaussian`, Canonne, Kamath & Steinke 2020)
on a grid of step γ, after snapping t to the same grid (as :mod:`mechanisms.gaussian` does; Mironov 2012).
[decision] γ must not depend on the data: a grid of step S/(α·2²⁰) would put every output in
t + γ·Z and, with the noise s.d. known, reveal t modulo γ. γ is the largest power of two <=
min(1, 1/α)·4·sqrt(2)/N·2⁻²⁰, where 4·sqrt(2)/N is a lower bound on S in both modes [derived: C_1 >= 1,
the mean term is >= 4m/N, every variance of values in [0, m] is <= m²/2], and N is the same for all
neighbours. Snapping moves t by at most γ/2, so S + γ (still β-smooth) bounds the snapped statistic's
local sensitivity and the noise s.d. is (S + γ)/α, larger than S/α by less than 2⁻²⁰. In grid units
σ >= 2²⁰, where the discrete Gaussian's normaliser equals σ·sqrt(2π) up to exp(−2π²σ²), so the sliding
and dilation steps of the smooth-sensitivity proof hold as for the continuous Gaussian.

[decision] What else is released (spec §7): the exact noise s.d. S/α depends on the data, so the product
releases :func:`dp_noise_scale` instead; group sizes only as :func:`dp_group_sizes`; :func:`p_value` is
post-processing that ignores the added noise.
"""

from __future__ import annotations

import heapq
import itertools
import math
import numbers
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import stats

from mechanisms.discrete_gaussian import sample_discrete_gaussian
from mechanisms.errors import MechanismError
from mechanisms.laplace import discrete_laplace_mechanism, laplace_mechanism
from mechanisms.random_source import RandomSource
from mechanisms.validation import check_positive_finite

Mode = Literal["sound", "paper"]

GRID_BITS = 20
"""The noise grid is at least 2**GRID_BITS times finer than the smallest possible S and S/α."""

_MODES = ("sound", "paper")
_LOG_SCALE_MARGIN = 1e-9
"""Relative widening of β in :func:`dp_noise_scale`, for the float rounding in ln S (a few ulps)."""

Values = npt.NDArray[np.float64]


# --- parameters and the statistic -------------------------------------------------------------------------


def noise_parameters(*, epsilon: float, delta: float) -> tuple[float, float]:
    """(alpha, beta) of Thm 7.2 for k = 1: alpha = eps/(5*sqrt(2 ln(2/delta))), beta = eps/(4*(1 + ln(2/delta))).

    α scales the noise (s.d. S/α) and β is the smoothness the sensitivity bound S must have; both shrink as
    δ does, because the Gaussian's tails must cover the data-dependent scale with probability 1 − δ.
    Spec TV-T-1: ε = 5, δ = 0.01 give α = 0.30719633, β = 0.19846571.
    """
    _check_privacy(epsilon=epsilon, delta=delta)
    log_term = math.log(2 / delta)
    return epsilon / (5 * math.sqrt(2 * log_term)), epsilon / (4 * (1 + log_term))


def welch_t(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Welch's t (eq. 3.2) of two groups, each with >= 2 values and positive variance.

    t = (μ_A − μ_B)/sqrt(s_A²/n_A + s_B²/n_B) with unbiased variances (eq. 3.1); it tests d_0 = 0.
    """
    first, second = _statistic_group(a, name="a"), _statistic_group(b, name="b")
    return _welch_t(first, second)


def welch_df(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Welch–Satterthwaite degrees of freedom (eq. 3.3), between min(n_A, n_B) − 1 and n_A + n_B − 2."""
    first, second = _statistic_group(a, name="a"), _statistic_group(b, name="b")
    share_a = float(np.var(first, ddof=1)) / first.size
    share_b = float(np.var(second, ddof=1)) / second.size
    return (share_a + share_b) ** 2 / (share_a**2 / (first.size - 1) + share_b**2 / (second.size - 1))


def p_value(t: float, df: float) -> float:
    """Two-sided p = 2·P[T_df > |t|] ([D] §7.1.3, with |t|: the source's ∫_t^∞ is a typo).

    df may come from noisy counts, so it is clipped to >= 1 rather than refused; the result ignores the
    noise added to t (spec §7), which callers must say next to it.
    """
    if isinstance(t, bool) or not isinstance(t, numbers.Real) or not math.isfinite(t):
        raise MechanismError(f"t must be a finite number, got {t!r}", hint="pass the released t statistic")
    if isinstance(df, bool) or not isinstance(df, numbers.Real) or math.isnan(df):
        raise MechanismError(
            f"df must be a number, got {df!r}", hint="use the noisy group counts: n_A + n_B − 2"
        )
    return float(2 * stats.t.sf(abs(float(t)), max(float(df), 1.0)))


# --- the smooth sensitivity ---------------------------------------------------------------------------------


def smooth_sensitivity(
    a_real: npt.ArrayLike,
    b_real: npt.ArrayLike,
    *,
    m: float,
    dummies: tuple[float, float],
    beta: float,
    mode: Mode = "sound",
) -> float:
    """S for the augmented groups (both dummies added to BOTH groups, as Algorithm 8 steps 2-3).

    ``mode="sound"`` (default) is the β-smooth bound of spec §6, proven in the module docstring;
    ``mode="paper"`` is Algorithm 8's greedy path (spec §5), kept to reproduce [D] and not a proof.
    Values must already be shifted into [0, m]; a real group may be empty (its augmented group is the
    two dummies, whose variance is positive).
    """
    first, second, dummy_pair = _checked_inputs(a_real, b_real, m=m, dummies=dummies)
    check_positive_finite(beta, name="beta", hint="take beta from noise_parameters(epsilon=…, delta=…)")
    _check_mode(mode)
    if mode == "paper":
        return _paper_sensitivity(first, second, m=float(m), dummies=dummy_pair, beta=float(beta))
    return _sound_sensitivity(first, second, m=float(m), dummies=dummy_pair, beta=float(beta))


def _sound_sensitivity(
    a_real: Values, b_real: Values, *, m: float, dummies: tuple[float, float], beta: float
) -> float:
    """S = max_k e^{−βk}·U_k, stopped once e^{−βk}·U_∞ <= S (which leaves S unchanged)."""
    bounds = _SoundBounds(a_real, b_real, m=m, dummies=dummies)
    best = 0.0
    for k in itertools.count():
        best = max(best, math.exp(-beta * k) * bounds.bound(k))
        if math.exp(-beta * (k + 1)) * bounds.ceiling <= best:
            return best
    raise AssertionError("unreachable: itertools.count() is infinite")  # pragma: no cover


class _SoundBounds:
    """The ingredients of U_k (spec §6, module docstring) for one dataset D.

    Computing U_0 … U_K costs O(K²) in numpy after one O(ν log ν) sort: W_X(j) is a minimum over j + 1
    windows, however large the groups are.
    """

    def __init__(self, a_real: Values, b_real: Values, *, m: float, dummies: tuple[float, float]) -> None:
        self.m = m
        self.sizes = (a_real.size + 2, b_real.size + 2)
        self.total = self.sizes[0] + self.sizes[1]
        self.dummy_ss = (dummies[0] - dummies[1]) ** 2 / 2
        self.mean_gap = abs(
            _augmented_mean(a_real, dummies=dummies) - _augmented_mean(b_real, dummies=dummies)
        )
        centre = (dummies[0] + dummies[1]) / 2
        self._prefix_sums = [_centred_prefix_sums(values, centre) for values in (a_real, b_real)]

    @property
    def ceiling(self) -> float:
        """U_∞ = sqrt(N)·m/sqrt(SS(r)/(N − 3)) >= every U_k: num_k <= m, and a group of at most N − 2
        records that holds both dummies has a variance of at least SS(r)/(N − 3)."""
        return math.sqrt(self.total) * self.m / math.sqrt(self.dummy_ss / (self.total - 3))

    def bound(self, k: int) -> float:
        """U_k = sqrt(N)·num_k/sqrt(s²_min(k + 1)) >= LS(D') for every D' at distance k."""
        return math.sqrt(self.total) * self.mean_range(k) / math.sqrt(self.variance_floor(k + 1))

    def mean_range(self, k: int) -> float:
        """num_k: the four group means of any D' at distance k and of its neighbours lie in an interval
        this long, since j changes move μ_X by at most j·m/(n_X − j) and all means lie in [0, m]."""
        denominators = (self.sizes[0] - k - 1, self.sizes[1] - k - 1)
        if min(denominators) <= 0:
            return self.m
        return min(self.m, self.mean_gap + (k + 1) * self.m * (1 / denominators[0] + 1 / denominators[1]))

    def variance_floor(self, changes: int) -> float:
        """s²_min(j): no group of a dataset within j changes of D has a smaller variance."""
        return min(
            _min_window_ss(prefix, prefix_sq, size=size - 2 - changes, dummy_ss=self.dummy_ss)
            / min(size + changes - 1, self.total - 3)
            for (prefix, prefix_sq), size in zip(self._prefix_sums, self.sizes, strict=True)
        )


def _centred_prefix_sums(values: Values, centre: float) -> tuple[Values, Values]:
    """Prefix sums of (x − c) and (x − c)² over the sorted values, c the dummies' midpoint (so the dummies
    add 0 and SS(r) to them, and cancellation is limited to values within m of c)."""
    shifted = np.sort(values) - centre
    zero = np.zeros(1)
    return np.concatenate((zero, np.cumsum(shifted))), np.concatenate((zero, np.cumsum(shifted * shifted)))


def _min_window_ss(prefix: Values, prefix_sq: Values, *, size: int, dummy_ss: float) -> float:
    """W_X: min over windows of ``size`` consecutive sorted values of SS(window ∪ dummies); the dummies'
    SS(r) if size <= 0. Clamped below by SS(r), which it always is in exact arithmetic."""
    if size <= 0:
        return dummy_ss
    count = prefix.size - 1
    sums = prefix[size:] - prefix[: count - size + 1]
    squares = prefix_sq[size:] - prefix_sq[: count - size + 1]
    return max(float(np.min(squares + dummy_ss - sums * sums / (size + 2))), dummy_ss)


# --- Algorithm 8 (paper mode) -------------------------------------------------------------------------------


class _GreedyGroup:
    """One augmented group along Algorithm 8's path: running mean and sum of squares, and heaps of the
    real records (value, index) so that the farthest one is found in O(log n) (lazy deletion by version).

    Replacing the farthest real record a* (distance d from the mean μ) by the mean of the other n − 1
    records lowers the sum of squares by exactly n·d²/(n − 1) and moves the mean to that value
    (eq. 7.22), so each step is O(log n) instead of a recomputation.
    """

    def __init__(self, real: Values, dummies: tuple[float, float]) -> None:
        self.original = [float(x) for x in real]
        self.current = list(self.original)
        self.size = real.size + 2
        everything = [*self.original, *dummies]
        self.mean = math.fsum(everything) / self.size
        self.ss = math.fsum((x - self.mean) ** 2 for x in everything)
        self.floor_ss = (dummies[0] - dummies[1]) ** 2 / 2
        self._versions = [0] * real.size
        self._low = [(x, i, 0) for i, x in enumerate(self.original)]
        self._high = [(-x, i, 0) for i, x in enumerate(self.original)]
        heapq.heapify(self._low)
        heapq.heapify(self._high)
        self._farthest: tuple[float, int] | None = None

    @property
    def variance(self) -> float:
        return self.ss / (self.size - 1)

    def farthest(self) -> tuple[float, int] | None:
        """(d_X, index) of the real record farthest from the mean (tie → lowest index); None if none."""
        if self._farthest is None and self.current:
            low, high = self._low, self._high
            while low[0][2] != self._versions[low[0][1]]:
                heapq.heappop(low)
            while high[0][2] != self._versions[high[0][1]]:
                heapq.heappop(high)
            low_distance, high_distance = self.mean - low[0][0], -high[0][0] - self.mean
            if low_distance > high_distance or (low_distance == high_distance and low[0][1] < high[0][1]):
                self._farthest = low_distance, low[0][1]
            else:
                self._farthest = high_distance, high[0][1]
        return self._farthest

    def neighbour_variance(self) -> float:
        """(s_X²)' = s_X² − n·d²/(n − 1)² (Thm 7.4 case 1, spec §4); s_X² if X has no real record.

        Kept >= SS(r)/(n − 1), which it is in exact arithmetic (the dummies stay), against rounding."""
        found = self.farthest()
        if found is None:
            return self.variance
        reduced = _replaced_variance(self.variance, size=self.size, distance=found[0])
        return max(reduced, self.floor_ss / (self.size - 1))

    def replace_farthest(self) -> tuple[float, float, float]:
        """Move the farthest real record to the mean of the others; (original, old, new) of that record."""
        found = self.farthest()
        assert found is not None  # callers pick a group with real records
        index = found[1]
        old = self.current[index]
        deviation = old - self.mean
        self.ss = max(self.ss - self.size * deviation * deviation / (self.size - 1), self.floor_ss)
        self.mean -= deviation / (self.size - 1)
        new = self.mean
        self.current[index] = new
        self._farthest = None
        self._versions[index] += 1
        heapq.heappush(self._low, (new, index, self._versions[index]))
        heapq.heappush(self._high, (-new, index, self._versions[index]))
        return self.original[index], old, new


def _replaced_variance(variance: float, *, size: int, distance: float) -> float:
    """Thm 7.4, case 1 (eq. 7.22): the variance after the record at ``distance`` from the mean of a group
    of ``size`` records is replaced by the mean of the others, s² − n·d²/(n − 1)². With d the largest
    distance this is the smallest variance of any neighbour (the case-2 term never goes lower, spec §4)."""
    return variance - size * distance * distance / (size - 1) ** 2


def _paper_sensitivity(
    a_real: Values, b_real: Values, *, m: float, dummies: tuple[float, float], beta: float
) -> float:
    """Algorithm 8, steps 4-8: S = max_i LS_i·e^{−β·H(D_0, D_i)}, i = 0 … n_A + n_B − 1 (augmented sizes)."""
    return max(
        local * math.exp(-beta * hamming)
        for local, hamming in _paper_path(a_real, b_real, m=m, dummies=dummies)
    )


def _paper_path(
    a_real: Values, b_real: Values, *, m: float, dummies: tuple[float, float]
) -> Iterator[tuple[float, int]]:
    """(LS_i, H(D_0, D_i)) along Algorithm 8's greedy path, i = 0 … n_A + n_B − 1.

    H is the actual Hamming distance (spec §5 notes): it stays put when the step changes a record that was
    already changed, which happens once a group's real records have all been moved (TV-T-2).
    """
    group_a, group_b = _GreedyGroup(a_real, dummies), _GreedyGroup(b_real, dummies)
    # Thm 7.3 as printed: max(2·C_1·(|Δμ| + m/n_min), C_2·(|Δμ| + 2m/n_min)) / sqrt(s_m²), with
    # s_m² = min(s_A², s_B², (s_A²)', (s_B²)'); the sizes, hence C_1, C_2 and n_min, never change.
    c_1, c_2 = _thm_7_3_constants(group_a.size, group_b.size)
    shift = m / min(group_a.size, group_b.size)
    hamming = 0
    for _ in range(group_a.size + group_b.size):
        variance_a, variance_b = group_a.neighbour_variance(), group_b.neighbour_variance()
        smallest = min(group_a.variance, group_b.variance, variance_a, variance_b)
        gap = abs(group_a.mean - group_b.mean)
        yield max(2 * c_1 * (gap + shift), c_2 * (gap + 2 * shift)) / math.sqrt(smallest), hamming
        # D_{i+1} (also computed, unused, after the last term: one O(log n) step).
        chosen = _greedy_choice(group_a, group_b, variance_a, variance_b)
        if chosen is not None:  # None: no real record anywhere, D has no neighbour but itself
            original, old, new = chosen.replace_farthest()
            hamming += (new != original) - (old != original)


def _greedy_choice(
    group_a: _GreedyGroup, group_b: _GreedyGroup, variance_a: float, variance_b: float
) -> _GreedyGroup | None:
    """The group with the smaller (s_X²)' (tie → A), among groups that have a real record to change
    (a group of dummies only cannot move, and choosing it would stall the path)."""
    if not group_b.current:
        return group_a if group_a.current else None
    if not group_a.current:
        return group_b
    return group_a if variance_a <= variance_b else group_b


def _thm_7_3_constants(n_a: int, n_b: int) -> tuple[float, float]:
    """C_1 = sqrt(n_A n_B/N) and C_2 in Thm 7.3's printed form (equal to C_1 + sqrt((n_A−1)(n_B+1)/N))."""
    total = n_a + n_b
    first = total / ((n_a - 1) * (n_b + 1))
    second = total / (n_a * n_b)
    return math.sqrt(n_a * n_b / total), (math.sqrt(first) + math.sqrt(second)) / math.sqrt(first * second)


# --- the releases -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TTestRelease:
    """The output of :func:`dp_ttest`.

    ``noise_sd`` is the exact noise standard deviation (S + γ)/α (γ the grid step: γ/S <= min(1, 1/α)·2⁻²⁰,
    below a millionth). It depends on the data, so it is **not** differentially private: release
    :func:`dp_noise_scale` of it instead.
    """

    t: float
    """The noisy t statistic of the augmented groups."""
    noise_sd: float
    """(S + γ)/α: the exact noise standard deviation (data-dependent, not DP)."""
    alpha: float
    beta: float
    epsilon: float
    delta: float


def dp_ttest(
    a_real: npt.ArrayLike,
    b_real: npt.ArrayLike,
    *,
    m: float,
    dummies: tuple[float, float],
    epsilon: float,
    delta: float,
    rng: RandomSource,
    mode: Mode = "sound",
) -> TTestRelease:
    """t(A ∪ r, B ∪ r) + (S/alpha)·N(0,1) (Thm 7.2, k = 1): (ε, δ)-DP for replace neighbours in sound mode.

    The dummies must be chosen without looking at the data (spec §3). In ``mode="paper"`` the guarantee
    rests on Algorithm 8's unproven greedy bound. Noise: exact discrete Gaussian on a public grid (module
    docstring), drawn from ``rng`` only.
    """
    first, second, dummy_pair = _checked_inputs(a_real, b_real, m=m, dummies=dummies)
    alpha, beta = noise_parameters(epsilon=epsilon, delta=delta)
    sensitivity = smooth_sensitivity(first, second, m=m, dummies=dummy_pair, beta=beta, mode=mode)
    statistic = _welch_t(_augmented(first, dummy_pair), _augmented(second, dummy_pair))
    step = _grid_step(first.size + second.size + 4, alpha=alpha)
    sigma = math.nextafter((sensitivity + float(step)) / alpha, math.inf)
    grid_sigma = Fraction(sigma) / step
    noisy = round(Fraction(statistic) / step) + sample_discrete_gaussian(grid_sigma**2, rng=rng)
    return TTestRelease(
        t=float(noisy * step), noise_sd=sigma, alpha=alpha, beta=beta, epsilon=epsilon, delta=delta
    )


def dp_noise_scale(noise_sd: float, *, beta: float, epsilon: float, rng: RandomSource) -> float:
    """A DP estimate of the noise s.d.: exp(ln(noise_sd) + Laplace(beta/epsilon)), (epsilon, 0)-DP.

    [decision] Spec §7 would release S/α exactly, but S depends on the data, so that is not DP. Since S
    is β-smooth, |ln S(D) − ln S(D')| <= β for neighbours (and so is ln((S + γ)/α): adding the constant
    γ keeps β-smoothness, dividing by α shifts the log), so Laplace noise of scale β/ε on the log is
    ε-DP (:func:`mechanisms.laplace.laplace_mechanism`, exact and snapped); exp is post-processing.
    β is widened by a relative 1e-9 to cover the rounding of the float logarithms. The guarantee holds
    for ``mode="sound"`` only: the paper mode's S is not proven β-smooth. Its cost adds to dp_ttest's.
    """
    check_positive_finite(noise_sd, name="noise_sd", hint="pass TTestRelease.noise_sd")
    check_positive_finite(beta, name="beta", hint="pass TTestRelease.beta")
    check_positive_finite(epsilon, name="epsilon", hint="spend a positive budget, e.g. epsilon=0.1")
    noisy_log = laplace_mechanism(
        math.log(noise_sd), sensitivity=beta * (1 + _LOG_SCALE_MARGIN), epsilon=epsilon, rng=rng
    )
    return math.exp(noisy_log)


def dp_group_sizes(n_a: int, n_b: int, *, epsilon: float, rng: RandomSource) -> tuple[float, float]:
    """Laplace counts of the two groups under replace neighbours: the pair has l1 sensitivity 2 (spec §7).

    Moving one record from A to B changes both counts by one, so each count gets discrete Laplace noise
    of scale 2/ε and the pair is (ε, 0)-DP. The counts of the *real* records; add 2 per group for the
    augmented sizes.
    """
    for name, count in (("n_a", n_a), ("n_b", n_b)):
        if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 0:
            raise MechanismError(
                f"{name} must be a whole number >= 0, got {count!r}", hint="pass the group's record count"
            )
    noisy_a = discrete_laplace_mechanism(int(n_a), sensitivity=2, epsilon=epsilon, rng=rng)
    noisy_b = discrete_laplace_mechanism(int(n_b), sensitivity=2, epsilon=epsilon, rng=rng)
    return float(noisy_a), float(noisy_b)


def _grid_step(total: int, *, alpha: float) -> Fraction:
    """γ: the largest power of two <= min(1, 1/α)·4·sqrt(2)/N / 2**GRID_BITS, from public N and α only.

    4·sqrt(2)/N <= S in both modes [derived]: C_1 = sqrt(n_A n_B/N) >= 1 and C_2 >= C_1; the mean term is
    at least 2m/min(n_A, n_B) >= 4m/N (paper) or m·(1/(n_A−1) + 1/(n_B−1)) >= 4m/N (sound, also when
    capped at m); and a variance of values in [0, m] is at most m²/2. So γ <= 2**-20·S (the widening
    S + γ is negligible) and γ <= 2**-20·S/α (the noise is fine-grained in grid units).
    """
    floor = Fraction(4 * math.sqrt(2) / total) * min(Fraction(1), 1 / Fraction(alpha))
    exponent = floor.numerator.bit_length() - floor.denominator.bit_length()
    if Fraction(2) ** exponent > floor:
        exponent -= 1
    return Fraction(2) ** (exponent - GRID_BITS)


# --- helpers ------------------------------------------------------------------------------------------------


def _welch_t(first: Values, second: Values) -> float:
    spread = float(np.var(first, ddof=1)) / first.size + float(np.var(second, ddof=1)) / second.size
    return (float(np.mean(first)) - float(np.mean(second))) / math.sqrt(spread)


def _augmented(values: Values, dummies: tuple[float, float]) -> Values:
    return np.concatenate((values, np.asarray(dummies, dtype=np.float64)))


def _augmented_mean(values: Values, *, dummies: tuple[float, float]) -> float:
    return float(np.mean(_augmented(values, dummies)))


def _checked_inputs(
    a_real: npt.ArrayLike, b_real: npt.ArrayLike, *, m: float, dummies: tuple[float, float]
) -> tuple[Values, Values, tuple[float, float]]:
    check_positive_finite(m, name="m", hint="m = upper − lower of the column's public bounds")
    bound = float(m)
    dummy_pair = _checked_dummies(dummies, m=bound)
    return (
        _real_values(a_real, name="a_real", m=bound),
        _real_values(b_real, name="b_real", m=bound),
        dummy_pair,
    )


def _checked_dummies(dummies: object, *, m: float) -> tuple[float, float]:
    hint = "use two distinct public constants in [0, m], e.g. 0.45·m and 0.55·m; never values from the data"
    if not isinstance(dummies, tuple | list) or len(dummies) != 2:
        raise MechanismError(f"dummies must be a pair (r_1, r_2), got {dummies!r}", hint=hint)
    for value in dummies:
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise MechanismError(f"dummies must be finite numbers, got {dummies!r}", hint=hint)
        if not 0 <= value <= m:
            raise MechanismError(f"dummies must lie in [0, m] = [0, {m!r}], got {dummies!r}", hint=hint)
    first, second = float(dummies[0]), float(dummies[1])
    if first == second:
        raise MechanismError(
            f"the two dummies must be distinct, got {dummies!r}: equal dummies leave a zero variance reachable",
            hint=hint,
        )
    return first, second


def _real_values(values: npt.ArrayLike, *, name: str, m: float) -> Values:
    """The real values of one group as a 1-D float array in [0, m]; empty is allowed (module docstring)."""
    hint = "clamp the values to the column's [lower, upper] and subtract lower, so that m = upper − lower"
    array = np.asarray(values)
    if array.dtype.kind not in "iuf" or array.ndim != 1:
        raise MechanismError(
            f"{name} must be a one-dimensional sequence of numbers, got dtype {array.dtype} with shape "
            f"{array.shape}",
            hint=hint,
        )
    array = array.astype(np.float64)
    if not np.all(np.isfinite(array)):
        raise MechanismError(f"{name} must contain finite numbers only", hint=hint)
    if array.size and (float(array.min()) < 0 or float(array.max()) > m):
        raise MechanismError(
            f"{name} has values outside [0, m] = [0, {m!r}] (min {float(array.min())!r}, max "
            f"{float(array.max())!r})",
            hint=hint,
        )
    return array


def _statistic_group(values: npt.ArrayLike, *, name: str) -> Values:
    array = np.asarray(values)
    if array.dtype.kind not in "iuf" or array.ndim != 1:
        raise MechanismError(
            f"{name} must be a one-dimensional sequence of numbers", hint="pass the group's values"
        )
    array = array.astype(np.float64)
    if array.size < 2 or not np.all(np.isfinite(array)) or float(np.var(array)) <= 0:
        raise MechanismError(
            f"{name} needs at least 2 finite values with a positive variance for Welch's t",
            hint="add the dummy records to both groups first (dp_ttest does)",
        )
    return array


def _check_privacy(*, epsilon: float, delta: float) -> None:
    check_positive_finite(epsilon, name="epsilon", hint="spend a positive budget, e.g. epsilon=1.0")
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real) or not 0 < delta < 1:
        raise MechanismError(
            f"delta must be a number strictly between 0 and 1, got {delta!r}",
            hint="the smooth-sensitivity Gaussian needs delta > 0, e.g. 1e-6 (well below 1/n)",
        )


def _check_mode(mode: object) -> None:
    if mode not in _MODES:
        raise MechanismError(
            f"mode must be 'sound' or 'paper', got {mode!r}",
            hint="'sound' is the proven bound; 'paper' reproduces Algorithm 8 of the source",
        )
