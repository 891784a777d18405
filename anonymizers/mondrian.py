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

Codes, not values: every QI is one small integer per row — the rank of its value among the column's
distinct values (numeric) or its leaf's depth-first position (categorical), in the smallest integer type
that holds it (one byte for up to 128 distinct values). Labels are made per box and per distinct label,
never per row: each QI's labels are a table of distinct labels and, per box, an index into it; the
published classes are the boxes with equal indexes. :func:`mondrian_source` has the engine encode the
columns (:meth:`TableSource.codes`) and :func:`write_release` has it write the release (the table
``POSITIONAL JOIN`` one label code per row and QI), so no value of the table becomes a Python object:
85 bytes per row at the peak for ten million rows with 8 QIs (docs/benchmarks.md), where a DataFrame of
the rows costs about 1 KB.

Speed: no recursion and no per-row Python. All groups still to be cut are processed together, one round
per tree depth, in a compact working set (their row numbers and codes, group after group): ranges come
from ``ufunc.reduceat`` over contiguous runs, a group's cut on an attribute from one stable argsort of
``(group, rank)`` — computed only for the groups that try that attribute (widest first: most groups are
cut on their first try) — and finished groups leave the working set for their place in the box order.
Adult (30,162 rows, 8 QIs) takes about 0.1 s at k = 5, ten million rows about 40 s. Only ``allowable`` is
called per candidate group, from Python, because it is the caller's Python function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

import numpy as np
import pandas as pd
from sqlglot import exp

from anonymizers.errors import AnonymizationError, InfeasibleError
from anonymizers.gcp import (
    categorical_ncp,
    class_loss,
    lca_coverage,
    leaf_indices,
    numeric_ncp,
    numeric_values,
    tree_positions,
)
from anonymizers.hierarchy import Hierarchy
from anonymizers.output import OutputTarget, write_query
from anonymizers.source import TableSource, as_text, code_dtype, quoted_column, quoted_table

Recoding = Literal["mean", "range", "median"]
Allowable = Callable[[np.ndarray], bool]
RECODINGS: tuple[Recoding, ...] = ("mean", "range", "median")
CategoricalLabel = Literal["lca", "set"]
CATEGORICAL_LABELS: tuple[CategoricalLabel, ...] = ("lca", "set")
_ROWS = "veil_mondrian_rows"
_ROW_ALIAS = "veil_t"


@dataclass(frozen=True)
class MondrianSummary:
    """What the report records: published classes and boxes, class sizes, and the information loss."""

    classes: int  # distinct published rows (boxes under identical labels merged)
    boxes: int  # groups of the partition
    class_sizes: dict[int, int]  # published class size → number of classes of that size
    gcp: float
    ncp: dict[str, float]  # per QI, the mean NCP over rows


@dataclass(frozen=True)
class Labels:
    """One QI's published labels: ``values`` holds the distinct labels (text, or numbers for mean and
    median recoding), ``index`` each box's position in it."""

    index: np.ndarray
    values: np.ndarray

    @property
    def text(self) -> bool:
        return self.values.dtype == object

    def of_rows(self, box: np.ndarray) -> np.ndarray | pd.Categorical:
        """Every row's label from its box: text as a categorical (one code per row), numbers as numbers."""
        codes = self.index.astype(code_dtype(max(len(self.values) - 1, 0)))[box]
        if self.text:
            return pd.Categorical.from_codes(codes, categories=pd.Index(self.values, dtype=object))
        return self.values[codes]


@dataclass(frozen=True)
class MondrianRelease:
    """A Mondrian release as codes: each row's box, each box's published class, each QI's labels."""

    qis: tuple[str, ...]
    box: np.ndarray  # per row (in the table's order), its box: 0-based, int32 for fewer than 2**31 rows
    box_sizes: np.ndarray
    box_class: np.ndarray  # per box, its published class (numbered in order of first appearance)
    labels: tuple[Labels, ...]  # per QI, in ``qis`` order
    summary: MondrianSummary

    def class_sizes(self) -> np.ndarray:
        """Rows per published class, by class number."""
        return np.bincount(self.box_class, weights=self.box_sizes).astype(np.int64)

    def row_classes(self) -> np.ndarray:
        """Every row's published class."""
        return self.box_class.astype(self.box.dtype)[self.box]


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
    frame = data if isinstance(data, pd.DataFrame) else pd.DataFrame(data)
    trees = dict(hierarchies or {})
    _check(qis, list(frame.columns), k=k, recoding=recoding, categorical=categorical)
    if class_column in frame.columns:
        raise AnonymizationError(
            f"the table already has a column {class_column}", hint="pass another class_column"
        )
    _check_rows(len(frame), k)
    dimensions, ranks = zip(
        *(_frame_dimension(frame, column, trees.get(column)) for column in qis), strict=True
    )
    release = _release(
        qis,
        dimensions,
        list(ranks),
        k=k,
        recoding=recoding,
        relaxed=relaxed,
        allowable=allowable,
        categorical=categorical,
    )
    table = frame.copy()
    for column, labels in zip(qis, release.labels, strict=True):
        table[column] = labels.values[labels.index][release.box]
    table[class_column] = release.box.astype(np.int64)
    by_box = np.argsort(release.box, kind="stable")
    by_class = np.argsort(release.row_classes(), kind="stable")
    return MondrianResult(
        table,
        tuple(np.split(by_box, np.cumsum(release.box_sizes)[:-1])),
        tuple(np.split(by_class, np.cumsum(release.class_sizes())[:-1])),
        release.summary,
    )


def mondrian_source(
    source: TableSource,
    qis: Sequence[str],
    *,
    k: int,
    hierarchies: Mapping[str, Hierarchy] | None = None,
    recoding: Recoding = "mean",
    relaxed: bool = False,
    allowable: Allowable | None = None,
    categorical: CategoricalLabel = "lca",
) -> MondrianRelease:
    """:func:`mondrian` on a table in its engine, reading codes instead of rows (:meth:`TableSource.codes`).

    Same partition, labels, classes and GCP as :func:`mondrian` on the same rows; categorical values are
    matched to hierarchy leaves as the engine's text of them (``CAST(col AS VARCHAR)``), as global recoding
    does. ``allowable`` gets row numbers in the table's row order. DuckDB sources only (a DuckDB file, CSV,
    Parquet): the rows must be numbered in the same order when the release is written
    (:func:`write_release`), which DuckDB guarantees and PostgreSQL does not.
    """
    if source.dialect != "duckdb":
        raise AnonymizationError(
            "Mondrian on codes reads DuckDB sources (a DuckDB file, CSV or Parquet)",
            hint="run mondrian() on source.dataframe(...) for a PostgreSQL table",
        )
    trees = dict(hierarchies or {})
    _check(qis, source.column_names(), k=k, recoding=recoding, categorical=categorical)
    _check_rows(source.row_count(), k)
    _refuse_nulls(source, qis)
    dictionaries, dimensions = {}, {}
    for column in qis:
        dictionaries[column], dimensions[column] = _source_dictionary(source, column, trees.get(column))
    codes = source.codes(dictionaries, text=[q for q in qis if q in trees])
    return _release(
        qis,
        [dimensions[q] for q in qis],
        [codes.pop(q) for q in qis],
        k=k,
        recoding=recoding,
        relaxed=relaxed,
        allowable=allowable,
        categorical=categorical,
    )


def write_release(
    source: TableSource, release: MondrianRelease, target: OutputTarget, *, replace: bool = False
) -> None:
    """Write the released table from the engine: every column of ``source`` in order, each QI replaced by
    its row's label. Python registers one label code per row and QI (a categorical for text, numbers for
    means and medians) and the engine pairs them with the table's rows by position (``POSITIONAL JOIN``),
    in the order :func:`mondrian_source` read them."""
    if source.dialect != "duckdb":
        raise AnonymizationError("write_release writes from DuckDB sources (a DuckDB file, CSV or Parquet)")
    rows = source.row_count()
    if rows != len(release.box):
        raise AnonymizationError(
            f"the release has {len(release.box)} rows, the table {rows}",
            hint="write a release with the table it was made from",
        )
    labels = pd.DataFrame(
        {column: qi.of_rows(release.box) for column, qi in zip(release.qis, release.labels, strict=True)}
    )
    query = exp.select().from_(exp.alias_(source.table, _ROW_ALIAS, table=True))
    query = query.join(exp.Join(this=exp.alias_(quoted_table(_ROWS), "r", table=True), method="POSITIONAL"))
    for column in source.column_names():
        if column not in release.qis:
            query = query.select(quoted_column(column, _ROW_ALIAS).as_(column, quoted=True))
        elif release.labels[release.qis.index(column)].text:
            query = query.select(as_text(quoted_column(column, "r")).as_(column, quoted=True))
        else:
            query = query.select(quoted_column(column, "r").as_(column, quoted=True))
    source.register(_ROWS, labels)
    try:
        write_query(source, query, target, replace=replace)
    finally:
        source.unregister(_ROWS)


def _check(qis: Sequence[str], columns: Sequence[str], *, k: int, recoding: str, categorical: str) -> None:
    if categorical not in CATEGORICAL_LABELS:
        raise AnonymizationError(f"unknown categorical label {categorical!r}", hint="use lca or set")
    if k < 1:
        raise AnonymizationError(f"k must be at least 1 (got {k})")
    if not qis:
        raise AnonymizationError("Mondrian needs at least one quasi-identifier")
    missing = [q for q in qis if q not in columns]
    if missing:
        raise AnonymizationError(f"quasi-identifier {missing[0]} is not a column of the table")
    if len(set(qis)) != len(qis):
        raise AnonymizationError("a quasi-identifier is listed twice")
    if recoding not in RECODINGS:
        raise AnonymizationError(f"unknown recoding {recoding!r}", hint="use mean, range or median")


def _check_rows(rows: int, k: int) -> None:
    if rows < k:
        raise InfeasibleError(f"the table has {rows} rows, fewer than k = {k}", hint="lower k or add rows")


class _NumericDimension:
    """A numeric QI, coded by the rank of each value among the distinct values; width = (max − min)/(table
    range); strict median cut. ``dtype`` is the column's type, in which a median is published."""

    def __init__(self, distinct: np.ndarray, dtype: np.dtype) -> None:
        self.distinct = distinct
        self.dtype = dtype
        self.size = len(distinct)
        self.span = float(distinct[-1] - distinct[0])

    def width(self, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        if self.span <= 0:
            return np.zeros(len(low))
        return (self.distinct[high] - self.distinct[low]) / self.span

    def ncp(self, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        return numeric_ncp(
            self.distinct[low],
            self.distinct[high],
            domain_low=float(self.distinct[0]),
            domain_high=float(self.distinct[-1]),
        )

    def cut(self, ranks: np.ndarray, groups: _Groups, *, k: int, relaxed: bool) -> np.ndarray:
        """Strict: every row up to the lower median value goes left. Relaxed: the first ⌊|P|/2⌋ rows."""
        if relaxed:
            return groups.sizes // 2
        median = ranks[groups.offsets + (groups.sizes + 1) // 2 - 1]
        return np.add.reduceat(ranks <= median[groups.member], groups.offsets, dtype=np.int64)


class _TreeDimension:
    """A categorical QI, coded by each leaf's depth-first position; width = NCP of the LCA; cut between
    its children."""

    def __init__(self, hierarchy: Hierarchy) -> None:
        self.hierarchy = hierarchy
        self.leaf_at = np.argsort(tree_positions(hierarchy))
        self.size = len(hierarchy.leaves)
        self.codes = np.stack(hierarchy.codes).astype(code_dtype(self.size - 1))

    def width(self, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        _, covered = lca_coverage(self.hierarchy, self.leaf_at[low], self.leaf_at[high])
        return categorical_ncp(covered, domain_size=self.size)

    ncp = width  # the width of a categorical attribute is the NCP of its LCA label

    def cut(self, ranks: np.ndarray, groups: _Groups, *, k: int, relaxed: bool) -> np.ndarray:
        """The boundary between two children of the group's LCA nearest the middle with ≥ k rows each side.

        Relaxed, when no such boundary exists: the first ⌊|P|/2⌋ rows in tree order.
        """
        level, _ = lca_coverage(self.hierarchy, self.leaf_at[groups.low], self.leaf_at[groups.high])
        below = np.maximum(level - 1, 0).astype(code_dtype(self.hierarchy.height))
        child = self.codes[below[groups.member], self.leaf_at[ranks]]
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
    """Groups laid end to end (sizes, offsets, each position's group) and one attribute's lowest and highest
    rank in each group."""

    sizes: np.ndarray
    offsets: np.ndarray
    member: np.ndarray
    low: np.ndarray
    high: np.ndarray


_Dimension = _NumericDimension | _TreeDimension


def _frame_dimension(
    frame: pd.DataFrame, column: str, hierarchy: Hierarchy | None
) -> tuple[_Dimension, np.ndarray]:
    """A column's dimension and every row's code."""
    if hierarchy is None:
        distinct, ranks = np.unique(numeric_values(frame, column), return_inverse=True)
        return _NumericDimension(distinct, frame[column].dtype), ranks.astype(code_dtype(len(distinct) - 1))
    positions = tree_positions(hierarchy)[leaf_indices(hierarchy, frame[column])]
    return _TreeDimension(hierarchy), positions.astype(code_dtype(len(hierarchy.leaves) - 1))


def _refuse_nulls(source: TableSource, qis: Sequence[str]) -> None:
    """NULLs would fall out of the engine's join: refuse them with the message the DataFrame path gives."""
    for column, nulls in source.null_counts(qis).items():
        if nulls:
            raise AnonymizationError(
                f"quasi-identifier {column} has missing values",
                hint="drop or impute them first, or give the column a hierarchy with a leaf for them",
            )


def _source_dictionary(
    source: TableSource, column: str, hierarchy: Hierarchy | None
) -> tuple[pd.DataFrame, _Dimension]:
    """A column's value → code table for the engine, and its dimension.

    Categorical: each distinct text's depth-first leaf position (an unknown value raises, naming it).
    Numeric: each distinct value's rank among the distinct values as floats (as :func:`numeric_values`
    reads them, so the ranks are those of the DataFrame path)."""
    if hierarchy is not None:
        texts = source.distinct_values(column)
        positions = tree_positions(hierarchy)
        codes = np.array([positions[hierarchy.leaf_index(t)] for t in texts], dtype=np.int64)
        return pd.DataFrame({"value": texts, "code": codes}), _TreeDimension(hierarchy)
    values = source.distinct_values(column, as_text_values=False)
    if not all(isinstance(v, int | float | Decimal) and not isinstance(v, bool) for v in values):
        raise AnonymizationError(
            f"quasi-identifier {column} is not numeric",
            hint=f"give {column} a hierarchy to treat it as categorical",
        )
    native = np.asarray(values)
    distinct, ranks = np.unique(native.astype(np.float64), return_inverse=True)
    dtype = native.dtype if native.dtype.kind in "iuf" else np.dtype(np.float64)
    return pd.DataFrame({"value": native, "code": ranks.astype(np.int64)}), _NumericDimension(distinct, dtype)


def _release(
    qis: Sequence[str],
    dimensions: Sequence[_Dimension],
    ranks: list[np.ndarray],
    *,
    k: int,
    recoding: Recoding,
    relaxed: bool,
    allowable: Allowable | None,
    categorical: CategoricalLabel,
) -> MondrianRelease:
    """Partition, labels, published classes and loss, all from the codes: ``ranks`` holds every row's code
    per dimension; it is consumed (emptied), so that the partition can free each array once it has moved
    its codes."""
    rows = len(ranks[0])
    if allowable is not None and not allowable(np.arange(rows)):
        raise InfeasibleError(
            "the whole table does not meet the allowable constraint, so no partition of it can",
            hint="relax the diversity or closeness requirement",
        )
    order, sizes, by_box = _partition(dimensions, ranks, k=k, relaxed=relaxed, allowable=allowable)
    box = np.empty(rows, dtype=order.dtype)
    box[order] = np.repeat(np.arange(len(sizes), dtype=order.dtype), sizes)
    starts = np.cumsum(sizes) - sizes
    labels, ncp = [], []
    for dimension, codes in zip(dimensions, by_box, strict=True):
        low, high = _bounds(codes, starts)
        if isinstance(dimension, _TreeDimension) and categorical == "set":
            set_labels, set_ncp = _value_sets(dimension, codes, sizes)
            labels.append(set_labels)
            ncp.append(set_ncp)
            continue
        if isinstance(dimension, _TreeDimension):
            labels.append(_ancestor_labels(dimension, low, high))
        else:
            labels.append(_numeric_labels(dimension, codes, order, box, sizes, low, high, recoding))
        ncp.append(dimension.ncp(low, high))
    del order, by_box
    box_class = _published_classes(labels, len(sizes))
    class_sizes = np.bincount(box_class, weights=sizes).astype(np.int64)
    histogram = np.bincount(class_sizes)
    score, per_qi = class_loss(sizes, ncp, qis)
    summary = MondrianSummary(
        classes=len(class_sizes),
        boxes=len(sizes),
        class_sizes={int(s): int(histogram[s]) for s in np.flatnonzero(histogram)},
        gcp=score,
        ncp=per_qi,
    )
    return MondrianRelease(tuple(qis), box, sizes, box_class, tuple(labels), summary)


def _bounds(ranks: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest rank of each run of ``ranks`` starting at ``offsets``."""
    return np.minimum.reduceat(ranks, offsets), np.maximum.reduceat(ranks, offsets)


def _runs(starts: np.ndarray, sizes: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The positions ``start, start + 1, …`` of every run, run after run."""
    offsets = np.cumsum(sizes) - sizes
    return np.repeat((starts - offsets).astype(dtype), sizes) + np.arange(int(sizes.sum()), dtype=dtype)


def _group_sort(member: np.ndarray, ranks: np.ndarray, size: int) -> np.ndarray:
    """The stable sort of positions by (group, rank), for ranks below ``size``. The key ``group · size +
    rank`` is built in the narrowest unsigned type that holds it: less memory, and keys of 8 or 16 bits
    are sorted by radix in linear time (the first rounds of a partition, when groups are few and large)."""
    groups = int(member[-1]) + 1
    highest = groups * size - 1
    kind = next(t for t in (np.uint8, np.uint16, np.uint32, np.uint64) if highest <= np.iinfo(t).max)
    keys = ranks.astype(kind)
    if groups > 1:
        keys += member.astype(kind) * kind(size)
    return np.argsort(keys, kind="stable")


def _partition(
    dimensions: Sequence[_Dimension],
    ranks: list[np.ndarray],
    *,
    k: int,
    relaxed: bool,
    allowable: Allowable | None,
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Row order, box sizes and every dimension's codes in that order: box b is the run
    ``order[sum(sizes[:b]) : sum(sizes[:b+1])]``, boxes numbered by where they start.

    The groups still to be cut live in a compact working set — their row numbers and codes laid end to
    end, group after group — and each group knows where it starts in ``order``. A round cuts every
    group, moves the groups that are finished (fewer than 2k rows, or no valid cut) to their place in
    ``order`` and gathers the rest into the next working set, in one pass over each array. Why not keep
    the codes in row order and read them through ``order``: after a few rounds that is one random memory
    access per row, attribute and round, which at ten million rows is most of the time."""
    rows = len(ranks[0])
    index = np.dtype(np.int32 if rows < 2**31 else np.int64)
    if rows < 2 * k:
        return np.arange(rows, dtype=index), np.array([rows]), ranks.copy()
    order = np.empty(rows, dtype=index)
    by_box = [np.empty(rows, dtype=r.dtype) for r in ranks]
    work_rows, work_ranks = np.arange(rows, dtype=index), ranks.copy()
    ranks.clear()
    starts, sizes = np.array([0]), np.array([rows])
    done_starts, done_sizes = [], []
    while len(sizes):
        offsets = np.cumsum(sizes) - sizes
        lefts, permutation = _cut_round(
            work_rows, work_ranks, offsets, sizes, dimensions, k=k, relaxed=relaxed, allowable=allowable
        )
        cut = lefts > 0
        starts = np.concatenate([starts[~cut], starts[cut], starts[cut] + lefts[cut]])
        offsets = np.concatenate([offsets[~cut], offsets[cut], offsets[cut] + lefts[cut]])
        sizes = np.concatenate([sizes[~cut], lefts[cut], sizes[cut] - lefts[cut]])
        done = sizes < 2 * k
        done[: int((~cut).sum())] = True  # the groups that were not cut come first
        moving = permutation[_runs(offsets[done], sizes[done], index)]
        placed = _runs(starts[done], sizes[done], index)
        order[placed] = work_rows[moving]
        for box_codes, codes in zip(by_box, work_ranks, strict=True):
            box_codes[placed] = codes[moving]
        done_starts.append(starts[done])
        done_sizes.append(sizes[done])
        starts, offsets, sizes = starts[~done], offsets[~done], sizes[~done]
        moving = permutation[_runs(offsets, sizes, index)]
        del permutation, placed
        work_rows = work_rows[moving]
        for j, codes in enumerate(work_ranks):  # one array at a time: the old one is freed at once
            work_ranks[j] = codes[moving]
        del codes
    final_starts, final_sizes = np.concatenate(done_starts), np.concatenate(done_sizes)
    return order, final_sizes[np.argsort(final_starts)], by_box


def _cut_round(
    rows: np.ndarray,
    ranks: Sequence[np.ndarray],
    offsets: np.ndarray,
    sizes: np.ndarray,
    dimensions: Sequence[_Dimension],
    *,
    k: int,
    relaxed: bool,
    allowable: Allowable | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Cut every group of the working set once if it can be cut. Returns each group's left size (0 when
    it is not cut) and the permutation of the working set that puts each cut group's left side first.

    A group tries its attributes widest first (ties in column order) and takes the first whose cut
    leaves k rows (and allowable rows) on each side; only then is that attribute's cut computed for it,
    so most groups cost one sort of their rows rather than one per attribute."""
    widths = np.column_stack([d.width(*_bounds(r, offsets)) for d, r in zip(dimensions, ranks, strict=True)])
    preference = np.argsort(-widths, axis=1, kind="stable")
    lefts = np.zeros(len(sizes), dtype=np.int64)
    permutation = np.arange(len(rows), dtype=rows.dtype)
    where = _Round(rows, offsets, sizes, permutation)
    trying = np.ones(len(sizes), dtype=bool)
    groups = np.arange(len(sizes))
    for place in range(len(dimensions)):
        attribute = preference[:, place]
        trying &= widths[groups, attribute] > 0  # widths descend: no wider attribute is left to try
        for j, dimension in enumerate(dimensions):
            picked = np.flatnonzero(trying & (attribute == j))
            if len(picked):
                left = _cut_groups(
                    dimension, ranks[j], where, picked, k=k, relaxed=relaxed, allowable=allowable
                )
                lefts[picked] = left
                trying[picked[left > 0]] = False
    return lefts, permutation


@dataclass(frozen=True)
class _Round:
    """The working set of one round: its row numbers, each group's ``offsets`` and ``sizes`` in it, and the
    ``permutation`` of it that the round's cuts fill in."""

    rows: np.ndarray
    offsets: np.ndarray
    sizes: np.ndarray
    permutation: np.ndarray


def _cut_groups(
    dimension: _Dimension,
    ranks: np.ndarray,
    where: _Round,
    picked: np.ndarray,
    *,
    k: int,
    relaxed: bool,
    allowable: Allowable | None,
) -> np.ndarray:
    """Cut the ``picked`` groups on one attribute (``ranks``: its codes in the working set) where that
    leaves ≥ k rows (and allowable rows) on each side: their part of the permutation sorts them by it —
    stable, so ties keep their order — left side first. Returns each picked group's left size, 0 where
    it is not cut."""
    sub_sizes = where.sizes[picked]
    within = _runs(where.offsets[picked], sub_sizes, where.rows.dtype)
    sub_offsets = np.cumsum(sub_sizes) - sub_sizes
    member = np.repeat(np.arange(len(picked), dtype=code_dtype(len(picked) - 1)), sub_sizes)
    sub_ranks = ranks[within]
    low, high = _bounds(sub_ranks, sub_offsets)
    sort = _group_sort(member, sub_ranks, dimension.size)
    sub_ranks, sorted_within = sub_ranks[sort], within[sort]
    del sort
    left = dimension.cut(sub_ranks, _Groups(sub_sizes, sub_offsets, member, low, high), k=k, relaxed=relaxed)
    del sub_ranks
    fits = (left >= k) & (sub_sizes - left >= k)
    if allowable is not None:
        sorted_rows = where.rows[sorted_within]
        for g in np.flatnonzero(fits):
            start, middle, end = sub_offsets[g], sub_offsets[g] + left[g], sub_offsets[g] + sub_sizes[g]
            fits[g] = allowable(sorted_rows[start:middle]) and allowable(sorted_rows[middle:end])
    if fits.all():
        where.permutation[within] = sorted_within
    else:
        moved = fits[member]
        where.permutation[within[moved]] = sorted_within[moved]
    return np.where(fits, left, 0)


def _numeric_labels(
    dimension: _NumericDimension,
    codes: np.ndarray,
    order: np.ndarray,
    box: np.ndarray,
    sizes: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    recoding: Recoding,
) -> Labels:
    """Per box its mean, lower median (in the column's type) or ``[min-max]``. Means are summed in row
    order, as a sum over the table's rows would be (the last bit of a float sum depends on the order)."""
    if recoding == "mean":
        values_by_row = np.empty(len(order))
        values_by_row[order] = dimension.distinct[codes]
        means = np.bincount(box, weights=values_by_row, minlength=len(sizes)) / sizes
        del values_by_row
        values, index = np.unique(means, return_inverse=True)
        return Labels(index, values)
    if recoding == "median":
        starts = np.cumsum(sizes) - sizes
        keys = np.sort(_box_keys(sizes) * dimension.size + codes)
        ranks, index = np.unique(keys[starts + (sizes + 1) // 2 - 1] % dimension.size, return_inverse=True)
        return Labels(index, dimension.distinct[ranks].astype(dimension.dtype))
    pairs, pair_index = np.unique(low.astype(np.int64) * dimension.size + high, return_inverse=True)
    bounds = zip(
        dimension.distinct[pairs // dimension.size], dimension.distinct[pairs % dimension.size], strict=True
    )
    return _text_labels([f"[{_text(a)}-{_text(b)}]" for a, b in bounds], pair_index)


def _ancestor_labels(dimension: _TreeDimension, low: np.ndarray, high: np.ndarray) -> Labels:
    """Per box, the label of the LCA of its first and last leaf in tree order (= of all its leaves)."""
    first = dimension.leaf_at[low]
    level, _ = lca_coverage(dimension.hierarchy, first, dimension.leaf_at[high])
    nodes, node_index = np.unique(level * dimension.size + dimension.codes[level, first], return_inverse=True)
    names = dimension.hierarchy.label_names
    return _text_labels([names[n // dimension.size][n % dimension.size] for n in nodes], node_index)


def _value_sets(dimension: _TreeDimension, codes: np.ndarray, sizes: np.ndarray) -> tuple[Labels, np.ndarray]:
    """Per box ``{a,b}``: its distinct values in tree order (one value: the value itself), as anonypy
    publishes them — less loss than the LCA label when a class holds a few values of a large subtree —
    and the NCP of that set. Equal sets are found without a Python object per box: boxes are refined by
    their t-th value, t = 0, 1, …, so that boxes share an id exactly when they hold the same values."""
    boxes = len(sizes)
    pairs = np.unique(_box_keys(sizes) * dimension.size + codes)
    counts = np.bincount(pairs // dimension.size, minlength=boxes)
    members = pairs % dimension.size
    starts = np.cumsum(counts) - counts
    ids = np.zeros(boxes, dtype=np.int64)
    by_count = np.argsort(-counts, kind="stable")
    descending = -counts[by_count]
    fresh = 1
    for t in range(int(counts.max())):
        active = by_count[: np.searchsorted(descending, -t, side="left")]  # boxes with more than t values
        _, refined = np.unique(
            ids[active] * dimension.size + members[starts[active] + t], return_inverse=True
        )
        ids[active] = fresh + refined
        fresh += int(refined.max()) + 1
    _, first, set_index = np.unique(ids, return_index=True, return_inverse=True)
    leaves = dimension.hierarchy.leaves
    texts = []
    for b in first:
        values = [leaves[dimension.leaf_at[r]] for r in members[starts[b] : starts[b] + counts[b]]]
        texts.append(values[0] if len(values) == 1 else "{" + ",".join(values) + "}")
    return _text_labels(texts, set_index), categorical_ncp(counts, domain_size=dimension.size)


def _box_keys(sizes: np.ndarray) -> np.ndarray:
    """Each position's box when boxes are runs of ``sizes`` (as the codes are after the partition)."""
    return np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)


def _text_labels(texts: Sequence[str], index: np.ndarray) -> Labels:
    """Labels from one text per distinct key: equal texts (two tree nodes with one name) become one label,
    since a reader cannot tell them apart."""
    codes, values = pd.factorize(pd.Series(texts, dtype=object))
    return Labels(codes[index], np.asarray(values, dtype=object))


def _published_classes(labels: Sequence[Labels], boxes: int) -> np.ndarray:
    """Per box, the number of its published class: boxes with the same label on every QI share one,
    numbered in order of first appearance."""
    key = np.zeros(boxes, dtype=np.int64)
    for qi in labels:
        _, key = np.unique(key * len(qi.values) + qi.index, return_inverse=True)
    _, first, key = np.unique(key, return_index=True, return_inverse=True)
    return np.argsort(np.argsort(first))[key]


def _text(number: float) -> str:
    """Integers without a decimal point, as the engine prints them; other numbers in shortest form."""
    return str(int(number)) if float(number).is_integer() else repr(float(number))
