"""How many sample-unique records are also unique in the population: the Poisson–gamma estimator.

Spec simulated-attack-risk.md §9 (slides 002, "標本一意性、母集団一意性"). A released table that is a
sample (rate λ) of a population of N_0 people: a record unique in the sample need not be unique in the
population. Cell frequencies are Poisson(N_0·π_i) with π_i ~ Gamma(α, β), αβ = 1/K over the K cells of
the quasi-identifier space, which gives

    E(S_1) = N_0 / (1 + N_0β)^(1 + 1/(Kβ))          expected population uniques
    E(s_1) = λN_0 / (1 + λN_0β)^(1 + 1/(Kβ))        expected sample uniques
    U = s_1 · ((1 + λN_0β)/(1 + N_0β))^(1 + 1/(Kβ)) records unique in both, s_1 observed.

β comes from the moment identity Var f = μ(1 + λN_0β), μ = λN_0/K, which holds over *all* K cells (empty
ones included). Under-dispersed samples (β <= 0) leave the gamma model; the Poisson limit
U = s_1·exp(−(1 − λ)N_0/K) is used instead [derived]. N_0 comes from policy, never from the data, and so
does K where a domain is declared (:func:`column_domain`): the cells a population *can* occupy, not the
values a sample happened to show. Counting only the values seen shrinks K — on Adult's sex × age × race,
72 ages seen of the 120 declared, 720 cells instead of 1,200 — and U with it (0.285 instead of 0.402).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from anonymizers.errors import AnonymizationError
from anonymizers.hierarchy import ROOT, Hierarchy


def expected_population_uniques(*, population: float, cells: float, beta: float) -> float:
    """E(S_1) = N_0 / (1 + N_0β)^(1 + 1/(Kβ))."""
    return population / (1.0 + population * beta) ** (1.0 + 1.0 / (cells * beta))


def expected_sample_uniques(
    *, population: float, cells: float, beta: float, sampling_fraction: float
) -> float:
    """E(s_1) = λN_0 / (1 + λN_0β)^(1 + 1/(Kβ))."""
    sampled = sampling_fraction * population
    return sampled / (1.0 + sampled * beta) ** (1.0 + 1.0 / (cells * beta))


def estimate_beta(*, variance: float, population: float, cells: float, sampling_fraction: float) -> float:
    """β = (1/(λN_0))·((K/(λN_0))·s_f² − 1), s_f² the unbiased variance over all K cells."""
    sampled = sampling_fraction * population
    return ((cells / sampled) * variance - 1.0) / sampled


@dataclass(frozen=True)
class PopulationUniqueness:
    """Sample uniques s_1, the fitted β and U, the estimated records unique in sample and population."""

    sample_uniques: int
    beta: float
    population_uniques: float
    model: Literal["poisson-gamma", "poisson"]
    population: float
    cells: float
    sampling_fraction: float


def estimate_population_uniques(
    frequencies: np.ndarray, *, cells: float, population: float, sampling_fraction: float
) -> PopulationUniqueness:
    """U from the sample's non-empty cell frequencies (the class sizes of its quasi-identifiers).

    ``cells`` is K (the product of the quasi-identifiers' domain sizes), ``population`` N_0 and
    ``sampling_fraction`` λ — all from policy.
    """
    frequencies = np.asarray(frequencies, dtype=float)
    if not 0 < sampling_fraction <= 1 or population <= 0 or cells < max(2, len(frequencies)):
        raise AnonymizationError(
            "population uniqueness needs 0 < λ <= 1, N_0 > 0 and K at least the number of occupied cells",
            hint="K is the number of possible quasi-identifier combinations, N_0 the population size",
        )
    total = frequencies.sum()
    variance = (np.square(frequencies).sum() - total**2 / cells) / (cells - 1)
    beta = estimate_beta(
        variance=variance, population=population, cells=cells, sampling_fraction=sampling_fraction
    )
    s1 = int((frequencies == 1).sum())
    if beta <= 0:
        uniques = s1 * math.exp(-(1.0 - sampling_fraction) * population / cells)
        model: Literal["poisson-gamma", "poisson"] = "poisson"
    else:
        uniques = population_uniques(
            s1, population=population, cells=cells, beta=beta, sampling_fraction=sampling_fraction
        )
        model = "poisson-gamma"
    return PopulationUniqueness(s1, beta, uniques, model, population, cells, sampling_fraction)


def population_uniques(
    sample_uniques: float, *, population: float, cells: float, beta: float, sampling_fraction: float
) -> float:
    """U = s_1 · ((1 + λN_0β)/(1 + N_0β))^(1 + 1/(Kβ)) for β > 0."""
    ratio = (1.0 + sampling_fraction * population * beta) / (1.0 + population * beta)
    return sample_uniques * ratio ** (1.0 + 1.0 / (cells * beta))


@dataclass(frozen=True)
class Domain:
    """How many values one quasi-identifier can take in the released table, and who said so."""

    size: int
    source: Literal["hierarchy", "policy", "observed"]


@dataclass(frozen=True)
class DeclaredValues:
    """A policy's domain of a column's raw values: its size and a test of a value's text."""

    size: int
    holds: Callable[[str], bool]


def column_domain(
    values: Iterable[str], *, hierarchy: Hierarchy | None, policy: DeclaredValues | None
) -> Domain:
    """One factor of K for a column whose released values (as text) are ``values``.

    A declared hierarchy (a file, not one built from the data) gives the labels of its lowest level that
    holds every released value, so a column released at level 2 counts level-2 labels; else the policy's
    domain, when the values are raw values of it; else, with nothing declared, the distinct values seen.
    ``*`` (a suppressed record) is set aside when placing the values on a level.
    """
    seen = set(values)
    shown = seen - {ROOT} or seen
    if hierarchy is not None:
        level = next((set(labels) for labels in hierarchy.labels if shown <= set(labels)), None)
        if level is not None:
            return Domain(len(level), "hierarchy")
    if policy is not None and all(policy.holds(value) for value in shown):
        return Domain(policy.size, "policy")
    return Domain(len(seen), "observed")


def cell_count(domains: Mapping[str, Domain]) -> float:
    """K: the product of the quasi-identifiers' domain sizes."""
    return float(np.prod([domain.size for domain in domains.values()]))
