"""Assignment (Hungarian) re-identification and linkage risk (spec simulated-attack-risk.md §8): the
Fig. 5.1 scoring vector, the cost matrix against scipy's cdist, and end-to-end attacks (fixed seeds)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from anonymizers.errors import AnonymizationError
from anonymizers.factorization import k_member_clusters, noise_matrix
from anonymizers.risk.linkage import (
    cost_matrix,
    hungarian_assignment,
    linkage_risk,
    reidentification_risk,
    score_assignment,
)

# Fig. 5.1: given assignment 1→1, 2→3, 3→2, 4→5, 5→4, 6→6, 7→7 (0-based below); clusters {1,2}, {3,4,5}, {6,7}
FIG_5_1_ASSIGNMENT = np.array([0, 2, 1, 4, 3, 5, 6])
FIG_5_1_LABELS = np.array([0, 0, 1, 1, 1, 2, 2])


def test_fig_5_1_noise_scoring_is_three_sevenths() -> None:
    result = score_assignment(FIG_5_1_ASSIGNMENT)
    assert result.successes.tolist() == [True, False, False, False, False, True, True]
    assert result.risk == pytest.approx(3 / 7)


def test_fig_5_1_two_anonymized_scoring_is_five_fourteenths() -> None:
    result = score_assignment(FIG_5_1_ASSIGNMENT, labels=FIG_5_1_LABELS, k=2)
    assert result.successes.tolist() == [True, False, False, True, True, True, True]
    assert result.risk == pytest.approx(5 / 14)
    assert result.risk_exact_credit == pytest.approx((1 / 2 + 2 / 3 + 2 / 2) / 7)


def test_fig_5_1_hungarian_finds_a_minimum_cost_matching() -> None:
    original = np.array([[1.0], [1.5], [1.5], [2.5], [3.5], [5.0], [6.0]])
    anonymized = np.array([[1.25], [1.25], [2.5], [2.5], [2.5], [5.5], [5.5]])
    assignment = hungarian_assignment(original, anonymized)
    cost = np.abs(original - anonymized.T)
    given = cost[np.arange(7), FIG_5_1_ASSIGNMENT].sum()
    assert sorted(assignment.tolist()) == list(range(7))
    assert cost[np.arange(7), assignment].sum() == pytest.approx(
        given
    )  # the figure's matching is optimal too


@pytest.mark.parametrize("metric", ["euclidean", "cosine", "cityblock"])
def test_cost_matrix_matches_cdist(metric: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("anonymizers.risk.linkage._COST_ENTRIES_PER_BLOCK", 64)  # force several blocks
    rng = np.random.default_rng(1)
    first, second = rng.random((23, 5)), rng.random((23, 5))
    cost = cost_matrix(first, second, metric=metric)  # type: ignore[arg-type]
    assert cost.dtype == np.float32
    np.testing.assert_allclose(cost, cdist(first, second, metric=metric), rtol=1e-5, atol=1e-6)


def test_unperturbed_release_is_fully_reidentified() -> None:
    matrix = (np.random.default_rng(2).random((50, 40)) < 0.3).astype(float)
    assert reidentification_risk(matrix, matrix).risk == 1.0


def test_noise_lowers_reidentification_risk() -> None:
    matrix = (np.random.default_rng(3).random((80, 30)) < 0.2).astype(float)
    small = reidentification_risk(matrix, noise_matrix(matrix, 0.1, np.random.default_rng(4))).risk
    large = reidentification_risk(matrix, noise_matrix(matrix, 3.0, np.random.default_rng(4))).risk
    assert small == 1.0
    assert large < 0.5


def test_k_anonymized_release_scores_with_cluster_credit() -> None:
    matrix = (np.random.default_rng(5).random((40, 20)) < 0.3).astype(float)
    clusters = k_member_clusters(matrix, 4, np.random.default_rng(6))
    result = reidentification_risk(matrix, clusters.rows, labels=clusters.labels, k=4)
    assert result.risk <= 1 / 4
    assert result.risk == pytest.approx(result.successes.mean() / 4)
    assert result.risk_exact_credit <= result.successes.mean() / 4 + 1e-12


def test_linkage_between_two_noisy_windows_of_the_same_users() -> None:
    rng = np.random.default_rng(7)
    base = (rng.random((60, 50)) < 0.3).astype(float)
    t1, t2 = noise_matrix(base, 0.05, rng), noise_matrix(base, 0.05, rng)
    assert linkage_risk(t1, t2).risk == 1.0
    other = (rng.random((60, 50)) < 0.3).astype(float)
    assert linkage_risk(t1, other).risk < 0.2  # unrelated windows link at about chance


def test_refuses_tables_of_different_users() -> None:
    with pytest.raises(AnonymizationError, match="rows") as caught:
        hungarian_assignment(np.zeros((3, 2)), np.zeros((4, 2)))
    assert caught.value.hint is not None


def test_refuses_unknown_metric() -> None:
    with pytest.raises(AnonymizationError, match="unknown metric"):
        cost_matrix(np.zeros((2, 2)), np.zeros((2, 2)), metric="hamming")  # type: ignore[arg-type]


def test_refuses_clustered_scoring_without_k() -> None:
    with pytest.raises(AnonymizationError, match="needs its k"):
        score_assignment(FIG_5_1_ASSIGNMENT, labels=FIG_5_1_LABELS)
