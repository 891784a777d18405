"""Mondrian: multidimensional local recoding by recursive median cuts (spec k-anonymity-algorithms.md §5).

LeFevre, DeWitt, Ramakrishnan, "Mondrian Multidimensional k-Anonymity", ICDE 2006. The table is one
group; a group of at least 2k rows is cut in two on the quasi-identifier with the widest normalized range
(ties by column order), falling back to the next widest when a side would have fewer than k rows or when
the caller's ``allowable`` constraint (l-diversity, t-closeness …) refuses a side. Groups that cannot be
cut are the equivalence classes; each is published under one value per QI: its mean, lower median or
``[min-max]`` for numeric QIs, the lowest common ancestor (LCA) of its values for categorical QIs.

Numeric QIs are cut at the lower median (strict: every row equal to it goes left; relaxed: the first
⌊|P|/2⌋ rows, splitting ties). Categorical QIs are split by the children of the group's LCA: leaves are
laid out in depth-first order of the hierarchy (:func:`anonymizers.gcp.tree_positions`, so every subtree is
a run), and the cut is the boundary between two children nearest the middle that leaves k rows on each
side. Their "range" is the NCP of the LCA — what the published label costs in GCP. Why children rather
than the median in leaf order: a median that falls inside a subtree leaves both halves under the same LCA,
so the cut costs depth without lowering the label; on Adult at k = 5 (8 QIs, ARX hierarchies) the median
cut ends at GCP 0.140, the child cut at 0.064 (ARX's local recoding: 0.061) — 0.030 when categorical
classes are measured by the values they contain, the measure of anonypy's 0.032
(tests/bench/test_mondrian_bench.py).

Boxes and classes: the partition's groups are *boxes*; the published *classes* are the distinct published
rows. They differ when a cut between two children of an LCA leaves both sides under that same LCA (children
c1, c2 | c3, c4) with equal labels on the other QIs: an attacker sees one class, so the report's class
count, class sizes and risk merge such boxes (ARX's Adult at k = 5: 3,796 boxes, 3,792 classes), and the
boxes stay the partition (``partition``, the ``equivalence_class`` column, GCP — equal labels cost the same).

Speed: no recursion and no per-row Python. All groups still to be cut are processed together, one round
per tree depth: their rows are contiguous runs of one permutation, ranges come from ``ufunc.reduceat``, the
cut from one stable argsort of ``(group, rank)`` per attribute, and the chosen cut reorders each run in
place. Adult (30,162 rows, 8 QIs) takes about 0.15 s at k = 5. Only ``allowable`` is called per candidate
group, from Python, because it is the caller's Python function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from anonymizers.errors import AnonymizationError, InfeasibleError
from anonymizers.gcp import (
    categorical_ncp,
    lca_coverage,
    leaf_indices,
    numeric_values,
    partition_gcp,
    tree_positions,
)
from anonymizers.hierarchy import Hierarchy

Recoding = Literal["mean", "range", "median"]
Allowable = Callable[[np.ndarray], bool]
RECODINGS: tuple[Recoding, ...] = ("mean", "range", "median")
CategoricalLabel = Literal["lca", "set"]
CATEGORICAL_LABELS: tuple[CategoricalLabel, ...] = ("lca", "set")


@dataclass(frozen=True)
class MondrianSummary:
    """What the report records: published classes and boxes, class sizes, and the information loss."""

    classes: int  # distinct published rows (boxes under identical labels merged)
    boxes: int  # groups of the partition
    class_sizes: dict[int, int]  # published class size → number of classes of that size
    gcp: float
    ncp: dict[str, float]  # per QI, the mean NCP over rows


@dataclass(frozen=True)
class MondrianResult:
    table: pd.DataFrame  # the input's rows in the input's order, QIs recoded, plus the box column
    partition: tuple[np.ndarray, ...]  # row positions (0-based, ascending) of each box
    classes: tuple[np.ndarray, ...]  # row positions (0-based, ascending) of each published class
    summary: MondrianSummary


def mondrian(
    data: pd.DataFrame | Mapping[str, np.ndarray],
    qis: Sequence[str],
    *,
    k: int,
    hierarchies: Mapping[str, Hierarchy] | None = None,
    recoding: Recoding = "mean",
    relaxed: bool = False,
    allowable: Allowable | None = None,
    class_column: str = "equivalence_class",
    categorical: CategoricalLabel = "lca",
) -> MondrianResult:
    """k-anonymize ``data`` on ``qis`` by Mondrian; QIs with a hierarchy are categorical, others numeric.

    ``relaxed`` cuts at ⌊|P|/2⌋ rows in sorted order, splitting ties, instead of at the median value.
    ``allowable(rows)`` gets the 0-based row positions (``iloc``) of a candidate class; it must hold for
    both sides of every cut and for the whole table (else :class:`InfeasibleError`). Columns other than the
    QIs pass through unchanged. Nothing is suppressed: with at least k rows Mondrian always reaches k.
    ``categorical="set"`` publishes each class's categorical values as a set (``{Private,State-gov}``)
    instead of their lowest common ancestor, and measures GCP the same way.
    """
    if categorical not in CATEGORICAL_LABELS:
        raise AnonymizationError(f"unknown categorical label {categorical!r}", hint="use lca or set")
    frame = data if isinstance(data, pd.DataFrame) else pd.DataFrame(data)
    trees = dict(hierarchies or {})
    _check(frame, qis, k=k, recoding=recoding, class_column=class_column)
    dimensions = [_dimension(frame, column, trees.get(column)) for column in qis]
    if allowable is not None and not allowable(np.arange(len(frame))):
        raise InfeasibleError(
            "the whole table does not meet the allowable constraint, so no partition of it can",
            hint="relax the diversity or closeness requirement",
        )
    order, sizes = _partition(dimensions, len(frame), k=k, relaxed=relaxed, allowable=allowable)
    classes = np.empty(len(frame), dtype=np.int64)
    classes[order] = np.repeat(np.arange(len(sizes)), sizes)
    table = frame.copy()
    for column, dimension in zip(qis, dimensions, strict=True):
        table[column] = _recode(frame[column], dimension, classes, order, sizes, recoding, categorical)
    table[class_column] = classes
    score, ncp = partition_gcp(frame, classes, qis, trees, categorical=categorical)
    published = _published_class(table, qis, order, sizes)[classes]
    class_sizes = np.bincount(published)
    histogram = np.bincount(class_sizes)
    summary = MondrianSummary(
        classes=len(class_sizes),
        boxes=len(sizes),
        class_sizes={int(s): int(histogram[s]) for s in np.flatnonzero(histogram)},
        gcp=score,
        ncp=ncp,
    )
    by_class = np.argsort(published, kind="stable")
    return MondrianResult(
        table,
        tuple(np.split(order, np.cumsum(sizes)[:-1])),
        tuple(np.split(by_class, np.cumsum(class_sizes)[:-1])),
        summary,
    )


def _published_class(
    table: pd.DataFrame, qis: Sequence[str], order: np.ndarray, sizes: np.ndarray
) -> np.ndarray:
    """Per box, the number of its published class: boxes whose recoded rows are identical share one.
    Compares one row per box, not every row."""
    first_rows = order[np.cumsum(sizes) - sizes]
    labels = table[list(qis)].iloc[first_rows]
    return labels.groupby(list(qis), sort=False, dropna=False).ngroup().to_numpy()


def _check(frame: pd.DataFrame, qis: Sequence[str], *, k: int, recoding: str, class_column: str) -> None:
    if k < 1:
        raise AnonymizationError(f"k must be at least 1 (got {k})")
    if not qis:
        raise AnonymizationError("Mondrian needs at least one quasi-identifier")
    missing = [q for q in qis if q not in frame.columns]
    if missing:
        raise AnonymizationError(f"quasi-identifier {missing[0]} is not a column of the table")
    if len(set(qis)) != len(qis):
        raise AnonymizationError("a quasi-identifier is listed twice")
    if recoding not in RECODINGS:
        raise AnonymizationError(f"unknown recoding {recoding!r}", hint="use mean, range or median")
    if class_column in frame.columns:
        raise AnonymizationError(
            f"the table already has a column {class_column}", hint="pass another class_column"
        )
    if len(frame) < k:
        raise InfeasibleError(
            f"the table has {len(frame)} rows, fewer than k = {k}", hint="lower k or add rows"
        )


class _NumericDimension:
    """A numeric QI: ranks of its distinct values; width = (max − min)/(table range); strict median cut."""

    def __init__(self, values: np.ndarray) -> None:
        self.distinct, inverse = np.unique(values, return_inverse=True)
        self.ranks = inverse.astype(np.int64)
        self.size = len(self.distinct)
        self.span = float(self.distinct[-1] - self.distinct[0])

    def width(self, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        if self.span <= 0:
            return np.zeros(len(low))
        return (self.distinct[high] - self.distinct[low]) / self.span

    def cut(self, ranks: np.ndarray, groups: _Groups, *, k: int, relaxed: bool) -> np.ndarray:
        """Strict: every row up to the lower median value goes left. Relaxed: the first ⌊|P|/2⌋ rows."""
        if relaxed:
            return groups.sizes // 2
        keys = groups.member * self.size + ranks
        median = keys[groups.offsets + (groups.sizes + 1) // 2 - 1]
        return np.searchsorted(keys, median, side="right") - groups.offsets


class _TreeDimension:
    """A categorical QI: ranks are depth-first positions; width = NCP of the LCA; cut between its children."""

    def __init__(self, hierarchy: Hierarchy, values: pd.Series) -> None:
        self.hierarchy = hierarchy
        positions = tree_positions(hierarchy)
        self.leaf_at = np.argsort(positions)
        self.ranks = positions[leaf_indices(hierarchy, values)]
        self.size = len(hierarchy.leaves)
        self.codes = np.stack(hierarchy.codes)

    def width(self, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        _, covered = lca_coverage(self.hierarchy, self.leaf_at[low], self.leaf_at[high])
        return categorical_ncp(covered, domain_size=self.size)

    def cut(self, ranks: np.ndarray, groups: _Groups, *, k: int, relaxed: bool) -> np.ndarray:
        """The boundary between two children of the group's LCA nearest the middle with ≥ k rows each side.

        Relaxed, when no such boundary exists: the first ⌊|P|/2⌋ rows in tree order.
        """
        level, _ = lca_coverage(self.hierarchy, self.leaf_at[groups.low], self.leaf_at[groups.high])
        child = self.codes[np.maximum(level - 1, 0)[groups.member], self.leaf_at[ranks]]
        member = groups.member
        after = np.flatnonzero((member[1:] == member[:-1]) & (child[1:] != child[:-1])) + 1
        owner = member[after]
        left = after - groups.offsets[owner]
        fits = (left >= k) & (groups.sizes[owner] - left >= k)
        owner, left = owner[fits], left[fits]
        best = np.lexsort((left, np.abs(2 * left - groups.sizes[owner]), owner))
        first = best[np.r_[True, owner[best][1:] != owner[best][:-1]]] if len(best) else best
        lefts = np.zeros(len(groups.sizes), dtype=np.int64)
        lefts[owner[first]] = left[first]
        return np.where(lefts > 0, lefts, groups.sizes // 2) if relaxed else lefts


@dataclass(frozen=True)
class _Groups:
    """The groups of one round laid end to end (sizes, offsets, each position's group) and one attribute's
    lowest and highest rank in each group."""

    sizes: np.ndarray
    offsets: np.ndarray
    member: np.ndarray
    low: np.ndarray
    high: np.ndarray


_Dimension = _NumericDimension | _TreeDimension


def _dimension(frame: pd.DataFrame, column: str, hierarchy: Hierarchy | None) -> _Dimension:
    if hierarchy is None:
        return _NumericDimension(numeric_values(frame, column))
    return _TreeDimension(hierarchy, frame[column])


def _partition(
    dimensions: Sequence[_Dimension], rows: int, *, k: int, relaxed: bool, allowable: Allowable | None
) -> tuple[np.ndarray, np.ndarray]:
    """Row order and class sizes: class c is ``order[sum(sizes[:c]) : sum(sizes[:c+1])]``, rows ascending."""
    order = np.arange(rows)
    starts, sizes = np.array([0]), np.array([rows])
    done_starts, done_sizes = [], []
    while len(starts):
        small = sizes < 2 * k
        done_starts.append(starts[small])
        done_sizes.append(sizes[small])
        starts, sizes = starts[~small], sizes[~small]
        if not len(starts):
            break
        cut, left = _cut_round(order, starts, sizes, dimensions, k=k, relaxed=relaxed, allowable=allowable)
        done_starts.append(starts[~cut])
        done_sizes.append(sizes[~cut])
        starts, sizes, left = starts[cut], sizes[cut], left[cut]
        starts = np.concatenate([starts, starts + left])
        sizes = np.concatenate([left, sizes - left])
    final_starts, final_sizes = np.concatenate(done_starts), np.concatenate(done_sizes)
    by_start = np.argsort(final_starts)
    final_sizes = final_sizes[by_start]
    members = np.repeat(np.arange(len(final_sizes)), final_sizes)
    return order[np.lexsort((order, members))], final_sizes


def _cut_round(
    order: np.ndarray,
    starts: np.ndarray,
    sizes: np.ndarray,
    dimensions: Sequence[_Dimension],
    *,
    k: int,
    relaxed: bool,
    allowable: Allowable | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Cut every group (runs of ``order``) once if it can be cut; reorders ``order`` so left rows come first.

    Returns whether each group was cut and its left size.
    """
    offsets = np.cumsum(sizes) - sizes
    positions = np.repeat(starts - offsets, sizes) + np.arange(int(sizes.sum()))
    member = np.repeat(np.arange(len(sizes)), sizes)
    rows = order[positions]
    widths = np.empty((len(sizes), len(dimensions)))
    lefts = np.empty((len(sizes), len(dimensions)), dtype=np.int64)
    sorts = []
    for j, dimension in enumerate(dimensions):
        ranks = dimension.ranks[rows]
        low, high = np.minimum.reduceat(ranks, offsets), np.maximum.reduceat(ranks, offsets)
        groups = _Groups(sizes, offsets, member, low, high)
        widths[:, j] = dimension.width(low, high)
        sort = np.argsort(member * dimension.size + ranks, kind="stable")
        sorts.append(sort)
        lefts[:, j] = dimension.cut(ranks[sort], groups, k=k, relaxed=relaxed)
    valid = (lefts >= k) & (sizes[:, None] - lefts >= k) & (widths > 0)
    preference = np.argsort(-widths, axis=1, kind="stable")
    if allowable is None:
        ranked = np.take_along_axis(valid, preference, axis=1)
        chosen = np.where(ranked.any(axis=1), preference[np.arange(len(sizes)), ranked.argmax(axis=1)], -1)
    else:
        chosen = _allowed_cuts(rows, offsets, sizes, lefts, valid, preference, sorts, allowable)
    reordered = rows.copy()
    for j, sort in enumerate(sorts):
        moved = chosen[member] == j
        reordered[moved] = rows[sort[moved]]
    order[positions] = reordered
    cut = chosen >= 0
    return cut, np.where(cut, lefts[np.arange(len(sizes)), np.maximum(chosen, 0)], 0)


def _allowed_cuts(
    rows: np.ndarray,
    offsets: np.ndarray,
    sizes: np.ndarray,
    lefts: np.ndarray,
    valid: np.ndarray,
    preference: np.ndarray,
    sorts: Sequence[np.ndarray],
    allowable: Allowable,
) -> np.ndarray:
    """Per group, the first attribute (widest first) whose k-valid cut leaves both sides allowable, or −1."""
    chosen = np.full(len(sizes), -1)
    for g in np.flatnonzero(valid.any(axis=1)):
        start, end = offsets[g], offsets[g] + sizes[g]
        for j in preference[g]:
            if not valid[g, j]:
                continue
            middle = start + lefts[g, j]
            if allowable(rows[sorts[j][start:middle]]) and allowable(rows[sorts[j][middle:end]]):
                chosen[g] = j
                break
    return chosen


def _recode(
    values: pd.Series,
    dimension: _Dimension,
    classes: np.ndarray,
    order: np.ndarray,
    sizes: np.ndarray,
    recoding: Recoding,
    categorical: CategoricalLabel,
) -> np.ndarray:
    """The published value of every row: its class's LCA label (or the set of its values), or mean /
    lower median / ``[min-max]``."""
    starts = np.cumsum(sizes) - sizes
    ranks = dimension.ranks[order]
    low, high = np.minimum.reduceat(ranks, starts), np.maximum.reduceat(ranks, starts)
    if isinstance(dimension, _TreeDimension) and categorical == "set":
        return _value_sets(dimension, ranks, starts)[classes]
    if isinstance(dimension, _TreeDimension):
        return _ancestor_labels(dimension, low, high)[classes]
    if recoding == "mean":
        return (np.bincount(classes, weights=values.to_numpy(dtype=np.float64)) / sizes)[classes]
    if recoding == "median":
        middle = np.sort(classes * dimension.size + dimension.ranks)[starts + (sizes + 1) // 2 - 1]
        return dimension.distinct[middle % dimension.size].astype(values.dtype)[classes]
    bounds = zip(dimension.distinct[low], dimension.distinct[high], strict=True)
    return np.array([f"[{_text(a)}-{_text(b)}]" for a, b in bounds], dtype=object)[classes]


def _value_sets(dimension: _TreeDimension, ranks: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per class, ``{a,b}``: its distinct values in tree order (one value: the value itself), as anonypy
    publishes them — less loss than the LCA label when a class holds a few values of a large subtree."""
    leaves = dimension.hierarchy.leaves
    labels = np.empty(len(starts), dtype=object)
    for index, run in enumerate(np.split(ranks, starts[1:])):
        values = [leaves[dimension.leaf_at[r]] for r in np.unique(run)]
        labels[index] = values[0] if len(values) == 1 else "{" + ",".join(values) + "}"
    return labels


def _ancestor_labels(dimension: _TreeDimension, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Per class, the label of the LCA of its first and last leaf in tree order (= of all its leaves)."""
    hierarchy = dimension.hierarchy
    first = dimension.leaf_at[low]
    level, _ = lca_coverage(hierarchy, first, dimension.leaf_at[high])
    labels = np.empty(len(low), dtype=object)
    for h in np.unique(level):
        here = level == h
        names = np.asarray(hierarchy.label_names[h], dtype=object)
        labels[here] = names[hierarchy.codes[h][first[here]]]
    return labels


def _text(number: float) -> str:
    """Integers without a decimal point, as the engine prints them; other numbers in shortest form."""
    return str(int(number)) if float(number).is_integer() else repr(float(number))
