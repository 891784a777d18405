"""Randomized (l_1..l_q)-diverse and (t_1..t_q)-close releases of sensitive quasi-identifiers.

Sei, Okumura, Takenouchi, Ohsuga, "Anonymization of Sensitive Quasi-Identifiers for l-Diversity and
t-Closeness" (spec ``sensitive-qid-diversity.md`` §3–§4). Every attribute S_j is at once a quasi-identifier
and sensitive, so each record publishes, per attribute, a *set* R_ij of η_j distinct values of the public
domain D(S_j): with probability p_j ("head") the true value plus η_j − 1 others drawn uniformly, otherwise
("tail") η_j values drawn uniformly from the whole domain. The analyst gets (D(S_j), p_j, η_j) and
reconstructs cross-tabulations with :mod:`anonymizers.reconstruction`.

Guarantees, on the *expanded* table (each record replaced by the product R_i1 × … × R_iq, Def 10):

* frequency / entropy [[l_j, j]]-diversity whenever η_j >= l_j — in any class for S_j (records equal on
  the other attributes) each contributing record adds η_j rows with distinct values of S_j, so no value
  exceeds 1/η_j (Thms 2–3; p_j = 1, η_j = l_j gives the smallest expected error, §4.2);
* [[t_j, j]]-closeness when the worst single-record Bayes posterior is within t_j of the whole-table
  distribution A_j (Lemma 1 / Thm 4: EMD is convex, so every class is then within t_j too). (p_j, η_j)
  come from the corrected Algorithm 1 (§4.3): the *worst* published set Z decides p, not each Z apart.

This is not differential privacy: nothing here spends or records a privacy budget.

Worst case over Z [derived]: the posterior is B = A ⊙ (κ_d + (κ_c − κ_d)·1_Z) / (κ_d + a_Z(κ_c − κ_d)),
a_Z = Σ_{m∈Z} A[m], so B − A = g·v_Z with v_Z = A ⊙ (1_Z − a_Z) independent of p and
g = (κ_c − κ_d)/(κ_d + a_Z(κ_c − κ_d)). Any EMD is therefore e_Z·g with e_Z = EMD(v_Z) computed once; for
the equal ground distance e_Z = a_Z(1 − a_Z), the spec's TV(a). g grows with p, so the worst case does
too, which is what the binary search on p needs.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from anonymizers.diversity import Distance, emd
from anonymizers.errors import AnonymizationError

Model = Literal["frequency", "entropy", "closeness", "frequency+closeness"]
MODELS: tuple[Model, ...] = ("frequency", "entropy", "closeness", "frequency+closeness")
EXACT_SUBSETS_LIMIT = 100_000  # enumerate the size-η subsets exactly up to this many (§4.3)
BISECTION_STEPS = 50
_TOLERANCE = 1e-12
_COLUMN_BLOCK = 8  # columns transposed at once: reading one column of a wide table is strided
_ROW_BLOCK = 4096
_POPCOUNT_16 = np.unpackbits(np.arange(1 << 16, dtype=">u2").view(np.uint8)).reshape(-1, 16).sum(axis=1)


@dataclass(frozen=True)
class AttributeRelease:
    """What an analyst needs to read one published attribute (it goes into the metadata file).

    ``domain`` is the public D(S_j) in a fixed order — published sets hold indices into it. ``p`` and ``eta``
    drive the randomization; ``l``/``t`` are the guarantees promised; ``achieved_emd`` the worst-case
    posterior EMD (closeness models); ``expected_l2`` the expected L2 error E_L2 of §4.1 (inf when η = d)."""

    attribute: str
    domain: tuple[str, ...]
    p: float
    eta: int
    model: Model
    l: int | None = None  # noqa: E741 (the paper's name)
    t: float | None = None
    achieved_emd: float | None = None
    expected_l2: float = math.inf
    distance: Distance = "equal"

    def __post_init__(self) -> None:
        where = f"attribute {self.attribute!r}"
        if not self.domain:
            raise AnonymizationError(f"{where}: the domain is empty", hint="list its values in the policy")
        if len(set(self.domain)) != len(self.domain):
            raise AnonymizationError(f"{where}: the domain lists a value twice")
        if self.model not in MODELS:
            raise AnonymizationError(f"{where}: unknown model {self.model!r}", hint=f"use one of {MODELS}")
        if not 0.0 <= self.p <= 1.0:
            raise AnonymizationError(f"{where}: p must be between 0 and 1 (got {self.p})")
        if not 1 <= self.eta <= self.d:
            raise AnonymizationError(f"{where}: eta must be between 1 and the domain size {self.d}")
        if self.model in ("frequency", "entropy", "frequency+closeness"):
            _check_l(self.l, self.d, attribute=self.attribute)
            if self.eta < self.l:  # type: ignore[operator]
                raise AnonymizationError(f"{where}: eta = {self.eta} is smaller than l = {self.l}")
        if self.model in ("closeness", "frequency+closeness"):
            _check_t(self.t)
        if self.distance not in ("equal", "ordered"):
            raise AnonymizationError(f"{where}: unknown ground distance {self.distance!r}")

    @property
    def d(self) -> int:
        return len(self.domain)

    @property
    def p_contains(self) -> float:
        """P_c = F_same: probability that the published set contains the true value."""
        return self.p + (1.0 - self.p) * self.eta / self.d

    @property
    def p_other(self) -> float:
        """F_other: probability that the published set contains one given *other* value (§5.2)."""
        if self.d == 1:
            return 0.0
        return self.p * (self.eta - 1) / (self.d - 1) + (1.0 - self.p) * self.eta / self.d

    def to_metadata(self) -> dict[str, Any]:
        """A JSON-ready dictionary (infinite E_L2 becomes null)."""
        return {
            "attribute": self.attribute,
            "domain": list(self.domain),
            "d": self.d,
            "p": self.p,
            "eta": self.eta,
            "model": self.model,
            "l": self.l,
            "t": self.t,
            "achieved_emd": self.achieved_emd,
            "expected_l2": self.expected_l2 if math.isfinite(self.expected_l2) else None,
            "distance": self.distance,
        }

    @classmethod
    def from_metadata(cls, entry: Mapping[str, Any]) -> AttributeRelease:
        """Read back :meth:`to_metadata`, validating as the constructor does."""
        try:
            expected = entry.get("expected_l2")
            return cls(
                attribute=str(entry["attribute"]),
                domain=tuple(str(value) for value in entry["domain"]),
                p=float(entry["p"]),
                eta=int(entry["eta"]),
                model=entry["model"],
                l=None if entry.get("l") is None else int(entry["l"]),
                t=None if entry.get("t") is None else float(entry["t"]),
                achieved_emd=None if entry.get("achieved_emd") is None else float(entry["achieved_emd"]),
                expected_l2=math.inf if expected is None else float(expected),
                distance=entry.get("distance", "equal"),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise AnonymizationError(
                f"malformed release metadata: {error}", hint="use the metadata file written with the release"
            ) from error


def _check_l(l: int | None, d: int, *, attribute: str | None = None) -> None:  # noqa: E741
    where = f"attribute {attribute!r}: " if attribute else ""
    if l is None or isinstance(l, bool) or int(l) != l or l < 1:
        raise AnonymizationError(f"{where}l must be a whole number of at least 1 (got {l})")
    if d < l:
        raise AnonymizationError(
            f"{where}the domain has {d} values, fewer than l = {l}",
            hint="lower l to at most the domain size, or list more values in the attribute's domain",
        )


def _check_t(t: float | None) -> None:
    if t is None or not 0.0 < t <= 1.0:
        raise AnonymizationError(f"t must be greater than 0 and at most 1 (got {t})")


def expected_l2(n: int, d: int, p: float, eta: int) -> float:
    """E_L2(N, d, p, η) of [S] eq. 9, in the equivalent form
    ``(d − 1)(η(d − 1) − p²(d − η)) / (p²·d·N·(d − η))`` under the square root.

    η = d publishes the whole domain and p = 0 only noise: both carry no information (inf). A one-value
    domain is known exactly (0)."""
    if n < 1 or d < 1 or not 1 <= eta <= d or not 0.0 <= p <= 1.0:
        raise AnonymizationError(
            f"E_L2 needs N >= 1, 1 <= eta <= d and 0 <= p <= 1 (got {n}, {d}, {p}, {eta})"
        )
    if d == 1:
        return 0.0
    if eta == d or p == 0.0:
        return math.inf
    square = (d - 1) * (eta * (d - 1) - p * p * (d - eta)) / (p * p * d * n * (d - eta))
    return math.sqrt(max(square, 0.0))


def diversity_parameters(domain_size: int, l: int) -> tuple[float, int]:  # noqa: E741
    """(p, η) = (1, l): frequency and entropy l-diversity with the smallest E_L2 (Thms 1–3).

    A domain of exactly l values publishes the whole domain every time — diverse but uninformative."""
    _check_l(l, domain_size)
    return 1.0, int(l)


def _kappas(d: int, p: float, eta: int) -> tuple[float, float]:
    """κ_c, κ_d of §4.3: the probability of publishing one given set Z when the true value is in / out of Z."""
    contains = p + (1.0 - p) * eta / d
    outside = math.comb(d - 1, eta)
    return contains / math.comb(d - 1, eta - 1), (1.0 - contains) / outside if outside else 0.0


@dataclass(frozen=True)
class _Subsets:
    """The size-η published sets of one attribute, reduced to what the worst case needs.

    * ``exact`` and ``spread`` given (ordered distance): prior masses a_Z and e_Z = EMD(A ⊙ (1_Z − a_Z)) of
      the sets no other set dominates (smaller or equal mass and larger or equal e_Z is worse: the EMD is
      e_Z·gap/(κ_d + a_Z·gap));
    * ``exact``, no ``spread`` (equal distance): the sorted distinct positive masses — TV(a) is unimodal;
    * not ``exact``: the relaxation interval [a_min, a_max] (sums of the η smallest / largest A values)."""

    mass: np.ndarray
    spread: np.ndarray | None
    exact: bool


@functools.lru_cache(maxsize=64)
def _members(d: int, eta: int) -> np.ndarray:
    """All size-η subsets of range(d) as a read-only bool matrix (subsets × d), shared by the attributes
    of one domain size; small domains filter the 2^d bit masks by popcount (faster than itertools)."""
    if d <= 20:
        masks = np.arange(1 << d, dtype=np.uint32)
        chosen = masks[_POPCOUNT_16[masks & 0xFFFF] + _POPCOUNT_16[masks >> 16] == eta]
        members = ((chosen[:, None] >> np.arange(d, dtype=np.uint32)) & 1).astype(bool)
    else:
        members = np.zeros((math.comb(d, eta), d), dtype=bool)
        index = np.array(list(itertools.combinations(range(d), eta)), dtype=np.intp).reshape(-1, eta)
        members[np.arange(index.shape[0])[:, None], index] = True
    members.flags.writeable = False
    return members


def _subsets(distribution: np.ndarray, eta: int, distance: Distance) -> _Subsets:
    d = distribution.size
    if math.comb(d, eta) > EXACT_SUBSETS_LIMIT:
        ordered = np.sort(distribution)
        return _Subsets(np.array([ordered[:eta].sum(), ordered[-eta:].sum()]), None, exact=False)
    members = _members(d, eta)
    mass = members @ distribution
    if distance == "equal":
        return _Subsets(np.unique(mass[mass > 0.0]), None, exact=True)
    # A + v_Z = A ⊙ (1 + 1_Z − a_Z) is itself a distribution (non-negative, sums to 1): e_Z is its EMD to A
    shifted = distribution[None, :] * (1.0 + members - mass[:, None])
    spread = emd(shifted, distribution, distance="ordered")
    order = np.lexsort((-spread, mass))
    mass, spread = mass[order], spread[order]
    best_before = np.concatenate(([-np.inf], np.maximum.accumulate(spread)[:-1]))
    frontier = spread > best_before
    return _Subsets(mass[frontier], spread[frontier], exact=True)


def _worst_emd(subsets: _Subsets, d: int, p: float, eta: int) -> float:
    """max over published sets Z of EMD(A, B(Z; p, η)). With the equal distance TV(a) =
    a(1 − a)·gap/(κ_d + a·gap) peaks at a* = 1/(1 + sqrt(κ_c/κ_d)) [derived], so the maximum over a finite
    set of masses is at a neighbour of a*, and over the relaxation interval at a* clipped into it (which
    also bounds the ordered distance, <= TV). κ_d = 0 (p = 1) never publishes a set of prior mass 0."""
    if eta >= d:
        return 0.0
    kappa_c, kappa_d = _kappas(d, p, eta)
    gap = kappa_c - kappa_d
    if gap <= 0.0:
        return 0.0
    peak = 1.0 / (1.0 + math.sqrt(kappa_c / kappa_d)) if kappa_d > 0.0 else 0.0
    if subsets.spread is not None:
        mass, spread = subsets.mass, subsets.spread
    elif subsets.exact:
        at = int(np.searchsorted(subsets.mass, peak))
        mass = subsets.mass[max(at - 1, 0) : at + 1]
        spread = mass * (1.0 - mass)
    else:
        low, high = subsets.mass
        if kappa_d == 0.0:
            return float(1.0 - low)  # TV = 1 − a for a > 0: the supremum over (0, high]
        mass = np.array([min(max(peak, low), high)])
        spread = mass * (1.0 - mass)
    denominator = kappa_d + mass * gap
    possible = denominator > 0.0
    values = spread[possible] * gap / denominator[possible]
    return float(values.max()) if values.size else 0.0


def worst_case_emd(distribution: np.ndarray, p: float, eta: int, *, distance: Distance = "equal") -> float:
    """The largest EMD between A and the Bayes posterior of any single published set (eq. 12) — exact when
    C(d, η) <= 10^5, otherwise the safe relaxation of §4.3."""
    prior = _check_distribution(distribution)
    return _worst_emd(_subsets(prior, eta, distance), prior.size, p, eta)


def posterior(distribution: np.ndarray, published_set: Sequence[int], p: float, eta: int) -> np.ndarray:
    """B_j of eq. 12 for one published set Z (indices into the domain)."""
    prior = _check_distribution(distribution)
    kappa_c, kappa_d = _kappas(prior.size, p, eta)
    weights = np.full(prior.size, kappa_d)
    weights[np.asarray(published_set, dtype=np.intp)] = kappa_c
    upsilon = weights * prior
    if upsilon.sum() <= 0.0:
        raise AnonymizationError("this set is never published (prior mass 0 and p = 1)")
    return upsilon / upsilon.sum()  # type: ignore[no-any-return]


def _check_distribution(distribution: np.ndarray) -> np.ndarray:
    prior = np.asarray(distribution, dtype=np.float64)
    if prior.ndim != 1 or prior.size == 0 or (prior < 0).any() or not math.isclose(prior.sum(), 1.0):
        raise AnonymizationError("the whole-table distribution must be non-negative and sum to 1")
    return prior


def _largest_p(subsets: _Subsets, d: int, eta: int, t: float) -> float:
    """Largest p in [0, 1] whose worst case is <= t: bisection, the worst case being non-decreasing in p."""
    if _worst_emd(subsets, d, 1.0, eta) <= t:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(BISECTION_STEPS):
        middle = (low + high) / 2
        if _worst_emd(subsets, d, middle, eta) <= t:
            low = middle
        else:
            high = middle
    return low


def closeness_parameters(
    distribution: np.ndarray,
    n: int,
    t: float,
    *,
    min_eta: int = 1,
    max_eta: int | None = None,
    distance: Distance = "equal",
) -> tuple[float, int, float, float]:
    """(p, η, worst-case EMD, E_L2) for [[t, j]]-closeness: Algorithm 1 of [S] as corrected in §4.3.

    For each η in [min_eta, min(max_eta, d − 1)] the largest p whose worst published set stays within t
    (bisection, 50 steps); keep the η with the smallest E_L2 (ties: the smaller η). ``min_eta = l`` also
    gives frequency l-diversity (§VII-D). When min_eta = d only the whole domain remains (0-close, §VII-C)."""
    _check_t(t)
    prior = _check_distribution(distribution)
    d = prior.size
    if n < 1:
        raise AnonymizationError(f"N must be at least 1 (got {n})")
    _check_l(min_eta, d)
    top = d - 1 if max_eta is None else min(max_eta, d - 1)
    if max_eta is not None and max_eta < min_eta:
        raise AnonymizationError(f"max_eta = {max_eta} is smaller than min_eta = {min_eta}")
    if d == 1 or min_eta == d:
        return 1.0, d, 0.0, expected_l2(n, d, 1.0, d)
    best: tuple[float, int, float, float] | None = None
    for eta in range(min_eta, top + 1):
        subsets = _subsets(prior, eta, distance)
        p = _largest_p(subsets, d, eta, t)
        if p == 0.0:
            continue
        error = expected_l2(n, d, p, eta)
        if best is None or error < best[3]:
            best = (p, eta, _worst_emd(subsets, d, p, eta), error)
    if best is None:
        raise AnonymizationError(
            f"no randomization meets t = {t}", hint="raise t, or allow larger eta (max_eta)"
        )
    return best


def encode(
    values: Sequence[Any] | np.ndarray | pd.Series, domain: Sequence[str], *, attribute: str
) -> np.ndarray:
    """Codes (indices into the public ``domain``) of one column; values outside the domain are refused —
    the domain comes from the policy, never from the data (a data-derived domain leaks rare values)."""
    column = pd.Series(values).astype("string")
    codes = pd.Index(list(domain), dtype="string").get_indexer(column)
    unknown = codes < 0
    if unknown.any():
        missing = column[unknown]
        examples = sorted({str(value) for value in missing.dropna().unique()[:3]})
        nulls = int(missing.isna().sum())
        described = ", ".join(repr(value) for value in examples) + (f" and {nulls} nulls" if nulls else "")
        raise AnonymizationError(
            f"attribute {attribute!r}: {int(unknown.sum())} values are not in the public domain ({described})",
            hint="add them to the attribute's domain in the policy, or recode them first",
        )
    return codes.astype(_code_dtype(len(domain)))


def plan_attribute(
    attribute: str,
    domain: Sequence[str],
    codes: np.ndarray,
    *,
    l: int | None = None,  # noqa: E741
    t: float | None = None,
    diversity: Literal["frequency", "entropy"] = "frequency",
    distance: Distance = "equal",
    max_eta: int | None = None,
) -> AttributeRelease:
    """The release of one attribute: l alone → (1, l) (§4.2); t alone → Algorithm 1; both → Algorithm 1
    with η from l (§VII-D). ``codes`` are the column's codes (only the whole-table distribution is used);
    a non-sensitive QID is l = 1 (it is published as is)."""
    size = len(domain)
    column = np.asarray(codes)
    _check_codes(column, size, attribute=attribute)
    n = int(column.size)
    if n == 0:
        raise AnonymizationError(f"attribute {attribute!r}: the table has no rows")
    if t is None:
        if l is None:
            raise AnonymizationError(f"attribute {attribute!r}: give l, t or both")
        _check_l(l, size, attribute=attribute)
        p, eta = diversity_parameters(size, l)
        return AttributeRelease(
            attribute, tuple(domain), p, eta, diversity, l=l, expected_l2=expected_l2(n, size, p, eta)
        )
    prior = np.bincount(column.astype(np.intp), minlength=size) / n
    if l is not None:
        _check_l(l, size, attribute=attribute)
    p, eta, worst, error = closeness_parameters(
        prior, n, t, min_eta=l or 1, max_eta=max_eta, distance=distance
    )
    model: Model = "closeness" if l is None else "frequency+closeness"
    return AttributeRelease(
        attribute,
        tuple(domain),
        p,
        eta,
        model,
        l=l,
        t=t,
        achieved_emd=worst,
        expected_l2=error,
        distance=distance,
    )


def _code_dtype(d: int) -> np.dtype[Any]:
    return np.dtype(np.uint8) if d <= 256 else np.dtype(np.uint16) if d <= 65536 else np.dtype(np.int64)


def _check_codes(column: np.ndarray, d: int, *, attribute: str) -> None:
    if column.size and (not np.issubdtype(column.dtype, np.integer) or column.min() < 0 or column.max() >= d):
        raise AnonymizationError(
            f"attribute {attribute!r}: codes must be whole numbers in [0, {d})",
            hint="encode the column against the public domain first (sensitive_qid.encode)",
        )


def _uniform_below(high: int, count: int, rng: np.random.Generator, dtype: np.dtype[Any]) -> np.ndarray:
    """``count`` uniform integers in [0, high). Small ranges use the generator's raw bytes with rejection
    (bytes >= 256 − 256 mod high are redrawn, so ``byte % high`` is exactly uniform): about three times
    faster than ``Generator.integers`` at millions of draws."""
    if high > 256:
        return rng.integers(0, high, size=count, dtype=dtype)
    raw = _raw_bytes(count, rng)
    if high == 256:
        return raw.astype(dtype, copy=False)
    limit = 256 - 256 % high
    rejected = np.flatnonzero(raw >= limit)
    while rejected.size:
        fresh = _raw_bytes(rejected.size, rng)
        raw[rejected] = fresh
        rejected = rejected[fresh >= limit]
    return (raw % np.uint8(high)).astype(dtype, copy=False)


def _raw_bytes(count: int, rng: np.random.Generator) -> np.ndarray:
    words = rng.bit_generator.random_raw((count + 7) // 8)
    return np.asarray(words, dtype=np.uint64).view(np.uint8)[:count]


def _distinct_draws(
    count: int, population: int, k: int, rng: np.random.Generator, dtype: np.dtype[Any]
) -> list[np.ndarray]:
    """k distinct values per row, uniform over the k-subsets of range(population), as k columns.

    Floyd's algorithm, vectorized over rows: for j = population − k … population − 1 draw x in [0, j]; if x
    was already taken, take j (never taken yet). Each k-subset is equally likely (Bentley & Floyd 1987)."""
    columns: list[np.ndarray] = []
    for j in range(population - k, population):
        draw = _uniform_below(j + 1, count, rng, dtype)
        if columns:
            taken = columns[0] == draw
            for column in columns[1:]:
                taken |= column == draw
            np.copyto(draw, dtype.type(j), where=taken)
        columns.append(draw)
    return columns


def _sorted_rows(columns: list[np.ndarray]) -> np.ndarray:
    """Columns as rows sorted ascending, in a column-major (Fortran) N × η array: a compare-exchange network
    (odd–even transposition) on whole columns for short rows, five times faster than a per-row sort at
    millions of rows, and column-major so that every later step reads contiguous columns."""
    if len(columns) > 8:
        return np.asfortranarray(np.sort(np.stack(columns, axis=1), axis=1))
    columns = list(columns)
    for round_ in range(len(columns)):
        for i in range(round_ % 2, len(columns) - 1, 2):
            low = np.minimum(columns[i], columns[i + 1])
            columns[i + 1] = np.maximum(columns[i], columns[i + 1])
            columns[i] = low
    rows = np.empty((columns[0].size, len(columns)), dtype=columns[0].dtype, order="F")
    for i, column in enumerate(columns):
        rows[:, i] = column
    return rows


def randomize_attribute(
    true_codes: np.ndarray, release: AttributeRelease, rng: np.random.Generator
) -> np.ndarray:
    """N × η published codes for one attribute, each row sorted and distinct (§3); column-major.

    Head (probability p): the true value plus η − 1 distinct others. Tail: η distinct values of the whole
    domain, drawn as one uniform "anchor" plus η − 1 distinct others — Σ_{u∈Z} (1/d)/C(d−1, η−1) = 1/C(d, η),
    so both branches share one sampler: others are drawn from range(d − 1) and shifted past the anchor."""
    column = np.asarray(true_codes)
    d, eta, count = release.d, release.eta, column.size
    _check_codes(column, d, attribute=release.attribute)
    dtype = _code_dtype(d)
    anchor = column.astype(dtype, copy=True)
    if release.p < 1.0:
        tail = np.flatnonzero(rng.random(count) >= release.p)
        anchor[tail] = _uniform_below(d, tail.size, rng, dtype)
    others = _distinct_draws(count, d - 1, eta - 1, rng, dtype)
    for other in others:
        other += other >= anchor
    return _sorted_rows([anchor, *others])


def randomize(
    codes: np.ndarray | Sequence[np.ndarray], releases: Sequence[AttributeRelease], rng: np.random.Generator
) -> list[np.ndarray]:
    """Per attribute, the N × η_j published codes (column-major) of the records: ``codes`` is N × q (indices
    into each domain) or q columns. Rows stay aligned with the input: shuffling the row order is the
    writer's job (§3)."""
    return [
        randomize_attribute(column, release, rng)
        for column, release in zip(_columns(codes, len(releases)), releases, strict=True)
    ]


def _columns(codes: np.ndarray | Sequence[np.ndarray], width: int) -> Iterator[np.ndarray]:
    """The q code columns, contiguous: a wide N × q array is transposed a few columns at a time (reading
    one column of it is strided), a sequence of columns is used as it is."""
    if isinstance(codes, np.ndarray):
        if codes.ndim != 2 or codes.shape[1] != width:
            raise AnonymizationError(f"codes must be records × {width} attributes (got shape {codes.shape})")
        for start in range(0, width, _COLUMN_BLOCK):
            block = codes[:, start : start + _COLUMN_BLOCK]
            columns = np.empty((block.shape[1], block.shape[0]), dtype=block.dtype)
            for row in range(0, block.shape[0], _ROW_BLOCK):  # tiles that stay in cache: 3x faster
                columns[:, row : row + _ROW_BLOCK] = block[row : row + _ROW_BLOCK].T
            yield from columns
        return
    if len(codes) != width or len({np.shape(column) for column in codes}) > 1:
        raise AnonymizationError(f"codes must be {width} columns of equal length")
    for column in codes:
        yield np.asarray(column)


def expand(published: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The expanded form of a release (§3): each record's product R_i1 × … × R_iq as Π η_j rows, in
    lexicographic order of the sets. Returns (codes rows × q, record index per row) — for small tables."""
    if not published:
        raise AnonymizationError("nothing to expand: no attributes")
    count = published[0].shape[0]
    etas = [array.shape[1] for array in published]
    combinations = np.array(list(itertools.product(*(range(eta) for eta in etas))), dtype=np.intp)
    rows = np.stack([array[:, combinations[:, j]] for j, array in enumerate(published)], axis=2)
    return rows.reshape(-1, len(published)), np.repeat(np.arange(count), combinations.shape[0])


def verify_release(
    codes: np.ndarray | Sequence[np.ndarray],
    published: Sequence[np.ndarray],
    releases: Sequence[AttributeRelease],
) -> None:
    """Refuse (AnonymizationError) a release that does not keep its promises, before anything is written.

    Per attribute: every published set holds η_j distinct in-domain codes in ascending order; with p = 1 it
    contains the true value; for l: η_j >= l_j, which proves frequency and entropy [[l_j, j]]-diversity of
    every expanded class (each contributing record adds η_j distinct values of S_j to it — module
    docstring); for t: the worst-case posterior EMD recomputed from (p_j, η_j, A_j) is <= t_j."""
    if len(published) != len(releases):
        raise AnonymizationError("the release does not match the table: one published array per attribute")
    for column, array, release in zip(_columns(codes, len(releases)), published, releases, strict=True):
        _verify_attribute(column, np.asarray(array), release)


def _verify_attribute(true_codes: np.ndarray, array: np.ndarray, release: AttributeRelease) -> None:
    where = f"attribute {release.attribute!r}"
    if array.shape != (true_codes.size, release.eta) or not np.issubdtype(array.dtype, np.integer):
        raise AnonymizationError(f"{where}: expected {true_codes.size} × {release.eta} published codes")
    if array.size and (array.min() < 0 or array.max() >= release.d):
        raise AnonymizationError(f"{where}: a published code is outside the domain")
    columns = [array[:, i] for i in range(release.eta)]  # column-wise: 2-D reductions over η are slow
    if not all((later > earlier).all() for earlier, later in itertools.pairwise(columns)):
        raise AnonymizationError(f"{where}: a published set repeats a value or is not sorted")
    if release.p == 1.0:
        contains = columns[0] == true_codes
        for column in columns[1:]:
            contains |= column == true_codes
        if not contains.all():
            raise AnonymizationError(f"{where}: p = 1 but a published set misses the true value")
    if release.l is not None and release.eta < release.l:
        raise AnonymizationError(f"{where}: sets of {release.eta} values cannot give l = {release.l}")
    if release.t is not None and true_codes.size:
        prior = np.bincount(true_codes.astype(np.intp), minlength=release.d) / true_codes.size
        worst = worst_case_emd(prior, release.p, release.eta, distance=release.distance)
        if worst > release.t + _TOLERANCE:
            raise AnonymizationError(
                f"{where}: the worst-case posterior EMD {worst:.6g} exceeds t = {release.t}",
                hint="recompute p and eta on this table (plan_attribute)",
            )
