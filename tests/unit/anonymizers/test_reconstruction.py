"""Reconstruction of cross-tabulations from randomized sensitive-QID releases (spec §5) and the utility
metrics (§2.2): the spec's vectors, the kernel against the explicit δ matrix of eq. 19, both counting
paths against each other, and EM against ValueAdding on a skewed table (fixed seeds)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from anonymizers import reconstruction
from anonymizers.errors import AnonymizationError
from anonymizers.reconstruction import (
    _apply_kernel,
    cross_tabulation,
    em_from_counts,
    hellinger,
    l1,
    l2,
    published_counts,
    random_baseline,
    reconstruct_em,
    reconstruct_value_adding,
)
from anonymizers.sensitive_qid import AttributeRelease, randomize


def release(d: int, *, p: float = 1.0, eta: int = 1) -> AttributeRelease:
    return AttributeRelease(f"s{d}", tuple(str(i) for i in range(d)), p, eta, "frequency", l=eta)


def skewed_codes(rows: int, domains: tuple[int, ...], seed: int) -> np.ndarray:
    """Correlated, skewed columns: a Zipf-like shared factor plus independent noise."""
    rng = np.random.default_rng(seed)
    base = rng.zipf(1.8, rows)
    noise = [rng.integers(0, d, rows) * (rng.random(rows) < 0.25) for d in domains]
    return np.stack([(base + n) % d for n, d in zip(noise, domains, strict=True)], axis=1)


# ---- metrics (TV-SQ-1) ------------------------------------------------------------------------------------


def test_tv_sq_1_metrics() -> None:
    a1, b1 = np.array([10, 100]), np.array([10, 80])
    a2, b2 = np.array([10, 25]), np.array([10, 5])
    assert (l1(a1, b1), l2(a1, b1), l1(a2, b2), l2(a2, b2)) == (20.0, 20.0, 20.0, 20.0)
    assert round(hellinger(a1, b1), 4) == 0.7465
    assert round(hellinger(a2, b2), 4) == 1.9544


def test_metrics_refuse_mismatched_or_negative_tables() -> None:
    with pytest.raises(AnonymizationError, match="differ in shape"):
        l1(np.zeros(3), np.zeros(4))
    with pytest.raises(AnonymizationError, match="non-negative"):
        hellinger(np.array([1.0, -1.0]), np.array([1.0, 1.0]))


# ---- counting -----------------------------------------------------------------------------------------------


def test_published_counts_by_hand() -> None:
    """Record 0 publishes {0, 2} × {1}, record 1 publishes {1, 2} × {0}."""
    published = [np.array([[0, 2], [1, 2]]), np.array([[1], [0]])]
    assert published_counts(published, [3, 2]).tolist() == [[0, 1], [1, 0], [1, 1]]


def test_published_counts_sum_to_records_times_set_sizes() -> None:
    rng = np.random.default_rng(1)
    codes = skewed_codes(3000, (5, 7, 4), 1)
    releases = [release(5, eta=2), release(7, eta=3), release(4, p=0.5, eta=2)]
    w = published_counts(randomize(codes, releases, rng), [5, 7, 4])
    assert w.shape == (5, 7, 4) and w.sum() == 3000 * 2 * 3 * 2


def test_scatter_and_product_counts_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(2)
    codes = skewed_codes(5000, (6, 9, 5, 3), 2)
    releases = [release(6, eta=4), release(9, p=0.3, eta=5), release(5, eta=2), release(3, p=0.8, eta=2)]
    published = randomize(codes, releases, rng)
    monkeypatch.setattr(reconstruction, "_SCATTER_COST", 0)  # always scatter
    monkeypatch.setattr(reconstruction, "_ENTRIES_PER_CHUNK", 1000)  # several chunks
    scattered = published_counts(published, [6, 9, 5, 3])
    monkeypatch.setattr(reconstruction, "_SCATTER_COST", 10**9)  # always the matrix product
    monkeypatch.setattr(reconstruction, "_PRODUCT_BYTES_PER_CHUNK", 50_000)
    multiplied = published_counts(published, [6, 9, 5, 3])
    assert multiplied.dtype == np.int64
    assert np.array_equal(scattered, multiplied)


def test_cross_tabulation_counts_the_true_cells() -> None:
    codes = skewed_codes(2000, (4, 3), 3)
    expected = pd.crosstab(codes[:, 0], codes[:, 1]).reindex(index=range(4), columns=range(3), fill_value=0)
    assert np.array_equal(cross_tabulation([codes[:, 0], codes[:, 1]], [4, 3]), expected.to_numpy())


def test_counting_refuses_codes_outside_the_domain_and_ragged_attributes() -> None:
    with pytest.raises(AnonymizationError, match="inside the domain"):
        published_counts([np.array([[0], [3]])], [3])
    with pytest.raises(AnonymizationError, match="different numbers of records"):
        published_counts([np.zeros((2, 1), dtype=int), np.zeros((3, 1), dtype=int)], [2, 2])


# ---- the kernel of eqs. 19–21 --------------------------------------------------------------------------------


def explicit_delta(releases: list[AttributeRelease]) -> np.ndarray:
    """δ_{α,β} = Π_j (F_same if c_α[j] = c_β[j] else F_other), as a |C| × |C| matrix (eq. 19)."""
    cells = list(itertools.product(*(range(r.d) for r in releases)))
    delta = np.ones((len(cells), len(cells)))
    for a, alpha in enumerate(cells):
        for b, beta in enumerate(cells):
            for j, r in enumerate(releases):
                delta[a, b] *= r.p_contains if alpha[j] == beta[j] else r.p_other
    return delta


def test_kernel_applies_the_delta_matrix_axis_by_axis() -> None:
    releases = [release(3, p=0.6, eta=2), release(4, p=0.2, eta=3), release(1), release(2, eta=2)]
    x = np.random.default_rng(5).random((3, 4, 1, 2))
    delta = explicit_delta(releases)
    expected = (delta.T @ x.ravel()).reshape(x.shape)
    assert _apply_kernel(x, releases, np.empty_like(x)) == pytest.approx(expected, rel=1e-12)


def test_delta_rows_sum_to_the_product_of_set_sizes() -> None:
    releases = [release(3, p=0.6, eta=2), release(5, p=0.3, eta=3)]
    assert explicit_delta(releases).sum(axis=1) == pytest.approx(np.full(15, 6.0))


# ---- reconstruction ------------------------------------------------------------------------------------------


def test_tv_sq_6_no_anonymization_is_reconstructed_exactly_in_one_step() -> None:
    codes = skewed_codes(1000, (4, 5), 6)
    releases = [release(4), release(5)]
    published = randomize(codes, releases, np.random.default_rng(6))
    truth = cross_tabulation([codes[:, 0], codes[:, 1]], [4, 5])
    estimate, iterations = reconstruct_em(published, releases)
    assert iterations == 1
    assert np.array_equal(estimate, truth)
    assert np.array_equal(reconstruct_value_adding(published, releases), truth)


def test_em_sums_to_n_and_beats_value_adding_on_a_skewed_table() -> None:
    domains = (6, 8, 5)
    codes = skewed_codes(20_000, domains, 7)
    releases = [release(6, eta=3), release(8, eta=3), release(5, p=0.7, eta=2)]
    published = randomize(codes, releases, np.random.default_rng(7))
    truth = cross_tabulation([codes[:, j] for j in range(3)], domains)
    estimate, iterations = reconstruct_em(published, releases)
    adding = reconstruct_value_adding(published, releases)
    chance = random_baseline(20_000, domains, np.random.default_rng(7))
    assert 1 < iterations < 10_000
    assert estimate.sum() == pytest.approx(20_000)
    assert adding.sum() == pytest.approx(20_000)
    assert (estimate >= 0).all()
    for metric in (l1, l2, hellinger):
        assert metric(truth, estimate) < 0.5 * metric(truth, adding)
        assert metric(truth, adding) < metric(truth, chance)


def test_em_recovers_the_truth_from_noiseless_counts() -> None:
    """Fed the expected counts w = K·x, the iteration converges to x (the model is identifiable)."""
    releases = [release(3, eta=2), release(4, eta=2)]
    truth = np.array([[50.0, 10, 5, 2], [20, 80, 1, 5], [3, 5, 15, 54]])
    observed = _apply_kernel(truth, releases, np.empty_like(truth))
    estimate, iterations = em_from_counts(
        observed, releases, n=250, tol_fraction=1e-10, max_iterations=200_000
    )
    assert iterations < 200_000
    assert estimate == pytest.approx(truth, abs=1e-3)  # the stopping rule leaves ~4e-5 here


def test_an_uninformative_attribute_leaves_the_other_marginal_exact() -> None:
    """η = d publishes the whole domain: EM spreads its counts evenly and keeps the exact attribute's."""
    codes = skewed_codes(3000, (3, 4), 8)
    releases = [release(3, eta=3), release(4)]
    published = randomize(codes, releases, np.random.default_rng(8))
    estimate, _ = reconstruct_em(published, releases)
    assert estimate.sum(axis=0) == pytest.approx(np.bincount(codes[:, 1], minlength=4))
    assert estimate == pytest.approx(np.repeat(estimate[:1], 3, axis=0))


def test_value_adding_uses_eta_over_d_per_attribute() -> None:
    """Eq. 18 with the erratum: P_in = Π (p + (1 − p)·η(s')/d(s')) = (0.5 + 0.5·2/4)(0.4 + 0.6·3/6) = 0.525."""
    rng = np.random.default_rng(9)
    codes = skewed_codes(500, (4, 6), 9)
    releases = [release(4, p=0.5, eta=2), release(6, p=0.4, eta=3)]
    published = randomize(codes, releases, rng)
    w = published_counts(published, [4, 6]).astype(float)
    expected = w * 0.525 / 6 + (500 - w) * 0.475 / (24 - 6)
    assert reconstruct_value_adding(published, releases) == pytest.approx(expected)


def test_random_baseline_is_a_multinomial_over_the_cells() -> None:
    table = random_baseline(10_000, (3, 4), np.random.default_rng(10))
    assert table.shape == (3, 4) and table.sum() == 10_000
    assert np.abs(table - 10_000 / 12).max() < 5 * math.sqrt(10_000 * (1 / 12) * (11 / 12))
    with pytest.raises(AnonymizationError, match="N >= 0"):
        random_baseline(-1, (2,), np.random.default_rng(0))


def test_reconstruction_refuses_sets_of_the_wrong_size() -> None:
    with pytest.raises(AnonymizationError, match="eta = 2 values"):
        reconstruct_em([np.zeros((3, 1), dtype=int)], [release(4, eta=2)])
    with pytest.raises(AnonymizationError, match="one release"):
        reconstruct_value_adding([np.zeros((3, 1), dtype=int)], [])


def test_em_refuses_bad_stopping_rules_and_mismatched_counts() -> None:
    with pytest.raises(AnonymizationError, match="tol_fraction must be positive"):
        em_from_counts(np.ones((2,)), [release(2)], n=2, tol_fraction=0.0)
    with pytest.raises(AnonymizationError, match="do not match"):
        em_from_counts(np.ones((3,)), [release(2)], n=2)
