"""Information-loss metrics of a globally recoded table, exactly as ARX 3.9 defines them, plus lower
bounds that let the lattice search skip nodes which cannot beat the best one found.

Notation: n records; QI d has a hierarchy whose domain has |D_d| leaves (the lines of the hierarchy file,
whether or not they occur in the data); a record's label at level l covers ``cov`` leaves, its *domain
share* is cov/|D_d|. A class is *suppressed* when it fails the privacy model (ARX removes its records).

* **Loss** — ARX's default ``MetricMDNMLoss`` (gs-factor 0.5 ⇒ generalization factor 1, suppression
  factor 1), after Iyengar (KDD 2002). Per QI d::

      S_d = Σ_{kept records} cov/|D_d| + Σ_{suppressed records} 1
      v_d = max(0, (S_d − n/|D_d|) / (n − n/|D_d|))

  and ARX's default aggregate is the *geometric* mean, shifted by one so zeros do not collapse it
  (``ILMultiDimensionalGeometricMean``; all attribute weights 1)::

      Loss = Π_d (1 + v_d)^(1/q) − 1

  On Adult (8 ARX hierarchies) the node sex0 age4 race0 marital2 edu3 country2 workclass2 occupation1
  gives 0.5916, the 0.592 ARX reports; the arithmetic mean of the same v_d would be 0.661.
* **1 − granularity** — ARX's quality model ``QualityModelColumnOrientedLoss``: per QI the mean share
  r_d = S_d/n, min_d = 1/|D_d|, max_d = 1; aggregated *before* normalizing, with the arithmetic mean::

      1 − granularity = (mean_d r_d − mean_d min_d) / (1 − mean_d min_d)     (clipped to [0, 1])

  (0.714 on the node above, as ARX reports).
* **Discernibility** (Bayardo & Agrawal 2005): Σ_{kept classes} |E|² + n·(suppressed records).
* **AECS** (average equivalence class size, LeFevre et al. 2006): kept records / kept classes.
* **Precision loss** (Sweeney 2002): mean over QIs and records of level/height, a suppressed record
  counting 1 on every QI (ARX ``MetricMDNMPrecision`` with the arithmetic mean); 1 − precision.
* **NCP / GCP** (Xu et al. 2006, Ghinita et al. 2007): a categorical label's NCP is (cov − 1)/(|D_d| − 1)
  (0 for a leaf, 1 for ``*``), a suppressed record's NCP is 1 on every QI; NCP_d averages over records,
  GCP averages NCP_d over QIs. For full-domain recoding of interval hierarchies this is the leaf count
  of the interval, which matches ARX's materialized domain shares.

Lower bounds (all nodes at once, from the QI marginals alone): Loss, GCP and precision are separable —
each QI's term depends only on that QI's level and, since a suppressed record costs 1 ≥ its share, the
suppression-free value is a lower bound of the value with suppression (ARX uses the same bound). For
discernibility, Σ|E|² ≥ n²/(number of classes) ≥ n²/min(n, Π_d labels_d), and a suppressed record's n
exceeds its class's contribution |E| < k ≤ n.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from anonymizers.frequency import ClassTable
from anonymizers.hierarchy import Hierarchy

SEARCH_METRICS = ("loss", "gcp", "precision", "discernibility")


@dataclass(frozen=True)
class NodeSummary:
    """Per-QI sums over the records of one node: the shares S_d, NCP sums and precision sums."""

    total: int
    suppressed_records: int
    share_sums: np.ndarray  # S_d: Σ cov/|D_d| over kept records + suppressed records
    ncp_sums: np.ndarray
    precision_sums: np.ndarray
    domain_sizes: np.ndarray


def summarize(
    table: ClassTable, suppressed: np.ndarray, hierarchies: Sequence[Hierarchy], total: int
) -> NodeSummary:
    """The per-QI sums every separable metric needs, for ``table`` with ``suppressed`` classes removed."""
    kept = ~suppressed
    kept_counts = table.counts[kept].astype(np.float64)
    gone = int(table.counts[suppressed].sum())
    q = len(hierarchies)
    shares, ncps, precisions = np.zeros(q), np.zeros(q), np.zeros(q)
    sizes = np.array([len(h.leaves) for h in hierarchies], dtype=np.float64)
    for d, (hierarchy, level) in enumerate(zip(hierarchies, table.levels, strict=True)):
        coverage = hierarchy.label_coverage[level][table.labels[kept, d]].astype(np.float64)
        shares[d] = kept_counts @ (coverage / sizes[d]) + gone
        ncps[d] = kept_counts @ _ncp(coverage, sizes[d]) + gone
        precisions[d] = kept_counts.sum() * _precision(level, hierarchy.height) + gone
    return NodeSummary(total, gone, shares, ncps, precisions, sizes)


def _ncp(coverage: np.ndarray, size: float) -> np.ndarray:
    return (coverage - 1) / (size - 1) if size > 1 else np.zeros_like(coverage)


def _precision(level: int, height: int) -> float:
    return level / height if height > 0 else 0.0


def attribute_loss(summary: NodeSummary) -> np.ndarray:
    """ARX's normalized Loss per QI: v_d = (S_d − n/|D_d|)/(n − n/|D_d|), at least 0."""
    return _normalized_shares(summary.share_sums, summary.total, summary.domain_sizes)


def _normalized_shares(sums: np.ndarray, total: float, sizes: np.ndarray) -> np.ndarray:
    low = total / sizes
    span = total - low
    safe = np.where(span > 0, span, 1.0)
    return np.where(span > 0, np.maximum(0.0, (sums - low) / safe), 0.0)


def geometric_loss(values: np.ndarray) -> float:
    """ARX's geometric aggregate Π(1 + v_d)^(1/q) − 1, computed in log space (the last axis)."""
    return np.expm1(np.log1p(values).mean(axis=-1))  # type: ignore[no-any-return]


def arx_loss(summary: NodeSummary) -> float:
    return float(geometric_loss(attribute_loss(summary)))


def granularity_loss(summary: NodeSummary) -> float:
    """1 − ARX's granularity (arithmetic mean, aggregated before normalization)."""
    mean_share = float(np.mean(summary.share_sums / summary.total))
    low = float(np.mean(1.0 / summary.domain_sizes))
    if low >= 1.0:
        return 0.0
    return min(1.0, max(0.0, (mean_share - low) / (1.0 - low)))


def ncp_per_attribute(summary: NodeSummary) -> np.ndarray:
    return summary.ncp_sums / summary.total


def gcp(summary: NodeSummary) -> float:
    return float(np.mean(ncp_per_attribute(summary)))


def precision_loss(summary: NodeSummary) -> float:
    return float(np.mean(summary.precision_sums / summary.total))


def discernibility(table: ClassTable, suppressed: np.ndarray) -> float:
    kept = table.counts[~suppressed].astype(np.float64)
    total = float(table.counts.sum())
    return float(kept @ kept + total * float(table.counts[suppressed].sum()))


def aecs(table: ClassTable, suppressed: np.ndarray) -> float:
    kept = table.counts[~suppressed]
    return float(kept.sum() / len(kept)) if len(kept) else 0.0


def all_metrics(
    table: ClassTable, suppressed: np.ndarray, hierarchies: Sequence[Hierarchy], total: int
) -> dict[str, float]:
    """Every metric of one node, for the report."""
    summary = summarize(table, suppressed, hierarchies, total)
    return {
        "loss": arx_loss(summary),
        "granularity_loss": granularity_loss(summary),
        "gcp": gcp(summary),
        "precision": precision_loss(summary),
        "discernibility": discernibility(table, suppressed),
        "aecs": aecs(table, suppressed),
    }


def metric_value(
    metric: str, table: ClassTable, suppressed: np.ndarray, hierarchies: Sequence[Hierarchy], total: int
) -> float:
    """The search objective (lower is better)."""
    if metric == "discernibility":
        return discernibility(table, suppressed)
    summary = summarize(table, suppressed, hierarchies, total)
    if metric == "loss":
        return arx_loss(summary)
    if metric == "gcp":
        return gcp(summary)
    if metric == "precision":
        return precision_loss(summary)
    raise ValueError(f"unknown metric {metric!r}")


def lower_bounds(
    metric: str, nodes: np.ndarray, hierarchies: Sequence[Hierarchy], marginals: Sequence[np.ndarray]
) -> np.ndarray:
    """A lower bound of ``metric`` at every node (rows of ``nodes``), from the raw-level marginals
    (records per leaf of each QI). For the separable metrics it is the exact suppression-free value."""
    total = float(marginals[0].sum())
    columns = []
    for d, (hierarchy, marginal) in enumerate(zip(hierarchies, marginals, strict=True)):
        per_level = _per_level(metric, hierarchy, marginal.astype(np.float64), total)
        columns.append(per_level[nodes[:, d]])
    stacked = np.stack(columns, axis=1)
    if metric == "loss":
        return geometric_loss(stacked)  # type: ignore[no-any-return]
    if metric in ("gcp", "precision"):
        return stacked.mean(axis=1)  # type: ignore[no-any-return]
    if metric == "discernibility":
        classes = np.minimum(np.exp(stacked.sum(axis=1)), total)
        return np.maximum(total * total / classes, total)  # type: ignore[no-any-return]
    raise ValueError(f"unknown metric {metric!r}")


def _per_level(metric: str, hierarchy: Hierarchy, marginal: np.ndarray, total: float) -> np.ndarray:
    size = float(len(hierarchy.leaves))
    values = []
    for level in range(hierarchy.height + 1):
        coverage = hierarchy.coverage[level].astype(np.float64)
        if metric == "loss":
            share = float(marginal @ (coverage / size))
            values.append(float(_normalized_shares(np.array([share]), total, np.array([size]))[0]))
        elif metric == "gcp":
            values.append(float(marginal @ _ncp(coverage, size)) / total)
        elif metric == "precision":
            values.append(_precision(level, hierarchy.height))
        else:  # discernibility: log of the labels that occur, so that products stay finite
            present = np.bincount(hierarchy.codes[level], weights=marginal) > 0
            values.append(float(np.log(max(1, int(present.sum())))))
    return np.array(values)
