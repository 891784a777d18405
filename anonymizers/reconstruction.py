"""Cross-tabulations reconstructed from a randomized sensitive-QID release (Sei et al. §V-D; spec
``sensitive-qid-diversity.md`` §5), and the utility metrics that compare them (§2.2).

The analyst picks q' published attributes; C = D(S'_1) × … × D(S'_q') are the cells. From the published
sets alone (no private data) we count w_c, the records whose product of sets contains c
(:func:`published_counts`), then estimate the true counts x:

* ValueAdding (eqs. 17–18, the baseline): each record spreads mass P_in over its own cells and 1 − P_in
  over the others;
* the proposed Bayes iteration (eqs. 19–27), which is EM (Richardson–Lucy form) for the observation model
  δ_{α,β} = Π_j (F_same if c_α[j] = c_β[j] else F_other): ``x ← x ⊙ K(w ⊘ Kx) / Π η``. K is the Kronecker
  product of one small matrix per attribute, ``(F_same − F_other)·I + F_other·11ᵀ``, so it is applied axis by
  axis on the tensor of counts in O(|C|·q') — never as a |C| × |C| matrix.

Cells are in C order over the attributes' public domains: ``counts[i_1, …, i_q']``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from anonymizers.errors import AnonymizationError
from anonymizers.sensitive_qid import AttributeRelease

_ENTRIES_PER_CHUNK = 1 << 20  # flat cell indices built at once by the scatter count (8 MB)
_PRODUCT_BYTES_PER_CHUNK = 32 << 20  # membership matrices built at once by the product count
_SCATTER_COST = 40  # one scattered increment costs about as much as 40 multiply-adds in BLAS (measured)


def _check_published(published: Sequence[np.ndarray], domain_sizes: Sequence[int]) -> int:
    if not published or len(published) != len(domain_sizes):
        raise AnonymizationError("give one published array per attribute (at least one)")
    rows = {np.shape(array)[0] for array in published}
    if len(rows) != 1:
        raise AnonymizationError("the published attributes have different numbers of records")
    for array, size in zip(published, domain_sizes, strict=True):
        if np.ndim(array) != 2 or (np.size(array) and (np.min(array) < 0 or np.max(array) >= size)):
            raise AnonymizationError("published codes must be records × eta arrays inside the domain")
    return rows.pop()


def published_counts(published: Sequence[np.ndarray], domain_sizes: Sequence[int]) -> np.ndarray:
    """w: per cell of D_1 × … × D_q', the records whose published product of sets contains it (eq. 17).

    Two exact ways, the cheaper one chosen by the work it takes: *scatter* adds one per record to each of
    its Π η_j cells (N·Π η_j increments, best for small sets); *product* splits the attributes in two
    groups and sums outer products of the records' membership vectors as one matrix product per chunk of
    records (N·|C| multiply-adds in BLAS, independent of η — best when the sets are large)."""
    sizes = tuple(int(size) for size in domain_sizes)
    count = _check_published(published, sizes)
    per_record = math.prod(np.shape(array)[1] for array in published)
    if len(sizes) > 1 and per_record * _SCATTER_COST > math.prod(sizes):
        return _product_counts(published, sizes, count)
    return _scatter_counts(published, sizes, count)


def _scatter_counts(published: Sequence[np.ndarray], sizes: tuple[int, ...], count: int) -> np.ndarray:
    """One bincount per chunk of records over the flat indices of their cells, built with the record axis
    innermost (long vectorized inner loops)."""
    total = math.prod(sizes)
    strides = [math.prod(sizes[j + 1 :]) for j in range(len(sizes))]
    rows = max(1, _ENTRIES_PER_CHUNK // math.prod(np.shape(array)[1] for array in published))
    counts = np.zeros(total, dtype=np.int64)
    for start in range(0, count, rows):
        flat = np.zeros((1, min(rows, count - start)), dtype=np.intp)
        for array, stride in zip(published, strides, strict=True):
            part = np.asarray(array[start : start + rows]).T.astype(np.intp) * stride  # eta × rows
            flat = (flat[:, None, :] + part[None, :, :]).reshape(-1, part.shape[1])
        counts += np.bincount(flat.ravel(), minlength=total)
    return counts.reshape(sizes)


def _product_counts(published: Sequence[np.ndarray], sizes: tuple[int, ...], count: int) -> np.ndarray:
    """w as Σ_chunks Aᵀ·B, A and B the records' 0/1 membership over the cells of two attribute groups
    (row-wise Kronecker products). float32 is exact here: a chunk adds at most ``rows`` < 2^24 ones per cell."""
    split = min(range(1, len(sizes)), key=lambda k: abs(math.prod(sizes[:k]) - math.prod(sizes[k:])))
    rows = max(1, _PRODUCT_BYTES_PER_CHUNK // (4 * (math.prod(sizes[:split]) + math.prod(sizes[split:]))))
    counts = np.zeros((math.prod(sizes[:split]), math.prod(sizes[split:])), dtype=np.int64)
    for start in range(0, count, rows):
        chunk = [np.asarray(array[start : start + rows]) for array in published]
        left = _memberships(chunk[:split], sizes[:split])
        right = _memberships(chunk[split:], sizes[split:])
        counts += np.rint(left.T @ right).astype(np.int64)
    return counts.reshape(sizes)


def _memberships(chunk: Sequence[np.ndarray], sizes: Sequence[int]) -> np.ndarray:
    """records × Π d_j float32: 1 where the record's product of sets contains the cell."""
    result: np.ndarray | None = None
    for array, size in zip(chunk, sizes, strict=True):
        member = np.zeros((array.shape[0], size), dtype=np.float32)
        np.put_along_axis(member, array.astype(np.intp), 1.0, axis=1)
        result = (
            member if result is None else (result[:, :, None] * member[:, None, :]).reshape(len(member), -1)
        )
    assert result is not None
    return result


def cross_tabulation(codes: Sequence[np.ndarray], domain_sizes: Sequence[int]) -> np.ndarray:
    """The true counts x over D_1 × … × D_q' of code columns (for evaluation on the data owner's side)."""
    return published_counts([np.asarray(column).reshape(-1, 1) for column in codes], domain_sizes)


def _check_releases(published: Sequence[np.ndarray], releases: Sequence[AttributeRelease]) -> int:
    if len(published) != len(releases):
        raise AnonymizationError("give one release (metadata entry) per published attribute")
    for array, release in zip(published, releases, strict=True):
        if np.ndim(array) != 2 or np.shape(array)[1] != release.eta:
            raise AnonymizationError(
                f"attribute {release.attribute!r}: published sets must have eta = {release.eta} values"
            )
    return _check_published(published, [release.d for release in releases])


def _apply_kernel(tensor: np.ndarray, releases: Sequence[AttributeRelease], out: np.ndarray) -> np.ndarray:
    """K·x into ``out``, K = ⊗_j (a_j·I + b_j·11ᵀ) with b_j = F_other and a_j = F_same − F_other, taken in
    its exact form p_j(d_j − η_j)/(d_j − 1) >= 0 (the difference of two rounded probabilities could be a
    tiny negative); in place, since the iteration applies K twice per step."""
    np.copyto(out, tensor)
    for axis, release in enumerate(releases):
        if release.d == 1:  # the 1 × 1 kernel is F_same = 1
            continue
        sums = out.sum(axis=axis, keepdims=True)
        sums *= release.p_other
        out *= release.p * (release.d - release.eta) / (release.d - 1)
        out += sums
    return out


def reconstruct_em(
    published: Sequence[np.ndarray],
    releases: Sequence[AttributeRelease],
    *,
    tol_fraction: float = 1e-6,
    max_iterations: int = 10_000,
) -> tuple[np.ndarray, int]:
    """The proposed reconstruction (eqs. 26–27): counts over the cells summing to N, and the iterations run.

    Iterates ``x ← x ⊙ K(w ⊘ Kx) / Π η`` from x = w / Π η — eq. 26 divided by Π η at every step instead of
    once at the end (eq. 27): the update is homogeneous of degree 0 in x, so the iterates are the paper's
    divided by Π η, and already sum to N. Stops when no estimated count moves by tol_fraction·N or more
    (the paper gives no stopping rule), or after max_iterations.

    The tolerance is on counts (iterates summing to N), not on the paper's iterates Π η times larger: the
    iteration count regularizes (Richardson–Lucy semi-convergence). On 2.5 M skewed records, q' = 4,
    d = 18, l = 3, this rule stops after ~1 600 iterations (L1 0.51 M); the same tolerance on the paper's
    scale runs 10 000 (L1 0.83 M). When the kernel smooths hard (closeness, small p and large η) each step
    is tiny and the rule may stop after a few iterations, far from the fixed point: raise max_iterations
    and lower tol_fraction there."""
    count = _check_releases(published, releases)
    observed = published_counts(published, [release.d for release in releases])
    return em_from_counts(
        observed, releases, n=count, tol_fraction=tol_fraction, max_iterations=max_iterations
    )


def em_from_counts(
    observed: np.ndarray,
    releases: Sequence[AttributeRelease],
    *,
    n: int,
    tol_fraction: float = 1e-6,
    max_iterations: int = 10_000,
) -> tuple[np.ndarray, int]:
    """The iteration of :func:`reconstruct_em` on counts w already computed (shape d_1 × … × d_q')."""
    if not tol_fraction > 0.0 or max_iterations < 1:
        raise AnonymizationError("tol_fraction must be positive and max_iterations at least 1")
    observed = np.asarray(observed, dtype=np.float64)
    if observed.shape != tuple(release.d for release in releases):
        raise AnonymizationError(f"counts of shape {observed.shape} do not match the attributes' domains")
    set_size = math.prod(release.eta for release in releases)
    tolerance = tol_fraction * n
    estimate = observed / set_size
    expected, ratio, step = (np.empty_like(observed) for _ in range(3))
    for iteration in range(1, max_iterations + 1):
        _apply_kernel(estimate, releases, expected)
        ratio.fill(0.0)
        np.divide(observed, expected, out=ratio, where=expected > 0)
        _apply_kernel(ratio, releases, step)
        step *= estimate
        step /= set_size
        change = float(np.abs(step - estimate).max())
        estimate, step = step, estimate
        if change < tolerance:
            return estimate, iteration
    return estimate, max_iterations


def reconstruct_value_adding(
    published: Sequence[np.ndarray], releases: Sequence[AttributeRelease]
) -> np.ndarray:
    """ValueAdding (eqs. 17–18, with the erratum η(s')/d(s')): x̂ = w·P_in/E_size + (N − w)(1 − P_in)/(|C| − E_size)."""
    count = _check_releases(published, releases)
    observed = published_counts(published, [release.d for release in releases]).astype(np.float64)
    inside = math.prod(release.p_contains for release in releases)
    set_size = math.prod(release.eta for release in releases)
    outside_cells = observed.size - set_size
    spread = (count - observed) * (1.0 - inside) / outside_cells if outside_cells else 0.0
    return observed * inside / set_size + spread  # type: ignore[no-any-return]


def random_baseline(n: int, shape: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    """The "Random" baseline of [S] §VI: multinomial(N, uniform over the cells) [spec decision]."""
    cells = math.prod(shape)
    if n < 0 or cells < 1:
        raise AnonymizationError("the random baseline needs N >= 0 and at least one cell")
    return rng.multinomial(n, np.full(cells, 1.0 / cells)).reshape(tuple(shape))  # type: ignore[no-any-return]


def _pair(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    first, second = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if first.shape != second.shape:
        raise AnonymizationError(f"cross-tabulations differ in shape: {first.shape} and {second.shape}")
    return first, second


def l1(x: np.ndarray, y: np.ndarray) -> float:
    """Σ |x − y| (Def 6)."""
    first, second = _pair(x, y)
    return float(np.abs(first - second).sum())


def l2(x: np.ndarray, y: np.ndarray) -> float:
    """sqrt(Σ (x − y)²) (Def 7)."""
    first, second = _pair(x, y)
    return float(np.sqrt(((first - second) ** 2).sum()))


def hellinger(x: np.ndarray, y: np.ndarray) -> float:
    """(1/√2)·sqrt(Σ (√x − √y)²) on counts (Def 8); negative estimates are refused."""
    first, second = _pair(x, y)
    if (first < 0).any() or (second < 0).any():
        raise AnonymizationError("the Hellinger distance needs non-negative counts")
    return float(np.sqrt(((np.sqrt(first) - np.sqrt(second)) ** 2).sum()) / math.sqrt(2.0))
