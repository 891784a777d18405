"""SGD factorization and de-identification of U (spec matrix-factorization.md): the Table 5.1 matrices,
Theorem 5.1 as a property, the error curve, the stratified SGD against a plain per-entry loop, refusals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizers.errors import AnonymizationError
from anonymizers.factorization import (
    _sgd_block,
    factorize,
    k_member_clusters,
    kanon_matrix,
    laplace_rows,
    noise_matrix,
    release,
)

ITEMS = ("google", "mail.google", "youtube", "facebook")
LOG = [  # Table 5.1: (pseudonym, time, item); x', z' are x, z in the second window
    ("x", "16:13:48", "google"),
    ("y", "16:15:14", "mail.google"),
    ("x", "16:17:13", "youtube"),
    ("z", "16:19:01", "facebook"),
    ("x'", "16:21:15", "youtube"),
    ("x'", "16:22:42", "google"),
    ("z'", "16:25:01", "youtube"),
]


def _window(start: str, stop: str) -> np.ndarray:
    users = {"x": 0, "y": 1, "z": 2, "x'": 0, "z'": 2}
    matrix = np.zeros((3, len(ITEMS)))
    for user, time, item in LOG:
        if start <= time <= stop:
            matrix[users[user], ITEMS.index(item)] = 1
    return matrix


def test_table_5_1_log_gives_the_spec_matrices() -> None:
    assert _window("16:10:00", "16:19:59").tolist() == [[1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]]
    assert _window("16:20:00", "16:29:59").tolist() == [[1, 0, 1, 0], [0, 0, 0, 0], [0, 0, 1, 0]]


def _sparse(n: int, m: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random((n, m)) < 0.1).astype(float)


def test_sgd_error_curve_decreases_below_the_zero_matrix() -> None:
    matrix = _sparse(60, 120, 1)
    result = factorize(matrix, rank=5, iterations=30, rng=np.random.default_rng(2))
    assert result.errors.shape == (30,)
    assert result.errors[-1] < result.errors[0]
    assert ((matrix - result.u @ result.v.T) ** 2).sum() < matrix.sum()  # least squares beats all zeros
    assert np.all(np.diff(result.errors[5:]) < 0.05 * result.errors[0])  # SGD jitter only, no blow-up
    assert result.u.shape == (60, 5) and result.v.shape == (120, 5)
    assert result.errors[-1] == pytest.approx(np.abs(matrix - result.u @ result.v.T).sum(), rel=1e-4)


def test_tall_matrix_is_factorized_in_its_own_orientation() -> None:
    matrix = _sparse(120, 40, 3)
    result = factorize(matrix, rank=4, iterations=20, rng=np.random.default_rng(4))
    assert result.u.shape == (120, 4) and result.v.shape == (40, 4)
    assert result.errors[-1] == pytest.approx(np.abs(matrix - result.u @ result.v.T).sum(), rel=1e-4)


def test_large_regularization_collapses_sparse_matrix_to_zero() -> None:
    matrix = _sparse(40, 200, 5)
    result = factorize(matrix, rank=5, iterations=5, regularization=0.5, rng=np.random.default_rng(6))
    assert result.regularization == 0.5
    assert result.errors[-1] == pytest.approx(matrix.sum(), rel=0.05)


def test_stratum_block_equals_sequential_per_entry_sgd() -> None:
    rng = np.random.default_rng(7)
    ut, vt, values = rng.random((3, 5)), rng.random((3, 5)), rng.random(5)
    expected_u, expected_v = ut.copy(), vt.copy()
    gamma, lam = 0.05, 0.01
    for j in range(5):  # the spec's loop, entry by entry
        e = values[j] - expected_u[:, j] @ expected_v[:, j]
        u_old = expected_u[:, j].copy()
        expected_u[:, j] += gamma * (e * expected_v[:, j] - lam * expected_u[:, j])
        expected_v[:, j] += gamma * (e * u_old - lam * expected_v[:, j])
    _sgd_block(values, ut, vt, gamma, 1 - gamma * lam)
    np.testing.assert_allclose(ut, expected_u, rtol=1e-12)
    np.testing.assert_allclose(vt, expected_v, rtol=1e-12)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 40), k=st.integers(2, 10), r=st.integers(1, 6), seed=st.integers(0, 2**32 - 1))
def test_theorem_5_1_every_released_row_occurs_at_least_k_times(n: int, k: int, r: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    k = min(k, n)
    u, v = rng.random((n, r)), rng.random((7, r))
    clusters = k_member_clusters(u, k, rng)
    assert clusters.sizes.min() >= k and clusters.sizes.max() <= 2 * k - 1
    x = release(clusters.rows, v)
    _, counts = np.unique(x, axis=0, return_counts=True)
    assert counts.min() >= k


def test_k_member_clusters_groups_nearby_rows() -> None:
    rows = np.array([[0.0], [0.1], [10.0], [10.2], [20.0], [20.1], [20.3]])
    clusters = k_member_clusters(rows, 2, np.random.default_rng(0))
    groups = {frozenset(np.flatnonzero(clusters.labels == c).tolist()) for c in set(clusters.labels.tolist())}
    assert groups == {frozenset({0, 1}), frozenset({2, 3}), frozenset({4, 5, 6})}
    np.testing.assert_allclose(clusters.rows[:2, 0], [0.05, 0.05])


def test_kanon_matrix_is_k_anonymous_over_all_items() -> None:
    clusters = kanon_matrix(_sparse(30, 15, 8), 4, np.random.default_rng(9))
    _, counts = np.unique(clusters.rows, axis=0, return_counts=True)
    assert counts.min() >= 4


def test_release_is_u_prime_times_v_transposed_with_optional_postprocessing() -> None:
    u, v = np.array([[1.0, 0.0], [0.5, 0.5]]), np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, 0.0]])
    np.testing.assert_allclose(release(u, v), [[1.0, 0.0, -1.0], [0.5, 1.0, -0.5]])
    np.testing.assert_allclose(release(u, v, clip=True), [[1.0, 0.0, 0.0], [0.5, 1.0, 0.0]])
    np.testing.assert_array_equal(release(u, v, threshold=0.5), [[1, 0, 0], [1, 1, 0]])


def test_laplace_noise_has_the_requested_scale() -> None:
    noisy = noise_matrix(np.zeros((200, 200)), 0.3, np.random.default_rng(10))
    assert np.mean(np.abs(noisy)) == pytest.approx(0.3, rel=0.02)  # E|Lap(b)| = b
    np.testing.assert_array_equal(
        laplace_rows(np.ones((2, 2)), 0.0, np.random.default_rng(0)), np.ones((2, 2))
    )


@pytest.mark.parametrize("rank", [0, 4, 7])
def test_refuses_rank_outside_one_to_min_dimension(rank: int) -> None:
    with pytest.raises(AnonymizationError, match="rank") as caught:
        factorize(np.zeros((4, 6)), rank=rank, rng=np.random.default_rng(0))
    assert caught.value.hint is not None


def test_refuses_k_larger_than_users() -> None:
    with pytest.raises(AnonymizationError, match="larger than the number of users") as caught:
        k_member_clusters(np.zeros((3, 2)), 4, np.random.default_rng(0))
    assert caught.value.hint is not None


def test_refuses_negative_noise_scale() -> None:
    with pytest.raises(AnonymizationError, match="non-negative"):
        laplace_rows(np.zeros((2, 2)), -0.1, np.random.default_rng(0))


def test_refuses_divergent_learning_rate() -> None:
    with pytest.raises(AnonymizationError, match="diverged"):
        factorize(
            np.ones((10, 20)) * 50, rank=3, iterations=5, learning_rate=5.0, rng=np.random.default_rng(0)
        )


def test_refuses_non_finite_matrix() -> None:
    with pytest.raises(AnonymizationError, match="NaN"):
        factorize(np.array([[np.nan, 0.0, 1.0]] * 3), rank=1, rng=np.random.default_rng(0))
