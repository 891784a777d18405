"""What ``combine`` draws follows the laws the attack simulator scores (anonymizers/risk/simulators.py).

Each test releases one value many times with a fixed seed and runs a chi-square goodness-of-fit test of the
released histogram against the simulator's exact published-value distribution (bins with an expected count
below 5 are pooled, the usual validity rule). The tolerance comes from the chi-square distribution: the test
fails only when the statistic's p-value is below 1e-6, which a correct sampler does once in a million seeds;
a sampler with the wrong scale, a lost clamp or an off-by-one in the geometric difference lands far below.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2

from anonymizers.combine import combine
from anonymizers.hierarchy import ROOT, Hierarchy
from anonymizers.risk.pipeline import AttributePipeline, Laplace, Pipeline, Randomize
from anonymizers.risk.simulators import laplace_matrix, randomize_matrix

pytestmark = pytest.mark.slow

DRAWS = 60_000
SIGNIFICANCE = 1e-6
WORK = Hierarchy(
    "work",
    (
        ("federal", "local", "state", "private", "self", "unpaid", "never"),
        ("government", "government", "government", "private", "other", "other", "other"),
        (ROOT,) * 7,
    ),
)


def goodness_of_fit(observed: np.ndarray, probabilities: np.ndarray) -> float:
    """The chi-square p-value of ``observed`` counts against ``probabilities``, small bins pooled."""
    expected = probabilities * observed.sum()
    large = expected >= 5
    observed_bins = np.append(observed[large], observed[~large].sum())
    expected_bins = np.append(expected[large], expected[~large].sum())
    keep = expected_bins > 0
    statistic = float((((observed_bins - expected_bins) ** 2)[keep] / expected_bins[keep]).sum())
    return float(chi2.sf(statistic, keep.sum() - 1))


def release_many(value: object, attribute: AttributePipeline, seed: int) -> np.ndarray:
    frame = pd.DataFrame({attribute.attribute: [value] * DRAWS})
    return combine(frame, Pipeline((attribute,)), seed=seed).table[attribute.attribute].to_numpy()


@pytest.mark.parametrize(
    ("law", "value", "epsilon"),
    [
        ("discrete", 20, 0.5),  # the middle of the grid: the two-sided geometric law
        ("discrete", 1, 0.25),  # next to the lower end: the clamped tail piles up on 0
        ("rounded", 20, 0.5),
        ("rounded", 38, 0.3),
    ],
)
def test_laplace_draws_follow_the_simulated_law(law: str, value: int, epsilon: float) -> None:
    step = Laplace(epsilon, lower=0, upper=40, law=law)  # type: ignore[arg-type]
    released = release_many(value, AttributePipeline("x", (step,)), seed=value)
    observed = np.bincount(released, minlength=step.grid_size)
    assert goodness_of_fit(observed, laplace_matrix(step)[value]) > SIGNIFICANCE


@pytest.mark.parametrize(("leaf", "sensitivity"), [("private", None), ("state", None), ("never", 1.0)])
def test_exponential_mechanism_draws_follow_the_transition_matrix(
    leaf: str, sensitivity: float | None
) -> None:
    step = Randomize(1.0, WORK, sensitivity)
    released = release_many(leaf, AttributePipeline("work", (step,)), seed=len(leaf))
    observed = np.bincount(WORK.leaf_codes(released), minlength=len(WORK.leaves))
    assert goodness_of_fit(observed, randomize_matrix(step)[WORK.leaf_index(leaf)]) > SIGNIFICANCE


def test_a_wrong_scale_is_detected() -> None:
    """The check has power: draws at ε = 0.5 do not pass for the law of ε = 0.45 (scale off by 11 %)."""
    drawn = Laplace(0.5, lower=0, upper=40)
    released = release_many(20, AttributePipeline("x", (drawn,)), seed=99)
    observed = np.bincount(released, minlength=drawn.grid_size)
    assert goodness_of_fit(observed, laplace_matrix(Laplace(0.45, lower=0, upper=40))[20]) < SIGNIFICANCE
