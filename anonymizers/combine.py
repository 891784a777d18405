"""Combined de-identification ([D] ch. 4): run a :class:`~anonymizers.risk.pipeline.Pipeline` on a table.

Why a runner of the declarative pipeline rather than its own options: the attack simulator
(``anonymizers/risk/``) replays the same description to compute each record's published-value
distribution, so what is released and what is scored cannot drift apart. The laws are the contract of
:mod:`anonymizers.risk.pipeline`; this module only draws from them, vectorized with numpy so that Adult
(32,561 rows) takes milliseconds and a million rows a few seconds:

* ``Generalize`` — a lookup of each distinct value's label (values are matched as text, as the engine
  casts a column to VARCHAR before joining a hierarchy).
* ``Laplace`` — discrete Laplace on the grid ``lower + i·unit``: K = G₁ − G₂ with G₁, G₂ independent
  geometric variables of ratio q = exp(−unit/b) has P(K = k) ∝ q^|k| exactly (the two-sided geometric
  law), which is what :func:`mechanisms.discrete_laplace.sample_discrete_laplace` draws one value at a
  time. Noise lands on the grid and is clamped to [lower, upper], so no float's low-order bits are
  published (Mironov, CCS 2012). ``law="rounded"`` (continuous Laplace rounded to the grid) is the
  reproduction law.
* ``Randomize`` — the exponential mechanism over a hierarchy's leaves, P(v' | v) ∝ exp(ε·u(v, v')/(2Δ_u))
  with u = −tree distance: one categorical draw per record by inverse CDF from the row of a precomputed
  transition matrix (the simulator's own :func:`~anonymizers.risk.simulators.randomize_matrix`).
* ``Sample`` — Bernoulli(rate) per record. The mask is drawn first and only kept records are transformed:
  sampling is independent of the values, so this is the same distribution as sampling last ([D]'s order)
  at a fraction of the work.

Randomness: a numpy ``Generator``. Production seeds it from the OS CSPRNG
(``numpy.random.default_rng(secrets.randbits(128))``) and never records that seed; a seed is used and
written to the report only when the user passes one (for a reproducible experiment — anyone holding it can
subtract the noise, so it must be kept as secret as the original table).

The hidden original-row id of every released row (its 0-based position in the input) comes back next to
the released table for the risk evaluator; it is not a column of the table and must never be written out.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from anonymizers.errors import AnonymizationError, HierarchyError
from anonymizers.hierarchy import Hierarchy, value_text
from anonymizers.risk.pipeline import Generalize, Laplace, Pipeline, Randomize, Step
from anonymizers.risk.simulators import randomize_matrix


@dataclass(frozen=True)
class CombineReport:
    """What was done, for the materialize report: every step's parameters, row counts, the user's seed."""

    attributes: tuple[tuple[str, tuple[dict[str, Any], ...]], ...]
    sample_rate: float | None
    input_rows: int
    released_rows: int
    seed: int | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; ``seed`` is null unless the user chose one."""
        return {
            "attributes": {name: list(steps) for name, steps in self.attributes},
            "sample_rate": self.sample_rate,
            "input_rows": self.input_rows,
            "released_rows": self.released_rows,
            "seed": self.seed,
        }


@dataclass(frozen=True)
class Released:
    """The de-identified table, the hidden input position of each of its rows, and the report.

    ``table`` has a fresh 0..n−1 index (the input's index would leak the hidden ids); ``row_ids[i]`` is the
    input position of ``table`` row i — for the risk evaluator only, never to be released.
    """

    table: pd.DataFrame
    row_ids: np.ndarray
    report: CombineReport


def combine(frame: pd.DataFrame, pipeline: Pipeline, *, seed: int | None = None) -> Released:
    """Apply ``pipeline`` to ``frame``: each quasi-identifier's steps in order, then sampling.

    Columns the pipeline does not name (the sensitive attribute, anything else) are released unchanged.
    ``seed`` makes the run reproducible and is recorded in the report; without it the generator is seeded
    from the OS CSPRNG and the seed is forgotten.
    """
    _check_columns(frame, pipeline)
    rng = np.random.default_rng(secrets.randbits(128) if seed is None else seed)
    kept = _sample_mask(len(frame), pipeline, rng)
    row_ids = np.flatnonzero(kept).astype(np.int64)
    table = frame.iloc[row_ids].reset_index(drop=True)
    for attribute in pipeline.attributes:
        values = table[attribute.attribute].to_numpy()
        for step in attribute.steps:
            values = apply_step(values, step, attribute=attribute.attribute, rng=rng)
        table[attribute.attribute] = values
    report = CombineReport(
        attributes=tuple(
            (a.attribute, tuple(describe(step) for step in a.steps)) for a in pipeline.attributes
        ),
        sample_rate=None if pipeline.sample is None else pipeline.sample.rate,
        input_rows=len(frame),
        released_rows=len(table),
        seed=seed,
    )
    return Released(table=table, row_ids=row_ids, report=report)


def recode(frame: pd.DataFrame, pipeline: Pipeline) -> pd.DataFrame:
    """Only the deterministic part of ``pipeline`` (its generalizations), no noise and no sampling.

    Why: a model trained on a released table reads generalized labels, so a new, raw record — such as the
    held-out test rows of :mod:`anonymizers.utility` — must be put into the released schema the way a
    partner would: recode what was generalized, leave what was perturbed as it is.
    """
    _check_columns(frame, pipeline)
    table = frame.reset_index(drop=True).copy()
    for attribute in pipeline.attributes:
        values = table[attribute.attribute].to_numpy()
        for step in attribute.steps:
            if isinstance(step, Generalize):
                values = generalize(values, step, attribute=attribute.attribute)
        table[attribute.attribute] = values
    return table


def apply_step(values: np.ndarray, step: Step, *, attribute: str, rng: np.random.Generator) -> np.ndarray:
    """One step on one column's values (text for hierarchies, numbers for Laplace)."""
    if isinstance(step, Generalize):
        return generalize(values, step, attribute=attribute)
    if isinstance(step, Laplace):
        return add_laplace_noise(values, step, attribute=attribute, rng=rng)
    return randomize(values, step, attribute=attribute, rng=rng)


def generalize(values: np.ndarray, step: Generalize, *, attribute: str) -> np.ndarray:
    """Each value's label at ``step.level``; a value missing from the hierarchy fails naming it."""
    leaves = leaf_codes(values, step.hierarchy, attribute=attribute)
    names = np.asarray(step.hierarchy.label_names[step.level], dtype=object)
    return names[step.hierarchy.codes[step.level][leaves]]


def add_laplace_noise(
    values: np.ndarray, step: Laplace, *, attribute: str, rng: np.random.Generator
) -> np.ndarray:
    """The value rounded to the grid ``lower + i·unit`` and clamped, plus grid noise of the step's law, clamped.

    Rounding and clamping match :func:`anonymizers.risk.simulators.laplace_matrix` (``numpy.rint``, then
    [lower, upper] before and after the noise), so the simulator scores exactly this law.
    """
    last = step.grid_size - 1
    index = np.clip(np.rint((_numbers(values, attribute) - step.lower) / step.unit), 0, last)
    ratio = step.unit / step.scale  # in grid units, the noise is P(k) ∝ exp(−|k|·ratio)
    if step.law == "discrete":
        success = -math.expm1(-ratio)  # 1 − q: numpy's geometric counts trials, so both carry the same +1
        noise = rng.geometric(success, index.size) - rng.geometric(success, index.size)
    else:
        noise = np.rint(rng.laplace(0.0, 1.0 / ratio, index.size))
    index = np.clip(index + noise, 0, last)
    if float(step.lower).is_integer() and float(step.unit).is_integer():
        return (int(step.lower) + index.astype(np.int64) * int(step.unit)).astype(np.int64)
    return np.round(step.lower + index * step.unit, 12)  # 0.1·3 prints as 0.3, the hierarchy's leaf text


def randomize(values: np.ndarray, step: Randomize, *, attribute: str, rng: np.random.Generator) -> np.ndarray:
    """One exponential-mechanism draw per record, by inverse CDF on its leaf's row of the transition matrix.

    The matrix is :func:`anonymizers.risk.simulators.randomize_matrix`, the very law the attack simulator
    replays: P(v' | v) ∝ exp(ε·u(v, v')/(2Δ_u)), u = −tree distance (``sensitivity=1``: the printed exp(ε·u/2)).
    """
    leaves = leaf_codes(values, step.hierarchy, attribute=attribute)
    cumulative = np.cumsum(randomize_matrix(step), axis=1)
    cumulative[:, -1] = 1.0  # rounding must not leave a gap above the last leaf
    uniform = rng.random(leaves.size)
    drawn = np.empty_like(leaves)
    for leaf in np.unique(leaves):
        rows = np.flatnonzero(leaves == leaf)
        drawn[rows] = np.searchsorted(cumulative[leaf], uniform[rows], side="right")
    return np.asarray(step.hierarchy.leaves, dtype=object)[drawn]


def leaf_codes(values: np.ndarray, hierarchy: Hierarchy, *, attribute: str) -> np.ndarray:
    """Leaf index of every value, matched as text; the lookup runs once per distinct value."""
    codes, distinct = pd.factorize(values, use_na_sentinel=True)
    if (codes < 0).any():
        raise HierarchyError(
            f"{attribute} has missing values, which no hierarchy covers",
            hint="replace them with a value of the hierarchy (e.g. '?') before de-identifying",
        )
    return hierarchy.leaf_codes(value_text(v) for v in distinct)[codes]


def describe(step: Step) -> dict[str, Any]:
    """A step's parameters for the report (hierarchies by attribute and height, not their leaves)."""
    if isinstance(step, Generalize):
        return {"step": "generalize", "hierarchy": step.hierarchy.attribute, "level": step.level}
    if isinstance(step, Laplace):
        return {
            "step": "laplace",
            "epsilon": step.epsilon,
            "scale": step.scale,
            "unit": step.unit,
            "lower": step.lower,
            "upper": step.upper,
            "law": step.law,
        }
    return {
        "step": "randomize",
        "epsilon": step.epsilon,
        "hierarchy": step.hierarchy.attribute,
        "leaves": len(step.hierarchy.leaves),
        "score_sensitivity": step.score_sensitivity,
    }


def _sample_mask(rows: int, pipeline: Pipeline, rng: np.random.Generator) -> np.ndarray:
    if pipeline.sample is None:
        return np.ones(rows, dtype=bool)
    return rng.random(rows) < pipeline.sample.rate


def _numbers(values: np.ndarray, attribute: str) -> np.ndarray:
    numbers = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=np.float64)
    if np.isnan(numbers).any():
        raise AnonymizationError(
            f"Laplace noise on {attribute} needs numbers, but some values are missing or not numeric",
            hint="add noise to a numeric column only, and before any generalization of it",
        )
    return numbers


def _check_columns(frame: pd.DataFrame, pipeline: Pipeline) -> None:
    missing = [a.attribute for a in pipeline.attributes if a.attribute not in frame.columns]
    if missing:
        raise AnonymizationError(
            f"the table has no column {missing[0]!r} named in the de-identification pipeline",
            hint=f"the table's columns are: {', '.join(map(str, frame.columns))}",
        )
