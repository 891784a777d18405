"""Per-attribute simulators: regions against brute-force computations of the published distribution."""

from __future__ import annotations

import math

import numpy as np
import pytest

from anonymizers.errors import AnonymizationError
from anonymizers.hierarchy import Hierarchy, interval_hierarchy
from anonymizers.risk.pipeline import AttributePipeline, Generalize, Laplace, Randomize, coarsen
from anonymizers.risk.simulators import (
    GeneralizationSimulator,
    PerturbationSimulator,
    laplace_half_width,
    laplace_matrix,
    local_label,
    randomize_matrix,
)

SPORTS = Hierarchy(
    "hobby",
    (
        ("baseball", "football", "judo", "chess"),
        ("ballgames", "ballgames", "indoorsports", "games"),
        ("sports", "sports", "sports", "games"),
        ("*", "*", "*", "*"),
    ),
)


def _brute_force_half_width(step: Laplace, mass: float) -> float:
    """Smallest m with P(|D| <= m) >= mass, summing the unclamped grid noise term by term."""
    s = step.scale / step.unit
    total, m = 0.0, -1
    while total < mass:
        m += 1
        if step.law == "discrete":
            q = math.exp(-1 / s)
            term = (1 - q) / (1 + q) * q**m
        else:
            cdf = lambda x: 1 - 0.5 * math.exp(-x / s)  # noqa: E731 - P(X/u <= x), x >= 0
            term = (cdf(m + 0.5) - cdf(m - 0.5)) if m else 2 * cdf(0.5) - 1
        total += term * (1 if m == 0 else 2)
    return step.unit * m


@pytest.mark.parametrize("law", ["discrete", "rounded"])
@pytest.mark.parametrize("epsilon", [0.3, 0.5, 1.0, 2.0])
@pytest.mark.parametrize("mass", [0.5, 0.9, 0.9486833])
def test_half_width_formula_matches_brute_force(law: str, epsilon: float, mass: float) -> None:
    step = Laplace(epsilon, lower=0, upper=400, unit=2.0, law=law)  # type: ignore[arg-type]
    assert laplace_half_width(step, mass) == _brute_force_half_width(step, mass)


@pytest.mark.parametrize("law", ["discrete", "rounded"])
def test_high_region_is_the_box_away_from_the_domain_ends(law: str) -> None:
    step = Laplace(0.5, lower=0, upper=100, law=law)  # type: ignore[arg-type]
    region = PerturbationSimulator(AttributePipeline("x", (step,))).region(0.9)
    width = int(laplace_half_width(step, 0.9))
    assert np.flatnonzero(region[50]).tolist() == list(range(50 - width, 50 + width + 1))


def test_clamped_end_point_joins_the_region_when_its_tail_is_heavy() -> None:
    step = Laplace(0.1, lower=0, upper=30)
    matrix = laplace_matrix(step)
    region = PerturbationSimulator(AttributePipeline("x", (step,))).region(0.9)
    assert np.allclose(matrix.sum(axis=1), 1.0)
    assert region[28, 30] and matrix[28, 30] > matrix[28, 28]
    assert matrix[15][region[15]].sum() >= 0.9


def test_randomization_follows_the_exponential_mechanism_by_tree_distance() -> None:
    matrix = randomize_matrix(Randomize(1.0, SPORTS, sensitivity=1.0))
    weights = np.exp(-np.array([0, 2, 4, 6]) / 2)  # from baseball: itself, football, judo, chess
    assert np.allclose(matrix[0], weights / weights.sum())


def test_noise_then_generalize_sums_the_noise_over_each_label() -> None:
    step = Laplace(0.7, lower=0, upper=9)
    hierarchy = interval_hierarchy("x", range(10), [5])
    simulator = PerturbationSimulator(AttributePipeline("x", (step, Generalize(hierarchy, 1))))
    noise = laplace_matrix(step)
    assert simulator.output_labels == ("0-4", "5-9")
    assert np.allclose(simulator.distribution[:, 0], noise[:, :5].sum(axis=1))
    assert simulator.output_codes(["5-9", "10-14"]).tolist() == [1, -1]


def test_generalize_then_randomize_acts_on_the_coarse_cells() -> None:
    coarse = coarsen(SPORTS, 1)
    simulator = PerturbationSimulator(
        AttributePipeline("hobby", (Generalize(SPORTS, 1), Randomize(2.0, coarse)))
    )
    assert simulator.output_labels == ("ballgames", "indoorsports", "games")
    assert np.allclose(simulator.distribution[0], simulator.distribution[1])  # baseball, football: one cell
    assert np.allclose(simulator.distribution[0], randomize_matrix(Randomize(2.0, coarse))[0])


def test_generalization_candidates_are_the_ancestors() -> None:
    released = ["sports", "ballgames", "indoorsports"]
    allowed = GeneralizationSimulator("hobby", SPORTS).allowed(["baseball"], released)
    assert allowed.tolist() == [[True, True, False]]  # [D] §3.1: {sports, ballgames}


def test_step_after_noise_must_cover_the_grid() -> None:
    narrow = interval_hierarchy("x", range(5), [5])
    simulator = PerturbationSimulator(
        AttributePipeline("x", (Laplace(1.0, lower=0, upper=9), Generalize(narrow, 1)))
    )
    with pytest.raises(AnonymizationError, match="cover every value it can receive"):
        simulator.region(0.9)


def test_local_recoding_labels_hold_their_range_or_set() -> None:
    assert local_label("30-39") is None and local_label("*") is None and local_label("{}") is None
    simulator = GeneralizationSimulator("age", None)
    allowed = simulator.allowed(["25", "39", "60"], ["[20-39]", "[40-60]", "39"])
    assert allowed.tolist() == [[True, False, False], [True, False, True], [False, True, False]]
    sets = GeneralizationSimulator("job", None).allowed(["a", "c"], ["{a,b}", "c"])
    assert sets.tolist() == [[True, False], [False, True]]
