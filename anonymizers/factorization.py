"""De-identification of a user × item matrix through its SGD factorization ([D] ch. 5 Algorithm 3 =
[J] Algorithm 1; spec ``matrix-factorization.md``).

M (n × m) is factorized as M ≈ U Vᵀ (U: n × r user factors, V: m × r item factors). Only U carries the
users, so only U is de-identified — k-member clustering (Byun et al., DASFAA 2007, adapted to real rows,
spec §4.1) or Laplace noise (§4.2) — and the release is X = U′ Vᵀ (the spec's erratum: [D] line 9 returns
the *un*-de-identified U, [J] has a dimension error). Because every row of X is a function of its row of
U′ through the one shared V, a k-anonymous U′ gives a k-anonymous X (Theorem 5.1); :func:`release`
computes X from the *distinct* rows of U′ so that equal rows of U′ give bit-identical rows of X whatever
the BLAS kernel does with row blocks.

The baselines of the experiments apply the same two operations to M itself (:func:`kanon_matrix`,
:func:`noise_matrix`). Laplace noise here is the papers' perturbation, **not** differential privacy: no
sensitivity is calibrated, so it must not be priced as such.

Randomness: a numpy ``Generator`` (production seeds it from the OS CSPRNG, tests from a fixed seed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from anonymizers.errors import AnonymizationError

_ERROR_ROWS_PER_CHUNK = 1024  # rows of U Vᵀ built at once for the L1 error curve
_SKEW_ENTRIES_PER_CHUNK = 1 << 22  # entries of the skewed copy of M gathered at once


Solver = Literal["sgd", "als", "nmf"]
SOLVERS: tuple[Solver, ...] = ("sgd", "als", "nmf")


@dataclass(frozen=True)
class Factorization:
    """M ≈ u @ v.T; ``errors[t]`` = Σ_ij |M_ij − (u vᵀ)_ij| after epoch t + 1 (Fig. 5.2 / [J] Fig. 3)."""

    u: np.ndarray
    v: np.ndarray
    errors: np.ndarray
    regularization: float  # λ, recorded because [D] (0.01) and [J] (0.5) disagree (spec §3.1)
    solver: Solver = "sgd"


@dataclass(frozen=True)
class Clustering:
    """A k-member clustering: ``labels[i]`` is row i's cluster, ``centroids[c]`` the mean of cluster c."""

    labels: np.ndarray
    centroids: np.ndarray
    k: int

    @property
    def rows(self) -> np.ndarray:
        """Every row replaced by its cluster's centroid (what is released)."""
        return self.centroids[self.labels]

    @property
    def sizes(self) -> np.ndarray:
        return np.bincount(self.labels, minlength=len(self.centroids))


def _as_matrix(matrix: np.ndarray, name: str = "matrix") -> np.ndarray:
    array = np.asarray(matrix, dtype=np.float64)
    if array.ndim != 2 or array.size == 0:
        raise AnonymizationError(f"{name} must be a non-empty two-dimensional array", hint="users × items")
    if not np.all(np.isfinite(array)):
        raise AnonymizationError(f"{name} contains NaN or infinite values", hint="fill or drop them first")
    return array


def factorize(
    matrix: np.ndarray,
    *,
    rank: int,
    iterations: int = 100,
    learning_rate: float = 0.05,
    regularization: float = 0.01,
    solver: Solver = "sgd",
    rng: np.random.Generator,
) -> Factorization:
    """Factorize M ≈ U Vᵀ over all n·m entries (Ω = every entry of the 0/1 matrix, spec §3).

    ``solver``: ``"sgd"`` is the papers' stochastic gradient descent (:func:`_sgd`); ``"als"`` minimizes the
    *same* objective by alternating exact least squares (:func:`_als`), 4× faster in wall time at 10,000 × 5,000 (docs/benchmarks.md) and
    with a comparable error curve; ``"nmf"`` is the non-negative variant of [D] §2.2.4 with the spec's
    corrected Lee–Seung updates (no λ: its objective is ‖M − UVᵀ‖²_F). All start from U, V ~ Uniform[0, 1].
    """
    m_array = _as_matrix(matrix)
    _check_parameters(m_array.shape, rank, iterations, learning_rate, regularization, solver)
    u = rng.random((m_array.shape[0], rank))
    v = rng.random((m_array.shape[1], rank))
    if solver == "sgd":
        u, v, errors = _sgd(m_array, u, v, iterations, learning_rate, regularization, rng)
    elif solver == "als":
        u, v, errors = _als(m_array, u, v, iterations, regularization)
    else:
        u, v, errors = _nmf(m_array, u, v, iterations)
        regularization = 0.0
    return Factorization(u, v, errors, float(regularization), solver)


def _check_parameters(
    shape: tuple[int, ...],
    rank: int,
    iterations: int,
    learning_rate: float,
    regularization: float,
    solver: str,
) -> None:
    n, m = shape
    if not 1 <= rank < min(n, m):
        raise AnonymizationError(
            f"rank {rank} must be between 1 and min(users, items) - 1 = {min(n, m) - 1}",
            hint="a factorization of full rank reproduces the matrix and de-identifies nothing; use r < min(n, m)",
        )
    if iterations < 1:
        raise AnonymizationError("iterations must be at least 1")
    if not (np.isfinite(learning_rate) and learning_rate > 0):
        raise AnonymizationError("learning_rate must be a positive number", hint="the papers use 0.05")
    if not (np.isfinite(regularization) and regularization >= 0):
        raise AnonymizationError(
            "regularization must be a non-negative number", hint="[D] uses 0.01, [J] 0.5"
        )
    if solver not in SOLVERS:
        raise AnonymizationError(f"unknown solver {solver!r}", hint="sgd, als or nmf")


def _sgd(
    m_array: np.ndarray,
    u: np.ndarray,
    v: np.ndarray,
    iterations: int,
    learning_rate: float,
    regularization: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The spec's per-entry Funk-SVD step ``e = M_ij − u_i·v_j; u_i += γ(e v_j − λ u_i);
    v_j += γ(e u_i − λ v_j)`` (simultaneous), run as *stratified* SGD (Gemulla et al., KDD 2011): an
    epoch visits Ω as max(n, m) strata, each a set of min(n, m) entries no two of which share a row or a
    column. Entries of one stratum touch disjoint parameters, so updating a whole stratum in one numpy
    step is exactly the sequential per-entry SGD on those entries — the vectorization changes nothing
    but the visiting order (a random injection rows → columns and a random order of strata, fresh every
    epoch, instead of a uniform permutation of Ω)."""
    n, m = m_array.shape
    # Work on the orientation with at least as many columns as rows (strata of size min(n, m)), factors
    # transposed (r × n) so that one stratum is r contiguous vectors. SGD is symmetric in U and V.
    swap = n > m
    target, ut, vt = (m_array.T, v.T, u.T) if swap else (m_array, u.T, v.T)
    row_order, col_order = rng.permutation(target.shape[0]), rng.permutation(target.shape[1])
    diagonals = _skewed(target, row_order, col_order)
    ut, vt = ut[:, row_order].astype(np.float32), vt[:, col_order].astype(np.float32)
    errors = np.empty(iterations)
    for epoch in range(iterations):
        with np.errstate(over="ignore", invalid="ignore"):  # divergence is detected just below
            _sgd_epoch(diagonals, ut, vt, learning_rate, regularization, rng)
            errors[epoch] = _l1_error(target, ut, vt, row_order, col_order)
        _check_finite(errors[epoch], epoch, "lower learning_rate (the papers use 0.05)")
    ut_out, vt_out = np.empty_like(ut), np.empty_like(vt)
    ut_out[:, row_order], vt_out[:, col_order] = ut, vt
    u_out, v_out = (vt_out.T, ut_out.T) if swap else (ut_out.T, vt_out.T)
    return u_out.astype(np.float64), v_out.astype(np.float64), errors


def _check_finite(error: float, epoch: int, hint: str) -> None:
    if not np.isfinite(error):
        raise AnonymizationError(f"the factorization diverged in epoch {epoch + 1}", hint=hint)


def _als(
    m_array: np.ndarray, u: np.ndarray, v: np.ndarray, iterations: int, regularization: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Alternating least squares on the SGD objective Σ_ij (M_ij − u_i·v_j)² + λ(‖u_i‖² + ‖v_j‖²).

    Summed over all n·m entries, the penalty weighs ‖u_i‖² by λm and ‖v_j‖² by λn, so with V fixed the
    exact minimizer is U = M V (VᵀV + λm I)⁻¹ (and symmetrically for V): two n·m·r products and two r × r
    solves per iteration instead of n·m scalar steps. Each half-step can only lower the objective. An
    iteration here is one update of U then of V (the error curve's unit)."""
    n, m = m_array.shape
    target = m_array.astype(np.float32)
    rank = u.shape[1]
    u, v = u.astype(np.float32), v.astype(np.float32)
    eye = np.eye(rank, dtype=np.float64)
    order = np.arange(n), np.arange(m)
    errors = np.empty(iterations)
    for epoch in range(iterations):
        gram = v.T.astype(np.float64) @ v + regularization * m * eye
        u = np.linalg.solve(gram, (target @ v).T.astype(np.float64)).T.astype(np.float32)
        gram = u.T.astype(np.float64) @ u + regularization * n * eye
        v = np.linalg.solve(gram, (target.T @ u).T.astype(np.float64)).T.astype(np.float32)
        errors[epoch] = _l1_error(target, u.T, v.T, *order)
        _check_finite(errors[epoch], epoch, "the matrix may be degenerate; try --solver sgd")
    return u.astype(np.float64), v.astype(np.float64), errors


_NMF_FLOOR = 1e-9  # keeps the multiplicative updates' denominators positive (spec §3.2)


def _nmf(
    m_array: np.ndarray, u: np.ndarray, v: np.ndarray, iterations: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lee–Seung multiplicative updates for M ≈ U Vᵀ, U, V ≥ 0 (the spec's corrected form of [D]
    Algorithm 1): U ← U ⊙ (M V) ⊘ (U VᵀV), V ← V ⊙ (Mᵀ U) ⊘ (V UᵀU). Non-increasing in ‖M − UVᵀ‖²_F."""
    n, m = m_array.shape
    target = m_array.astype(np.float32)
    u, v = u.astype(np.float32), v.astype(np.float32)
    errors = np.empty(iterations)
    for epoch in range(iterations):
        u *= (target @ v) / (u @ (v.T @ v) + _NMF_FLOOR)
        v *= (target.T @ u) / (v @ (u.T @ u) + _NMF_FLOOR)
        errors[epoch] = _l1_error(target, u.T, v.T, np.arange(n), np.arange(m))
        _check_finite(errors[epoch], epoch, "the matrix may be degenerate; try --solver sgd")
    return u.astype(np.float64), v.astype(np.float64), errors


def refit_items(
    matrix: np.ndarray,
    u_prime: np.ndarray,
    v: np.ndarray,
    *,
    learning_rate: float = 0.05,
    regularization: float = 0.01,
    rng: np.random.Generator,
) -> np.ndarray:
    """Step 8b of the spec ("V is optimized once"): one SGD pass over Ω updating only V, U′ fixed, so that
    the items fit the de-identified users. Every row of the release still shares the one V (Theorem 5.1
    holds). Same stratified visiting order as :func:`factorize`'s SGD."""
    m_array, u_array, v_array = _as_matrix(matrix), _as_matrix(u_prime, "u_prime"), _as_matrix(v, "v")
    n, m = m_array.shape
    swap = n > m
    target = m_array.T if swap else m_array
    row_order, col_order = rng.permutation(target.shape[0]), rng.permutation(target.shape[1])
    diagonals = _skewed(target, row_order, col_order)
    ut, vt = (v_array.T, u_array.T) if swap else (u_array.T, v_array.T)
    ut, vt = ut[:, row_order].astype(np.float32), vt[:, col_order].astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        _sgd_epoch(diagonals, ut, vt, learning_rate, regularization, rng, update=("u" if swap else "v"))
    fitted = (ut if swap else vt).copy()
    out = np.empty_like(fitted)
    out[:, row_order if swap else col_order] = fitted
    if not np.all(np.isfinite(out)):
        raise AnonymizationError("refitting V diverged", hint="lower learning_rate")
    return out.T.astype(np.float64)


def _skewed(target: np.ndarray, row_order: np.ndarray, col_order: np.ndarray) -> np.ndarray:
    """diagonals[s, i] = M[row_order[i], col_order[(i + s) mod m]]: stratum s read as one contiguous row."""
    n, m = target.shape
    diagonals = np.empty((m, n), dtype=np.float32)
    positions = np.arange(n)
    step = max(1, _SKEW_ENTRIES_PER_CHUNK // n)
    for start in range(0, m, step):
        shifts = np.arange(start, min(m, start + step))[:, None]
        diagonals[start : start + step] = target[row_order[positions], col_order[(positions + shifts) % m]]
    return diagonals


def _sgd_epoch(
    diagonals: np.ndarray,
    ut: np.ndarray,
    vt: np.ndarray,
    gamma: float,
    lam: float,
    rng: np.random.Generator,
    *,
    update: str = "both",
) -> None:
    """One epoch in place, strata in random order. Stratum s pairs permuted row i with permuted column
    (i + s) mod m: a contiguous block of columns, split in two where it wraps around. ``update`` is
    ``"both"``, or ``"u"``/``"v"`` to hold the other factor fixed (:func:`refit_items`)."""
    n, m = ut.shape[1], vt.shape[1]
    gamma, shrink = np.float32(gamma), np.float32(1.0 - gamma * lam)
    for s in rng.permutation(m):
        head = min(n, m - s)
        _sgd_block(diagonals[s, :head], ut[:, :head], vt[:, s : s + head], gamma, shrink, update)
        if head < n:
            _sgd_block(diagonals[s, head:], ut[:, head:], vt[:, : n - head], gamma, shrink, update)


def _sgd_block(
    values: np.ndarray,
    ut: np.ndarray,
    vt: np.ndarray,
    gamma: np.float32,
    shrink: np.float32,
    update: str = "both",
) -> None:
    """The per-entry SGD step on entries with pairwise distinct rows and columns (views, updated in place)."""
    ge = gamma * (values - np.einsum("ij,ij->j", ut, vt))
    old_u = ut * ge if update != "u" else None
    if update != "v":
        ut *= shrink
        ut += ge * vt
    if old_u is not None:
        vt *= shrink
        vt += old_u


def _l1_error(
    target: np.ndarray, ut: np.ndarray, vt: np.ndarray, row_order: np.ndarray, col_order: np.ndarray
) -> float:
    """Σ_ij |M_ij − (U Vᵀ)_ij| on the permuted factors, a chunk of rows at a time (never n × m floats)."""
    total = 0.0
    for start in range(0, target.shape[0], _ERROR_ROWS_PER_CHUNK):
        rows = row_order[start : start + _ERROR_ROWS_PER_CHUNK]
        product = ut[:, start : start + _ERROR_ROWS_PER_CHUNK].T @ vt
        total += float(np.abs(target[rows][:, col_order] - product).sum(dtype=np.float64))
    return total


def k_member_clusters(rows: np.ndarray, k: int, rng: np.random.Generator) -> Clustering:
    """Greedy k-member clustering (Byun et al. 2007) adapted to real-valued rows (spec §4.1).

    Seed: a random row, then each new seed is the unassigned row farthest (Euclidean) from the previous
    seed; a cluster grows by the unassigned row that least increases its sum of squared distances to the
    centroid (for a cluster of size s with centroid c that increase is s/(s+1)·‖x − c‖², so the nearest
    row to the centroid), until it has k rows. The < k rows left over join the cluster with the nearest
    centroid (centroids of the full clusters). Sizes end in [k, 2k − 1]. O(n²·r/1) time, O(n·r) memory.
    """
    x = _as_matrix(rows, "rows")
    n = x.shape[0]
    check_k(k, n)
    labels = np.full(n, -1, dtype=np.intp)
    norms = np.einsum("ij,ij->i", x, x)
    free = np.ones(n, dtype=bool)
    seed = int(rng.integers(n))
    clusters = 0
    while free.sum() >= k:
        distance = norms - 2.0 * (x @ x[seed]) + norms[seed]
        seed = int(np.argmax(np.where(free, distance, -np.inf)))
        members = [seed]
        free[seed] = False
        total = x[seed].copy()
        while len(members) < k:
            centroid = total / len(members)
            distance = norms - 2.0 * (x @ centroid)
            best = int(np.argmin(np.where(free, distance, np.inf)))
            members.append(best)
            free[best] = False
            total += x[best]
        labels[members] = clusters
        clusters += 1
    centroids = _centroids(x, labels, clusters)
    leftover = np.flatnonzero(free)
    if leftover.size:
        c_norms = np.einsum("ij,ij->i", centroids, centroids)
        labels[leftover] = np.argmin(c_norms[None, :] - 2.0 * (x[leftover] @ centroids.T), axis=1)
        centroids = _centroids(x, labels, clusters)
    return Clustering(labels, centroids, k)


def _centroids(x: np.ndarray, labels: np.ndarray, clusters: int) -> np.ndarray:
    assigned = labels >= 0
    sums = np.zeros((clusters, x.shape[1]))
    np.add.at(sums, labels[assigned], x[assigned])
    return sums / np.bincount(labels[assigned], minlength=clusters)[:, None]


def check_k(k: int, n: int) -> None:
    """k-member clustering needs 1 <= k <= n rows."""
    if k < 1:
        raise AnonymizationError(f"k must be at least 1, got {k}")
    if k > n:
        raise AnonymizationError(
            f"k = {k} is larger than the number of users ({n})", hint="choose k <= the number of rows"
        )


def laplace_rows(u: np.ndarray, scale: float, rng: np.random.Generator) -> np.ndarray:
    """U + E with E_ij ~ Lap(0, scale) i.i.d. ([D]/[J] write Lap(0, 2φ²) in (mean, variance) form, which is
    scale φ). A perturbation without sensitivity calibration — not differential privacy."""
    x = _as_matrix(u, "u")
    if not (np.isfinite(scale) and scale >= 0):
        raise AnonymizationError(
            f"the noise scale must be a non-negative number, got {scale}", hint="e.g. 0.1"
        )
    return x + rng.laplace(0.0, scale, size=x.shape) if scale > 0 else x.copy()


def release(
    u_prime: np.ndarray, v: np.ndarray, *, clip: bool = False, threshold: float | None = None
) -> np.ndarray:
    """X = U′ Vᵀ (n × m, real-valued), computed from the distinct rows of U′ so equal rows of U′ give
    bit-identical rows of X (Theorem 5.1 holds exactly, not up to BLAS rounding).

    ``clip`` clips to [0, 1]; ``threshold`` maps to 0/1 (x >= threshold). Both are post-processing that
    the spec applies only after risk has been evaluated on the real-valued X, and that must be
    re-evaluated if published (§4)."""
    u_array, v_array = _as_matrix(u_prime, "u_prime"), _as_matrix(v, "v")
    if u_array.shape[1] != v_array.shape[1]:
        raise AnonymizationError(f"u_prime has rank {u_array.shape[1]} but v has rank {v_array.shape[1]}")
    distinct, inverse = np.unique(u_array, axis=0, return_inverse=True)
    x = (distinct @ v_array.T)[inverse.reshape(-1)]
    if clip:
        np.clip(x, 0.0, 1.0, out=x)
    if threshold is not None:
        x = (x >= threshold).astype(np.float64)
    return x


def kanon_matrix(matrix: np.ndarray, k: int, rng: np.random.Generator) -> Clustering:
    """Baseline A_k(M): the same k-member clustering applied to the rows of M (experiment 1)."""
    return k_member_clusters(matrix, k, rng)


def noise_matrix(matrix: np.ndarray, scale: float, rng: np.random.Generator) -> np.ndarray:
    """Baseline A_φ(M) = M + Lap(φ) entry-wise (experiment 2); not differential privacy."""
    return laplace_rows(matrix, scale, rng)
