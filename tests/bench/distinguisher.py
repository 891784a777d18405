"""How well an observer tells two neighbouring databases apart from one number per query (here a
response time), stated as a distinguishing advantage and an empirical ε lower bound.

The observer's test is a threshold: "present" when the time is above (or below) ``t``. The threshold
and its direction are chosen on one half of the samples; the other half measures it, so the choice
does not flatter the result. For an ε-DP mechanism every event S satisfies P[S | D] ≤ e^ε P[S | D′]
(δ = 0), so ε ≥ ln(P[S | D] / P[S | D′]) for S = "above t" and for its complement; with Clopper–Pearson
95% bounds (lower on the numerator, upper on the denominator) the bound holds with that confidence
(the method of Jagielski et al. 2020, "Auditing differentially private machine learning")."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Distinguisher:
    threshold: float
    above_means_present: bool
    advantage: float  # TPR − FPR on the held-out half
    epsilon_lower_bound: float  # ≥ 0; 0 when nothing is shown at this confidence


def clopper_pearson(successes: int, trials: int, *, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact two-sided interval for a binomial proportion."""
    alpha = 1 - confidence
    low = 0.0 if successes == 0 else float(beta.ppf(alpha / 2, successes, trials - successes + 1))
    high = 1.0 if successes == trials else float(beta.ppf(1 - alpha / 2, successes + 1, trials - successes))
    return low, high


def best_threshold(present: np.ndarray, absent: np.ndarray) -> tuple[float, bool]:
    """The threshold and direction with the largest |TPR − FPR| on these samples."""
    candidates = np.unique(np.concatenate([present, absent]))
    above_present = (present[None, :] > candidates[:, None]).mean(axis=1)
    above_absent = (absent[None, :] > candidates[:, None]).mean(axis=1)
    gap = above_present - above_absent
    i = int(np.argmax(np.abs(gap)))
    return float(candidates[i]), bool(gap[i] >= 0)


def distinguish(present: list[float], absent: list[float], *, seed: int = 0) -> Distinguisher:
    """Choose the test on a random half of each side, measure it on the other half."""
    rng = random.Random(seed)
    a, b = _halves(present, rng), _halves(absent, rng)
    threshold, above = best_threshold(a[0], b[0])
    hits_present = int(((a[1] > threshold) == above).sum())
    hits_absent = int(((b[1] > threshold) == above).sum())
    n_present, n_absent = len(a[1]), len(b[1])
    advantage = hits_present / n_present - hits_absent / n_absent
    bounds = [
        _log_ratio(clopper_pearson(hits_present, n_present)[0], clopper_pearson(hits_absent, n_absent)[1]),
        _log_ratio(
            clopper_pearson(n_absent - hits_absent, n_absent)[0],
            clopper_pearson(n_present - hits_present, n_present)[1],
        ),
    ]
    return Distinguisher(threshold, above, advantage, max(0.0, *bounds))


def _halves(samples: list[float], rng: random.Random) -> tuple[np.ndarray, np.ndarray]:
    shuffled = list(samples)
    rng.shuffle(shuffled)
    middle = len(shuffled) // 2
    return np.array(shuffled[:middle]), np.array(shuffled[middle:])


def _log_ratio(numerator: float, denominator: float) -> float:
    if numerator <= 0:
        return 0.0
    return math.log(numerator / denominator) if denominator > 0 else math.inf
