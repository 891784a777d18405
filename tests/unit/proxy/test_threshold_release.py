"""τ-thresholding of data-derived keys, against the exact law of the noise the release adds (issue 21).

Two guarantees, each checked against the probability computed from the mechanism's distribution, not
from the code under test:

* a key held by one person (people count 1) passes τ with probability at most δ_τ / L, for every ε —
  exactly, from the discrete noise's tail (the continuous Laplace formula understates it by up to 2×);
* a key whose count is just above (or below) τ is released at the rate the mechanism gives: sometimes
  hidden, sometimes shown. A seeded binomial test over 2,000 releases, failing when the two-sided p-value
  is below 1e-6 (the false-failure rate of each test).
"""

from __future__ import annotations

import math
import random
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest, norm

from mechanisms.laplace import (
    SCALE_DENOMINATOR,
    discrete_laplace_upper_tail,
    laplace_grid_step,
    laplace_upper_tail,
)
from proxy.analysis.parse import parse_statements
from proxy.analysis.quantities import THRESHOLD_QUANTITY
from proxy.analysis.statements import PrivateQuery, classify
from proxy.config import DatasetPolicy, parse_config
from proxy.query.planning import prepare_release
from proxy.release.apply import release
from proxy.release.plan import Measurement, ReleasePlan

POLICY = """
[datasets.d]
path = "d.duckdb"

[datasets.d.tables.words]
privacy_unit = "row"
[datasets.d.tables.words.columns]
word = { type = "text" }

[datasets.d.tables.visits]
privacy_unit = "patient_id"
max_contributions = 3
[datasets.d.tables.visits.columns]
patient_id = { type = "integer" }
note = { type = "text" }
"""
ROWS = "SELECT word, COUNT(*) FROM words GROUP BY word"  # one key per person: discrete noise, L = 1
PEOPLE = "SELECT note, COUNT(*) FROM visits GROUP BY note"  # weighted counts: noise on a grid, L = 3
FALSE_FAILURE = 1e-6
DRAWS = 2000


def dataset() -> DatasetPolicy:
    policy = parse_config(POLICY, path=Path("/nonexistent/veil.toml")).dataset("d")
    assert policy is not None
    return policy


def plan_for(sql: str, *, epsilon: float, delta: float = 1e-6, gaussian: bool = False) -> ReleasePlan:
    statement = classify(parse_statements(sql)[0], dataset())
    assert isinstance(statement, PrivateQuery)
    plan, _ = prepare_release(
        statement.shape, epsilon=epsilon, delta=delta, dialect="duckdb", gaussian=gaussian
    )
    assert plan.threshold is not None
    return plan


def gate(plan: ReleasePlan) -> Measurement:
    return next(m for m in plan.measurements if m.quantity == THRESHOLD_QUANTITY)


# --- the exact law of the noise, rebuilt here from the mechanisms' documented parameters -------------------


def rounded_up(scale: Fraction) -> Fraction:
    """The mechanisms round every Laplace scale up to a multiple of 2**-32 (mechanisms/laplace.py)."""
    return Fraction(math.ceil(scale * SCALE_DENOMINATOR), SCALE_DENOMINATOR)


def at_least(m: int, scale: Fraction) -> float:
    """P[K >= m] for K discrete Laplace, P[K = k] ∝ exp(-|k|/scale): p^m/(1+p) for m >= 1, by symmetry else."""
    p = math.exp(-1 / float(scale))
    if m >= 1:
        return math.exp(-m / float(scale)) / (1 + p)
    return 1 - math.exp(-(1 - m) / float(scale)) / (1 + p)


def laplace_release_probability(measurement: Measurement, count: int, threshold: float) -> float:
    """P[noisy count > τ] for the Laplace gate: discrete noise on the integers, or on the 2^k grid of
    step γ with scale (Δ + γ)/(γ·ε) in grid units (the count is a grid point: γ divides 1)."""
    sensitivity, epsilon = Fraction(measurement.sensitivity), Fraction(measurement.epsilon)
    if measurement.exact_integer:
        return at_least(math.floor(threshold - count) + 1, rounded_up(sensitivity / epsilon))
    step = Fraction(laplace_grid_step(sensitivity=measurement.sensitivity, epsilon=measurement.epsilon))
    scale = rounded_up((sensitivity + step) / (step * epsilon))
    return at_least(math.floor((Fraction(threshold) - count) / step) + 1, scale)


def discrete_gaussian_release_probability(sigma: float, count: int, threshold: float) -> float:
    """P[count + Y > τ], Y ~ N_Z(0, σ²), by summing the probability mass (±40σ holds all of it)."""
    reach = math.ceil(40 * sigma) + 2
    y = np.arange(-reach, reach + 1, dtype=np.float64)
    mass = np.exp(-y * y / (2 * sigma * sigma))
    return float(mass[count + y > threshold].sum() / mass.sum())


# --- a key held by one person --------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(epsilon=st.floats(min_value=0.01, max_value=40.0), delta=st.sampled_from([1e-9, 1e-6, 1e-3]))
def test_a_single_persons_key_passes_with_probability_at_most_delta_over_l(
    epsilon: float, delta: float
) -> None:
    """Exactly, for discrete noise (tables of people, L = 1) and grid noise (L = 3): the planted bug of
    the continuous formula on discrete noise released such a key with probability up to 1.99·δ."""
    for sql, keys_per_person in ((ROWS, 1), (PEOPLE, 3)):
        plan = plan_for(sql, epsilon=epsilon, delta=delta)
        assert plan.threshold is not None
        probability = laplace_release_probability(gate(plan), 1, plan.threshold)
        assert probability <= plan.threshold_delta / keys_per_person


def test_the_worst_case_epsilon_of_the_continuous_formula_is_now_within_delta() -> None:
    """ε = 13.125, δ = 1e-6 on a table of people: τ = 3 − 4e-4 under the continuous formula, so a count
    of 1 passed with K >= 2, probability 1.99e-6. The discrete tail moves τ to the next integer."""
    plan = plan_for(ROWS, epsilon=13.125)
    assert plan.threshold is not None and plan.threshold >= 3.0
    assert laplace_release_probability(gate(plan), 1, plan.threshold) <= 1e-6


@pytest.mark.parametrize("probability", [1e-12, 1e-6, 0.01, 0.4])
@pytest.mark.parametrize(("sensitivity", "epsilon"), [(1.0, 0.1), (1.0, 13.125), (3.0, 0.5), (250.5, 2.0)])
def test_laplace_upper_tails_are_the_smallest_that_hold(
    sensitivity: float, epsilon: float, probability: float
) -> None:
    """t is an upper tail (P[noise > t] <= p) and the smallest one on the noise's lattice."""
    scale = rounded_up(Fraction(sensitivity) / Fraction(epsilon))
    t = discrete_laplace_upper_tail(sensitivity=sensitivity, epsilon=epsilon, probability=probability)
    assert t.is_integer()
    assert at_least(int(t) + 1, scale) <= probability < at_least(int(t), scale) or t == 0
    step = Fraction(laplace_grid_step(sensitivity=sensitivity, epsilon=epsilon))
    grid_scale = rounded_up((Fraction(sensitivity) + step) / (step * Fraction(epsilon)))
    grid_t = Fraction(laplace_upper_tail(sensitivity=sensitivity, epsilon=epsilon, probability=probability))
    m = grid_t / step + Fraction(1, 2)  # t = γ·(m − ½)
    assert m.denominator == 1
    assert at_least(int(m), grid_scale) <= probability < at_least(int(m) - 1, grid_scale) or m == 1


# --- keys near τ: released at the mechanism's rate -------------------------------------------------------


def released_share(plan: ReleasePlan, count: int, rows_per_person: int) -> int:
    """How many of DRAWS seeded releases show a key whose exact people count is ``count``."""
    exact = [("k", count * rows_per_person, count)]  # key, COUNT(*), people (the gate)
    return sum(len(release(plan, exact, rng=random.Random(seed)).rows) for seed in range(DRAWS))


def near(threshold: float) -> list[int]:
    """The integer counts just below and just above τ."""
    return [math.floor(threshold), math.floor(threshold) + 1]


@pytest.mark.parametrize(("sql", "rows_per_person"), [(ROWS, 1), (PEOPLE, 2)])
def test_keys_near_tau_are_released_at_the_laplace_rate(sql: str, rows_per_person: int) -> None:
    """Evaluating τ on the exact count (the planted bug) shows the key above τ every time and the one
    below never; rounding the noisy count before the comparison shifts the rate."""
    plan = plan_for(sql, epsilon=1.0)
    assert plan.threshold is not None
    for count in near(plan.threshold):
        expected = laplace_release_probability(gate(plan), count, plan.threshold)
        assert 0.05 < expected < 0.95, "a count near τ is sometimes hidden, sometimes shown"
        shown = released_share(plan, count, rows_per_person)
        assert binomtest(shown, DRAWS, expected).pvalue > FALSE_FAILURE, (count, shown, expected)


def test_keys_near_tau_are_released_at_the_discrete_gaussian_rate() -> None:
    plan = plan_for(ROWS, epsilon=1.0, gaussian=True)
    measurement = gate(plan)
    assert plan.threshold is not None and measurement.exact_integer
    sigma = measurement.gaussian_sigma()
    for count in near(plan.threshold):
        expected = discrete_gaussian_release_probability(sigma, count, plan.threshold)
        assert 0.05 < expected < 0.95
        shown = released_share(plan, count, 1)
        assert binomtest(shown, DRAWS, expected).pvalue > FALSE_FAILURE, (count, shown, expected)


def test_keys_near_tau_are_released_at_the_gaussian_rate_on_the_grid() -> None:
    """The grid noise is N_Z(0, σ_γ²)·γ with σ_γ·γ within a grid step of the analytic σ (γ ≈ σ·2^-20):
    the normal tail gives the rate to far better than the test's resolution (±0.01)."""
    plan = plan_for(PEOPLE, epsilon=1.0, gaussian=True)
    measurement = gate(plan)
    assert plan.threshold is not None and not measurement.exact_integer
    sigma = measurement.gaussian_sigma()
    for count in near(plan.threshold):
        expected = float(norm.sf((plan.threshold - count) / sigma))
        assert 0.05 < expected < 0.95
        shown = released_share(plan, count, 2)
        assert binomtest(shown, DRAWS, expected).pvalue > FALSE_FAILURE, (count, shown, expected)


def test_the_noisy_count_is_compared_with_tau_before_rounding() -> None:
    """ε = 18 on weighted counts: b = 1/3, τ ≈ 5.74. A count of 5 passes with probability 0.054 when the
    grid value is compared with τ; rounding it first lets every value in [5.5, 5.74] through too (0.09 —
    beyond δ's calibration for a count of 1 as well)."""
    plan = plan_for(PEOPLE, epsilon=18.0)
    assert plan.threshold is not None and plan.threshold % 1 > 0.5
    count = math.floor(plan.threshold)
    expected = laplace_release_probability(gate(plan), count, plan.threshold)
    shown = released_share(plan, count, 2)
    assert binomtest(shown, DRAWS, expected).pvalue > FALSE_FAILURE, (shown, expected)
