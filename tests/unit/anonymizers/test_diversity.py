"""l-diversity variants and t-closeness on class × sensitive-value count matrices, hand-checked."""

from __future__ import annotations

import math

import numpy as np
import pytest

from anonymizers.diversity import (
    DiversityModel,
    achieved,
    closeness_per_attribute,
    distinct_l,
    emd,
    entropy_l,
    frequency_l_per_attribute,
    recursive_achieved_l,
    recursive_cl,
)
from anonymizers.errors import AnonymizationError

# three classes over values (a, b, c)
MATRIX = np.array([[5, 0, 0], [2, 2, 0], [3, 2, 1]])


def test_distinct_l_counts_values_present() -> None:
    assert distinct_l(MATRIX).tolist() == [1, 2, 3]


def test_entropy_l_is_exp_of_the_entropy() -> None:
    third = -(0.5 * math.log(0.5) + 1 / 3 * math.log(1 / 3) + 1 / 6 * math.log(1 / 6))
    assert entropy_l(MATRIX) == pytest.approx([1.0, 2.0, math.exp(third)])


def test_recursive_cl_compares_the_top_count_with_the_tail() -> None:
    # class 3 sorted (3, 2, 1): l=2 tail = 2+1 = 3; 3 < c·3 holds for c = 2, not for c = 1
    assert recursive_cl(MATRIX, c=2, l=2).tolist() == [False, True, True]
    assert recursive_cl(MATRIX, c=1, l=2).tolist() == [False, False, False]
    assert recursive_cl(MATRIX, c=4, l=3).tolist() == [False, False, True]  # 3 < 4·1
    assert recursive_cl(MATRIX, c=10, l=4).tolist() == [False, False, False]  # fewer than l values
    assert recursive_achieved_l(MATRIX, c=4).tolist() == [1, 2, 3]


def test_equal_distance_emd_is_half_the_l1_distance() -> None:
    overall = np.array([0.5, 0.3, 0.2])
    assert emd(MATRIX, overall, distance="equal") == pytest.approx([0.5, 0.2, (0 + 1 / 30 + 1 / 30) / 2])


def test_ordered_distance_emd_sums_cumulative_differences() -> None:
    """Li et al. 2007: (1/(m−1))·Σ|cumulative difference|; all mass moved from one end to the other
    costs 1."""
    extremes = np.array([[1, 0, 0]])
    assert emd(extremes, np.array([0.0, 0.0, 1.0]), distance="ordered") == pytest.approx([1.0])
    # class (0.5, 0.5, 0) against (1/3, 1/3, 1/3): cumulative differences 1/6, 1/3 → (1/6 + 1/3)/2
    assert emd(np.array([[1, 1, 0]]), np.full(3, 1 / 3), distance="ordered") == pytest.approx([0.25])


def test_model_failing_masks() -> None:
    overall = np.array([0.5, 0.3, 0.2])
    assert DiversityModel(l=2).failing(MATRIX, None).tolist() == [True, False, False]
    assert DiversityModel(l=2.5, variant="entropy").failing(MATRIX, None).tolist() == [True, True, False]
    assert DiversityModel(l=2, variant="recursive", c=2).failing(MATRIX, None).tolist() == [
        True,
        False,
        False,
    ]
    assert DiversityModel(t=0.3).failing(MATRIX, overall).tolist() == [True, False, False]


def test_entropy_l_exactly_met_passes() -> None:
    assert not DiversityModel(l=2, variant="entropy").failing(np.array([[3, 3]]), None).any()


def test_implied_distinct_l_of_each_variant() -> None:
    assert DiversityModel(l=2.5, variant="entropy").implied_distinct == 3
    assert DiversityModel(l=3, variant="recursive").implied_distinct == 3
    assert DiversityModel(t=0.2).implied_distinct == 1
    assert DiversityModel(l=3).monotone_with_suppression
    assert not DiversityModel(l=3, variant="entropy").monotone_with_suppression
    assert not DiversityModel(t=0.2).monotone_with_suppression


def test_merging_classes_never_breaks_the_monotone_variants() -> None:
    """Generalization merges classes: distinct, entropy and t never get worse than the worst part."""
    rng = np.random.default_rng(0)
    overall = np.array([0.2, 0.3, 0.5])
    for _ in range(200):
        parts = rng.integers(0, 6, (2, 3))
        parts[:, 0] += 1
        merged = parts.sum(axis=0, keepdims=True)
        assert distinct_l(merged)[0] >= distinct_l(parts).max()
        assert entropy_l(merged)[0] >= entropy_l(parts).min() - 1e-12
        assert (
            emd(merged, overall, distance="equal")[0] <= emd(parts, overall, distance="equal").max() + 1e-12
        )


def test_achieved_measures_over_released_classes() -> None:
    result = achieved(MATRIX[1:], np.array([0.5, 0.3, 0.2]), c=4)
    assert result["distinct_l"] == 2
    assert result["entropy_l"] == pytest.approx(2.0)
    assert result["recursive_l"] == 2
    assert result["t"] == pytest.approx(0.2)


def test_invalid_parameters_are_refused() -> None:
    with pytest.raises(AnonymizationError, match="whole number"):
        DiversityModel(l=2.5)
    with pytest.raises(AnonymizationError, match="t must be between 0 and 1"):
        DiversityModel(t=1.5)
    with pytest.raises(AnonymizationError, match="c > 0"):
        DiversityModel(l=2, variant="recursive", c=0)


def test_sensitive_qid_frequency_l_and_closeness() -> None:
    """Two sensitive QIDs (age, disease) as codes: for disease the classes are the ages and vice versa.
    age 0: diseases (0, 1); age 1: diseases (0, 0) — so disease is only 1-diverse within age 1."""
    codes = np.array([[0, 0], [0, 1], [1, 0]])
    counts = np.array([1, 1, 2])
    # age within disease 0: ages (0, 1, 1) → max share 2/3 → l = 1.5; disease 1: age 0 only → 1
    assert frequency_l_per_attribute(codes, counts).tolist() == [1.0, 1.0]
    # disease overall (3/4, 1/4); age 0 has (1/2, 1/2) → 1/4; age 1 (1, 0) → 1/4
    assert closeness_per_attribute(codes, counts)[1] == pytest.approx(0.25)
