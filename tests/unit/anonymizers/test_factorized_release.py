"""Factorized releases (anonymizers/factorized_release.py), the solvers behind them and the matrix
utility: Theorem 5.1 as a property, ALS/NMF against SGD, the V refit, scoring and refusals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizers.errors import AnonymizationError
from anonymizers.factorization import factorize, laplace_rows, refit_items
from anonymizers.factorized_release import ReleaseSettings, release_window, score_windows
from anonymizers.matrix_utility import matrix_utility


def planted(n: int = 60, m: int = 40, rank: int = 4, seed: int = 0) -> np.ndarray:
    """A 0/1 matrix with low-rank structure: users drawn from a few taste profiles."""
    rng = np.random.default_rng(seed)
    profiles = rng.random((rank, m)) < 0.3
    users = rng.integers(rank, size=n)
    flips = rng.random((n, m)) < 0.05
    return (profiles[users] ^ flips).astype(np.float64)


@settings(max_examples=25, deadline=None)
@given(
    k=st.integers(2, 10),
    seed=st.integers(0, 2**16),
    method=st.sampled_from(["mf", "kanon-matrix"]),
    refit=st.booleans(),
    threshold=st.sampled_from([None, 0.5]),
)
def test_theorem_5_1_every_distinct_released_row_occurs_at_least_k_times(
    k: int, seed: int, method: str, refit: bool, threshold: float | None
) -> None:
    matrix = planted(n=37, m=15, seed=seed % 7)
    chosen = ReleaseSettings(
        method=method,  # type: ignore[arg-type]
        k=k,
        rank=5,
        iterations=5,
        refit_v="one-epoch" if refit and method == "mf" else "none",
        threshold=threshold,
    )
    published = release_window(matrix, chosen, np.random.default_rng(seed)).published
    _, counts = np.unique(published, axis=0, return_counts=True)
    assert counts.min() >= k


def objective(matrix: np.ndarray, u: np.ndarray, v: np.ndarray, lam: float) -> float:
    """The SGD objective summed over all entries: Σ(M − UVᵀ)² + λ(m‖U‖² + n‖V‖²)."""
    n, m = matrix.shape
    return float(((matrix - u @ v.T) ** 2).sum() + lam * (m * (u**2).sum() + n * (v**2).sum()))


def test_als_minimizes_the_sgd_objective_at_least_as_well_and_its_l1_curve_is_comparable() -> None:
    matrix = planted(n=120, m=80)
    sgd = factorize(matrix, rank=6, iterations=60, rng=np.random.default_rng(1))
    als = factorize(matrix, rank=6, iterations=60, solver="als", rng=np.random.default_rng(1))
    assert als.solver == "als" and sgd.solver == "sgd"
    # ALS solves each half-step exactly; SGD with a fixed step γ hovers around the minimum
    assert objective(matrix, als.u, als.v, 0.01) <= objective(matrix, sgd.u, sgd.v, 0.01) * 1.001
    assert abs(als.errors[-1] - sgd.errors[-1]) <= 0.15 * sgd.errors[-1]


def test_nmf_factors_are_non_negative_and_its_squared_error_never_grows() -> None:
    matrix = planted(n=50, m=30)
    previous = np.inf
    for iterations in (1, 5, 20, 60):
        result = factorize(matrix, rank=4, iterations=iterations, solver="nmf", rng=np.random.default_rng(3))
        assert result.u.min() >= 0 and result.v.min() >= 0 and result.regularization == 0.0
        squared = float(((matrix - result.u @ result.v.T) ** 2).sum())
        assert squared <= previous + 1e-6
        previous = squared


def test_refitting_v_fits_the_de_identified_users_better() -> None:
    matrix = planted(n=80, m=50)
    fitted = factorize(matrix, rank=5, iterations=40, rng=np.random.default_rng(2))
    noisy = laplace_rows(fitted.u, 0.3, np.random.default_rng(3))
    refit = refit_items(matrix, noisy, fitted.v, rng=np.random.default_rng(4))
    before = ((matrix - noisy @ fitted.v.T) ** 2).sum()
    after = ((matrix - noisy @ refit.T) ** 2).sum()
    assert refit.shape == fitted.v.shape
    assert after < before


def test_scoring_an_unchanged_release_finds_everyone_and_clusters_get_the_1_over_k_credit() -> None:
    windows = [planted(seed=1), planted(seed=1)]
    windows = [np.unique(w, axis=0) for w in windows]  # distinct rows: the assignment is unique
    risks = score_windows(windows, windows, k=None)
    assert risks.reidentification[0]["risk"] == 1.0 and risks.linkage[0]["risk"] == 1.0
    pairs = np.repeat(np.eye(4), 2, axis=0)  # four groups of two identical rows
    clustered = score_windows([pairs], [pairs], k=2)
    assert clustered.reidentification[0]["risk"] == 0.5
    assert clustered.reidentification[0]["risk_exact_credit"] == 0.5


def test_utility_of_the_original_itself_is_one_and_heavy_noise_lowers_it() -> None:
    matrix = planted(n=200, m=60, seed=4)
    same = matrix_utility(matrix, matrix, columns=10, rng=np.random.default_rng(0))
    assert same.uti == pytest.approx(1.0) and len(same.columns) == 10
    noisy = laplace_rows(matrix, 2.0, np.random.default_rng(1))
    assert matrix_utility(matrix, noisy, columns=10, rng=np.random.default_rng(0)).uti < 0.8


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"k": 2, "noise": 0.1}, "exactly one of --k and --noise"),
        ({}, "exactly one of --k and --noise"),
        ({"noise": -0.1}, "non-negative"),
        ({"k": 0}, "at least 1"),
        ({"k": 2, "method": "kanon-matrix", "refit_v": "one-epoch"}, "--method mf only"),
    ],
)
def test_bad_settings_are_refused(arguments: dict, message: str) -> None:
    with pytest.raises(AnonymizationError, match=message):
        ReleaseSettings(**arguments)


@pytest.mark.parametrize(
    ("settings_", "message"),
    [
        (ReleaseSettings(k=2, rank=15), "rank 15 must be between 1 and min"),
        (ReleaseSettings(k=61, rank=3), "larger than the number of users"),
        (ReleaseSettings(method="kanon-matrix", k=61), "larger than the number of users"),
    ],
)
def test_impossible_releases_are_refused_before_any_work(settings_: ReleaseSettings, message: str) -> None:
    with pytest.raises(AnonymizationError, match=message):
        release_window(planted(n=60, m=15), settings_, np.random.default_rng(0))
