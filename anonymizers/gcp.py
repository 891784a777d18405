"""NCP and GCP: the information loss of a recoded table, on one scale for local and global recoding.

Ghinita, Karras, Kalnis, Mamoulis, "Fast data anonymization with low information loss", VLDB 2007, define
the Normalized Certainty Penalty of an equivalence class ``G`` on attribute ``A`` and the Global Certainty
Penalty of a table ``T`` with ``n`` rows and ``d`` quasi-identifiers:

* numeric ``A``:      ``NCP_A(G) = (max_G A − min_G A) / (max_T A − min_T A)`` (0 when the table's range is 0);
* categorical ``A``:  ``NCP_A(G) = (|leaves(u)| − 1) / (|leaves(A)| − 1)`` where ``u`` is the label the class
  is published under (for local recoding, the lowest common ancestor of its values in the hierarchy);
* ``GCP(T) = Σ_G |G| · Σ_A NCP_A(G) / (n · d)``; a suppressed row counts NCP 1 on every attribute.

Which categorical formula: Ghinita et al. write ``card(u)/|A|`` (and 0 for a single leaf), which jumps from
0 to 2/|A| at the first generalization. ARX's "Loss" metric (``metric/v2/MetricMDNMLoss``, also the
column-oriented quality model ``aggregates/quality/QualityModelColumnOrientedLoss`` that the GUI reports as
1 − granularity) sums the domain share ``card(u)/|A|`` per row and normalizes it between its minimum ``1/|A|``
(every value raw) and 1, which is exactly ``(card(u) − 1)/(|A| − 1)`` per row; suppressed rows count 1.
We use ARX's form: it is continuous, 0 for raw values and 1 for ``*``, and it equals the numeric formula on an
integer attribute whose leaves are the consecutive values of the table. ``|A|`` is the number of leaves of
the hierarchy (as in ARX), not of the table. anonypy (0.2.1) computes no loss measure; its categorical
"generalization" is the set of values of a class, which :func:`partition_gcp` measures with
``categorical="set"`` (``card(u)`` = distinct values in the class).

Local recoding (Mondrian) is measured from the class of every row (:func:`partition_gcp`) — Mondrian itself
passes each box's NCP to :func:`class_loss`, the same sums without going back to the rows — and global
recoding from the published labels (:func:`labelled_gcp`); all give the same number for the same release.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, TypeVar

import numpy as np
import pandas as pd

from anonymizers.errors import AnonymizationError, HierarchyError
from anonymizers.hierarchy import Hierarchy

CategoricalMeasure = Literal["lca", "set"]
T = TypeVar("T")


def numeric_ncp(low: np.ndarray, high: np.ndarray, *, domain_low: float, domain_high: float) -> np.ndarray:
    """NCP of intervals ``[low, high]`` (clipped to the domain) on an attribute ranging over the domain."""
    span = domain_high - domain_low
    if span <= 0:
        return np.zeros(np.shape(low), dtype=np.float64)
    width = np.minimum(high, domain_high) - np.maximum(low, domain_low)
    return np.clip(width / span, 0.0, 1.0)


def categorical_ncp(covered: np.ndarray, *, domain_size: int) -> np.ndarray:
    """NCP of labels that cover ``covered`` leaves of a domain of ``domain_size`` leaves: (c − 1)/(|A| − 1)."""
    if domain_size <= 1:
        return np.zeros(np.shape(covered), dtype=np.float64)
    return (np.asarray(covered, dtype=np.float64) - 1.0) / (domain_size - 1)


def gcp(class_sizes: np.ndarray, ncp: np.ndarray, *, suppressed: int = 0) -> float:
    """``Σ |G| Σ_A NCP_A(G) / (n d)`` over classes (rows of ``ncp``, one column per attribute).

    ``suppressed`` rows are part of ``n`` and count 1 on every attribute.
    """
    sizes = np.asarray(class_sizes, dtype=np.float64)
    rows = float(sizes.sum()) + suppressed
    attributes = ncp.shape[1]
    if rows == 0 or attributes == 0:
        return 0.0
    return float((sizes @ ncp.sum(axis=1) + suppressed * attributes) / (rows * attributes))


def tree_positions(hierarchy: Hierarchy) -> np.ndarray:
    """Each leaf's position in depth-first order of the tree, siblings in order of first appearance.

    Why: every subtree is then a run of consecutive positions, so the lowest common ancestor of a set of
    leaves is the lowest common ancestor of its first and last leaf in this order — a min and a max per
    class instead of a walk over its values. Mondrian cuts categorical attributes in this order too.
    """
    keys = tuple(hierarchy.codes[level] for level in range(hierarchy.height + 1))
    order = np.lexsort(keys)  # the last key (the level below the root) sorts first
    positions = np.empty(len(order), dtype=np.int64)
    positions[order] = np.arange(len(order))
    return positions


def lca_coverage(hierarchy: Hierarchy, first: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Level and number of covered leaves of the lowest common ancestor of leaf pairs (leaf indices)."""
    codes = np.stack(hierarchy.codes)
    level = np.argmax(codes[:, first] == codes[:, last], axis=0)  # the root row is all True
    return level, np.stack(hierarchy.coverage)[level, first]


def class_numeric_ncp(
    values: np.ndarray, classes: np.ndarray, count: int, *, domain_low: float, domain_high: float
) -> np.ndarray:
    """Per class, (max − min) / (domain range) of ``values``; ``classes`` holds each row's class id."""
    low = np.full(count, np.inf)
    high = np.full(count, -np.inf)
    np.minimum.at(low, classes, values)
    np.maximum.at(high, classes, values)
    return numeric_ncp(low, high, domain_low=domain_low, domain_high=domain_high)


def class_categorical_ncp(
    leaves: np.ndarray,
    classes: np.ndarray,
    count: int,
    hierarchy: Hierarchy,
    *,
    measure: CategoricalMeasure = "lca",
) -> np.ndarray:
    """Per class, the NCP of its leaves (leaf indices): under their lowest common ancestor, or as a set."""
    domain = len(hierarchy.leaves)
    if measure == "set":
        pairs = np.unique(classes.astype(np.int64) * domain + leaves)
        covered = np.bincount(pairs // domain, minlength=count)
        return categorical_ncp(covered, domain_size=domain)
    positions = tree_positions(hierarchy)
    at_position = np.argsort(positions)
    first = np.full(count, domain, dtype=np.int64)
    last = np.full(count, -1, dtype=np.int64)
    np.minimum.at(first, classes, positions[leaves])
    np.maximum.at(last, classes, positions[leaves])
    _, covered = lca_coverage(hierarchy, at_position[first], at_position[last])
    return categorical_ncp(covered, domain_size=domain)


def leaf_indices(hierarchy: Hierarchy, values: pd.Series) -> np.ndarray:
    """Leaf index of every value (compared as text, as the engine does); fails naming an unknown value."""
    codes, uniques = pd.factorize(values.astype(str))
    lookup = np.fromiter((hierarchy.leaf_index(str(v)) for v in uniques), dtype=np.int64, count=len(uniques))
    return lookup[codes]


def numeric_values(frame: pd.DataFrame, column: str) -> np.ndarray:
    """The column as floats; refuses text and missing values with a message that says what to do."""
    series = frame[column]
    if not pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series):
        raise AnonymizationError(
            f"quasi-identifier {column} is not numeric",
            hint=f"give {column} a hierarchy to treat it as categorical",
        )
    values = series.to_numpy(dtype=np.float64)
    if np.isnan(values).any():
        raise AnonymizationError(
            f"quasi-identifier {column} has missing values",
            hint="drop or impute them first, or give the column a hierarchy with a leaf for them",
        )
    return values


def partition_gcp(
    frame: pd.DataFrame,
    classes: np.ndarray,
    qis: Sequence[str],
    hierarchies: Mapping[str, Hierarchy],
    *,
    suppressed: np.ndarray | None = None,
    categorical: CategoricalMeasure = "lca",
) -> tuple[float, dict[str, float]]:
    """GCP of a local recoding given by each row's class id (``frame`` holds the *original* values).

    QIs with a hierarchy are categorical, the others numeric. ``suppressed`` marks removed rows (they count
    1 on every attribute and belong to no class; their ``classes`` entry is ignored). Returns the GCP and
    each attribute's mean NCP over all rows.
    """
    kept = np.ones(len(frame), dtype=bool) if suppressed is None else ~np.asarray(suppressed, dtype=bool)
    ids, dense = np.unique(np.asarray(classes)[kept], return_inverse=True)
    sizes = np.bincount(dense, minlength=len(ids))
    columns = []
    for column in qis:
        if column in hierarchies:
            leaves = leaf_indices(hierarchies[column], frame[column])[kept]
            columns.append(
                class_categorical_ncp(leaves, dense, len(ids), hierarchies[column], measure=categorical)
            )
        else:
            values = numeric_values(frame, column)
            columns.append(
                class_numeric_ncp(
                    values[kept],
                    dense,
                    len(ids),
                    domain_low=float(values.min()),
                    domain_high=float(values.max()),
                )
            )
    return class_loss(sizes, columns, qis, suppressed=int((~kept).sum()))


def labelled_gcp(
    released: pd.DataFrame,
    qis: Sequence[str],
    hierarchies: Mapping[str, Hierarchy],
    *,
    numeric_domains: Mapping[str, tuple[float, float]] | None = None,
    suppressed: int = 0,
) -> tuple[float, dict[str, float]]:
    """GCP of a released table whose QI cells are hierarchy labels (global recoding, or any labelling).

    Categorical QIs: NCP of the label's leaf count. QIs named in ``numeric_domains`` (the original table's
    ``(min, max)``) are numeric: a label stands for the interval from its smallest to its largest leaf
    (leaves read as numbers), measured like Mondrian's ``[min-max]`` so both algorithms share one scale.
    ``suppressed`` counts rows removed from ``released``; rows kept with ``*`` everywhere count 1 by
    themselves.
    """
    domains = numeric_domains or {}
    columns = []
    for column in qis:
        hierarchy = hierarchies[column]
        codes, uniques = pd.factorize(released[column].astype(str))
        if column in domains:
            intervals = _label_intervals(hierarchy)
            bounds = np.array([_lookup(intervals, hierarchy, str(u)) for u in uniques]).reshape(-1, 2)
            low, high = domains[column]
            per_label = numeric_ncp(bounds[:, 0], bounds[:, 1], domain_low=low, domain_high=high)
        else:
            covered = _label_coverage(hierarchy)
            counts = np.array([_lookup(covered, hierarchy, str(u)) for u in uniques])
            per_label = categorical_ncp(counts, domain_size=len(hierarchy.leaves))
        columns.append(per_label[codes])
    return class_loss(np.ones(len(released), dtype=np.int64), columns, qis, suppressed=suppressed)


def _label_coverage(hierarchy: Hierarchy) -> dict[str, int]:
    covered: dict[str, int] = {}
    for names, counts in zip(hierarchy.label_names, hierarchy.label_coverage, strict=True):
        for code, name in enumerate(names):
            covered.setdefault(name, int(counts[code]))
    return covered


def _label_intervals(hierarchy: Hierarchy) -> dict[str, tuple[float, float]]:
    try:
        leaves = np.array([float(v) for v in hierarchy.leaves])
    except ValueError:
        raise HierarchyError(
            f"the leaves of {hierarchy.attribute} are not numbers, so it cannot be measured as numeric",
            hint=f"leave {hierarchy.attribute} out of numeric_domains to measure it as categorical",
        ) from None
    intervals: dict[str, tuple[float, float]] = {}
    for names, codes in zip(hierarchy.label_names, hierarchy.codes, strict=True):
        low = np.full(len(names), np.inf)
        high = np.full(len(names), -np.inf)
        np.minimum.at(low, codes, leaves)
        np.maximum.at(high, codes, leaves)
        for code, name in enumerate(names):
            intervals.setdefault(name, (float(low[code]), float(high[code])))
    return intervals


def _lookup(table: dict[str, T], hierarchy: Hierarchy, label: str) -> T:
    try:
        return table[label]
    except KeyError:
        raise HierarchyError(
            f"released value {label!r} of {hierarchy.attribute} is no label of its hierarchy",
            hint="measure the table with the hierarchies it was recoded with",
        ) from None


def class_loss(
    sizes: np.ndarray, columns: Sequence[np.ndarray], qis: Sequence[str], *, suppressed: int = 0
) -> tuple[float, dict[str, float]]:
    """GCP and each attribute's mean NCP over rows, from classes of ``sizes`` and one NCP per class in each
    of ``columns`` (one per QI): what Mondrian measures from its boxes without going back to the rows."""
    ncp = np.column_stack(columns) if columns else np.zeros((len(sizes), 0))
    rows = float(sizes.sum()) + suppressed
    per_attribute = {
        column: float((sizes @ ncp[:, j] + suppressed) / rows) if rows else 0.0
        for j, column in enumerate(qis)
    }
    return gcp(sizes, ncp, suppressed=suppressed), per_attribute
