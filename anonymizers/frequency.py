"""Frequency sets: how many records share each combination of (generalized) quasi-identifier values.

Why: every question the lattice search asks of a node — class sizes, suppressed records, sensitive values
per class, information loss — is answered by the node's frequency set, and the frequency set of a more
general node is a *rollup* (sum) of a more specific one (Incognito's rollup property, LeFevre et al. 2005).
So the engine runs one ``GROUP BY`` over the table, at the lowest node the search needs (the raw values),
and only that frequency set comes back to Python; every lattice node is then a numpy rollup of it — label
codes mapped through ``Hierarchy.codes[level]``, combined into one integer key per row, grouped by hashing
(``pandas.factorize``).

Values meet hierarchy leaves in the engine: each QI is cast to text and joined against a registered table
(leaf text → code), so what crosses into Python are small integer codes, not strings. A value the hierarchy
lacks is reported by name (:class:`HierarchyError`).

When the base frequency set would exceed ``max_base_classes`` rows (say a 10⁸-row table whose raw QI
combinations are nearly unique), :class:`EngineFrequency` computes each node's frequency set in the engine
instead — ``GROUP BY`` over the generalized codes — so memory stays bounded by the node's class count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pandas as pd
from sqlglot import exp

from anonymizers.errors import AnonymizationError, HierarchyError
from anonymizers.hierarchy import Hierarchy
from anonymizers.source import TableSource, as_text, quoted_column

DEFAULT_MAX_BASE_CLASSES = 5_000_000
_KEY_LIMIT = 1 << 62
_SOURCE_ALIAS = "veil_t"
_MISSING = -1
_DENSE_FACTOR, _DENSE_MINIMUM = 4, 1 << 16
_CACHED_COLUMN_ROWS = 2_000_000  # ≤ 8 MB per mapped column


@dataclass(frozen=True)
class ClassTable:
    """The equivalence classes of one node: ``labels[c, d]`` is class c's label code on QI d at
    ``levels[d]`` (a code of ``Hierarchy.codes[levels[d]]``), ``counts[c]`` its records, and
    ``sensitive[c, s]`` its records with sensitive value s (when a sensitive attribute is given)."""

    levels: tuple[int, ...]
    labels: np.ndarray
    counts: np.ndarray
    sensitive: np.ndarray | None = None

    @property
    def classes(self) -> int:
        return len(self.counts)


@dataclass(frozen=True)
class FrequencySet:
    """Counts per combination of QI label codes (at ``levels``) and, optionally, sensitive value code."""

    hierarchies: tuple[Hierarchy, ...]
    levels: tuple[int, ...]
    codes: np.ndarray  # (rows, QIs) int32 label codes at ``levels``
    counts: np.ndarray  # (rows,) int64
    sensitive: np.ndarray | None = None  # (rows,) int32 code into ``sensitive_values``
    sensitive_values: tuple[str, ...] = ()
    _lookups: list[list[np.ndarray]] = field(init=False, repr=False, compare=False)
    _columns: dict[tuple[int, int], np.ndarray] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        # column-major: a rollup reads each QI's codes as one contiguous column
        object.__setattr__(self, "codes", np.asfortranarray(self.codes, dtype=np.int32))
        object.__setattr__(
            self,
            "_lookups",
            [_level_lookups(h, start) for h, start in zip(self.hierarchies, self.levels, strict=True)],
        )

    @property
    def rows(self) -> int:
        return len(self.counts)

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def marginal(self, dimension: int) -> np.ndarray:
        """Records per label of QI ``dimension`` at this set's level (lower bounds need only these)."""
        size = len(self.hierarchies[dimension].label_names[self.levels[dimension]])
        return np.bincount(self.codes[:, dimension], weights=self.counts, minlength=size).astype(np.int64)

    def sensitive_totals(self) -> np.ndarray | None:
        """Records per sensitive value over the whole table (t-closeness compares classes with it)."""
        if self.sensitive is None:
            return None
        size = len(self.sensitive_values)
        return np.bincount(self.sensitive, weights=self.counts, minlength=size).astype(np.int64)

    def rollup(self, levels: Sequence[int]) -> ClassTable:
        """The classes at ``levels`` (each ≥ this set's level): map codes up, group, sum."""
        target = tuple(int(level) for level in levels)
        if any(t < s for t, s in zip(target, self.levels, strict=True)):
            raise ValueError(f"cannot roll up from {self.levels} to the more specific {target}")
        columns = [self._column(d, target[d]) for d in range(len(target))]
        radices = [len(h.label_names[level]) for h, level in zip(self.hierarchies, target, strict=True)]
        keys, span = combined_keys(columns, radices)
        width = 1 if self.sensitive is None else len(self.sensitive_values)
        if span * width <= max(_DENSE_FACTOR * self.rows, _DENSE_MINIMUM):
            return self._dense_rollup(target, keys, span, radices)
        inverse, uniques = pd.factorize(keys)  # hashing: ~4x faster than np.unique's sort here
        classes = len(uniques)
        first = np.empty(classes, dtype=np.int64)
        first[inverse] = np.arange(len(inverse))  # any row of a class carries the class's labels
        counts = np.bincount(inverse, weights=self.counts, minlength=classes).astype(np.int64)
        labels = np.stack([column[first] for column in columns], axis=1)
        return ClassTable(target, labels, counts, self._sensitive_matrix(inverse, classes))

    def _column(self, dimension: int, level: int) -> np.ndarray:
        """QI ``dimension``'s codes mapped to ``level``; kept for reuse when the set is small enough
        (the gather is a third of a rollup's time, and the search asks for the same columns again)."""
        key = (dimension, level)
        cached = self._columns.get(key)
        if cached is None:
            cached = self._lookups[dimension][level - self.levels[dimension]][self.codes[:, dimension]]
            if self.rows <= _CACHED_COLUMN_ROWS:
                self._columns[key] = cached
        return cached

    def _dense_rollup(
        self, target: tuple[int, ...], keys: np.ndarray, span: int, radices: list[int]
    ) -> ClassTable:
        """Grouping by counting into the whole key space (× sensitive values): when that space is
        small, cheaper than hashing."""
        width = 1 if self.sensitive is None else len(self.sensitive_values)
        if self.sensitive is not None:
            keys = keys * width + self.sensitive
        dense = np.bincount(keys, weights=self.counts, minlength=span * width).reshape(span, width)
        totals = dense.sum(axis=1) if width > 1 else dense[:, 0]
        present = np.flatnonzero(totals)
        counts = totals[present].astype(np.int64)
        labels = np.empty((len(present), len(radices)), dtype=np.int32)
        rest = present
        for d in range(len(radices) - 1, -1, -1):
            rest, labels[:, d] = np.divmod(rest, radices[d])
        matrix = None if self.sensitive is None else dense[present].astype(np.int64)
        return ClassTable(target, labels, counts, matrix)

    def _sensitive_matrix(self, inverse: np.ndarray, classes: int) -> np.ndarray | None:
        if self.sensitive is None:
            return None
        width = len(self.sensitive_values)
        flat = inverse.astype(np.int64) * width + self.sensitive
        matrix = np.bincount(flat, weights=self.counts, minlength=classes * width)
        return matrix.astype(np.int64).reshape(classes, width)


def _level_lookups(hierarchy: Hierarchy, start: int) -> list[np.ndarray]:
    """``result[j][code]``: the label code at level ``start + j`` of the label ``code`` at ``start``."""
    result = []
    base = hierarchy.codes[start]
    for level in range(start, hierarchy.height + 1):
        lookup = np.zeros(len(hierarchy.label_names[start]), dtype=np.int32)
        lookup[base] = hierarchy.codes[level]
        result.append(lookup)
    return result


def combined_keys(columns: Sequence[np.ndarray], radices: Sequence[int]) -> tuple[np.ndarray, int]:
    """One int64 key per row for a tuple of codes (mixed radix) and the size of the key space.

    When the product of the radices would overflow, the partial key is renumbered densely first, so any
    number of QIs works; the key is then no longer decodable digit by digit, and the span returned is
    ``2**62`` so that callers group by hashing.
    """
    rows = len(columns[0]) if columns else 0
    key = np.zeros(rows, dtype=np.int64)
    span, renumbered = 1, False
    for column, radix in zip(columns, radices, strict=True):
        if span * radix >= _KEY_LIMIT:
            uniques, dense = np.unique(key, return_inverse=True)
            key, span, renumbered = dense.astype(np.int64), len(uniques), True
        key *= radix
        key += column
        span *= radix
    return key, (_KEY_LIMIT if renumbered else span)


class FrequencyProvider(Protocol):
    """What the lattice search needs: the hierarchies, per-QI marginals for the lower bounds, the
    table-wide sensitive distribution, and the classes of any node."""

    hierarchies: tuple[Hierarchy, ...]
    sensitive_values: tuple[str, ...]

    @property
    def total(self) -> int: ...

    def marginal(self, dimension: int) -> np.ndarray: ...

    def sensitive_totals(self) -> np.ndarray | None: ...

    def rollup(self, levels: Sequence[int]) -> ClassTable: ...


@dataclass(frozen=True)
class _Query:
    """The engine side of a frequency set: lookup tables registered, the ``GROUP BY`` built."""

    source: TableSource
    qi: tuple[str, ...]
    hierarchies: tuple[Hierarchy, ...]
    sensitive: str | None
    sensitive_values: tuple[str, ...]

    def counts(self, levels: Sequence[int], *, limit: int | None = None) -> dict[str, np.ndarray]:
        """``GROUP BY`` of the QIs' label codes at ``levels`` (and the sensitive code), with COUNT(*)."""
        tables = {
            f"veil_codes_{d}": pd.DataFrame({"leaf": list(h.leaves), "code": h.codes[level].astype(np.int64)})
            for d, (h, level) in enumerate(zip(self.hierarchies, levels, strict=True))
        }
        if self.sensitive is not None:
            tables["veil_codes_s"] = pd.DataFrame(
                {"leaf": list(self.sensitive_values), "code": np.arange(len(self.sensitive_values))}
            )
        for name, frame in tables.items():
            self.source.register(name, frame)
        try:
            return self.source.arrays(self._select(limit))
        finally:
            for name in tables:
                self.source.unregister(name)

    def _parts(self) -> list[tuple[str, str, str]]:
        """(column, lookup table, result alias) of every QI and of the sensitive attribute."""
        parts = [(column, f"veil_codes_{d}", f"c{d}") for d, column in enumerate(self.qi)]
        if self.sensitive is not None:
            parts.append((self.sensitive, "veil_codes_s", "s"))
        return parts

    def _select(self, limit: int | None) -> exp.Select:
        query = exp.select().from_(exp.alias_(self.source.table, _SOURCE_ALIAS, table=True))
        codes: list[exp.Expression] = []
        for column, lookup, _ in self._parts():
            condition = exp.EQ(
                this=as_text(quoted_column(column, _SOURCE_ALIAS)),
                expression=exp.column("leaf", table=lookup, quoted=True),
            )
            query = query.join(exp.table_(lookup, quoted=True), on=condition, join_type="left")
            code = exp.column("code", table=lookup, quoted=True)
            codes.append(exp.func("coalesce", code, exp.Literal.number(_MISSING)))
        query = query.select(
            *(code.as_(alias, quoted=True) for code, (_, _, alias) in zip(codes, self._parts(), strict=True)),
            exp.func("count", exp.Star()).as_("n", quoted=True),
        ).group_by(*codes)
        return query.limit(limit) if limit is not None else query

    def check_codes(self, result: dict[str, np.ndarray]) -> None:
        """Fail naming the first value a hierarchy (or the sensitive domain) does not cover."""
        for column, _, alias in self._parts():
            if np.any(np.asarray(result[alias]) == _MISSING):
                value = self._first_unmatched(column)
                if value is None:
                    raise HierarchyError(
                        f"{column} has NULL values, which no hierarchy covers",
                        hint="filter or fill them before anonymizing (e.g. with COALESCE in a view)",
                    )
                raise HierarchyError(
                    f"value {value!r} of {column} is not in its hierarchy",
                    hint="add a line for it to the hierarchy file, or build the hierarchy from the data",
                )

    def _first_unmatched(self, column: str) -> str | None:
        leaves = (
            self.sensitive_values
            if column == self.sensitive
            else self.hierarchies[self.qi.index(column)].leaves
        )
        known = set(leaves)
        for value in self.source.distinct_values(column):
            if value not in known:
                return str(value)
        return None


def _assemble(query: _Query, levels: tuple[int, ...], result: dict[str, np.ndarray]) -> FrequencySet:
    query.check_codes(result)
    codes = np.stack([np.asarray(result[f"c{d}"], dtype=np.int32) for d in range(len(query.qi))], axis=1)
    sensitive = np.asarray(result["s"], dtype=np.int32) if query.sensitive is not None else None
    return FrequencySet(
        query.hierarchies,
        levels,
        codes.reshape(len(result["n"]), len(query.qi)),
        np.asarray(result["n"], dtype=np.int64),
        sensitive,
        query.sensitive_values,
    )


@dataclass(frozen=True)
class EngineFrequency:
    """Node frequency sets computed in the engine, one ``GROUP BY`` per node: for tables whose raw
    frequency set is too large to hold. Marginals and the sensitive distribution are computed once."""

    query: _Query
    marginals: tuple[np.ndarray, ...]
    totals: np.ndarray | None

    @property
    def hierarchies(self) -> tuple[Hierarchy, ...]:
        return self.query.hierarchies

    @property
    def sensitive_values(self) -> tuple[str, ...]:
        return self.query.sensitive_values

    @property
    def total(self) -> int:
        return int(self.marginals[0].sum())

    def marginal(self, dimension: int) -> np.ndarray:
        return self.marginals[dimension]

    def sensitive_totals(self) -> np.ndarray | None:
        return self.totals

    def rollup(self, levels: Sequence[int]) -> ClassTable:
        target = tuple(int(level) for level in levels)
        base = _assemble(self.query, target, self.query.counts(target))
        return base.rollup(target)


def frequency_set(
    source: TableSource,
    qi: Sequence[str],
    hierarchies: Sequence[Hierarchy],
    *,
    sensitive: str | None = None,
    max_base_classes: int = DEFAULT_MAX_BASE_CLASSES,
) -> FrequencySet | EngineFrequency:
    """The raw frequency set of ``qi`` (and ``sensitive``), computed by the engine.

    Returns a :class:`FrequencySet` when it has at most ``max_base_classes`` rows, otherwise an
    :class:`EngineFrequency` that asks the engine for each node.
    """
    if len(qi) != len(hierarchies) or not qi:
        raise AnonymizationError("give one hierarchy per quasi-identifier (and at least one)")
    source.require_columns([*qi, *([sensitive] if sensitive else [])])
    values: tuple[str, ...] = ()
    if sensitive is not None:
        values = ordered_values(source.distinct_values(sensitive))
    query = _Query(source, tuple(qi), tuple(hierarchies), sensitive, values)
    raw = tuple(0 for _ in qi)
    result = query.counts(raw, limit=max_base_classes + 1)
    if len(result["n"]) <= max_base_classes:
        return _assemble(query, raw, result)
    top = tuple(h.height for h in hierarchies)
    marginals = []
    for d in range(len(qi)):
        levels = tuple(0 if j == d else top[j] for j in range(len(qi)))
        node = _assemble(query, levels, query.counts(levels))
        marginals.append(node.marginal(d))
    totals = None
    if sensitive is not None:
        totals = _assemble(query, top, query.counts(top)).sensitive_totals()
    return EngineFrequency(query, tuple(marginals), totals)


def ordered_values(values: Sequence[str]) -> tuple[str, ...]:
    """Sensitive values in their natural order — numeric when every value is a number — which the
    ordered-distance EMD of t-closeness relies on."""
    texts = [str(v) for v in values]
    try:
        return tuple(sorted(texts, key=float))
    except ValueError:
        return tuple(sorted(texts))
