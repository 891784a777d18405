"""The simulated attack of [D] ch. 4, Algorithm 2 (corrected, spec simulated-attack-risk.md §2–§4).

The data holder plays the attacker: for every original record r_i^0 it runs the de-identification
simulator against the released table D^1, gets high- and low-confidence candidates C_i^H, C_i^L, and
checks — with the hidden row id that links each released row to its original, which is never released —
whether the true released record r_i^1 is among them:

* r_i^1 ∈ C_i^H → C_i = C_i^H; r_i^1 ∈ C_i^L → C_i = C_i^H ∪ C_i^L; otherwise (or r_i^1 sampled away) the
  attack on i fails and i contributes risk 0;
* sampling at rate α: i is not an outlier when N_i = |C_i^H ∪ C_i^L| > T' = k·α, and then |C_i| ← |C_i|/α
  (the erratum of §3.3: the worked example prints the inequality reversed). The low-confidence region
  is bounded by default (:func:`default_low_threshold`): the whole support would make every noised
  record's N_i the whole release, so no sampled outlier would stay at risk;
* record suppression is not a generalization to the root: a released row whose quasi-identifiers are all
  ``*`` (how ARX, and any tool that keeps every row, writes a suppressed record) says only "this record
  was suppressed", and under class-wise suppression (global recoding: a record is suppressed exactly when
  its class fails the model) an attacker who knows the rules sees whether r_i^0's class was published.
  So the ``*`` rows are candidates only for the records with no published candidate, and then they are
  all of them, with certainty (C_i^H). Counting them for everyone, as spec §3.1's "a suppressed cell is
  the root" does for cells, made a k-anonymous release with m ``*`` rows score n_q = m instead of k
  (issue 12) [decision]. Under partial suppression (some records of a published class) a suppressed
  record's attacker looks in the published class and fails: risk 0 for it, its class-mates count one
  fewer candidate;
* re-identifying adversary (Def 4.4): n_q = min_i |C_i|, risk 1/n_q;
* revealing adversary (Def 4.5): n_s = min_i (distinct sensitive values in C_i), risk 1/n_s, and the
  probabilistic variant max_i (records of C_i with the true sensitive value)/|C_i|. Both use the candidates
  as released, without the 1/α scaling: the sensitive values of records sampled away are unknown, so
  scaling a count of distinct values would invent them [decision].

Counting uses :mod:`anonymizers.risk.counting`, never the n_0 × n_1 pairs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from anonymizers.errors import AnonymizationError
from anonymizers.hierarchy import ROOT, value_text
from anonymizers.risk.counting import Constraint, count_in_regions
from anonymizers.risk.pipeline import AttributePipeline, Generalize, Pipeline
from anonymizers.risk.simulators import GeneralizationSimulator, PerturbationSimulator

DEFAULT_THRESHOLD = 0.9
"""T of [D] §4.2.2: the mass of the high-confidence region."""
DEFAULT_OUTLIER_K = 2.0
"""k of the outlier threshold T' = k·α (the worked example's k; [D] does not state it for §4.3)."""


def default_low_threshold(threshold: float) -> float:
    """T_L, the mass of the low-confidence region, when none is chosen: 1 − (1 − T)², 0.99 for T = 0.9.

    Why not the whole support (T_L = 1, the spec's first default): Laplace noise and the exponential
    mechanism give every value some probability, so their support is everything, N_i = |C^H ∪ C^L| is the
    whole release and no noised record is ever an outlier — every |C_i| is divided by α, understating an
    outlier's risk up to 1/α. [D] §4.2.2 says the opposite: "if an outlier is sampled … the record's
    privacy risk is not reduced", and a record is no outlier "if there are k records *near* it"; its
    worked example's noise is bounded, so its support is near. A region of mass 1 − (1 − T)² misses the
    true record as rarely, relative to what C^H misses, as C^H misses relative to everything [decision].
    """
    return round(1.0 - (1.0 - threshold) ** 2, 12)


@dataclass(frozen=True)
class AttackResult:
    """What Algorithm 2 found, with every parameter needed to reproduce it (spec §10).

    ``sizes[i]`` is |C_i| after the sampling adjustment, NaN where the attack on record i fails (risk 0).
    ``histogram`` pairs each distinct |C_i| with the number of records at that risk level 1/|C_i|.
    """

    n_q: float
    risk: float
    sizes: np.ndarray
    min_size: float
    p1_size: float
    median_size: float
    histogram: tuple[tuple[float, int], ...]
    records: int
    records_at_risk_zero: int
    n_s: float | None
    revealing_risk: float | None
    probabilistic_revealing_risk: float | None
    threshold: float
    low_threshold: float
    outlier_k: float
    sampling_rate: float | None
    outlier_threshold: float | None
    confidence_region: str = "box"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (without the per-record sizes)."""
        result = asdict(self)
        del result["sizes"]
        result["histogram"] = [{"candidates": size, "records": count} for size, count in self.histogram]
        return {key: (None if isinstance(v, float) and math.isinf(v) else v) for key, v in result.items()}


def simulate_attack(
    original: pd.DataFrame,
    released: pd.DataFrame,
    pipeline: Pipeline,
    *,
    row_id: str = "row_id",
    sensitive: str | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    low_threshold: float | None = None,
    outlier_k: float = DEFAULT_OUTLIER_K,
    progress: Callable[[int, int], None] | None = None,
) -> AttackResult:
    """Run Algorithm 2 of every original record against the released table.

    ``original`` holds the quasi-identifiers of ``pipeline`` (and ``sensitive``); its row *positions* are
    the record ids. ``released`` holds the released quasi-identifiers (and ``sensitive``) and ``row_id``,
    the position in ``original`` each released row came from. ``threshold`` is T, ``low_threshold`` T_L
    (default :func:`default_low_threshold`; 1.0: the whole support, which understates the risk of sampled
    outliers); with p perturbed attributes each gets T^(1/p) and T_L^(1/p). ``progress(done, total)``
    follows the counting in records scored (2 counting passes, 4 with ``sensitive``).
    """
    if low_threshold is None:
        low_threshold = default_low_threshold(threshold)
    _check_inputs(original, released, pipeline, row_id, sensitive, threshold, low_threshold)
    starred = suppressed_rows(released, pipeline.quasi_identifiers)
    published = released[~starred]
    regions = _regions(original, published, pipeline, threshold, low_threshold)
    tracker = _Passes(progress, regions.profile_of, 2 if sensitive is None else 4)
    own = np.full(len(original), -1, dtype=np.int64)
    own[published[row_id].to_numpy(dtype=np.int64)] = np.arange(len(published))
    own_starred = np.zeros(len(original), dtype=bool)
    own_starred[released[row_id].to_numpy(dtype=np.int64)[starred]] = True
    high, union = regions.counts(tracker=tracker)
    hidden = union == 0  # no published candidate: the record's class was not published
    in_high, in_union = (np.where(hidden, own_starred, inside) for inside in regions.holds(own))
    high, union = (np.where(hidden, starred.sum(), count) for count in (high, union))
    rate = None if pipeline.sample is None else pipeline.sample.rate
    sizes = candidate_sizes(high, union, in_high, in_union, sampling_rate=rate, outlier_k=outlier_k)
    revealing = (
        _revealing(
            original[sensitive], released[sensitive], regions, starred, hidden, in_high, in_union, tracker
        )
        if sensitive is not None
        else (None, None)
    )
    return attack_result(sizes, revealing, threshold, low_threshold, outlier_k, rate)


class _Passes:
    """Progress of the counting in records: each pass counts the profiles in order, so the records done
    are those of the profiles done; a record is scored when every pass has counted it."""

    def __init__(
        self, report: Callable[[int, int], None] | None, profile_of: np.ndarray, passes: int
    ) -> None:
        self.report = report
        self.records = np.cumsum(np.bincount(profile_of)) if len(profile_of) else np.zeros(1, dtype=np.int64)
        self.passes = passes
        self.finished = 0

    def pass_done(self) -> None:
        self.finished += 1

    def profiles_done(self, stop: int) -> None:
        if self.report is not None:
            total = int(self.records[-1])
            self.report((self.finished * total + int(self.records[stop - 1])) // self.passes, total)


@dataclass(frozen=True)
class _Regions:
    """Every original record's high-confidence and union regions over the *published* released rows (the
    ones not suppressed), as constraints on the records' profiles (:mod:`anonymizers.risk.counting`)."""

    high: list[Constraint]
    union: list[Constraint]
    profile_of: np.ndarray
    published: int

    def counts(self, classes: np.ndarray | None = None, *, tracker: _Passes) -> tuple[np.ndarray, np.ndarray]:
        """(|C^H|, |C^H ∪ C^L|) per original record, split by the published rows' ``classes`` if given."""
        return self._count(self.high, classes, tracker), self._count(self.union, classes, tracker)

    def _count(
        self, constraints: list[Constraint], classes: np.ndarray | None, tracker: _Passes
    ) -> np.ndarray:
        profiles = len(constraints[0].query)
        counts = count_in_regions(
            constraints,
            profiles=profiles,
            released=self.published,
            classes=classes,
            progress=tracker.profiles_done,
        )
        tracker.pass_done()
        return counts[self.profile_of]

    def holds(self, own: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Whether each record's own published row (``own``: its position, −1 if none) is in its high
        region and in its union region."""
        high = _own_in_region(self.high, self.profile_of, own)
        return high, _own_in_region(self.union, self.profile_of, own)


def _regions(
    original: pd.DataFrame, published: pd.DataFrame, pipeline: Pipeline, threshold: float, low: float
) -> _Regions:
    """Encode every attribute, group the original records into profiles of identical query codes."""
    exponent = 1.0 / max(sum(a.perturbed for a in pipeline.attributes), 1)
    encoded = [
        _encode(a, original[a.attribute], published[a.attribute], threshold**exponent, low**exponent)
        for a in pipeline.attributes
    ]
    queries = np.column_stack([query for query, _, _, _ in encoded])
    profile_of, profile_codes = np.unique(queries, axis=0, return_inverse=True)[::-1]
    return _Regions(
        [Constraint(h, profile_codes[:, j], codes) for j, (_, codes, h, _) in enumerate(encoded)],
        [Constraint(u, profile_codes[:, j], codes) for j, (_, codes, _, u) in enumerate(encoded)],
        profile_of.reshape(-1),
        len(published),
    )


def suppressed_rows(released: pd.DataFrame, quasi_identifiers: Sequence[str]) -> np.ndarray:
    """Released rows whose every quasi-identifier is ``*``: how ARX (and any tool that keeps every row)
    writes a suppressed record."""
    starred = np.ones(len(released), dtype=bool)
    for column in quasi_identifiers:
        starred &= released[column].astype(str).to_numpy() == ROOT
    return starred


def candidate_sizes(
    high: np.ndarray,
    union: np.ndarray,
    in_high: np.ndarray,
    in_union: np.ndarray,
    *,
    sampling_rate: float | None,
    outlier_k: float = DEFAULT_OUTLIER_K,
) -> np.ndarray:
    """|C_i| from |C_i^H|, |C_i^H ∪ C_i^L| and where r_i^1 fell (Algorithm 2 lines 3–8, spec §4).

    NaN where r_i^1 is in neither set or was not sampled (``in_union`` false): risk 0. With sampling, a
    record whose N_i = |C_i^H ∪ C_i^L| exceeds T' = k·α is not an outlier and its size is divided by α.
    """
    sizes = np.where(in_high, high, union).astype(float)
    sizes[~in_union] = np.nan
    if sampling_rate is not None:
        common = union > outlier_k * sampling_rate
        sizes = np.where(common, sizes / sampling_rate, sizes)
    return sizes


def _encode(
    attribute: AttributePipeline, original: pd.Series, released: pd.Series, high: float, low: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(query code per original, code per released row, high region, union region) of one attribute."""
    if attribute.perturbed:
        simulator = PerturbationSimulator(attribute)
        codes = simulator.output_codes(released.to_numpy())
        return (
            simulator.input_codes(original.to_numpy()),
            codes,
            simulator.region(high),
            simulator.region(low),
        )
    if len(attribute.steps) > 1 or not all(isinstance(s, Generalize) for s in attribute.steps):
        raise AnonymizationError(
            f"{attribute.attribute}: a deterministic attribute takes at most one Generalize step",
            hint="generalize once, to the highest level wanted",
        )
    hierarchy = attribute.steps[0].hierarchy if attribute.steps else None
    query, originals = pd.factorize(original)
    codes, labels = pd.factorize(released)
    originals, labels = [value_text(v) for v in originals], [value_text(v) for v in labels]
    allowed = GeneralizationSimulator(attribute.attribute, hierarchy).allowed(list(originals), list(labels))
    return query.astype(np.int64), codes.astype(np.int64), allowed, allowed


def _own_in_region(constraints: list[Constraint], profile_of: np.ndarray, own: np.ndarray) -> np.ndarray:
    """Whether each original's own released row lies in its region on every attribute (False if none)."""
    inside = own >= 0
    for c in constraints:
        code = np.where(inside, c.released[np.maximum(own, 0)], -1)
        ok = code >= 0
        inside &= ok
        inside[ok] &= c.allowed[c.query[profile_of[ok]], code[ok]]
    return inside


def _revealing(
    original: pd.Series,
    released: pd.Series,
    regions: _Regions,
    starred: np.ndarray,
    hidden: np.ndarray,
    in_high: np.ndarray,
    in_union: np.ndarray,
    tracker: _Passes,
) -> tuple[float, float]:
    """(n_s, probabilistic risk) over the records whose attack succeeds (Def 4.5 and its variant); the
    candidates of a ``hidden`` record (no published candidate) are the suppressed rows, as for |C_i|."""
    codes, _ = pd.factorize(pd.concat([original.astype(str), released.astype(str)], ignore_index=True))
    truth, released_classes = codes[: len(original)], codes[len(original) :]
    if not in_union.any():
        return math.inf, 0.0
    width = int(codes.max()) + 1
    suppressed = np.bincount(released_classes[starred], minlength=width)
    high, union = (
        np.where(hidden[:, None], suppressed, np.pad(count, ((0, 0), (0, width - count.shape[1]))))
        for count in regions.counts(released_classes[~starred], tracker=tracker)
    )
    chosen = np.where(in_high[:, None], high, union)[in_union]
    distinct = (chosen > 0).sum(axis=1)
    share = chosen[np.arange(len(chosen)), truth[in_union]] / chosen.sum(axis=1)
    return float(distinct.min()), float(share.max())


def attack_result(
    sizes: np.ndarray,
    revealing: tuple[float | None, float | None],
    threshold: float,
    low_threshold: float,
    outlier_k: float,
    rate: float | None,
) -> AttackResult:
    attacked = sizes[~np.isnan(sizes)]
    n_q = float(attacked.min()) if len(attacked) else math.inf
    values, counts = np.unique(np.round(attacked, 9), return_counts=True)
    n_s, probabilistic = revealing
    return AttackResult(
        n_q=n_q,
        risk=0.0 if math.isinf(n_q) else 1.0 / n_q,
        sizes=sizes,
        min_size=n_q,
        p1_size=float(np.percentile(attacked, 1, method="lower")) if len(attacked) else math.inf,
        median_size=float(np.median(attacked)) if len(attacked) else math.inf,
        histogram=tuple((float(v), int(c)) for v, c in zip(values, counts, strict=True)),
        records=len(sizes),
        records_at_risk_zero=int(np.isnan(sizes).sum()),
        n_s=n_s,
        revealing_risk=None if n_s is None else (0.0 if math.isinf(n_s) else 1.0 / n_s),
        probabilistic_revealing_risk=probabilistic,
        threshold=threshold,
        low_threshold=low_threshold,
        outlier_k=outlier_k,
        sampling_rate=rate,
        outlier_threshold=None if rate is None else outlier_k * rate,
    )


def _check_inputs(
    original: pd.DataFrame,
    released: pd.DataFrame,
    pipeline: Pipeline,
    row_id: str,
    sensitive: str | None,
    threshold: float,
    low_threshold: float,
) -> None:
    needed = list(pipeline.quasi_identifiers) + ([sensitive] if sensitive else [])
    for name, table, columns in (("original", original, needed), ("released", released, [*needed, row_id])):
        missing = [c for c in columns if c not in table.columns]
        if missing:
            raise AnonymizationError(
                f"the {name} table lacks column {missing[0]!r}",
                hint="pass the quasi-identifiers of the pipeline (and the sensitive column) in both tables, "
                f"and the hidden row id {row_id!r} in the released one",
            )
    if not 0 < threshold < 1 or not threshold <= low_threshold <= 1:
        raise AnonymizationError(
            f"thresholds must satisfy 0 < T < 1 and T <= T_L <= 1, got T={threshold}, T_L={low_threshold}",
            hint="the default T = 0.9 follows [D] §4.2; T_L defaults to 1 − (1 − T)²",
        )
    ids = released[row_id].to_numpy()
    if len(ids) and (ids.min() < 0 or ids.max() >= len(original) or len(np.unique(ids)) != len(ids)):
        raise AnonymizationError(
            f"the released column {row_id!r} must name distinct row positions of the original table",
            hint="carry the original row number through the pipeline; each released row comes from one record",
        )
