"""A declarative description of a de-identification pipeline: what happens to each quasi-identifier, in order.

Why a description rather than code: the combined de-identification (ch. 4 of the dissertation; spec
simulated-attack-risk.md §4) must be *run* by ``anonymizers/combine.py`` and *simulated* by the attack of
``anonymizers/risk/attack.py``, and the two must agree exactly on what each step does — the simulator
replays the pipeline's published-value distribution P_j(· | r^0) (Kerckhoffs: the attacker knows the rules).
Order matters (noise-then-generalize ≠ generalize-then-noise, [D] Fig. 4.4), so each attribute carries a
tuple of steps applied left to right, and sampling is one table-level step applied last.

The laws below are the contract both sides implement:

* :class:`Generalize` replaces a value by its label at ``level`` of ``hierarchy`` (values are the
  hierarchy's leaves as text; a released ``*`` is the root and matches every value).
* :class:`Laplace` rounds the value to the grid ``lower + i·unit`` (clamping it to [lower, upper]),
  adds ``unit·K`` with K discrete Laplace,
  P(K = k) ∝ exp(−|k|·unit/b), b = sensitivity/ε (Lap(δ_j/ε) of [D] §4.3 with δ_j = unit by default), and
  clamps to [lower, upper]. Discrete rather than rounded-continuous noise because that is what the exact
  sampler :func:`mechanisms.discrete_laplace.sample_discrete_laplace` draws (Mironov 2012);
  ``law="rounded"`` (continuous Laplace, rounded to the nearest grid point) is the law of the spec's
  half-width formula and is kept for reproductions.
* :class:`Randomize` publishes leaf v' of ``hierarchy`` instead of leaf v with probability
  ∝ exp(ε·u(v, v')/(2Δ_u)), u(v, v') = −tree distance (the exponential mechanism with the errata of spec §7);
  Δ_u defaults to the largest tree distance 2·height; ``sensitivity=1`` is the reproduction mode
  exp(ε·u/2). This is the exponential mechanism's distribution, not permute-and-flip's
  (:mod:`mechanisms.exponential`): a runner must draw from exactly these probabilities
  (:func:`anonymizers.risk.simulators.randomize_matrix` gives them).
* :class:`Sample` keeps each record independently with probability ``rate`` (Bernoulli(α), spec §3.3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from anonymizers.errors import AnonymizationError
from anonymizers.hierarchy import Hierarchy


@dataclass(frozen=True)
class Generalize:
    """Recode to ``level`` of ``hierarchy`` (0 = unchanged leaf, ``hierarchy.height`` = ``*``)."""

    hierarchy: Hierarchy
    level: int

    def __post_init__(self) -> None:
        if not 0 <= self.level <= self.hierarchy.height:
            raise AnonymizationError(
                f"generalization level {self.level} of {self.hierarchy.attribute} is outside 0..{self.hierarchy.height}",
                hint="levels count from 0 (the raw value) to the hierarchy's height (the root `*`)",
            )


@dataclass(frozen=True)
class Laplace:
    """Discrete Laplace noise on the grid ``lower + i·unit``, clamped to [lower, upper] (module docstring)."""

    epsilon: float
    lower: float
    upper: float
    unit: float = 1.0
    sensitivity: float | None = None
    law: Literal["discrete", "rounded"] = "discrete"

    def __post_init__(self) -> None:
        for name in ("epsilon", "unit"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise AnonymizationError(f"Laplace {name} must be a positive number, got {value}")
        if not (math.isfinite(self.lower) and math.isfinite(self.upper) and self.lower < self.upper):
            raise AnonymizationError(
                f"Laplace bounds must be finite with lower < upper, got [{self.lower}, {self.upper}]",
                hint="take the bounds from policy (the attribute's public domain), never from the data",
            )
        if self.sensitivity is not None and not (math.isfinite(self.sensitivity) and self.sensitivity > 0):
            raise AnonymizationError(f"Laplace sensitivity must be a positive number, got {self.sensitivity}")
        if self.law not in ("discrete", "rounded"):
            raise AnonymizationError(f"unknown Laplace law {self.law!r}: use 'discrete' or 'rounded'")

    @property
    def scale(self) -> float:
        """b = Δ/ε in the attribute's units (Δ defaults to the grid unit δ_j)."""
        return (self.unit if self.sensitivity is None else self.sensitivity) / self.epsilon

    @property
    def grid_size(self) -> int:
        """Number of grid points lower, lower + unit, …, upper (upper rounded down onto the grid)."""
        return math.floor((self.upper - self.lower) / self.unit + 1e-9) + 1


@dataclass(frozen=True)
class Randomize:
    """Exponential-mechanism randomization among the leaves of ``hierarchy`` by tree distance."""

    epsilon: float
    hierarchy: Hierarchy
    sensitivity: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise AnonymizationError(f"randomization epsilon must be a positive number, got {self.epsilon}")
        if self.sensitivity is not None and not (math.isfinite(self.sensitivity) and self.sensitivity > 0):
            raise AnonymizationError(f"randomization sensitivity must be positive, got {self.sensitivity}")

    @property
    def score_sensitivity(self) -> float:
        """Δ_u: the largest tree distance 2·height unless given."""
        return float(2 * self.hierarchy.height) if self.sensitivity is None else self.sensitivity


Step = Generalize | Laplace | Randomize


@dataclass(frozen=True)
class AttributePipeline:
    """The steps applied to one quasi-identifier, left to right; no steps = released unchanged."""

    attribute: str
    steps: tuple[Step, ...] = ()

    def __post_init__(self) -> None:
        for before, after in zip(self.steps, self.steps[1:], strict=False):
            if isinstance(after, Laplace) and not isinstance(before, Laplace):
                raise AnonymizationError(
                    f"{self.attribute}: Laplace noise must come first in an attribute's steps",
                    hint="noise acts on numbers; generalize or randomize after it, not before",
                )

    @property
    def perturbed(self) -> bool:
        """True when some step is random, so the simulator needs confidence regions (spec §3.2)."""
        return any(isinstance(step, Laplace | Randomize) for step in self.steps)


@dataclass(frozen=True)
class Sample:
    """Bernoulli(rate) sampling of whole records, applied after every attribute step (spec §3.3)."""

    rate: float

    def __post_init__(self) -> None:
        if not 0 < self.rate <= 1:
            raise AnonymizationError(f"sampling rate must be in (0, 1], got {self.rate}")


@dataclass(frozen=True)
class Pipeline:
    """One :class:`AttributePipeline` per quasi-identifier, then optional table-level sampling."""

    attributes: tuple[AttributePipeline, ...]
    sample: Sample | None = None

    def __post_init__(self) -> None:
        names = [a.attribute for a in self.attributes]
        if len(set(names)) != len(names):
            raise AnonymizationError("each quasi-identifier may appear only once in a pipeline")
        if not names:
            raise AnonymizationError("a pipeline needs at least one quasi-identifier")

    @property
    def quasi_identifiers(self) -> tuple[str, ...]:
        return tuple(a.attribute for a in self.attributes)


def coarsen(hierarchy: Hierarchy, level: int) -> Hierarchy:
    """The tree above ``level``: its leaves are the level-``level`` labels.

    For generalize-then-randomize ([D] §4.3 dataset 3: education generalized to level 1, then randomized
    among the level-1 cells): ``(Generalize(h, 1), Randomize(ε, coarsen(h, 1)))``.
    """
    if not 0 <= level < hierarchy.height:
        raise AnonymizationError(
            f"cannot coarsen the hierarchy of {hierarchy.attribute} at level {level}",
            hint=f"use a level from 0 to {hierarchy.height - 1}: the root alone is not a tree to randomize in",
        )
    first: dict[str, int] = {}
    for index, label in enumerate(hierarchy.labels[level]):
        first.setdefault(label, index)
    rows = list(first.values())
    return Hierarchy(
        hierarchy.attribute,
        tuple(tuple(labels[i] for i in rows) for labels in hierarchy.labels[level:]),
    )
