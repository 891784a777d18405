"""Generalization hierarchies: each leaf value of a quasi-identifier and its label at every level.

Why one representation for every kind (ARX CSV files, numeric intervals, dates, suppression only): the
lattice search, Mondrian's categorical splits, the attack simulator (ancestors of a value) and the
exponential mechanism (tree distance) all ask the same questions — "what is v at level h", "how many leaves
does this label cover", "how far apart are two leaves" — and answer them from integer codes with numpy.

Leaves are text: the engine casts a column to text (``CAST(col AS VARCHAR)``) before matching it against a
hierarchy, so ``39`` in an integer column and ``39`` in an ARX file are the same leaf. Level 0 is the raw
value; the last level is the root ``*`` (spec k-anonymity-algorithms.md §3; 0-based levels, erratum 2).
"""

from __future__ import annotations

import csv
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from functools import cached_property
from pathlib import Path

import numpy as np

from anonymizers.errors import HierarchyError

ROOT = "*"


@dataclass(frozen=True)
class Hierarchy:
    """A tree over one attribute's values, stored level by level.

    ``labels[h][i]`` is the label of leaf ``i`` at level ``h``; ``labels[0]`` are the leaves themselves and
    ``labels[-1]`` is all ``*``.
    """

    attribute: str
    labels: tuple[tuple[str, ...], ...]
    _leaf_index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _validate(self.attribute, self.labels)
        object.__setattr__(self, "_leaf_index", {leaf: i for i, leaf in enumerate(self.labels[0])})

    @property
    def height(self) -> int:
        """The root's level: a hierarchy with levels 0..height."""
        return len(self.labels) - 1

    @property
    def leaves(self) -> tuple[str, ...]:
        return self.labels[0]

    def leaf_index(self, value: str) -> int:
        try:
            return self._leaf_index[value]
        except KeyError:
            raise HierarchyError(
                f"value {value!r} of {self.attribute} is not in its hierarchy",
                hint="add a line for it to the hierarchy file, or build the hierarchy from the data",
            ) from None

    def leaf_codes(self, values: Iterable[str]) -> np.ndarray:
        """Leaf indices of ``values``; fails naming the first value the hierarchy does not cover."""
        return np.fromiter((self.leaf_index(v) for v in values), dtype=np.int32)

    def generalize(self, value: str, level: int) -> str:
        return self.labels[level][self.leaf_index(value)]

    def mapping(self, level: int) -> dict[str, str]:
        """Leaf → label at ``level``: what the engine joins against to recode a column."""
        return dict(zip(self.labels[0], self.labels[level], strict=True))

    @cached_property
    def codes(self) -> tuple[np.ndarray, ...]:
        """Per level, the label code of every leaf (labels numbered in order of first appearance)."""
        return tuple(_factorize(level)[0] for level in self.labels)

    @cached_property
    def label_names(self) -> tuple[tuple[str, ...], ...]:
        """Per level, the label of each code in :attr:`codes`."""
        return tuple(_factorize(level)[1] for level in self.labels)

    @cached_property
    def label_coverage(self) -> tuple[np.ndarray, ...]:
        """Per level, how many leaves each label code covers (ARX's domain share × domain size)."""
        return tuple(np.bincount(codes) for codes in self.codes)

    @cached_property
    def coverage(self) -> tuple[np.ndarray, ...]:
        """Per level, how many leaves each leaf's label covers."""
        return tuple(counts[codes] for counts, codes in zip(self.label_coverage, self.codes, strict=True))

    def ancestors(self, value: str) -> tuple[str, ...]:
        """The value's label at every level, itself first: A(v) of the generalization simulator."""
        index = self.leaf_index(value)
        return tuple(level[index] for level in self.labels)

    def distance(self, first: str, second: str) -> int:
        """Edges between two leaves through their lowest common ancestor (0 for the same leaf)."""
        a, b = self.leaf_index(first), self.leaf_index(second)
        for level, codes in enumerate(self.codes):
            if codes[a] == codes[b]:
                return 2 * level
        raise AssertionError("the root joins every pair of leaves")

    @cached_property
    def distances(self) -> np.ndarray:
        """Leaf × leaf tree distances, for the exponential mechanism on categories (small domains)."""
        n = len(self.leaves)
        result = np.full((n, n), 2 * self.height, dtype=np.int32)
        for level in range(self.height, -1, -1):
            codes = self.codes[level]
            same = codes[:, None] == codes[None, :]
            result[same] = 2 * level
        return result


def _validate(attribute: str, labels: Sequence[Sequence[str]]) -> None:
    if len(labels) < 2:
        raise HierarchyError(f"the hierarchy of {attribute} needs at least a raw level and the root `*`")
    leaves = labels[0]
    if any(len(level) != len(leaves) for level in labels):
        raise HierarchyError(f"every line of the hierarchy of {attribute} needs the same number of levels")
    if len(set(leaves)) != len(leaves):
        duplicate = next(v for v in leaves if leaves.count(v) > 1)
        raise HierarchyError(f"value {duplicate!r} appears twice in the hierarchy of {attribute}")
    if set(labels[-1]) != {ROOT}:
        raise HierarchyError(f"the last level of the hierarchy of {attribute} must be `*` on every line")
    for level in range(1, len(labels) - 1):
        parent: dict[str, str] = {}
        for child, above in zip(labels[level], labels[level + 1], strict=True):
            if parent.setdefault(child, above) != above:
                raise HierarchyError(
                    f"label {child!r} of {attribute} has two parents ({parent[child]!r} and {above!r}) "
                    f"at level {level + 1}",
                    hint="each label must generalize to exactly one label at the next level",
                )


def _factorize(level: Sequence[str]) -> tuple[np.ndarray, tuple[str, ...]]:
    names: dict[str, int] = {}
    codes = np.fromiter((names.setdefault(label, len(names)) for label in level), dtype=np.int32)
    return codes, tuple(names)


def load_arx_hierarchy(path: Path, attribute: str) -> Hierarchy:
    """An ARX-format CSV (``;``-separated, one line per leaf, columns = levels, last column ``*``)."""
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            rows = [row for row in csv.reader(handle, delimiter=";") if row]
    except OSError as error:
        raise HierarchyError(
            f"cannot read the hierarchy of {attribute} from {path}: {error.strerror}"
        ) from None
    if not rows:
        raise HierarchyError(f"the hierarchy file {path} of {attribute} is empty")
    widths = {len(row) for row in rows}
    if len(widths) != 1:
        raise HierarchyError(f"every line of {path} needs the same number of `;`-separated levels")
    return Hierarchy(attribute, tuple(tuple(level) for level in zip(*rows, strict=True)))


def interval_hierarchy(
    attribute: str,
    values: Iterable[float],
    widths: Sequence[float],
    *,
    bottom: float | None = None,
    top: float | None = None,
    leaf_text: Mapping[float, str] | None = None,
) -> Hierarchy:
    """Numeric values in aligned intervals of growing ``widths`` (each a multiple of the one before).

    Labels follow ARX's files for integers (``35-39`` for width 5) and are half-open for reals
    (``[35, 40)``). ``bottom``/``top`` code the tails: every value ≤ bottom (≥ top) becomes the leaf-level
    bucket ``<=bottom`` (``>=top``) at level 1 and above, so that a few extreme values neither widen every
    interval nor stay unique (spec §2; thresholds come from policy, never from the private maximum).
    ``leaf_text`` gives the engine's text of a value where it differs from :func:`value_text` (DuckDB
    prints a DOUBLE 39 as ``39.0``).
    """
    _check_widths(attribute, widths)
    distinct = sorted(set(values))
    integral = all(float(v).is_integer() for v in distinct) and all(float(w).is_integer() for w in widths)
    text = leaf_text or {}
    leaves = tuple(text.get(v, value_text(v)) for v in distinct)
    levels = [leaves]
    for width in widths:
        levels.append(tuple(_interval_label(v, width, integral, bottom, top) for v in distinct))
    levels.append(tuple(ROOT for _ in distinct))
    return Hierarchy(attribute, tuple(levels))


def _check_widths(attribute: str, widths: Sequence[float]) -> None:
    if not widths or any(w <= 0 for w in widths):
        raise HierarchyError(f"interval widths of {attribute} must be positive, e.g. 5,10,20")
    for narrow, wide in itertools.pairwise(widths):
        if not math.isclose(wide / narrow, round(wide / narrow)) or wide <= narrow:
            raise HierarchyError(
                f"interval widths of {attribute} must each be a multiple of the one before (got {narrow} then {wide})",
                hint="nested intervals keep the hierarchy a tree: e.g. 5,10,20",
            )


def _interval_label(
    value: float, width: float, integral: bool, bottom: float | None, top: float | None
) -> str:
    if bottom is not None and value <= bottom:
        return f"<={value_text(bottom)}"
    if top is not None and value >= top:
        return f">={value_text(top)}"
    start = math.floor(value / width) * width
    if integral:
        return f"{int(start)}-{int(start + width - 1)}"
    return f"[{value_text(start)}, {value_text(start + width)})"


def value_text(value: object) -> str:
    """How the engine prints a value as text: integral numbers without a decimal point (DuckDB prints an
    INTEGER 39 as ``39``; a DOUBLE column is matched through its own text, see ``leaf_text``)."""
    if isinstance(value, float | np.floating):
        return str(int(value)) if float(value).is_integer() else repr(float(value))
    return str(value)


def date_hierarchy(attribute: str, values: Iterable[date]) -> Hierarchy:
    """Day → month → year → ``*``; leaves are ISO dates as the engine prints them."""
    distinct = sorted(set(values))
    return Hierarchy(
        attribute,
        (
            tuple(d.isoformat() for d in distinct),
            tuple(f"{d.year:04d}-{d.month:02d}" for d in distinct),
            tuple(f"{d.year:04d}" for d in distinct),
            tuple(ROOT for _ in distinct),
        ),
    )


def suppression_hierarchy(attribute: str, values: Iterable[str]) -> Hierarchy:
    """Raw value or ``*``: the hierarchy of a categorical column that has no file."""
    distinct = tuple(sorted(set(values)))
    return Hierarchy(attribute, (distinct, tuple(ROOT for _ in distinct)))


AUTO_INTERVAL_BUCKETS = 20  # the first level of an automatic interval hierarchy has about this many buckets


def auto_widths(values: Sequence[float]) -> tuple[float, ...]:
    """Interval widths for a numeric column without a hierarchy: a round first width, then doubling.

    The first width is the 1-2-5 number nearest to range/20 (ages 17..90 → 5), so the first level keeps
    about twenty buckets; each further level doubles the width until one interval holds the whole range,
    after which only the root is left. Doubling keeps the intervals nested (a tree).
    """
    low, high = min(values), max(values)
    span = float(high - low)
    if span <= 0:
        return (1.0,)
    width = _nice_number(span / AUTO_INTERVAL_BUCKETS)
    if all(float(v).is_integer() for v in values):
        width = max(2.0, round(width))  # width 1 on integers would repeat the raw level
    widths = [width]
    while math.floor(low / widths[-1]) != math.floor(high / widths[-1]):
        widths.append(widths[-1] * 2)
    return tuple(widths[:-1] or widths)


def _nice_number(target: float) -> float:
    exponent = math.floor(math.log10(target))
    candidates = [m * 10.0**e for e in (exponent, exponent + 1) for m in (1, 2, 5)]
    return min(candidates, key=lambda c: abs(math.log(c / target)))


def hierarchy_from_spec(
    attribute: str, spec: str | None, values: Sequence[object], *, texts: Sequence[str] | None = None
) -> Hierarchy:
    """The hierarchy a command-line spec names, built over the column's distinct ``values``.

    ``spec``: a path to an ARX CSV file; ``interval:5,10,20`` (optionally ``;top=80;bottom=18``);
    ``date``; ``suppress``; or ``None`` for the default — intervals with :func:`auto_widths` for numbers,
    day/month/year for dates, ``*`` suppression for anything else. ``texts[i]``, when given, is how the
    engine prints ``values[i]``: the leaves then match a column the engine casts to text.
    """
    leaf_text = None if texts is None else dict(zip(values, texts, strict=True))
    if spec is None:
        return _default_hierarchy(attribute, values, leaf_text)
    if spec == "suppress":
        return suppression_hierarchy(attribute, texts or [str(v) for v in values])
    if spec == "date":
        return date_hierarchy(attribute, _dates(attribute, values))
    if spec.startswith("interval:"):
        widths, coding = _interval_spec(attribute, spec.removeprefix("interval:"))
        text = _numeric_text(leaf_text)
        return interval_hierarchy(attribute, _numbers(attribute, values), widths, leaf_text=text, **coding)
    return load_arx_hierarchy(Path(spec), attribute)


def _default_hierarchy(
    attribute: str, values: Sequence[object], leaf_text: Mapping[object, str] | None
) -> Hierarchy:
    if values and all(isinstance(v, int | float | Decimal) and not isinstance(v, bool) for v in values):
        numbers = _numbers(attribute, values)
        return interval_hierarchy(
            attribute, numbers, auto_widths(numbers), leaf_text=_numeric_text(leaf_text)
        )
    if values and all(isinstance(v, date) for v in values):
        return date_hierarchy(attribute, _dates(attribute, values))
    return suppression_hierarchy(
        attribute, list(leaf_text.values()) if leaf_text else [str(v) for v in values]
    )


def _numeric_text(leaf_text: Mapping[object, str] | None) -> dict[float, str] | None:
    return None if leaf_text is None else {float(v): t for v, t in leaf_text.items()}  # type: ignore[arg-type]


def _interval_spec(attribute: str, text: str) -> tuple[tuple[float, ...], dict[str, float]]:
    widths_text, *options = text.split(";")
    try:
        widths = tuple(float(w) for w in widths_text.split(","))
        coding = {name.strip(): float(value) for name, value in (o.split("=", 1) for o in options)}
    except ValueError:
        raise HierarchyError(
            f"cannot read the interval hierarchy of {attribute}: {text!r}",
            hint="write e.g. interval:5,10,20 or interval:5,10,20;top=80;bottom=18",
        ) from None
    unknown = set(coding) - {"top", "bottom"}
    if unknown:
        raise HierarchyError(
            f"unknown interval option {sorted(unknown)[0]!r} for {attribute}: use top= or bottom="
        )
    return widths, coding


def _numbers(attribute: str, values: Sequence[object]) -> list[float]:
    try:
        return [float(v) for v in values]  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise HierarchyError(
            f"{attribute} has non-numeric values; an interval hierarchy needs numbers"
        ) from None


def _dates(attribute: str, values: Sequence[object]) -> list[date]:
    try:
        return [v if isinstance(v, date) else date.fromisoformat(str(v)) for v in values]
    except ValueError:
        raise HierarchyError(
            f"{attribute} has values that are not dates; a date hierarchy needs dates"
        ) from None
