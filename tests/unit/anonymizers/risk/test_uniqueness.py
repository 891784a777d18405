"""The Poisson–gamma population-uniques estimator against test vector TV-PU-1 (spec §9)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from anonymizers.errors import AnonymizationError
from anonymizers.hierarchy import interval_hierarchy
from anonymizers.risk.uniqueness import (
    DeclaredValues,
    Domain,
    cell_count,
    column_domain,
    estimate_beta,
    estimate_population_uniques,
    expected_population_uniques,
    expected_sample_uniques,
    population_uniques,
)

TV = {"population": 10_000, "cells": 1_000}


def test_expected_uniques_of_tv_pu_1() -> None:
    assert expected_population_uniques(beta=0.01, **TV) == pytest.approx(62.4089, abs=5e-5)
    assert expected_sample_uniques(beta=0.01, sampling_fraction=0.1, **TV) == pytest.approx(71.5267, abs=5e-5)


def test_population_uniques_of_tv_pu_1_in_both_forms() -> None:
    u = population_uniques(50, beta=0.01, sampling_fraction=0.1, **TV)
    ratio = expected_population_uniques(beta=0.01, **TV) / expected_sample_uniques(
        beta=0.01, sampling_fraction=0.1, **TV
    )
    assert u == pytest.approx(4.36263, abs=5e-6)
    assert u == pytest.approx(50 * ratio * 0.1)


def test_beta_comes_back_from_the_variance() -> None:
    assert estimate_beta(variance=11.0, sampling_fraction=0.1, **TV) == pytest.approx(0.01)


def test_variance_counts_the_empty_cells() -> None:
    """1,000 sampled records in 10 cells of 100 of K = 1,000: s² = (10·100² − 1000²/1000)/999."""
    result = estimate_population_uniques(np.full(10, 100), sampling_fraction=0.1, **TV)
    variance = (10 * 100**2 - 1_000**2 / 1_000) / 999
    assert result.beta == pytest.approx(estimate_beta(variance=variance, sampling_fraction=0.1, **TV))
    assert result.model == "poisson-gamma" and result.sample_uniques == 0


def test_under_dispersed_sample_uses_the_poisson_limit() -> None:
    frequencies = np.ones(1_000)  # every cell once: variance 0 < mean, so β < 0
    result = estimate_population_uniques(frequencies, sampling_fraction=0.1, **TV)
    assert result.model == "poisson" and result.beta < 0
    assert result.population_uniques == pytest.approx(1_000 * math.exp(-0.9 * 10))


def test_rejects_a_sampling_fraction_above_one() -> None:
    with pytest.raises(AnonymizationError, match="0 < λ <= 1"):
        estimate_population_uniques(np.ones(3), sampling_fraction=1.5, **TV)


AGES = interval_hierarchy("age", range(120), [10, 40])  # a declared domain: 120 ages, 12 decades, 3 spans
POLICY = DeclaredValues(120, lambda text: text.isdigit() and int(text) < 120)


def test_a_declared_hierarchy_counts_the_labels_of_the_level_released() -> None:
    assert column_domain(["23", "37"], hierarchy=AGES, policy=None) == Domain(120, "hierarchy")
    assert column_domain(["20-29", "30-39", "*"], hierarchy=AGES, policy=None) == Domain(12, "hierarchy")
    assert column_domain(["0-39", "40-79"], hierarchy=AGES, policy=POLICY) == Domain(3, "hierarchy")


def test_a_policy_domain_counts_only_for_raw_values_of_it() -> None:
    assert column_domain(["23", "37"], hierarchy=None, policy=POLICY) == Domain(120, "policy")
    assert column_domain(["20-29", "30-39"], hierarchy=None, policy=POLICY) == Domain(2, "observed")


def test_without_a_declaration_k_counts_the_values_seen() -> None:
    domains = {
        "age": column_domain(["23", "37", "41"], hierarchy=None, policy=None),
        "sex": Domain(2, "policy"),
    }
    assert domains["age"] == Domain(3, "observed") and cell_count(domains) == 6
