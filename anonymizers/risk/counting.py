"""Count, for every attacker profile, the released records inside its candidate region — without pairs.

Why this module: Algorithm 2 asks |C_i| for every original record i, and C_i is a product of per-attribute
sets. Comparing all n_0 × n_1 pairs is hopeless at a million rows, so (spec §4 "Performance"):

1. records that share every known value form one *profile*; all of them have the same counts;
2. a profile is joined (pandas merges on integer codes) to each released value it accepts on all but one
   constrained attribute — generalized labels (ancestors), randomized categories, and the released
   sensitive value when counting per sensitive class;
3. the remaining attribute — chosen as the one whose regions are widest — is counted by binary search
   (``np.searchsorted``) over released rows sorted by (key, code), one search per contiguous run of its
   region (a noise box is one run, plus the clamped end points when they carry enough mass).

The cost is the size of the joined table (Σ over profiles of the product of the region sizes of the
expanded attributes) plus O(n_1 log n_1) for the sort — never n_0 × n_1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Constraint:
    """One attribute's region: profile ``p`` accepts released code ``c`` iff ``allowed[query[p], c]``.

    ``query``: per profile, its row of ``allowed``; ``released``: per released row, its code (−1 = a value
    no profile accepts).
    """

    allowed: np.ndarray
    query: np.ndarray
    released: np.ndarray


CHUNK_ROWS = 2_000_000
"""Joined (profile, released combination) rows per chunk of profiles, estimated from the region sizes: it
bounds the memory of a count, and a caller sees progress between chunks."""


@dataclass(frozen=True)
class _Index:
    """The released side, built once for every chunk of profiles: the numbered combinations of the
    expanded codes (and class), the sorted search positions, the runs of the searched attribute's regions
    and the (query code, released code) pairs each expanded attribute accepts."""

    keys: pd.DataFrame | None
    columns: list[str]
    positions: np.ndarray
    width: int
    runs: pd.DataFrame
    pairs: list[pd.DataFrame]


def count_in_regions(
    constraints: list[Constraint],
    *,
    profiles: int,
    released: int,
    classes: np.ndarray | None = None,
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Released rows in every profile's region, shape (profiles,) — or (profiles, m) split by class.

    ``released`` is the number of released rows; ``classes`` (codes 0..m−1 per released row, e.g. the
    sensitive value) splits each count by class. Profiles are counted in chunks (:data:`CHUNK_ROWS`);
    ``progress(p)`` is called after each with the number of profiles done (0..p−1).
    """
    live = [c for c in constraints if not c.allowed[np.unique(c.query)].all()]
    n_classes = 0 if classes is None else int(classes.max(initial=-1)) + 1
    accepted = np.ones(released, dtype=bool)
    for c in live:
        accepted &= c.released >= 0
    if not live:
        return _totals(np.zeros(profiles, dtype=np.int64), accepted, classes, n_classes, profiles)
    sizes = [c.allowed[np.unique(c.query)].sum(axis=1).mean() for c in live]
    searched = live[int(np.argmax(sizes))]
    expanded = [c for c in live if c is not searched]
    index = _index(searched, expanded, accepted, classes)
    totals = np.zeros((profiles,) if classes is None else (profiles, n_classes), dtype=np.int64)
    for start, stop in _chunks(expanded, profiles, n_classes):
        totals[start:stop] = _count_chunk(
            np.arange(start, stop), searched, expanded, index, n_classes, classes
        )
        if progress is not None:
            progress(stop)
    return totals


def _index(
    searched: Constraint, expanded: list[Constraint], accepted: np.ndarray, classes: np.ndarray | None
) -> _Index:
    rows = pd.DataFrame({"row": np.flatnonzero(accepted)})
    columns = []
    for index, c in enumerate(expanded):
        rows[f"k{index}"] = c.released[rows["row"].to_numpy()]
        columns.append(f"k{index}")
    if classes is not None:
        rows["class"] = classes[rows["row"].to_numpy()]
        columns.append("class")
    keys, rows = _key(rows, columns)
    width = searched.allowed.shape[1]
    positions = np.sort(rows["key"].to_numpy() * width + searched.released[rows["row"].to_numpy()])
    pairs = []
    for index, c in enumerate(expanded):
        source, code = np.nonzero(c.allowed)
        pairs.append(pd.DataFrame({f"q{index}": source, f"k{index}": code}))
    return _Index(keys, columns, positions, width, _runs(searched.allowed), pairs)


def _chunks(expanded: list[Constraint], profiles: int, n_classes: int) -> list[tuple[int, int]]:
    """Consecutive profile ranges of about :data:`CHUNK_ROWS` joined rows each (a profile's rows: the
    product of its expanded regions' sizes, times the classes)."""
    if profiles == 0:
        return []
    weight = np.full(profiles, float(max(n_classes, 1)))
    for c in expanded:
        weight *= c.allowed.sum(axis=1)[c.query]
    chunk_of = (np.cumsum(weight) - weight) // CHUNK_ROWS
    starts = np.concatenate([[0], np.flatnonzero(np.diff(chunk_of)) + 1])
    return list(zip(starts.tolist(), [*starts[1:].tolist(), profiles], strict=True))


def _count_chunk(
    chunk: np.ndarray,
    searched: Constraint,
    expanded: list[Constraint],
    index: _Index,
    n_classes: int,
    classes: np.ndarray | None,
) -> np.ndarray:
    """The counts of the profiles in ``chunk``: each joined to every released combination it accepts on
    the expanded attributes, then the searched attribute's runs counted by binary search."""
    queries = pd.DataFrame({"profile": chunk - chunk[0], "s": searched.query[chunk]})
    for position, (c, pairs) in enumerate(zip(expanded, index.pairs, strict=True)):
        queries[f"q{position}"] = c.query[chunk[queries["profile"].to_numpy()]]
        queries = queries.merge(pairs, on=f"q{position}").drop(columns=f"q{position}")
    if classes is not None:
        queries = queries.merge(pd.DataFrame({"class": np.arange(n_classes)}), how="cross")
    queries = queries.merge(index.keys, on=index.columns) if index.keys is not None else queries.assign(key=0)
    queries = queries.merge(index.runs, on="s")
    base = queries["key"].to_numpy() * index.width
    counts = np.searchsorted(
        index.positions, base + queries["hi"].to_numpy(), side="right"
    ) - np.searchsorted(index.positions, base + queries["lo"].to_numpy(), side="left")
    size = len(chunk)
    if classes is None:
        return np.bincount(queries["profile"], weights=counts, minlength=size).astype(np.int64)
    flat = queries["profile"].to_numpy() * n_classes + queries["class"].to_numpy()
    totals = np.bincount(flat, weights=counts, minlength=size * n_classes)
    return totals.reshape(size, n_classes).astype(np.int64)


def _totals(
    zeros: np.ndarray, accepted: np.ndarray, classes: np.ndarray | None, n_classes: int, profiles: int
) -> np.ndarray:
    """No attribute constrains anything: every profile sees every accepted released row."""
    if classes is None:
        return zeros + int(accepted.sum())
    per_class = np.bincount(classes[accepted], minlength=n_classes)
    return np.tile(per_class, (profiles, 1)).astype(np.int64)


def _key(rows: pd.DataFrame, columns: list[str]) -> tuple[pd.DataFrame | None, pd.DataFrame]:
    """Number the released combinations of the expanded codes (None: there are none, every row is key 0);
    queries keep only the combinations that exist."""
    if not columns:
        return None, rows.assign(key=0)
    keys = rows[columns].drop_duplicates().reset_index(drop=True)
    keys["key"] = np.arange(len(keys))
    return keys, rows.merge(keys, on=columns)


def _runs(allowed: np.ndarray) -> pd.DataFrame:
    """Contiguous runs [lo, hi] of True in every row of ``allowed``: columns s, lo, hi."""
    padded = np.zeros((allowed.shape[0], allowed.shape[1] + 2), dtype=np.int8)
    padded[:, 1:-1] = allowed
    change = np.diff(padded, axis=1)
    start_row, start = np.nonzero(change == 1)
    _, stop = np.nonzero(change == -1)
    return pd.DataFrame({"s": start_row, "lo": start, "hi": stop - 1})
