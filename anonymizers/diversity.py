"""l-diversity and t-closeness, checked on the per-class sensitive-value count matrix (classes × values).

Why matrices: the lattice search checks hundreds of nodes, and every variant below is a row-wise numpy
expression over the counts the frequency set already carries — no rows, no loops over classes.

Definitions (Machanavajjhala et al., TKDD 2007; Li, Li, Venkatasubramanian, ICDE 2007); a class has
sensitive counts sorted r_1 ≥ r_2 ≥ … ≥ r_m, n_c records, p(s) = count(s)/n_c:

* distinct l-diversity: at least l values occur (m ≥ l);
* entropy l-diversity: −Σ p(s) log p(s) ≥ log l; the class *achieves* l = exp(entropy);
* recursive (c, l)-diversity: r_1 < c·(r_l + r_{l+1} + … + r_m);
* t-closeness: EMD(class distribution, whole-table distribution) ≤ t, with the equal ground distance
  for categories (EMD = ½ Σ|p − q|, the total variation) or the ordered distance |i − j|/(m − 1) for
  ordered values (EMD = (1/(m−1))·Σ_{i<m} |Σ_{j≤i} (p_j − q_j)|), m = size of the sensitive domain.

Monotonicity (what the lattice search may prune on): merging classes never breaks any of the four
(distinct: the union has at least as many values; entropy: concavity; recursive: proved in the paper;
t-closeness: EMD is convex in the class distribution). With *suppression* only distinct-l keeps the
stronger property the search needs — a merged class fails only if every part fails — so for the others
the search prunes on the distinct-l (and k) condition they imply (:meth:`DiversityModel.implied_distinct`).

Sensitive quasi-identifiers (spec sensitive-qid-diversity.md, Sei et al.): :func:`frequency_l_per_attribute`
and :func:`closeness_per_attribute` measure the frequency (l_1..l_q)-diversity and (t_1..t_q)-closeness a
table achieves when each attribute S_j is sensitive within the classes formed by the others (Defs 10–16,
with the class's own distribution as B_j — the Bayes posterior of their randomized scheme reduces to it for
a deterministic table). Both reuse the count-matrix machinery here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from anonymizers.errors import AnonymizationError
from anonymizers.frequency import combined_keys

Variant = Literal["distinct", "entropy", "recursive"]
Distance = Literal["equal", "ordered"]
_TOLERANCE = 1e-12


def distinct_l(matrix: np.ndarray) -> np.ndarray:
    """Distinct sensitive values per class."""
    return np.count_nonzero(matrix, axis=1)


def entropy_l(matrix: np.ndarray) -> np.ndarray:
    """exp(entropy) per class: the entropy-l each class achieves (natural logarithms)."""
    totals = matrix.sum(axis=1, keepdims=True).astype(np.float64)
    p = matrix / np.where(totals > 0, totals, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, -p * np.log(p), 0.0)
    return np.exp(terms.sum(axis=1))  # type: ignore[no-any-return]


def _tails(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """r_1 per class and tails[:, j] = r_{j+1} + … + r_m (counts sorted descending)."""
    ordered = -np.sort(-matrix, axis=1)
    tails = np.cumsum(ordered[:, ::-1], axis=1)[:, ::-1]
    return ordered[:, 0], tails


def recursive_cl(matrix: np.ndarray, *, c: float, l: int) -> np.ndarray:  # noqa: E741 (the paper's name)
    """Whether each class is recursive (c, l)-diverse: r_1 < c·Σ_{i≥l} r_i."""
    if l > matrix.shape[1]:
        return np.zeros(matrix.shape[0], dtype=bool)
    first, tails = _tails(matrix)
    return first < c * tails[:, l - 1]  # type: ignore[no-any-return]


def recursive_achieved_l(matrix: np.ndarray, *, c: float) -> np.ndarray:
    """The largest l for which each class is recursive (c, l)-diverse (0 if none)."""
    first, tails = _tails(matrix)
    return np.count_nonzero(first[:, None] < c * tails, axis=1)


def distribution(counts: np.ndarray) -> np.ndarray:
    return counts / max(1.0, float(np.sum(counts)))


def emd(matrix: np.ndarray, overall: np.ndarray, *, distance: Distance) -> np.ndarray:
    """EMD of each class's sensitive distribution from ``overall`` (a distribution over the columns)."""
    totals = matrix.sum(axis=1, keepdims=True).astype(np.float64)
    difference = matrix / np.where(totals > 0, totals, 1.0) - overall[None, :]
    if distance == "equal":
        return 0.5 * np.abs(difference).sum(axis=1)  # type: ignore[no-any-return]
    size = matrix.shape[1]
    if size < 2:
        return np.zeros(matrix.shape[0])
    cumulative = np.cumsum(difference, axis=1)[:, :-1]
    return np.abs(cumulative).sum(axis=1) / (size - 1)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class DiversityModel:
    """The sensitive-attribute constraints of one anonymization: an l-diversity variant, t-closeness,
    or both. ``c`` is recursive diversity's constant; ``distance`` t-closeness's ground distance."""

    l: float | None = None  # noqa: E741 (the paper's name)
    variant: Variant = "distinct"
    c: float = 2.0
    t: float | None = None
    distance: Distance = "equal"

    def __post_init__(self) -> None:
        if self.l is not None and self.l < 1:
            raise AnonymizationError(f"l must be at least 1 (got {self.l})")
        if (
            self.variant in ("distinct", "recursive")
            and self.l is not None
            and not float(self.l).is_integer()
        ):
            raise AnonymizationError(f"{self.variant} l-diversity needs a whole number l (got {self.l})")
        if self.variant == "recursive" and self.c <= 0:
            raise AnonymizationError(f"recursive (c, l)-diversity needs c > 0 (got {self.c})")
        if self.t is not None and not 0 <= self.t <= 1:
            raise AnonymizationError(f"t must be between 0 and 1 (got {self.t})")

    @property
    def active(self) -> bool:
        return self.l is not None or self.t is not None

    @property
    def implied_distinct(self) -> int:
        """The distinct-l every passing class must reach: entropy-l ≥ l ⇒ more than ⌈l⌉−1 values;
        recursive (c, l) ⇒ at least l values (its tail sum is empty otherwise)."""
        if self.l is None:
            return 1
        return int(np.ceil(self.l - _TOLERANCE))

    @property
    def monotone_with_suppression(self) -> bool:
        """Whether failing classes, once merged, still fail — only then may a node with too many
        outliers prune its specializations (see the module docstring)."""
        return self.t is None and (self.l is None or self.variant == "distinct")

    def failing(self, matrix: np.ndarray, overall: np.ndarray | None) -> np.ndarray:
        """Mask of the classes that violate the model."""
        fails = np.zeros(matrix.shape[0], dtype=bool)
        if self.l is not None:
            if self.variant == "distinct":
                fails |= distinct_l(matrix) < self.l
            elif self.variant == "entropy":
                fails |= entropy_l(matrix) < self.l * (1 - _TOLERANCE)
            else:
                fails |= ~recursive_cl(matrix, c=self.c, l=int(self.l))
        if self.t is not None:
            if overall is None:
                raise AnonymizationError("t-closeness needs the whole table's sensitive distribution")
            fails |= emd(matrix, overall, distance=self.distance) > self.t + _TOLERANCE
        return fails

    def implied_failing(self, matrix: np.ndarray) -> np.ndarray:
        """Mask of the classes that fail the monotone part: fewer than :attr:`implied_distinct` values."""
        return distinct_l(matrix) < self.implied_distinct


def achieved(
    matrix: np.ndarray, overall: np.ndarray | None, *, c: float = 2.0, distance: Distance = "equal"
) -> dict[str, float]:
    """What the released classes achieve: the smallest distinct-l, entropy-l and recursive-(c, l), and
    the largest EMD to the whole table (t). Empty input achieves nothing (all zeros)."""
    if matrix.shape[0] == 0:
        return {"distinct_l": 0.0, "entropy_l": 0.0, "recursive_l": 0.0, "t": 0.0}
    result = {
        "distinct_l": float(distinct_l(matrix).min()),
        "entropy_l": float(entropy_l(matrix).min()),
        "recursive_l": float(recursive_achieved_l(matrix, c=c).min()),
    }
    result["t"] = float(emd(matrix, overall, distance=distance).max()) if overall is not None else 0.0
    return result


def _matrices_per_attribute(codes: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
    """For each attribute j: classes formed by the other attributes × values of j (Sei et al. Def 10)."""
    width = codes.shape[1]
    result = []
    for j in range(width):
        others = [codes[:, i] for i in range(width) if i != j]
        radices = [int(codes[:, i].max()) + 1 for i in range(width) if i != j]
        keys = combined_keys(others, radices)[0] if others else np.zeros(len(counts), dtype=np.int64)
        classes, uniques = pd.factorize(keys)
        size = int(codes[:, j].max()) + 1
        flat = classes.astype(np.int64) * size + codes[:, j]
        matrix = np.bincount(flat, weights=counts, minlength=len(uniques) * size)
        result.append(matrix.reshape(len(uniques), size))
    return result


def frequency_l_per_attribute(codes: Sequence[np.ndarray] | np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The frequency [[l_j, j]]-diversity each sensitive QID achieves: min over its classes of
    n_c / max_s count(s) (every value's relative frequency is ≤ 1/l_j). ``codes`` is records × q."""
    table = np.asarray(codes)
    return np.array(
        [float((m.sum(axis=1) / m.max(axis=1)).min()) for m in _matrices_per_attribute(table, counts)]
    )


def closeness_per_attribute(
    codes: Sequence[np.ndarray] | np.ndarray, counts: np.ndarray, *, distance: Distance = "equal"
) -> np.ndarray:
    """The [[t_j, j]]-closeness each sensitive QID achieves: the largest EMD between a class's
    distribution of S_j and the whole table's."""
    table = np.asarray(codes)
    result = []
    for matrix in _matrices_per_attribute(table, counts):
        overall = distribution(matrix.sum(axis=0))
        result.append(float(emd(matrix, overall, distance=distance).max()))
    return np.array(result)
