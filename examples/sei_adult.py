"""Sensitive quasi-identifiers on UCI Adult: (l_1..l_q)-diversity and (t_1..t_q)-closeness (Sei et al., seed 001).

Every attribute of Adult is treated as a sensitive quasi-identifier (spec ``sensitive-qid-diversity.md``):
each record publishes, per attribute, a *set* of η_j values of the attribute's public domain
(:mod:`anonymizers.sensitive_qid`), and an analyst reconstructs cross-tabulations over q' attributes from
the sets alone (:mod:`anonymizers.reconstruction`). The script re-runs the paper's evaluation (§VI):

* all l_j = l for l = 2..10 (frequency diversity, (p_j, η_j) = (1, l_j); l_j = d_j − 1 when d_j <= l), and
  all t_j = t for t = 0.1..0.5 (closeness, Algorithm 1 as corrected in spec §4.3, equal ground distance);
* per setting one randomized release of the whole table (checked by ``verify_release``), then for
  q' = 1..4 the same random attribute subsets (``--subsets`` distinct ones per q', or all when there are
  fewer): the true cross-tabulation against the proposed EM reconstruction, ValueAdding and Random (a
  multinomial draw of N records over the cells), by L1, L2 and Hellinger (Defs 6–8), averaged over the
  subsets;
* Fig. 7 of the paper: the age × occupation histogram at l = 5, original against both reconstructions.

EM stopping rule. The library stops when no cell moves by ``tol_fraction``·N (default 1e-6) in one step, or
after 10,000 steps. When the kernel smooths hard (large η next to d, or closeness with small p) every step is
tiny and this rule stops after the first step, where EM is no better than ValueAdding (the docstring of
``reconstruct_em`` warns about it). The script reports the library's default rule ("EM (default rule)") and,
beside it, what its docstring advises for that case ("EM (restart)"): when the default rule stops after one
step while some attribute of the query is randomized (one step is exact when every attribute publishes its
true value alone), the iteration is run again with tol ``--restart-tol``·N (default 1e-9) and at most 10,000
steps; otherwise the two are the same. The tables show the default rule and, per row, how many queries were
restarted and what that did to their mean L1. ``--restart-tol 0`` never restarts.

Categorization (the paper does not say how it categorized): age in 10-year bins, hours-per-week in 10-hour
bins, capital-gain and capital-loss {0, >0}, education-num as it is (1..16), fnlwgt in deciles. Domains are
declared here from UCI's adult.names (public), except the fnlwgt decile cut points, which come from the data
(see docs/reproductions.md). Rows with an unknown value ("?") are dropped: 30,162 of the training file's
32,561 (the paper's 45,222 also include the 15,060-row test file, which is not in ../shared/data).

    .venv/bin/python examples/sei_adult.py [--data ../shared/data/adult.data] [--seed 1] [--subsets 10]
        [--ls 2,...,10] [--ts 0.1,...,0.5] [--restart-tol 1e-9] [--attributes age,sex,...] [--plot-dir DIR]
        [--workers N] [--json]

``--plot-dir`` writes ``sei_diversity.png``, ``sei_closeness.png`` and ``sei_age_occupation.png`` (needs the
``[plot]`` extra). ``--attributes`` restricts the attributes that queries are drawn from (all 15 are still
anonymized). Without adult.data the script exits with the download address before any work. The default
run takes about 2.5 minutes on 2 cores (``--workers``: settings run in forked processes; the result does not
depend on their number). The seed is an experiment's, printed with the results; a production release never
takes one. Results and discussion: docs/reproductions.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from anonymizers.errors import AnonymizationError
from anonymizers.plots import DPI, require_matplotlib
from anonymizers.reconstruction import (
    cross_tabulation,
    em_from_counts,
    hellinger,
    l1,
    l2,
    published_counts,
    random_baseline,
    reconstruct_value_adding,
)
from anonymizers.sensitive_qid import AttributeRelease, encode, plan_attribute, randomize, verify_release
from proxy.cli.sources import progress_callback

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult.data"
DOWNLOAD_HINT = (
    "Download the UCI Adult training file (https://archive.ics.uci.edu/dataset/2/adult, file adult.data) "
    "and pass --data PATH."
)
COLUMNS = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
]
UNKNOWN = "?"
LS = tuple(range(2, 11))
TS = (0.1, 0.2, 0.3, 0.4, 0.5)
QS = (1, 2, 3, 4)
METHODS = ("em", "restart", "value_adding", "random")
METHOD_NAMES = {
    "em": "EM (default rule)",
    "restart": "EM (restart)",
    "value_adding": "ValueAdding",
    "random": "Random",
}
METRICS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {"L1": l1, "L2": l2, "Hellinger": hellinger}
DEFAULT_TOL = 1e-6  # the library's default rule
RESTART_TOL = 1e-9
FIGURE_L = 5
FIGURE_ATTRIBUTES = ("age", "occupation")

# Public domains: UCI's adult.names and the bins declared here; nothing read from the data but the fnlwgt
# decile cut points (FNLWGT_BINS).
AGE_BINS = tuple(f"{low}-{low + 9}" for low in range(10, 100, 10))  # adult.names: age 17..90
HOURS_BINS = tuple(f"{low}-{low + 9}" for low in range(0, 100, 10))  # 1..99
POSITIVE_OR_ZERO = ("0", ">0")
FNLWGT_BINS = tuple(f"D{decile}" for decile in range(1, 11))
DOMAINS: dict[str, tuple[str, ...]] = {
    "age": AGE_BINS,
    "workclass": ("Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov",
                  "Without-pay", "Never-worked"),
    "fnlwgt": FNLWGT_BINS,
    "education": ("Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm", "Assoc-voc",
                  "9th", "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate", "5th-6th", "Preschool"),
    "education-num": tuple(str(years) for years in range(1, 17)),
    "marital-status": ("Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed",
                       "Married-spouse-absent", "Married-AF-spouse"),
    "occupation": ("Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial",
                   "Prof-specialty", "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical",
                   "Farming-fishing", "Transport-moving", "Priv-house-serv", "Protective-serv", "Armed-Forces"),
    "relationship": ("Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"),
    "race": ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"),
    "sex": ("Female", "Male"),
    "capital-gain": POSITIVE_OR_ZERO,
    "capital-loss": POSITIVE_OR_ZERO,
    "hours-per-week": HOURS_BINS,
    "native-country": ("United-States", "Cambodia", "England", "Puerto-Rico", "Canada", "Germany",
                       "Outlying-US(Guam-USVI-etc)", "India", "Japan", "Greece", "South", "China", "Cuba", "Iran",
                       "Honduras", "Philippines", "Italy", "Poland", "Jamaica", "Vietnam", "Mexico", "Portugal",
                       "Ireland", "France", "Dominican-Republic", "Laos", "Ecuador", "Taiwan", "Haiti",
                       "Columbia", "Hungary", "Guatemala", "Nicaragua", "Scotland", "Thailand", "Yugoslavia",
                       "El-Salvador", "Trinadad&Tobago", "Peru", "Hong", "Holand-Netherlands"),
    "income": ("<=50K", ">50K"),
}  # fmt: skip
ATTRIBUTES = tuple(DOMAINS)

Progress = Callable[[int, int], None]


def _no_progress(done: int, total: int) -> None:
    """No bar: the default when the caller shows none."""


# --- data -------------------------------------------------------------------------------------------------


def load_adult(path: Path) -> pd.DataFrame:
    """adult.data as strings (comma+space CSV, with or without a header line), rows with "?" dropped."""
    if not path.is_file():
        sys.exit(f"{path} not found. {DOWNLOAD_HINT}")
    with path.open(encoding="utf-8") as handle:
        has_header = handle.readline().startswith("age,")
    frame = pd.read_csv(
        path, names=COLUMNS, header=0 if has_header else None, skipinitialspace=True, dtype=str
    ).dropna(subset=["income"])
    frame["income"] = frame["income"].str.rstrip(".")  # the test file writes ">50K."
    known = ~(frame == UNKNOWN).any(axis=1)
    return frame[known].reset_index(drop=True)


def _bins(values: pd.Series, width: int, labels: Sequence[str]) -> np.ndarray:
    """Codes of ``width``-wide bins starting at 10·first label (labels "10-19", "20-29", …)."""
    low = int(labels[0].split("-")[0])
    codes = (values.astype(np.int64).to_numpy() - low) // width
    if (codes < 0).any() or (codes >= len(labels)).any():
        raise AnonymizationError(f"a value is outside the declared bins {labels[0]}..{labels[-1]}")
    return codes


def categorize(frame: pd.DataFrame) -> np.ndarray:
    """N × 15 codes into DOMAINS (uint8), continuous attributes binned as the module docstring says."""
    columns: dict[str, np.ndarray] = {}
    for name, domain in DOMAINS.items():
        raw = frame[name]
        if name in ("age", "hours-per-week"):
            columns[name] = _bins(raw, 10, domain)
        elif name in ("capital-gain", "capital-loss"):
            columns[name] = (raw.astype(np.int64).to_numpy() > 0).astype(np.int64)
        elif name == "fnlwgt":
            weights = raw.astype(np.int64).to_numpy()
            cuts = np.quantile(weights, np.arange(1, 10) / 10)  # the one data-derived categorization
            columns[name] = np.searchsorted(cuts, weights, side="right")
        else:
            columns[name] = encode(raw.to_numpy(), domain, attribute=name)
    return np.stack([columns[name].astype(np.uint8) for name in ATTRIBUTES], axis=1)


# --- the experiment ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """One anonymization of the whole table: every attribute at l (diversity) or at t (closeness)."""

    model: str  # "l" or "t"
    value: float

    @property
    def label(self) -> str:
        return f"l = {self.value:g}" if self.model == "l" else f"t = {self.value:g}"


def plan(codes: np.ndarray, setting: Setting) -> list[AttributeRelease]:
    """Per attribute its release: l_j = l (d_j − 1 when d_j <= l) or t_j = t, equal ground distance."""
    releases = []
    for j, (name, domain) in enumerate(DOMAINS.items()):
        if setting.model == "l":
            l_j = int(setting.value) if len(domain) > setting.value else len(domain) - 1
            releases.append(plan_attribute(name, domain, codes[:, j], l=l_j))
        else:
            releases.append(plan_attribute(name, domain, codes[:, j], t=setting.value))
    return releases


def attribute_subsets(
    q: int, count: int, rng: np.random.Generator, pool: Sequence[int] | None = None
) -> list[tuple[int, ...]]:
    """``count`` distinct random q-subsets of the attributes in ``pool`` (positions in ATTRIBUTES; default
    all), or all of them when there are at most ``count``."""
    every = list(itertools.combinations(range(len(ATTRIBUTES)) if pool is None else sorted(pool), q))
    if len(every) <= count:
        return every
    chosen = rng.choice(len(every), size=count, replace=False)
    return [every[i] for i in sorted(chosen)]


@dataclass
class Query:
    """One reconstruction: attributes, EM iterations (default rule; the restart's, if it ran) and every
    method's distances."""

    attributes: tuple[str, ...]
    cells: int
    iterations: int
    restart_iterations: int | None
    distances: dict[str, dict[str, float]]  # method → metric → value


@dataclass
class SettingResult:
    setting: Setting
    releases: list[dict[str, Any]]
    seconds: float
    queries: dict[int, list[Query]] = field(default_factory=dict)  # q' → queries

    def mean(self, q: int, method: str, metric: str) -> float:
        return float(np.mean([query.distances[method][metric] for query in self.queries[q]]))

    def methods(self) -> list[str]:
        first = next(iter(self.queries.values()))[0]
        return [m for m in METHODS if m in first.distances]


def reconstruct(
    codes: np.ndarray,
    published: Sequence[np.ndarray],
    releases: Sequence[AttributeRelease],
    subset: Sequence[int],
    *,
    rng: np.random.Generator,
    restart_tol: float,
) -> tuple[Query, dict[str, np.ndarray]]:
    """The true cross-tabulation over ``subset`` and every method's estimate of it."""
    chosen = [releases[j] for j in subset]
    sets = [published[j] for j in subset]
    sizes = [release.d for release in chosen]
    n = codes.shape[0]
    truth = cross_tabulation([codes[:, j] for j in subset], sizes)
    observed = published_counts(sets, sizes)
    estimates: dict[str, np.ndarray] = {}
    estimates["em"], iterations = em_from_counts(observed, chosen, n=n, tol_fraction=DEFAULT_TOL)
    restart_iterations = None
    if restart_tol > 0:
        estimates["restart"] = estimates["em"]
        exact = all(release.p == 1.0 and release.eta == 1 for release in chosen)  # K = I: one step is exact
        if iterations == 1 and not exact:
            estimates["restart"], restart_iterations = em_from_counts(
                observed, chosen, n=n, tol_fraction=restart_tol
            )
    estimates["value_adding"] = reconstruct_value_adding(sets, chosen)
    estimates["random"] = random_baseline(n, truth.shape, rng)
    distances = {
        method: {name: metric(truth, estimate) for name, metric in METRICS.items()}
        for method, estimate in estimates.items()
    }
    query = Query(tuple(ATTRIBUTES[j] for j in subset), truth.size, iterations, restart_iterations, distances)
    return query, {"truth": truth, **estimates}


def run_setting(
    codes: np.ndarray,
    setting: Setting,
    subsets: dict[int, list[tuple[int, ...]]],
    *,
    seed: int,
    index: int,
    restart_tol: float,
) -> SettingResult:
    """Plan, randomize and verify one release, then reconstruct every subset. Seeded by (seed, index)."""
    start = time.perf_counter()
    rng = np.random.default_rng((seed, index))
    releases = plan(codes, setting)
    published = randomize(codes, releases, rng)
    verify_release(codes, published, releases)
    result = SettingResult(setting, [release.to_metadata() for release in releases], 0.0)
    for q, chosen in subsets.items():
        result.queries[q] = [
            reconstruct(codes, published, releases, subset, rng=rng, restart_tol=restart_tol)[0]
            for subset in chosen
        ]
    result.seconds = time.perf_counter() - start
    return result


def figure_histogram(
    codes: np.ndarray, *, seed: int, restart_tol: float
) -> tuple[Query, dict[str, np.ndarray]]:
    """Fig. 7: age × occupation at l = FIGURE_L, from a release of its own (seeded by (seed, "figure"))."""
    rng = np.random.default_rng((seed, *b"figure"))
    releases = plan(codes, Setting("l", FIGURE_L))
    published = randomize(codes, releases, rng)
    subset = [ATTRIBUTES.index(name) for name in FIGURE_ATTRIBUTES]
    return reconstruct(codes, published, releases, subset, rng=rng, restart_tol=restart_tol)


def run(
    codes: np.ndarray,
    settings: Sequence[Setting],
    *,
    seed: int,
    subsets: int,
    restart_tol: float,
    workers: int,
    pool: Sequence[int] | None = None,
    progress: Progress = _no_progress,
) -> list[SettingResult]:
    """Every setting on the same attribute subsets (drawn from ``pool``, default all attributes; every
    attribute is anonymized either way); settings run in ``workers`` processes (the result does not depend
    on their number)."""
    rng = np.random.default_rng(seed)
    size = len(ATTRIBUTES) if pool is None else len(pool)
    chosen = {q: attribute_subsets(q, subsets, rng, pool) for q in QS if q <= size}
    jobs = [(codes, s, chosen) for s in settings]
    results: list[SettingResult] = []
    if workers <= 1:
        for index, (table, setting, queries) in enumerate(jobs):
            results.append(
                run_setting(table, setting, queries, seed=seed, index=index, restart_tol=restart_tol)
            )
            progress(index + 1, len(jobs))
        return results
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [
            pool.submit(run_setting, table, setting, queries, seed=seed, index=index, restart_tol=restart_tol)
            for index, (table, setting, queries) in enumerate(jobs)
        ]
        for done, future in enumerate(futures, start=1):
            results.append(future.result())
            progress(done, len(jobs))
    return results


# --- claims and tables -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    name: str
    holds: bool
    detail: str


def check_claims(results: Sequence[SettingResult], histogram: Query | None) -> list[Claim]:
    """The seed's qualitative claims, checked on the means."""
    claims = []
    methods = results[0].methods()
    restarted = [
        x for r in results for qs in r.queries.values() for x in qs if x.restart_iterations is not None
    ]
    for em in [m for m in ("em", "restart") if m in methods and (m == "em" or restarted)]:
        cells = [(r, q, metric) for r in results for q in r.queries for metric in METRICS]
        lost = [
            f"{r.setting.label} q'={q} {metric}"
            for r, q, metric in cells
            if not r.mean(q, em, metric) < r.mean(q, "value_adding", metric)
        ]
        claims.append(
            Claim(
                f"{METHOD_NAMES[em]} < ValueAdding (means, every setting, q', metric)",
                not lost,
                f"{len(cells) - len(lost)} of {len(cells)} hold"
                + (f"; fails at {', '.join(lost[:8])}{' …' if len(lost) > 8 else ''}" if lost else ""),
            )
        )
    ratios = [
        r.mean(q, "value_adding", metric) / r.mean(q, "random", metric)
        for r in results
        for q in r.queries
        for metric in METRICS
    ]
    claims.append(
        Claim(
            "ValueAdding ≈ Random (and below it)",
            all(ratio < 1.0 for ratio in ratios),
            f"ValueAdding / Random from {min(ratios):.2f} to {max(ratios):.2f} (median {np.median(ratios):.2f})",
        )
    )
    diversity = sorted((r for r in results if r.setting.model == "l"), key=lambda r: r.setting.value)
    closeness = sorted((r for r in results if r.setting.model == "t"), key=lambda r: r.setting.value)
    ends = [r for r in (diversity[:1] + closeness[-1:]) if r.setting.value in (2, max(TS))]
    if ends:
        halves = {
            f"{r.setting.label} q'={q} {metric}": r.mean(q, "value_adding", metric)
            / r.mean(q, "random", metric)
            for r in ends
            for q in r.queries
            for metric in ("L1", "L2")
        }
        claims.append(
            Claim(
                "ValueAdding ≈ 50 % below Random in L1/L2 when l is small (2) or t large (0.5)",
                all(0.3 <= ratio <= 0.7 for ratio in halves.values()),
                "ValueAdding / Random " + ", ".join(f"{key} {ratio:.2f}" for key, ratio in halves.items()),
            )
        )
    if len(diversity) >= 2:
        first, last = diversity[0], diversity[-1]
        gaps = {
            f"q'={q} {metric}": (
                first.mean(q, "em", metric) / first.mean(q, "value_adding", metric),
                last.mean(q, "em", metric) / last.mean(q, "value_adding", metric),
            )
            for q in first.queries
            for metric in METRICS
        }
        claims.append(
            Claim(
                f"the gap narrows as l grows (EM (default rule) / ValueAdding larger at {last.setting.label} "
                f"than at {first.setting.label})",
                all(b > a for a, b in gaps.values()),
                ", ".join(f"{key} {a:.2f} → {b:.2f}" for key, (a, b) in gaps.items()),
            )
        )
    if len(closeness) >= 2:
        for method in [
            m for m in ("em", "restart", "value_adding") if m in methods and (m != "restart" or restarted)
        ]:
            rises = [
                f"q'={q} {metric} {a.setting.value:g}→{b.setting.value:g}"
                for q in closeness[0].queries
                for metric in METRICS
                for a, b in itertools.pairwise(closeness)
                if b.mean(q, method, metric) > a.mean(q, method, metric)
            ]
            steps = len(closeness[0].queries) * len(METRICS) * (len(closeness) - 1)
            claims.append(
                Claim(
                    f"{METHOD_NAMES[method]}: distances fall as t grows",
                    not rises,
                    f"{steps - len(rises)} of {steps} steps fall"
                    + (f"; rises at {', '.join(rises[:6])}{' …' if len(rises) > 6 else ''}" if rises else ""),
                )
            )
    if histogram is not None:
        d = histogram.distances
        claims.append(
            Claim(
                f"age × occupation at l = {FIGURE_L} reconstructed almost perfectly",
                d["em"]["L1"] < 0.25 * d["value_adding"]["L1"],
                "L1 " + ", ".join(f"{METHOD_NAMES[m]} {v['L1']:,.0f}" for m, v in d.items())
                + "; Hellinger " + ", ".join(f"{METHOD_NAMES[m]} {v['Hellinger']:.1f}" for m, v in d.items()),
            )
        )  # fmt: skip
    return claims


def format_releases(results: Sequence[SettingResult]) -> str:
    """(p_j, η_j) per setting and attribute."""
    header = "| setting | " + " | ".join(f"{name} ({len(DOMAINS[name])})" for name in ATTRIBUTES) + " |"
    lines = ["(p, η) per attribute (domain size)", "", header, "|---" * (len(ATTRIBUTES) + 1) + "|"]
    for result in results:
        cells = [
            f"{release['eta']}" if release["p"] == 1.0 else f"{release['p']:.2f}, {release['eta']}"
            for release in result.releases
        ]
        lines.append(f"| {result.setting.label} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("(a single number: p = 1 and that η)")
    return "\n".join(lines)


def format_distances(results: Sequence[SettingResult], q: int) -> str:
    """Mean L1, L2 and Hellinger per setting of EM (default rule), ValueAdding and Random at one q'; EM's
    mean steps, and the queries restarted after a one-step stop with their mean L1 before → after."""
    methods = ("em", "value_adding", "random")
    count = len(results[0].queries[q])
    heads = [f"{metric}: EM / ValueAdding / Random" for metric in METRICS]
    lines = [
        f"q' = {q} ({count} attribute subsets): mean distance to the true cross-tabulation",
        "",
        "| setting | " + " | ".join(heads) + " | EM steps | EM restarts: L1 before → after |",
        "|---" * (len(METRICS) + 3) + "|",
    ]
    for result in results:
        cells = []
        for metric in METRICS:
            form = "{:,.0f}" if metric != "Hellinger" else "{:.1f}"
            cells.append(" / ".join(form.format(result.mean(q, m, metric)) for m in methods))
        queries = result.queries[q]
        steps = f"{np.mean([x.iterations for x in queries]):,.0f}"
        again = [x for x in queries if x.restart_iterations is not None]
        restarts = (
            f"{len(again)}: {np.mean([x.distances['em']['L1'] for x in again]):,.0f} → "
            f"{np.mean([x.distances['restart']['L1'] for x in again]):,.0f} "
            f"({np.mean([x.restart_iterations for x in again]):,.0f} steps)"
            if again
            else "0"
        )
        lines.append(f"| {result.setting.label} | " + " | ".join(cells) + f" | {steps} | {restarts} |")
    return "\n".join(lines)


def format_claims(claims: Sequence[Claim]) -> str:
    return "\n".join(f"- {'holds' if c.holds else 'FAILS'}: {c.name} — {c.detail}" for c in claims)


# --- plots ---------------------------------------------------------------------------------------------------

COLOURS = {"em": "#cc3311", "restart": "#ee7733", "value_adding": "#4477aa", "random": "#777777"}
STYLES = {"em": "-", "restart": "--", "value_adding": "-", "random": ":"}


def _figure(width: float, height: float, rows: int, columns: int) -> tuple[Any, Any]:
    """A figure on matplotlib's Agg canvas (as anonymizers.plots draws them) and its axes."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.subplots(rows, columns, squeeze=False)


def _restarted(results: Sequence[SettingResult]) -> bool:
    return any(x.restart_iterations is not None for r in results for qs in r.queries.values() for x in qs)


def plot_distances(results: Sequence[SettingResult], model: str, path: Path) -> None:
    """Rows q', columns L1 / L2 / Hellinger; x = l or t; one line per method, y on a log axis (EM sits an
    order of magnitude below the others). EM (restart) is drawn only when some query was restarted."""
    chosen = [r for r in results if r.setting.model == model]
    qs = sorted(chosen[0].queries)
    methods = [m for m in chosen[0].methods() if m != "restart" or _restarted(chosen)]
    figure, axes = _figure(10.0, 2.3 * len(qs) + 0.6, len(qs), len(METRICS))
    xs = [r.setting.value for r in chosen]
    for row, q in enumerate(qs):
        for column, metric in enumerate(METRICS):
            ax = axes[row][column]
            for method in methods:
                ax.plot(xs, [r.mean(q, method, metric) for r in chosen], marker="o", markersize=3,
                        color=COLOURS[method], linestyle=STYLES[method], label=METHOD_NAMES[method])  # fmt: skip
            ax.set_yscale("log")
            if row == 0:
                ax.set_title(metric, fontsize=10)
            if column == 0:
                ax.set_ylabel(f"q' = {q}")
            if row == len(qs) - 1:
                ax.set_xlabel(model)
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=len(methods), fontsize=8)
    what = "frequency (l, …, l)-diversity" if model == "l" else "(t, …, t)-closeness"
    figure.suptitle(f"Adult, {what}: mean distance to the true cross-tabulation (log scale)", fontsize=10)
    figure.savefig(path)


def plot_histogram(tables: dict[str, np.ndarray], path: Path, *, restarted: bool = False) -> None:
    """Fig. 7: the age × occupation counts side by side — original, EM, ValueAdding — on one colour scale
    (age rows, occupation columns), and below the cells in decreasing order of their true count."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10.0, 7.0), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    top, bottom = figure.subfigures(2, 1, height_ratios=(1.1, 1.0))
    panels = [("truth", "original"), ("em", METHOD_NAMES["em"]), ("value_adding", "ValueAdding")]
    if restarted and "restart" in tables:
        panels.insert(2, ("restart", METHOD_NAMES["restart"]))
    axes = top.subplots(1, len(panels), sharey=True)
    highest = float(max(tables[key].max() for key, _ in panels))
    image = None
    for ax, (key, title) in zip(axes, panels, strict=True):
        image = ax.imshow(tables[key], cmap="viridis", vmin=0, vmax=highest, aspect="auto")
        ax.set_title(title, fontsize=9)
        ax.set_xticks(range(len(DOMAINS["occupation"])), DOMAINS["occupation"], rotation=90, fontsize=6)
    axes[0].set_yticks(range(len(DOMAINS["age"])), DOMAINS["age"], fontsize=7)
    axes[0].set_ylabel("age")
    top.colorbar(image, ax=list(axes), shrink=0.9, label="records")
    ax = bottom.subplots()
    truth = tables["truth"].ravel()
    order = np.argsort(-truth, kind="stable")
    cells = np.arange(truth.size)
    ax.bar(cells, truth[order], width=1.0, color="#bbbbbb", label="original")
    for key, _ in panels[1:]:
        ax.plot(cells, tables[key].ravel()[order], color=COLOURS[key], linestyle=STYLES[key], linewidth=1.0,
                label=METHOD_NAMES[key])  # fmt: skip
    ax.set_xlabel(f"age × occupation cell ({truth.size}), by decreasing true count")
    ax.set_ylabel("records")
    ax.legend(loc="best", fontsize=7)
    figure.suptitle(f"Adult, age × occupation at l = {FIGURE_L} (Fig. 7 of the paper)", fontsize=10)
    figure.savefig(path)


# --- main ------------------------------------------------------------------------------------------------------


def _numbers(text: str, kind: type) -> list[Any]:
    return [kind(part) for part in text.split(",") if part.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="path of adult.data")
    parser.add_argument("--seed", type=int, default=1, help="experiment seed (printed with the results)")
    parser.add_argument(
        "--subsets",
        type=int,
        default=10,
        help="distinct random attribute subsets per q' (all when there are fewer)",
    )
    parser.add_argument("--ls", default=",".join(map(str, LS)), help="l values (diversity), comma-separated")
    parser.add_argument("--ts", default=",".join(map(str, TS)), help="t values (closeness), comma-separated")
    parser.add_argument(
        "--restart-tol",
        type=float,
        default=RESTART_TOL,
        help="when EM's default rule stops after one step, run it again with this tolerance (times N); 0: never",
    )
    parser.add_argument("--plot-dir", type=Path, help="write sei_diversity.png, sei_closeness.png, "
                        "sei_age_occupation.png here")  # fmt: skip
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="processes (default: all CPUs)"
    )
    parser.add_argument(
        "--attributes",
        default=",".join(ATTRIBUTES),
        help="the attributes queries are drawn from, comma-separated (all are anonymized; default: all 15)",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    ls, ts = _numbers(args.ls, int), _numbers(args.ts, float)
    pool = [name.strip() for name in args.attributes.split(",") if name.strip()]
    if not pool or set(pool) - set(ATTRIBUTES):
        parser.error(f"--attributes takes names among {', '.join(ATTRIBUTES)}")
    if args.subsets < 1 or args.restart_tol < 0 or not ls + ts:
        parser.error("--subsets must be at least 1, --restart-tol at least 0, and --ls or --ts non-empty")
    if args.plot_dir is not None:
        try:
            require_matplotlib()
        except AnonymizationError as error:
            sys.exit(error.message)
        args.plot_dir.mkdir(parents=True, exist_ok=True)
    frame = load_adult(args.data)  # exits with the hint before any work
    say = (lambda text: None) if args.json else print
    started = time.perf_counter()
    codes = categorize(frame)
    say(
        f"{len(frame):,} rows of {args.data} without '?'; seed {args.seed}; {args.subsets} subsets per q'; "
        f"EM restart tol {args.restart_tol:g}·N; {args.workers} worker{'s' * (args.workers > 1)}"
    )
    settings = [Setting("l", value) for value in ls] + [Setting("t", value) for value in ts]
    update, close = progress_callback("settings", quiet=args.json, unit="settings")
    results = run(
        codes, settings, seed=args.seed, subsets=args.subsets, restart_tol=args.restart_tol, workers=args.workers,
        pool=[ATTRIBUTES.index(name) for name in pool], progress=update,
    )  # fmt: skip
    close()
    histogram, tables = figure_histogram(codes, seed=args.seed, restart_tol=args.restart_tol)
    claims = check_claims(results, histogram)
    seconds = time.perf_counter() - started
    say(f"\n{format_releases(results)}")
    for q in results[0].queries:
        say(f"\n{format_distances(results, q)}")
    say(
        f"\nage × occupation at l = {FIGURE_L} ({histogram.cells} cells): "
        + "; ".join(
            f"{METHOD_NAMES[m]} L1 {v['L1']:,.0f}, L2 {v['L2']:,.0f}, Hellinger {v['Hellinger']:.1f}"
            for m, v in histogram.distances.items()
        )
        + f"; EM steps {histogram.iterations:,}"
    )
    say(f"\nThe paper's claims\n\n{format_claims(claims)}")
    say(f"\n{seconds:.0f} s (the settings: {sum(r.seconds for r in results):.0f} CPU-s of work in all)")
    if args.plot_dir is not None:
        for model, name in (("l", "sei_diversity.png"), ("t", "sei_closeness.png")):
            if any(r.setting.model == model for r in results):
                plot_distances(results, model, args.plot_dir / name)
                say(f"plot: {args.plot_dir / name}")
        restarted = histogram.restart_iterations is not None
        plot_histogram(tables, args.plot_dir / "sei_age_occupation.png", restarted=restarted)
        say(f"plot: {args.plot_dir / 'sei_age_occupation.png'}")
    if args.json:
        document = {
            "rows": len(frame),
            "seed": args.seed,
            "subsets": args.subsets,
            "restart_tol": args.restart_tol,
            "seconds": seconds,
            "settings": [
                {
                    "setting": asdict(r.setting),
                    "seconds": r.seconds,
                    "releases": r.releases,
                    "queries": {str(q): [asdict(x) for x in queries] for q, queries in r.queries.items()},
                    "means": {
                        str(q): {m: {k: r.mean(q, m, k) for k in METRICS} for m in r.methods()}
                        for q in r.queries
                    },
                }
                for r in results
            ],
            "histogram": asdict(histogram),
            "claims": [asdict(c) for c in claims],
        }
        print(json.dumps(document, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
