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


def count_in_regions(
    constraints: list[Constraint], *, profiles: int, released: int, classes: np.ndarray | None = None
) -> np.ndarray:
    """Released rows in every profile's region, shape (profiles,) — or (profiles, m) split by class.

    ``released`` is the number of released rows; ``classes`` (codes 0..m−1 per released row, e.g. the
    sensitive value) splits each count by class.
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
    queries = pd.DataFrame({"profile": np.arange(profiles), "s": searched.query})
    rows = pd.DataFrame({"row": np.flatnonzero(accepted)})
    key_columns = []
    for index, c in enumerate(expanded):
        column = f"k{index}"
        source, code = np.nonzero(c.allowed)
        pairs = pd.DataFrame({f"q{index}": source, column: code})
        queries[f"q{index}"] = c.query[queries["profile"].to_numpy()]
        queries = queries.merge(pairs, on=f"q{index}").drop(columns=f"q{index}")
        rows[column] = c.released[rows["row"].to_numpy()]
        key_columns.append(column)
    if classes is not None:
        queries = queries.merge(pd.DataFrame({"class": np.arange(n_classes)}), how="cross")
        rows["class"] = classes[rows["row"].to_numpy()]
        key_columns.append("class")
    queries, rows = _key(queries, rows, key_columns)
    width = searched.allowed.shape[1]
    positions = np.sort(rows["key"].to_numpy() * width + searched.released[rows["row"].to_numpy()])
    runs = _runs(searched.allowed)
    queries = queries.merge(runs, on="s")
    base = queries["key"].to_numpy() * width
    counts = np.searchsorted(positions, base + queries["hi"].to_numpy(), side="right") - np.searchsorted(
        positions, base + queries["lo"].to_numpy(), side="left"
    )
    if classes is None:
        return np.bincount(queries["profile"], weights=counts, minlength=profiles).astype(np.int64)
    flat = queries["profile"].to_numpy() * n_classes + queries["class"].to_numpy()
    totals = np.bincount(flat, weights=counts, minlength=profiles * n_classes)
    return totals.reshape(profiles, n_classes).astype(np.int64)


def _totals(
    zeros: np.ndarray, accepted: np.ndarray, classes: np.ndarray | None, n_classes: int, profiles: int
) -> np.ndarray:
    """No attribute constrains anything: every profile sees every accepted released row."""
    if classes is None:
        return zeros + int(accepted.sum())
    per_class = np.bincount(classes[accepted], minlength=n_classes)
    return np.tile(per_class, (profiles, 1)).astype(np.int64)


def _key(queries: pd.DataFrame, rows: pd.DataFrame, columns: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Number the released combinations of the expanded codes; queries keep only combinations that exist."""
    if not columns:
        queries["key"] = 0
        rows["key"] = 0
        return queries, rows
    keys = rows[columns].drop_duplicates().reset_index(drop=True)
    keys["key"] = np.arange(len(keys))
    return queries.merge(keys, on=columns), rows.merge(keys, on=columns)


def _runs(allowed: np.ndarray) -> pd.DataFrame:
    """Contiguous runs [lo, hi] of True in every row of ``allowed``: columns s, lo, hi."""
    padded = np.zeros((allowed.shape[0], allowed.shape[1] + 2), dtype=np.int8)
    padded[:, 1:-1] = allowed
    change = np.diff(padded, axis=1)
    start_row, start = np.nonzero(change == 1)
    _, stop = np.nonzero(change == -1)
    return pd.DataFrame({"s": start_row, "lo": start, "hi": stop - 1})
