"""Attack simulators for one attribute: which released values an attacker accepts for an original value.

Spec simulated-attack-risk.md §3. A simulator answers, for the original value r^0[qi_j] the attacker knows,
which released values are *high-confidence* candidates and which are candidates at all (the "box" rule,
the product default):

* :class:`GeneralizationSimulator` (f_gen, §3.1): deterministic — a released label is a candidate iff it is
  an ancestor-or-self of the original value (a suppressed ``*`` cell is the root, so it always is; a row
  of ``*`` only — a suppressed *record* — is handled by :mod:`anonymizers.risk.attack`); no
  low-confidence set.
* :class:`PerturbationSimulator` (f_per, §3.2): replays the attribute's whole step list (noise, then any
  generalization or randomization after it, spec §4 "the simulator replicates the pipeline order") to get
  the published-value distribution P_j(· | v) exactly, as a matrix over a finite input × output domain. The
  high region is the smallest highest-probability set with mass >= T_j (ties at the threshold included, so
  the region depends on v alone and a symmetric noise gives a symmetric box); the low region is the same
  with mass T_L (1.0 = the whole support; :func:`anonymizers.risk.attack.default_low_threshold` says why
  the default is smaller).

Sampling (f_sam, §3.3) is table-level and lives in :mod:`anonymizers.risk.attack`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from anonymizers.errors import AnonymizationError, HierarchyError
from anonymizers.hierarchy import Hierarchy, value_text
from anonymizers.risk.pipeline import AttributePipeline, Generalize, Laplace, Randomize

MAX_MATRIX_CELLS = 50_000_000
"""Largest input × output domain of one perturbed attribute (about 400 MB of float64)."""

_TIE_TOLERANCE = 1e-12


def laplace_tail(step: Laplace, distance: np.ndarray) -> np.ndarray:
    """P(D >= d) = P(D <= −d) of the grid noise D (in grid units) for integers d >= 0."""
    s = step.scale / step.unit
    d = distance.astype(float)
    if step.law == "discrete":
        q = math.exp(-1.0 / s)
        return np.power(q, d) / (1.0 + q)
    return np.where(d == 0, 1.0 - 0.5 * math.exp(-0.5 / s), 0.5 * np.exp(-(d - 0.5) / s))


def laplace_pmf(step: Laplace, offset: np.ndarray) -> np.ndarray:
    """P(D = d) of the grid noise D before clamping (symmetric, so computed from |d|)."""
    s = step.scale / step.unit
    d = np.abs(offset).astype(float)
    if step.law == "discrete":
        q = math.exp(-1.0 / s)
        return (1.0 - q) / (1.0 + q) * np.power(q, d)
    return np.where(
        d == 0, 1.0 - math.exp(-0.5 / s), 0.5 * np.exp(-(d - 0.5) / s) * (1.0 - math.exp(-1.0 / s))
    )


def laplace_matrix(step: Laplace) -> np.ndarray:
    """P(published grid index k | original grid index v), clamping folding each tail onto its end point."""
    n = step.grid_size
    if n * n > MAX_MATRIX_CELLS:
        raise AnonymizationError(
            f"the Laplace grid of {n} points is too fine to simulate the attack",
            hint="use a coarser unit or narrower [lower, upper] bounds",
        )
    index = np.arange(n)
    offset = index[None, :] - index[:, None]
    matrix = laplace_pmf(step, offset)
    if n == 1:
        return np.ones((1, 1))
    matrix[:, 0] = laplace_tail(step, index)
    matrix[:, -1] = laplace_tail(step, n - 1 - index)
    return matrix


def laplace_half_width(step: Laplace, mass: float) -> float:
    """Half-width w_j of the box [v − w_j, v + w_j] holding >= ``mass`` of the unclamped noise (spec §3.2).

    ``rounded`` law: w = u·max(0, ceil((b/u)·ln(1/(1 − T)) − 1/2)) as the spec derives it. ``discrete`` law:
    P(|D| <= m) = 1 − 2q^(m+1)/(1 + q) with q = exp(−u/b), so
    m = max(0, ceil((b/u)·ln(2/((1 − T)(1 + q))) − 1)).
    Clamping only adds mass at the domain's ends, so away from them the exact region is this box.
    """
    s = step.scale / step.unit
    if mass >= 1.0:
        return math.inf
    if step.law == "discrete":
        q = math.exp(-1.0 / s)
        steps = math.ceil(s * math.log(2.0 / ((1.0 - mass) * (1.0 + q))) - 1.0 - 1e-9)
    else:
        steps = math.ceil(s * math.log(1.0 / (1.0 - mass)) - 0.5 - 1e-9)
    return step.unit * max(0, steps)


def randomize_matrix(step: Randomize) -> np.ndarray:
    """P(v' | v) ∝ exp(ε·u(v, v')/(2Δ_u)), u = −tree distance: the exponential mechanism's exact law."""
    logits = -step.epsilon * step.hierarchy.distances.astype(float) / (2.0 * step.score_sensitivity)
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True)


def highest_probability_region(matrix: np.ndarray, mass: float) -> np.ndarray:
    """Per row, the smallest set of outputs of highest probability with total >= ``mass``, ties included."""
    if mass >= 1.0:
        return matrix > 0
    ordered = -np.sort(-matrix, axis=1)
    cumulative = np.cumsum(ordered, axis=1)
    needed = np.minimum((cumulative < mass - _TIE_TOLERANCE).sum(axis=1), matrix.shape[1] - 1)
    threshold = ordered[np.arange(matrix.shape[0]), needed]
    return matrix >= threshold[:, None] * (1.0 - _TIE_TOLERANCE)


@dataclass(frozen=True)
class GeneralizationSimulator:
    """f_gen for an attribute released unchanged (no hierarchy) or through one :class:`Generalize`."""

    attribute: str
    hierarchy: Hierarchy | None

    def allowed(self, originals: Sequence[str], released: Sequence[str]) -> np.ndarray:
        """``allowed[i, j]``: released label j is in A(originals[i]) — an ancestor-or-self (spec §3.1).

        Local recodings publish labels no hierarchy has: Mondrian's ``[min-max]`` ranges and ``{a,b}``
        value sets. Such a label is in A(v) when its range or set holds v (its class's box)."""
        position = {label: j for j, label in enumerate(released)}
        result = np.zeros((len(originals), len(released)), dtype=bool)
        for i, value in enumerate(originals):
            ancestors = (value,) if self.hierarchy is None else self.hierarchy.ancestors(value)
            columns = [position[a] for a in ancestors if a in position]
            result[i, columns] = True
        for j, label in enumerate(released):
            holds = local_label(label)
            if holds is not None:
                result[:, j] |= [holds(value) for value in originals]
        return result


def local_label(label: str) -> Callable[[str], bool] | None:
    """What a local-recoding label holds: ``[lo-hi]`` the numbers in that closed range, ``{a,b}`` those
    values; None for any other label (an ordinary hierarchy label or a raw value)."""
    if label.startswith("{") and label.endswith("}") and len(label) > 2:
        members = frozenset(label[1:-1].split(","))
        return members.__contains__
    match = _RANGE.fullmatch(label)
    if match is None:
        return None
    low, high = float(match[1]), float(match[2])
    return lambda value: _number(value) is not None and low <= _number(value) <= high  # type: ignore[operator]


_RANGE = re.compile(r"\[(-?[0-9.eE+]+)-(-?[0-9.eE+]+)\]")


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class PerturbationSimulator:
    """f_per for an attribute whose steps include noise or randomization (spec §3.2, §4 order)."""

    pipeline: AttributePipeline

    @property
    def attribute(self) -> str:
        return self.pipeline.attribute

    @cached_property
    def _first(self) -> Generalize | Laplace | Randomize:
        return self.pipeline.steps[0]

    def input_codes(self, values: Sequence[object]) -> np.ndarray:
        """Index of each original value in the input domain (grid index for noise, leaf index otherwise)."""
        first = self._first
        if isinstance(first, Laplace):
            return _grid_codes(first, values, self.attribute)
        return first.hierarchy.leaf_codes(value_text(v) for v in values)

    @cached_property
    def _distribution(self) -> tuple[np.ndarray, tuple[str, ...]]:
        """(P(output | input) over the whole input domain, output labels as text), composing every step."""
        first = self._first
        if isinstance(first, Laplace):
            matrix = laplace_matrix(first)
            labels = tuple(value_text(first.lower + i * first.unit) for i in range(first.grid_size))
        elif isinstance(first, Randomize):
            matrix, labels = randomize_matrix(first), first.hierarchy.leaves
        else:
            matrix = _one_hot(first.hierarchy.codes[first.level])
            labels = first.hierarchy.label_names[first.level]
        for step in self.pipeline.steps[1:]:
            matrix, labels = _then(step, matrix, labels, self.attribute)
        if matrix.size > MAX_MATRIX_CELLS:
            raise AnonymizationError(
                f"the published-value distribution of {self.attribute} is too large to simulate",
                hint="use a coarser unit or a coarser hierarchy",
            )
        return matrix, labels

    @property
    def distribution(self) -> np.ndarray:
        return self._distribution[0]

    @property
    def output_labels(self) -> tuple[str, ...]:
        return self._distribution[1]

    def output_codes(self, released: Sequence[object]) -> np.ndarray:
        """Index of each released value among the outputs; −1 for a value the pipeline cannot publish."""
        last = self.pipeline.steps[-1]
        if isinstance(last, Laplace):
            return _grid_codes(last, released, self.attribute, strict=False)
        position = {label: j for j, label in enumerate(self.output_labels)}
        return np.fromiter((position.get(str(v), -1) for v in released), dtype=np.int64, count=len(released))

    def region(self, mass: float) -> np.ndarray:
        """``region[v, v']``: output v' is in the highest-probability set of mass ``mass`` given input v."""
        return highest_probability_region(self.distribution, mass)


def _one_hot(codes: np.ndarray) -> np.ndarray:
    matrix = np.zeros((len(codes), int(codes.max()) + 1))
    matrix[np.arange(len(codes)), codes] = 1.0
    return matrix


def _then(
    step: Generalize | Laplace | Randomize, matrix: np.ndarray, labels: tuple[str, ...], attribute: str
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Compose one more step after a random one: P(out | in) = P(mid | in) · P(out | mid)."""
    if isinstance(step, Laplace):
        raise AnonymizationError(f"{attribute}: Laplace noise must come first in an attribute's steps")
    hierarchy = step.hierarchy
    try:
        rows = hierarchy.leaf_codes(labels)
    except HierarchyError as error:
        raise HierarchyError(
            f"{attribute}: {error.message}; the step after noise or randomization must cover every value "
            "it can receive",
            hint="build the hierarchy over the whole grid [lower, upper] (or the previous step's labels)",
        ) from None
    if isinstance(step, Generalize):
        codes = hierarchy.codes[step.level][rows]
        out = np.zeros((matrix.shape[0], len(hierarchy.label_names[step.level])))
        np.add.at(out.T, codes, matrix.T)
        return out, hierarchy.label_names[step.level]
    return matrix @ randomize_matrix(step)[rows], hierarchy.leaves


def _grid_codes(
    step: Laplace, values: Sequence[object], attribute: str, *, strict: bool = True
) -> np.ndarray:
    try:
        numbers = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise AnonymizationError(
            f"{attribute} has non-numeric values but is perturbed by Laplace noise"
        ) from None
    codes = np.rint((numbers - step.lower) / step.unit).astype(np.int64)
    outside = (codes < 0) | (codes >= step.grid_size) | ~np.isfinite(numbers)
    if strict:
        return np.clip(codes, 0, step.grid_size - 1)
    codes[outside] = -1
    return codes
