"""One window's factorized release and the attacks on a sequence of them ([D] ch. 5; spec
``matrix-factorization.md`` §4, ``simulated-attack-risk.md`` §8).

Methods:

* ``mf`` — Algorithm 3 with the spec's errata: factorize M ≈ UVᵀ, de-identify U only (k-member clustering,
  or Laplace noise of scale φ; φ = 0 is "MF alone", Table 5.3), optionally refit V once with U′ fixed, and
  publish X = U′Vᵀ;
* ``kanon-matrix`` — the baseline A_k(M): k-member clustering of M's rows;
* ``noise-matrix`` — the baseline A_φ(M) = M + Lap(φ).

Optional post-processing (clip to [0, 1], threshold to 0/1) is applied before scoring: the risk is always
that of what is published.

Scoring: re-identification of every window (its original against its release) and linkage of consecutive
windows (two releases). For clustered releases a success is a match to any row *published identically* to the
user's own — what the attacker sees as one cluster (the k-member clusters, merged where post-processing made
rows equal) — with the sources' 1/k credit and the exact 1/|group| credit beside it. Both commands
(``materialize factorize`` and ``risk factorized``) score through :func:`score_windows`, so they agree.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from anonymizers.errors import AnonymizationError
from anonymizers.factorization import (
    Solver,
    check_k,
    factorize,
    k_member_clusters,
    laplace_rows,
    refit_items,
    release,
)
from anonymizers.risk.linkage import Metric, linkage_risk, reidentification_risk

Method = Literal["mf", "kanon-matrix", "noise-matrix"]
METHODS: tuple[Method, ...] = ("mf", "kanon-matrix", "noise-matrix")
RefitV = Literal["none", "one-epoch"]
_AUTO_SGD_CELLS = 2_000_000  # up to 2M cells SGD (the papers' solver) takes seconds; above, ALS


@dataclass(frozen=True)
class ReleaseSettings:
    """Everything that decides one window's release; recorded in the report as given."""

    method: Method = "mf"
    k: int | None = None
    noise: float | None = None
    rank: int = 20
    iterations: int = 100
    learning_rate: float = 0.05
    regularization: float = 0.01
    solver: Solver | Literal["auto"] = "auto"
    refit_v: RefitV = "none"
    clip: bool = False
    threshold: float | None = None

    def __post_init__(self) -> None:
        if (self.k is None) == (self.noise is None):
            raise AnonymizationError("give exactly one of --k and --noise", hint="e.g. --k 4 or --noise 0.15")
        if self.method not in METHODS:
            raise AnonymizationError(f"unknown method {self.method!r}", hint=", ".join(METHODS))
        if self.noise is not None and not (np.isfinite(self.noise) and self.noise >= 0):
            raise AnonymizationError(
                f"the noise scale φ must be a non-negative number, got {self.noise}", hint="e.g. --noise 0.15"
            )
        if self.k is not None and self.k < 1:
            raise AnonymizationError(f"k must be at least 1, got {self.k}")
        if self.refit_v != "none" and self.method != "mf":
            raise AnonymizationError("--refit-v applies to --method mf only")

    def solver_for(self, shape: tuple[int, int]) -> Solver:
        """``auto``: the papers' SGD while it takes seconds, alternating least squares above."""
        if self.solver != "auto":
            return self.solver
        return "sgd" if shape[0] * shape[1] <= _AUTO_SGD_CELLS else "als"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class WindowRelease:
    """The published matrix, the clustering behind it (None for noise) and the factorization's error curve
    (None for the baselines)."""

    published: np.ndarray
    labels: np.ndarray | None
    errors: np.ndarray | None
    solver: Solver | None


def release_window(matrix: np.ndarray, settings: ReleaseSettings, rng: np.random.Generator) -> WindowRelease:
    """One window's release under ``settings`` (see the module docstring)."""
    if settings.k is not None:
        check_k(settings.k, matrix.shape[0])  # before the factorization, not after it
    if settings.method == "kanon-matrix":
        assert settings.k is not None
        clustering = k_member_clusters(matrix, settings.k, rng)
        return WindowRelease(_post_process(clustering.rows, settings), clustering.labels, None, None)
    if settings.method == "noise-matrix":
        assert settings.noise is not None
        return WindowRelease(
            _post_process(laplace_rows(matrix, settings.noise, rng), settings), None, None, None
        )
    solver = settings.solver_for(matrix.shape)
    factors = factorize(
        matrix,
        rank=settings.rank,
        iterations=settings.iterations,
        learning_rate=settings.learning_rate,
        regularization=settings.regularization,
        solver=solver,
        rng=rng,
    )
    labels = None
    if settings.k is not None:
        clustering = k_member_clusters(factors.u, settings.k, rng)
        u_prime, labels = clustering.rows, clustering.labels
    else:
        assert settings.noise is not None
        u_prime = laplace_rows(factors.u, settings.noise, rng)
    v = factors.v
    if settings.refit_v == "one-epoch":
        v = refit_items(
            matrix,
            u_prime,
            v,
            learning_rate=settings.learning_rate,
            regularization=settings.regularization,
            rng=rng,
        )
    published = release(u_prime, v, clip=settings.clip, threshold=settings.threshold)
    return WindowRelease(published, labels, factors.errors, solver)


def _post_process(x: np.ndarray, settings: ReleaseSettings) -> np.ndarray:
    if settings.clip:
        x = np.clip(x, 0.0, 1.0)
    if settings.threshold is not None:
        x = (x >= settings.threshold).astype(np.float64)
    return x


@dataclass(frozen=True)
class Risks:
    """``reidentification[w]`` for window w; ``linkage[w]`` between windows w and w + 1. Each is the
    sources' score (1/k credit for clustered releases) with the exact credit beside it."""

    reidentification: list[dict[str, float]]
    linkage: list[dict[str, float]]

    def to_dict(self) -> dict[str, Any]:
        return {"reidentification": self.reidentification, "linkage": self.linkage}

    @property
    def headline(self) -> tuple[float, float]:
        """Mean re-identification and mean linkage risk over the windows (the tables' numbers)."""
        return (
            float(np.mean([r["risk"] for r in self.reidentification])),
            float(np.mean([r["risk"] for r in self.linkage])) if self.linkage else float("nan"),
        )


def published_groups(published: np.ndarray) -> np.ndarray:
    """Rows published identically share a label: the clusters as the attacker sees them."""
    _, labels = np.unique(published, axis=0, return_inverse=True)
    return labels.reshape(-1)


def score_windows(
    originals: list[np.ndarray],
    published: list[np.ndarray],
    *,
    k: int | None,
    metric: Metric = "euclidean",
    progress: Any = None,
) -> Risks:
    """Hungarian re-identification of every window and linkage of consecutive ones. ``k`` is the release's
    k for clustered releases (its groups are :func:`published_groups`), None for noise releases.
    ``progress(done, total)`` is called after each assignment."""
    if len(originals) != len(published) or len(published) < 1:
        raise AnonymizationError("one release per original window is needed")
    labels = [published_groups(x) if k is not None else None for x in published]
    total = 2 * len(published) - 1
    reid, link = [], []
    for w, (original, released) in enumerate(zip(originals, published, strict=True)):
        result = reidentification_risk(original, released, labels=labels[w], k=k, metric=metric)
        reid.append(_scores(result))
        if progress:
            progress(len(reid) + len(link), total)
    for w in range(len(published) - 1):
        result = linkage_risk(published[w], published[w + 1], labels_t2=labels[w + 1], k=k, metric=metric)
        link.append(_scores(result))
        if progress:
            progress(len(reid) + len(link), total)
    return Risks(reid, link)


def _scores(result: Any) -> dict[str, float]:
    return {
        "risk": result.risk,
        "risk_exact_credit": result.risk_exact_credit,
        "successes": int(result.successes.sum()),
    }
