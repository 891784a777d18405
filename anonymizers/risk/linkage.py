"""Re-identification and linkage risk of time-sequence releases by the assignment attack ([D] §5.1,
[J] §3; spec ``simulated-attack-risk.md`` §8).

The attacker pairs rows of two tables one-to-one at minimum total distance (the Hungarian method,
``scipy.optimize.linear_sum_assignment``):

* re-identification (Def 5.1): the original window M_t1 against its release A(M_t1);
* linkage (Def 5.2): two releases A(M_t1), A(M_t2) of the same users under fresh pseudonyms.

Rows of both tables are aligned by user (row i is user i in both); the evaluator knows this mapping, the
attacker never sees it. A user is attacked successfully when matched to their own row, or — for a
k-anonymized release — to any row of their own cluster. Risk = n′/n (Def 5.3), times 1/k for clustered
releases as the sources score (the Fig. 5.1 example); the exact credit 1/|cluster| per success is
reported too, since clusters hold up to 2k − 1 rows.

Memory: the solver needs the dense n × n cost matrix. It is built in float32 (400 MB at 10 000 users), a
block of rows at a time, each block's distances computed in float64 and then rounded — but scipy's
``linear_sum_assignment`` copies it to float64 (800 MB), and the two tables are read as float64 too, so an
attack at 10 000 users × 5 000 items peaks near 2.1 GB (docs/benchmarks.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.optimize import linear_sum_assignment

from anonymizers.errors import AnonymizationError

Metric = Literal["euclidean", "cosine", "cityblock"]
_COST_ENTRIES_PER_BLOCK = 1 << 22  # float64 distances computed at once (32 MB)


@dataclass(frozen=True)
class AttackResult:
    """``assignment[i]`` = the row of the second table matched to row i of the first; ``successes[i]``
    whether that match finds user i (or their cluster); ``risk`` as the sources score it (with the 1/k
    factor for clustered releases), ``risk_exact_credit`` with 1/|cluster| per success instead."""

    assignment: np.ndarray
    successes: np.ndarray
    risk: float
    risk_exact_credit: float


def cost_matrix(first: np.ndarray, second: np.ndarray, *, metric: Metric = "euclidean") -> np.ndarray:
    """float32 distances ``cost[i, j]`` between row i of ``first`` and row j of ``second``, built in blocks
    of rows. Euclidean uses ‖a‖² − 2a·b + ‖b‖² (clipped at 0); cosine is 1 − cos (a zero row is at
    distance 1 from everything); cityblock is the L1 distance (the spec's option; O(n²·m) memory-light)."""
    a, b = _rows(first, "first"), _rows(second, "second")
    if a.shape[1] != b.shape[1]:
        raise AnonymizationError(
            f"the tables have {a.shape[1]} and {b.shape[1]} columns", hint="same items in both"
        )
    if metric == "cosine":
        a, b = _unit_rows(a), _unit_rows(b)
    elif metric not in ("euclidean", "cityblock"):
        raise AnonymizationError(f"unknown metric {metric!r}", hint="euclidean, cosine or cityblock")
    cost = np.empty((a.shape[0], b.shape[0]), dtype=np.float32)
    b_norms = np.einsum("ij,ij->i", b, b)
    per_block = _COST_ENTRIES_PER_BLOCK // (b.shape[0] * (b.shape[1] if metric == "cityblock" else 1))
    step = max(1, per_block)
    for start in range(0, a.shape[0], step):
        block = a[start : start + step]
        if metric == "cityblock":
            cost[start : start + step] = np.abs(block[:, None, :] - b[None, :, :]).sum(axis=2)
        elif metric == "cosine":
            cost[start : start + step] = 1.0 - block @ b.T
        else:
            squared = np.einsum("ij,ij->i", block, block)[:, None] - 2.0 * (block @ b.T) + b_norms[None, :]
            cost[start : start + step] = np.sqrt(np.maximum(squared, 0.0))
    return cost


def _rows(table: np.ndarray, name: str) -> np.ndarray:
    array = np.asarray(table, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] == 0:
        raise AnonymizationError(f"{name} must be a non-empty users × items array")
    if not np.all(np.isfinite(array)):
        raise AnonymizationError(f"{name} contains NaN or infinite values")
    return array


def _unit_rows(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def hungarian_assignment(
    first: np.ndarray, second: np.ndarray, *, metric: Metric = "euclidean"
) -> np.ndarray:
    """The attacker's one-to-one matching of minimum total distance: ``assignment[i]`` for row i of
    ``first``. Both tables must have the same number of rows (same users, fresh pseudonyms)."""
    if np.shape(first)[0] != np.shape(second)[0]:
        raise AnonymizationError(
            f"the tables have {np.shape(first)[0]} and {np.shape(second)[0]} rows",
            hint="keep inactive users as zero rows so that both windows hold the same users",
        )
    _, columns = linear_sum_assignment(cost_matrix(first, second, metric=metric))
    return columns


def score_assignment(
    assignment: np.ndarray, *, labels: np.ndarray | None = None, k: int | None = None
) -> AttackResult:
    """Score a matching of user i to row ``assignment[i]`` (rows aligned by user).

    Without ``labels`` (noise releases): success iff assignment[i] == i, risk = successes / n. With the
    release's cluster ``labels`` and its ``k``: success iff labels[assignment[i]] == labels[i], risk =
    successes / n × 1/k (the sources' scoring: Fig. 5.1 gives 5/7 × 1/2 = 5/14), exact credit
    Σ_success 1/|cluster_i| / n."""
    matched = np.asarray(assignment, dtype=np.intp)
    n = matched.size
    if n == 0 or matched.min() < 0 or matched.max() >= n:
        raise AnonymizationError("the assignment must map each of the n users to a row 0..n-1")
    if labels is None:
        successes = matched == np.arange(n)
        risk = float(successes.mean())
        return AttackResult(matched, successes, risk, risk)
    cluster = np.asarray(labels)
    if cluster.shape != (n,):
        raise AnonymizationError(
            f"labels has shape {cluster.shape}, expected ({n},)", hint="one label per row"
        )
    if k is None or k < 1:
        raise AnonymizationError("a clustered release needs its k (>= 1) for the 1/k credit")
    successes = cluster[matched] == cluster
    _, inverse, sizes = np.unique(cluster, return_inverse=True, return_counts=True)
    exact = float((successes / sizes[inverse.reshape(-1)]).sum() / n)
    return AttackResult(matched, successes, float(successes.mean()) / k, exact)


def reidentification_risk(
    original: np.ndarray,
    released: np.ndarray,
    *,
    labels: np.ndarray | None = None,
    k: int | None = None,
    metric: Metric = "euclidean",
) -> AttackResult:
    """Def 5.1: the attacker knows M_t1 and A(M_t1); ``labels``/``k`` are the release's clusters, if any."""
    return score_assignment(hungarian_assignment(original, released, metric=metric), labels=labels, k=k)


def linkage_risk(
    released_t1: np.ndarray,
    released_t2: np.ndarray,
    *,
    labels_t2: np.ndarray | None = None,
    k: int | None = None,
    metric: Metric = "euclidean",
) -> AttackResult:
    """Def 5.2: the attacker has A(M_t1) and A(M_t2) only; success when user i's t1 row is matched to
    their t2 row or to a row of their t2 cluster (``labels_t2``, the t2 release's clustering)."""
    return score_assignment(
        hungarian_assignment(released_t1, released_t2, metric=metric), labels=labels_t2, k=k
    )
