"""Risk-targeted release: of the transformations a small search explores, the one with the least
information loss whose risk is at most a target R — or none, and then nothing is released.

Why a search and not a formula: a data holder can bet a release on a risk figure ("at most 1 in 20"), but
k, the suppression limit, ε and the sampling rate are only indirectly tied to it — the optimum at k = 5
may reach k = 16, a sampled outlier stays at risk 1 whatever α is. So candidates are *measured* with the
very measure the report gives, and the best one under R is chosen. Every candidate explored is kept (the
frontier) so the report shows what each step of privacy costs.

Risk measures (``MEASURES``; each is the figure of the report it names, compared with R):

* ``simulated`` — 1/n_q of the simulated attack ([D] ch. 4 Algorithm 2, :mod:`anonymizers.risk.attack`);
  under global recoding a record's candidates are its class (:mod:`anonymizers.risk.classes`), so it is
  1/(smallest released class), the prosecutor's maximum;
* ``prosecutor`` — max 1/|class|; ``marketer`` — #classes/#released records (an average, so it can be met
  with small classes); ``journalist`` — max λ/|class| with λ the share of the population the released table
  is (``--sampling-fraction``, times α when ``combine`` samples) — :mod:`anonymizers.risk.classic`.

k-anonymity by optimal global recoding (:func:`kanon_frontier`) — a *monotone search*. For a fixed
suppression limit s, the least loss is non-decreasing in k: a node feasible at k is feasible at every
smaller k, and raising k can only suppress more of it, at cost 1 per record (≥ any label's share; the same
holds for GCP, precision and discernibility). So for each s of a small grid the search walks k up the
1-2-5 series (plus ⌈1/R⌉, ⌈λ/R⌉ for the journalist, the smallest k that guarantees the max measures) and
stops at the first k whose release meets R: no larger k can lose less. It also stops when k becomes
infeasible within s (then every larger k is). Every candidate is one lattice search on the *same* frequency
set, computed once by the engine; the risk comes from the chosen node's class sizes — no rows are read.

``combine`` (:func:`combine_grid`) — a *small grid*, evaluated in full: every noise step's ε times
1, 1/2, 1/4, 1/8 (the user's split between columns kept) × the sampling rate α (the given one, or 1 = no
sampling, and each of 0.9, 0.7, 0.5 below it): 16 candidates at most. Why not a monotone walk: each
candidate is a random draw, and risk and loss are monotone in ε and α only in expectation — a walk would
stop on a lucky draw. With a seed, every candidate uses the same seed (common random numbers: candidates
differ by their parameters, not by their luck). The chosen draw is the one written: drawing again could
exceed R. Loss = :attr:`anonymizers.utility.InformationLoss.cell_loss`.

Ties in loss go to the lower risk, then to the candidate explored first (less suppression, larger ε).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from anonymizers.errors import AnonymizationError, InfeasibleError
from anonymizers.frequency import FrequencyProvider
from anonymizers.global_recoding import GlobalRecodingResult, PrivacyModel, search
from anonymizers.risk.classes import class_attack
from anonymizers.risk.classic import ClassicRisk, classic_from_sizes
from anonymizers.risk.pipeline import AttributePipeline, Laplace, Pipeline, Randomize, Sample, Step

MEASURES = ("simulated", "prosecutor", "journalist", "marketer")
SUPPRESSION_STEPS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2)
EPSILON_FACTORS = (1.0, 0.5, 0.25, 0.125)
SAMPLE_RATES = (0.9, 0.7, 0.5)
K_SERIES = (1, 2, 5)  # times powers of ten
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Target:
    """At most ``max_risk`` by ``measure``; ``sampling_fraction`` is λ for the journalist measure."""

    max_risk: float
    measure: str = "simulated"
    sampling_fraction: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.max_risk <= 1:
            raise AnonymizationError(f"--max-risk must be in (0, 1], got {self.max_risk}")
        if self.measure not in MEASURES:
            raise AnonymizationError(
                f"unknown risk measure {self.measure!r}", hint=f"choose one of: {', '.join(MEASURES)}"
            )
        if self.measure == "journalist" and self.sampling_fraction is None:
            raise AnonymizationError(
                "--risk-measure journalist needs --sampling-fraction λ (the table's share of the population)"
            )

    def guaranteeing_k(self) -> int | None:
        """The smallest k whose release meets the target whatever the classes are, for the measures that
        are a function of the smallest class (None for the marketer's average)."""
        if self.measure == "marketer":
            return None
        scale = self.sampling_fraction if self.measure == "journalist" else 1.0
        return math.ceil(scale / self.max_risk - 1e-9)


@dataclass(frozen=True)
class Candidate:
    """One explored transformation: its parameters, risk by the target's measure and information loss
    (both None when no release exists with these parameters)."""

    parameters: dict[str, Any]
    risk: float | None
    loss: float | None
    note: str | None = None

    def meets(self, max_risk: float) -> bool:
        """Risk ≤ R, with room for rounding (1/k computed for R = 1/k must meet it)."""
        return self.risk is not None and self.risk <= max_risk + 1e-12

    def describe(self) -> str:
        return ", ".join(f"{key}={_text(value)}" for key, value in self.parameters.items())


@dataclass(frozen=True)
class Frontier:
    """Every candidate explored, in order, and the index of the chosen one (None: none meets R)."""

    target: Target
    utility: str
    design: str
    candidates: tuple[Candidate, ...]
    chosen: int | None = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "chosen", choose(self.candidates, self.target.max_risk))

    def lowest_risk(self) -> Candidate | None:
        """The candidate closest to the target, for the refusal message."""
        measured = [c for c in self.candidates if c.risk is not None]
        return min(measured, key=lambda c: (c.risk, c.loss)) if measured else None

    def refusal(self, hint: str) -> AnonymizationError:
        """One line: the target, the best risk reached and with what parameters; ``hint`` says what the
        command's user can loosen."""
        best = self.lowest_risk()
        reached = (
            "no candidate could be released"
            if best is None
            else f"the lowest {self.target.measure} risk reached is {best.risk:.6g} ({best.describe()})"
        )
        return AnonymizationError(
            f"no release meets --max-risk {self.target.max_risk:g}: {reached}; nothing was written", hint=hint
        )

    def to_dict(self) -> dict[str, Any]:
        """The report's ``search`` section."""
        return {
            "max_risk": self.target.max_risk,
            "risk_measure": self.target.measure,
            "sampling_fraction": self.target.sampling_fraction,
            "utility": self.utility,
            "design": self.design,
            "candidates": [
                {
                    "parameters": c.parameters,
                    "risk": c.risk,
                    "loss": c.loss,
                    "meets_target": c.meets(self.target.max_risk),
                    "chosen": i == self.chosen,
                    **({"note": c.note} if c.note else {}),
                }
                for i, c in enumerate(self.candidates)
            ],
            "chosen": None if self.chosen is None else self.candidates[self.chosen].parameters,
        }


def choose(candidates: Sequence[Candidate], max_risk: float) -> int | None:
    """The index of the least-loss candidate whose risk is ≤ ``max_risk`` (ties: lower risk, then the
    first explored); None when none is."""
    meeting = [i for i, c in enumerate(candidates) if c.meets(max_risk)]
    return min(meeting, key=lambda i: (candidates[i].loss, candidates[i].risk, i)) if meeting else None


# --- k-anonymity by optimal global recoding -------------------------------------------------------------


def k_grid(k_min: int, records: int, target: Target) -> list[int]:
    """k from ``k_min`` up the 1-2-5 series to the number of records, plus the guaranteeing k."""
    values = {k_min}
    scale = 1
    while scale <= records:
        values |= {step * scale for step in K_SERIES if k_min < step * scale <= records}
        scale *= 10
    guarantee = target.guaranteeing_k()
    if guarantee is not None and k_min < guarantee <= records:
        values.add(guarantee)
    return sorted(values)


def suppression_grid(limit: float) -> list[float]:
    """The suppression limits tried: the steps of ``SUPPRESSION_STEPS`` below ``limit``, and ``limit``."""
    return sorted({*(s for s in SUPPRESSION_STEPS if s < limit), limit})


def kanon_frontier(
    provider: FrequencyProvider,
    qi: Sequence[str],
    target: Target,
    *,
    model: PrivacyModel,
    suppression_limit: float,
    metric: str = "loss",
    progress: Progress | None = None,
) -> tuple[Frontier, GlobalRecodingResult | None]:
    """The monotone search of the module docstring over one frequency set; ``model.k`` is the smallest k
    tried. Returns the frontier and the chosen node's result (None when no candidate meets R)."""
    ks, limits = k_grid(model.k, provider.total, target), suppression_grid(suppression_limit)
    candidates: list[Candidate] = []
    best: tuple[Candidate, GlobalRecodingResult] | None = None
    if progress is not None:
        progress(0, len(ks) * len(limits))  # an upper bound: each walk stops at the first k meeting R
    for limit in limits:
        for k in ks:
            result = _optimum(provider, qi, replace(model, k=k), limit, metric)
            candidate = _kanon_candidate({"k": k, "suppression_limit": limit}, result, metric, target)
            candidates.append(candidate)
            if result is not None and _displaces(
                candidate, None if best is None else best[0], target.max_risk
            ):
                best = (candidate, result)
            if progress is not None:
                progress(len(candidates), len(ks) * len(limits))
            if result is None or candidate.meets(target.max_risk):
                break  # a larger k cannot lose less, or cannot be met at all
    design = "monotone search: k walked up per suppression limit until the risk meets the target"
    return Frontier(target, metric, design, tuple(candidates)), None if best is None else best[1]


def _optimum(
    provider: FrequencyProvider, qi: Sequence[str], model: PrivacyModel, limit: float, metric: str
) -> GlobalRecodingResult | None:
    """The optimal node for one (k, suppression limit), None when no node meets k within the limit."""
    try:
        return search(provider, qi, model, suppression_limit=limit, metric=metric)
    except InfeasibleError:
        return None


def kanon_risk(target: Target, result: GlobalRecodingResult) -> float:
    """The target's measure of a global recoding, from its released class sizes (0 if none released)."""
    sizes = result.classes.counts[~result.suppressed]
    if not len(sizes):
        return 0.0
    if target.measure == "simulated":
        return class_attack(sizes, result.suppressed_records).risk
    return classic_measure(target, classic_from_sizes(sizes, sampling_fraction=target.sampling_fraction))


def classic_measure(target: Target, risk: ClassicRisk) -> float:
    """The figure of a :class:`~anonymizers.risk.classic.ClassicRisk` the target names."""
    if target.measure == "prosecutor":
        return float(risk.prosecutor_max)
    if target.measure == "marketer":
        return float(risk.marketer)
    return float(risk.journalist_max)


def _kanon_candidate(
    parameters: dict[str, Any], result: GlobalRecodingResult | None, metric: str, target: Target
) -> Candidate:
    if result is None:
        return Candidate(parameters, None, None, "infeasible: no node meets k within the suppression limit")
    return Candidate(parameters, kanon_risk(target, result), float(result.metrics[metric]))


def _displaces(candidate: Candidate, incumbent: Candidate | None, max_risk: float) -> bool:
    """Whether ``candidate``, explored after ``incumbent``, is the better choice by :func:`choose` — so
    that only the best release so far is kept in memory, not every candidate's."""
    if not candidate.meets(max_risk):
        return False
    return incumbent is None or (candidate.loss, candidate.risk) < (incumbent.loss, incumbent.risk)


# --- combine ----------------------------------------------------------------------------------------------


def combine_grid(pipeline: Pipeline) -> list[tuple[dict[str, Any], Pipeline]]:
    """The candidates of the module docstring: (parameters for the report, pipeline to run)."""
    start = 1.0 if pipeline.sample is None else pipeline.sample.rate
    rates = [start, *(rate for rate in SAMPLE_RATES if rate < start)]
    noisy = any(_noisy(step) for attribute in pipeline.attributes for step in attribute.steps)
    factors = EPSILON_FACTORS if noisy else (1.0,)
    grid = []
    for rate in rates:
        for factor in factors:
            scaled = Pipeline(
                tuple(_scaled(attribute, factor) for attribute in pipeline.attributes),
                None if rate == 1.0 else Sample(rate),
            )
            grid.append(({**_epsilons(scaled), "sample_rate": rate}, scaled))
    return grid


def _noisy(step: Step) -> bool:
    return isinstance(step, Laplace | Randomize)


def _scaled(attribute: AttributePipeline, factor: float) -> AttributePipeline:
    steps = tuple(
        replace(s, epsilon=s.epsilon * factor) if isinstance(s, Laplace | Randomize) else s
        for s in attribute.steps
    )
    return AttributePipeline(attribute.attribute, steps)


def _epsilons(pipeline: Pipeline) -> dict[str, Any]:
    """ε per noised column (the sum of its noise steps' ε: what the column's value costs)."""
    spent = {
        attribute.attribute: sum(s.epsilon for s in attribute.steps if isinstance(s, Laplace | Randomize))
        for attribute in pipeline.attributes
        if any(_noisy(s) for s in attribute.steps)
    }
    return {"epsilon": spent} if spent else {}


def combine_frontier(
    grid: Sequence[tuple[dict[str, Any], Pipeline]],
    target: Target,
    evaluate: Callable[[Pipeline], tuple[Any, float, float]],
    *,
    progress: Progress | None = None,
) -> tuple[Frontier, Any, Pipeline | None]:
    """Every grid point: ``evaluate(pipeline)`` draws a release and returns (release, risk, loss). Returns
    the frontier, the chosen release (the very draw that was measured) and its pipeline, or Nones."""
    candidates: list[Candidate] = []
    best: tuple[Candidate, Any, Pipeline] | None = None
    if progress is not None:
        progress(0, len(grid))
    for parameters, pipeline in grid:
        release, risk, loss = evaluate(pipeline)
        candidate = Candidate(parameters, risk, loss)
        candidates.append(candidate)
        if _displaces(candidate, None if best is None else best[0], target.max_risk):
            best = (candidate, release, pipeline)
        if progress is not None:
            progress(len(candidates), len(grid))
    design = "grid: every noise step's ε × 1, 1/2, 1/4, 1/8 and sampling rates, every point drawn"
    frontier = Frontier(target, "cell_loss", design, tuple(candidates))
    return (frontier, None, None) if best is None else (frontier, best[1], best[2])


def _text(value: object) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
