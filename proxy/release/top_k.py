"""Top-k answered by a DP selection: which keys (exponential mechanism, peeling), then their counts.

A top-k query (proxy/analysis/top_k.py) can always be answered the ordinary way — a noisy count of every
key, sorted by post-processing, which is report-noisy-top-k with Laplace noise and costs ε once. Its noise
is scaled to the ℓ1 sensitivity of the count vector: how many keys one person can touch. The selection
here needs only the ℓ∞ sensitivity, how much one person can move *one* count: for
``COUNT(DISTINCT <privacy unit>)`` that is one person, however many keys they have. So:

1. *(keys from the data only)* a noisy number of people per key, kept above τ as for any GROUP BY of
   data-derived keys (docs/privacy.md, τ-thresholding): the candidates, an (ε₁, δ)-DP output;
2. per partition, :func:`mechanisms.top_k.dp_top_k` — k rounds of permute-and-flip at ε₂/k over the
   candidates, scored by their exact number of people (sensitivity 1, monotone);
3. the selected keys' numbers of people with discrete Laplace noise: a person is in at most k of the
   selected keys of their partition, so the ℓ1 sensitivity is k.

The shares are equal: ε/2 each (ε/3 with keys from the data). Partitions are disjoint in people: the
engine counts each person only in their first partition (proxy/rewrite/top_k_scores.py), so the
selections of all partitions together cost ε₂ (parallel composition) and their counts ε₃.

When is the selection better? Its per-round noise is about k·Δ∞/ε₂ = 2k/ε; the ordinary answer's is the ℓ1
sensitivity of the counts over ε, min(L, keys) for COUNT(DISTINCT). :func:`selection_applies` takes the
selection when 2k < min(L, keys). For ``COUNT(*)`` one person can put all of their L rows in one key, so
ℓ∞ = ℓ1 = L and the ordinary answer is always the better one: it is kept (docs/sql.md, "Top-k").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from mechanisms.laplace import discrete_laplace_mechanism, laplace_mechanism
from mechanisms.random_source import RandomSource
from mechanisms.top_k import dp_top_k, top_k_rho, top_k_round_epsilon, top_k_score_gap_bound
from proxy.analysis.aggregates import AggregateKind
from proxy.analysis.quantities import THRESHOLD_QUANTITY, Quantity, QuantityKind
from proxy.analysis.shape import QueryShape
from proxy.analysis.top_k import TopK
from proxy.release.apply import Cell, ReleasedTable, noisy_columns, public_cells
from proxy.release.plan import Measurement, ReleasePlan, key_threshold, sensitivity, split_epsilon

MAX_CANDIDATES = 100_000  # keys selected from (the ordinary answer releases at most 10,000 cells)
SELECTION_SENSITIVITY = 1  # one person moves each key's number of people by at most 1
COUNTS = Quantity(QuantityKind.UNITS, None)  # the number of people of each selected key


@dataclass(frozen=True)
class TopKSelection:
    """The selection step of a plan: k rounds (per partition) at ``epsilon``/k each."""

    k: int
    epsilon: float
    candidates: int | None  # keys per partition (public domains); None: keys come from the data
    partitions: int | None  # None: keys come from the data

    @property
    def round_epsilon(self) -> float:
        return top_k_round_epsilon(self.epsilon, self.rounds)

    @property
    def rounds(self) -> int:
        return self.k if self.candidates is None else min(self.k, self.candidates)

    @property
    def mechanism(self) -> str:
        return "exponential (permute-and-flip, monotone, peeling)"

    @property
    def rho(self) -> float:
        return top_k_rho(epsilon=self.epsilon, rounds=self.rounds)

    def score_gap(self, confidence: float = 0.95) -> float:
        """With probability >= confidence, every selected key has at most this many fewer people than
        the k-th largest count of its partition (mechanisms/top_k.py); for keys from the data, among
        the candidates that passed τ (counted as at most 10^6)."""
        return top_k_score_gap_bound(
            epsilon=self.epsilon,
            sensitivity=SELECTION_SENSITIVITY,
            k=self.rounds,
            candidates=self.candidates or 1_000_000,
            confidence=confidence,
            monotone=True,
            outputs=self.partitions or 1,
        )


@dataclass(frozen=True)
class TopKPlan(ReleasePlan):
    """A ReleasePlan whose measurements are the gate (keys from the data only) and the counts of the
    selected keys; ``selection`` is the step in between."""

    selection: TopKSelection | None = None

    @property
    def counts(self) -> Measurement:
        return self.measurements[-1]

    @property
    def gate(self) -> Measurement | None:
        return self.measurements[0] if self.threshold is not None else None

    def describe(self) -> str:
        selection = self.selection
        assert selection is not None
        charge = f"ε={self.epsilon:.4g}" + (f", δ={self.delta:.3g}" if self.delta else "")
        per = " per partition" if self.top_k.partition else ""
        parts = []
        if self.gate is not None:
            parts.append(
                f"candidate keys: number of people above τ={self.threshold:.4g} ε={self.gate.epsilon:.4g}"
            )
        parts.append(
            f"top-{selection.k} selection{per}: exponential mechanism, {selection.rounds} rounds at "
            f"ε={selection.round_epsilon:.4g}, ε={selection.epsilon:.4g}"
        )
        parts.append(f"{self.counts.quantity.label} of the selected keys ε={self.counts.epsilon:.4g}")
        return f"{charge} ({'; '.join(parts)})"

    @property
    def top_k(self) -> TopK:
        top = self.shape.top_k
        assert top is not None
        return top


def selection_applies(shape: QueryShape, *, gaussian: bool, other_row: bool) -> bool:
    """Whether a top-k query is answered by a DP selection (module docstring) rather than noisy counts of
    every key: for COUNT(DISTINCT <privacy unit>) when 2k < min(L, keys), with Laplace noise and without
    the "(other)" row (which needs every key's count)."""
    top = shape.top_k
    if top is None or gaussian or other_row or shape.table.privacy_unit is None:
        return False
    if shape.aggregates[top.count].kind is not AggregateKind.COUNT_UNITS:
        return False
    bound = shape.table.max_contributions
    cells = shape.cells
    if cells is not None and cells > MAX_CANDIDATES:
        return False
    return 2 * top.k < min(bound, cells if cells is not None else bound)


def price_top_k(shape: QueryShape, *, epsilon: float, delta: float) -> TopKPlan:
    """Equal shares of ε for the gate (keys from the data), the selection and the counts; all of δ for
    the gate's τ."""
    top = shape.top_k
    assert top is not None
    parts = 3 if shape.thresholded else 2
    share = split_epsilon(epsilon, parts)
    counts = Measurement(
        quantity=Quantity(QuantityKind.UNITS, None, unit=shape.aggregates[top.count].unit),  # = COUNTS, named
        sensitivity=float(top.k),
        epsilon=share,
        exact_integer=True,
        integer_output=True,
    )
    selection = TopKSelection(top.k, share, *_candidates(shape, top))
    if not shape.thresholded:
        return TopKPlan(shape, (counts,), epsilon, selection=selection)
    bound = shape.table.max_contributions
    gate = Measurement(
        quantity=THRESHOLD_QUANTITY,
        sensitivity=sensitivity(THRESHOLD_QUANTITY, max_contributions=bound, cells=None),
        epsilon=share,
        exact_integer=False,
        integer_output=True,
    )
    threshold_delta = split_epsilon(delta, 1)  # the largest float not above the charged decimal δ
    threshold = key_threshold(gate, bound, threshold_delta)
    return TopKPlan(
        shape,
        (gate, counts),
        epsilon,
        delta,
        threshold,
        threshold_delta=threshold_delta,
        selection=selection,
    )


def _candidates(shape: QueryShape, top: TopK) -> tuple[int | None, int | None]:
    """(keys per partition, partitions) of public domains."""
    if shape.thresholded:
        return None, None
    domains = [len(key.values or ()) for key in shape.group_keys]
    ranked = math.prod(domains[i] for i in top.ranked(len(domains)))
    return ranked, math.prod(domains[i] for i in top.partition)


Row = Sequence[object]


def release_top_k(
    plan: TopKPlan,
    scores: Sequence[Row],
    *,
    rng: RandomSource,
    gate_rows: Sequence[Row] = (),
) -> ReleasedTable:
    """The noisy table: the selected keys of every partition and their noisy numbers of people.

    ``scores``: (keys…, number of people) from the engine, each person in one partition only; a public
    key absent from them has 0. ``gate_rows``: (keys…, bounded number of people) for keys from the data.
    """
    selection = plan.selection
    assert selection is not None
    width = len(plan.shape.group_keys)
    exact = {tuple(row[:width]): int(_whole(row[width])) for row in scores}
    candidates = _gated(plan, gate_rows, rng=rng) if plan.gate is not None else public_cells(plan)
    rows = []
    for cells in _partitions(candidates, plan.top_k.partition).values():
        chosen = dp_top_k(
            [exact.get(cell, 0) for cell in cells],
            k=plan.top_k.k,
            epsilon=selection.epsilon,
            sensitivity=SELECTION_SENSITIVITY,
            rng=rng,
            monotone=True,
        )
        for index in chosen:
            cell = cells[index]
            count = discrete_laplace_mechanism(
                exact.get(cell, 0), sensitivity=plan.counts.sensitivity, epsilon=plan.counts.epsilon, rng=rng
            )
            rows.append((*cell, count))
    return ReleasedTable(noisy_columns(plan), rows)


def _gated(plan: TopKPlan, gate_rows: Sequence[Row], *, rng: RandomSource) -> list[Cell]:
    """Keys from the data whose noisy number of people exceeds τ (docs/privacy.md)."""
    gate = plan.gate
    assert gate is not None and plan.threshold is not None
    width = len(plan.shape.group_keys)
    kept = []
    for row in gate_rows:
        noisy = laplace_mechanism(
            float(_whole(row[width]) if row[width] is not None else 0),
            sensitivity=gate.sensitivity,
            epsilon=gate.epsilon,
            rng=rng,
        )
        if noisy > plan.threshold:
            kept.append(tuple(row[:width]))
    return kept


def _partitions(cells: list[Cell], partition: tuple[int, ...]) -> dict[Cell, list[Cell]]:
    """Candidate cells by the values of the partition keys, in the order they come."""
    groups: dict[Cell, list[Cell]] = {}
    for cell in cells:
        groups.setdefault(tuple(cell[i] for i in partition), []).append(cell)
    return groups


def _whole(value: object) -> int | float:
    """Engine numbers arrive as int, float or Decimal (PostgreSQL's NUMERIC)."""
    if isinstance(value, Decimal):
        return float(value)
    assert isinstance(value, int | float)
    return value
