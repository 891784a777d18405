"""The DP Welch t-test with dummy data (dissertation 000, ch. 7): Table 7.1, Fig. 7.1 and power on UCI Adult.

The mechanism is :mod:`mechanisms.ttest` (spec ``dp-ttest-dummy.md``): both dummy records r_1 ≠ r_2 are added
to both groups, and the release is t(A ∪ r, B ∪ r) + (S/α)·N(0, 1) with S a smooth sensitivity —
``mode="paper"`` (Algorithm 8's greedy path, not a proof) or ``mode="sound"`` (the product's default, a proven
β-smooth bound). Three experiments:

* ``7.1`` — Table 7.1: the noise s.d. S/α at ε′ = 5, m = 200, n ∈ {100, 1,000, 10,000}, s² ∈ {20, 200, 2,000},
  under the spec's assumptions (§8): values N(100, s²) clipped to [0, 200], n split equally, fixed dummies
  r_1 = 90, r_2 = 110, δ′ = 0.01, mean over ``--seeds`` datasets; paper mode next to the printed value, sound
  mode beside it, and the spec's acceptance criteria (a)-(c).
* ``fig7.1`` — Fig. 7.1: the type-I error against ε′ at n = 10,000, m = 200, s² = 200 with H0 true, ``--trials``
  fresh datasets per point, both modes. A trial rejects when p = 2·P[T_df > |t̃|] < 0.05 with df = n_A + n_B − 2
  of the augmented groups (the true group sizes, spec §7's df̃ without the count noise; Welch's df is the
  same here up to rounding: equal sizes, equal variances). Also shown: a noise-aware rule that rejects when
  |t̃| > t_{0.975, df}·sqrt(1 + σ²), σ the noise s.d.
* ``power`` — UCI Adult, hours-per-week (public bounds [0, 100], so m = 100; dummies 45 and 55) by sex, by
  race (White against Black), and by sex with the labels shuffled afresh in every trial (H0 true): the
  fraction of ``--trials`` releases that reject H0 under both rules, sound mode, ε′ from 0.5 to 1,000 at
  δ′ = 1e-6 and 0.01. Each trial of a real comparison is fresh noise on the same data.

Noise. Fig. 7.1 and the power table draw the noise as S/α times a numpy standard normal, vectorized over
trials; the product's :func:`mechanisms.ttest.dp_ttest` draws an exact discrete Gaussian on a grid at least 2²⁰
times finer than its s.d. (S + γ)/α, γ/S <= 2⁻²⁰/α (about 10⁻¹⁰ here) — the same law for these purposes, and
far faster. The smooth
sensitivity S is computed per dataset (each Fig. 7.1 trial draws new data). Algorithm 8's greedy path does not
depend on β, so paper mode walks it once per dataset (the module's ``_paper_path``) and takes
S(β) = max_i LS_i·e^{−β·H_i} for every ε′ at once; the first dataset of each run is checked against
:func:`mechanisms.ttest.smooth_sensitivity` (which is called per ε′ instead if the helper is gone).

    .venv/bin/python examples/ttest.py [--tables 7.1,fig7.1,power] [--seeds 5] [--trials 1000] [--seed 0]
        [--data ../shared/data/adult.data] [--plot-dir DIR] [--workers N] [--json]

``--plot-dir`` writes ``ttest_type1.png`` (Fig. 7.1) and ``ttest_power.png`` there (needs the ``[plot]``
extra). The power part reads UCI Adult (https://archive.ics.uci.edu/dataset/2/adult, file adult.data); without
it the script exits with that hint before any work; Table 7.1 and Fig. 7.1 need no data. Seeds are an
experiment's, printed with the results; a production release never takes one. The default run takes about
4 minutes on 2 cores (``--workers``: the trials run in forked processes, the result does not depend on their
number). Results and discussion: docs/reproductions.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats

from anonymizers.errors import AnonymizationError
from anonymizers.plots import DPI, require_matplotlib
from mechanisms import ttest
from proxy.cli.sources import progress_callback

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult.data"
DOWNLOAD_HINT = (
    "Download the UCI Adult training file (https://archive.ics.uci.edu/dataset/2/adult, file adult.data) "
    "and pass --data PATH, or leave out the power part: --tables 7.1,fig7.1"
)
TABLES = ("7.1", "fig7.1", "power")
SIGNIFICANCE = 0.05

# Table 7.1 and Fig. 7.1 (spec §8): the domain [0, m], the data's centre, the fixed dummies, δ′.
M = 200.0
DUMMIES = (90.0, 110.0)
TABLE_EPSILON = 5.0
TABLE_DELTA = 0.01
TABLE_NS = (100, 1_000, 10_000)
TABLE_VARIANCES = (20.0, 200.0, 2_000.0)
PAPER_TABLE_7_1 = {100: (256.04, 33.07, 10.32), 1_000: (78.72, 13.06, 7.23), 10_000: (30.33, 8.98, 7.70)}
"""[D] Table 7.1 as printed ("Variance (ε′, μ_d) = (5, 0)"), rows n, columns s²."""
BAND_B = {(1_000, 2_000.0): (3.0, 12.0), (10_000, 2_000.0): (3.0, 12.0), (10_000, 200.0): (3.0, 12.0),
          (100, 2_000.0): (7.0, 14.0)}  # fmt: skip
"""Acceptance (b) of spec §8: the paper-mode mean S/α of these cells lies in these closed intervals."""
CHUNK = 25
"""Trials per task of Fig. 7.1 and of the shuffled comparison: the unit of parallel work and of seeding."""
FIG_N = 10_000
FIG_VARIANCE = 200.0
FIG_EPSILONS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1_000.0)

# Power on Adult: hours-per-week, public bounds (census top-code 99), dummies at 0.45·m and 0.55·m.
HOURS_BOUNDS = (0.0, 100.0)
HOURS_DUMMIES = (45.0, 55.0)
POWER_EPSILONS = (0.5, 1.0, 2.0, 5.0, 10.0, 50.0, 100.0, 1_000.0)
POWER_DELTAS = (1e-6, 0.01)
ADULT_COLUMNS = ["age", "workclass", "fnlwgt", "education-text", "education", "marital-status", "occupation",
                 "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week",
                 "native-country", "income"]  # fmt: skip

Values = npt.NDArray[np.float64]
Progress = Callable[[int, int], None]


def _no_progress(done: int, total: int) -> None:
    """No bar: the default when the caller shows none."""


# --- data and the noise scale ---------------------------------------------------------------------------------


def sample_groups(
    rng: np.random.Generator, n: int, variance: float, *, m: float = M
) -> tuple[Values, Values]:
    """n values N(m/2, s²) clipped to [0, m], split equally (the first ⌊n/2⌋ are A): H0 holds."""
    values = np.clip(rng.normal(m / 2, math.sqrt(variance), n), 0.0, m)
    return values[: n // 2], values[n // 2 :]


def augmented_t(a: Values, b: Values, dummies: tuple[float, float]) -> float:
    """t(A ∪ r, B ∪ r): the statistic dp_ttest adds noise to (Def 7.1, Algorithm 8 line 9 corrected)."""
    return ttest.welch_t(np.concatenate((a, dummies)), np.concatenate((b, dummies)))


def smooth_sensitivities(
    a: Values,
    b: Values,
    *,
    m: float,
    dummies: tuple[float, float],
    betas: Sequence[float],
    mode: ttest.Mode,
    walk: bool = True,
) -> Values:
    """S for each β, as :func:`mechanisms.ttest.smooth_sensitivity` gives it.

    Paper mode with ``walk``: Algorithm 8's path (LS_i, H(D_0, D_i)) does not depend on β, so it is walked
    once and S(β) = max_i LS_i·e^{−β·H_i} is taken for every β (the module's own formula). Otherwise one
    public call per β (sound mode: a few milliseconds each).
    """
    path = getattr(ttest, "_paper_path", None)
    if mode == "paper" and walk and path is not None:
        steps = np.array(list(path(a, b, m=m, dummies=dummies)), dtype=np.float64)
        local, hamming = steps[:, 0], steps[:, 1]
        return np.asarray(
            [float(np.max(local * np.exp(-beta * hamming))) for beta in betas], dtype=np.float64
        )
    return np.asarray(
        [ttest.smooth_sensitivity(a, b, m=m, dummies=dummies, beta=beta, mode=mode) for beta in betas],
        dtype=np.float64,
    )


def _check_walk(
    a: Values, b: Values, *, m: float, dummies: tuple[float, float], betas: Sequence[float]
) -> None:
    """The one-walk paper-mode S must be the public function's (to rounding), or the run stops."""
    walked = smooth_sensitivities(a, b, m=m, dummies=dummies, betas=betas, mode="paper")
    public = smooth_sensitivities(a, b, m=m, dummies=dummies, betas=betas, mode="paper", walk=False)
    if not np.allclose(walked, public, rtol=1e-12, atol=0.0):
        raise RuntimeError(
            f"paper-mode S from the walked path {walked} differs from smooth_sensitivity {public}"
        )


# --- Table 7.1 ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One cell of Table 7.1: S/α per seed in both modes, on the same datasets."""

    n: int
    variance: float
    paper: list[float]
    sound: list[float]

    @property
    def paper_mean(self) -> float:
        return float(np.mean(self.paper))

    @property
    def sound_mean(self) -> float:
        return float(np.mean(self.sound))


def table_7_1(
    *,
    seeds: int = 5,
    seed: int = 0,
    ns: Sequence[int] = TABLE_NS,
    variances: Sequence[float] = TABLE_VARIANCES,
    epsilon: float = TABLE_EPSILON,
    delta: float = TABLE_DELTA,
    progress: Progress = _no_progress,
) -> list[Cell]:
    """S/α (the noise s.d.) per (n, s²) over ``seeds`` datasets, paper and sound mode on the same data.

    Dataset j of cell (n, s²) comes from ``np.random.default_rng((seed, n, round(s²), j))``.
    """
    alpha, beta = ttest.noise_parameters(epsilon=epsilon, delta=delta)
    cells, total = [], len(ns) * len(variances) * seeds
    for n in ns:
        for variance in variances:
            paper, sound = [], []
            for j in range(seeds):
                a, b = sample_groups(np.random.default_rng((seed, n, round(variance), j)), n, variance)
                for mode, scales in (("paper", paper), ("sound", sound)):
                    s = ttest.smooth_sensitivity(a, b, m=M, dummies=DUMMIES, beta=beta, mode=mode)  # type: ignore[arg-type]
                    scales.append(s / alpha)
                progress(len(cells) * seeds + j + 1, total)
            cells.append(Cell(n, float(variance), paper, sound))
    return cells


@dataclass(frozen=True)
class Check:
    """One acceptance criterion of spec §8 and whether it holds, with the numbers behind it."""

    name: str
    holds: bool
    detail: str


def acceptance(cells: Sequence[Cell]) -> list[Check]:
    """Spec §8 (a)-(c) on paper-mode means: (a) S/α decreases in s² for every n and in n for s² ∈ {20, 200};
    (b) the four cells of BAND_B lie in their bands; (c) sound >= paper on every dataset.

    Criteria about cells that were not computed are skipped; at least two values are needed for a trend.
    """
    by_key = {(c.n, c.variance): c for c in cells}
    ns = sorted({c.n for c in cells})
    variances = sorted({c.variance for c in cells})
    failures, compared = [], 0
    for n in ns:
        means = [by_key[n, v].paper_mean for v in variances if (n, v) in by_key]
        compared += len(means) > 1
        if any(x <= y for x, y in itertools.pairwise(means)):
            failures.append(f"n = {n:,}: " + " → ".join(f"{x:.2f}" for x in means))
    for v in (20.0, 200.0):
        means = [by_key[n, v].paper_mean for n in ns if (n, v) in by_key]
        compared += len(means) > 1
        if any(x <= y for x, y in itertools.pairwise(means)):
            failures.append(f"s² = {v:,g}: " + " → ".join(f"{x:.2f}" for x in means))
    checks = []
    if compared:
        checks.append(Check("(a) S/α decreases in s² for each n, and in n for s² = 20, 200", not failures,
                            "; ".join(failures) or "every row and both columns decrease"))  # fmt: skip
    banded = [(key, band) for key, band in BAND_B.items() if key in by_key]
    outside = [
        f"(n = {n:,}, s² = {v:,g}) = {by_key[n, v].paper_mean:.2f} ∉ [{low:g}, {high:g}]"
        for (n, v), (low, high) in banded
        if not low <= by_key[n, v].paper_mean <= high
    ]
    if banded:
        inside = ", ".join(f"({n:,}, {v:,g}) = {by_key[n, v].paper_mean:.2f}" for (n, v), _ in banded)
        checks.append(Check("(b) cells (1,000, 2,000), (10,000, 2,000), (10,000, 200) in [3, 12]; "
                            "(100, 2,000) in [7, 14]", not outside, "; ".join(outside) or inside))  # fmt: skip
    below = [
        f"(n = {c.n:,}, s² = {c.variance:,g}, seed {j}): sound {s:.3f} < paper {p:.3f}"
        for c in cells
        for j, (p, s) in enumerate(zip(c.paper, c.sound, strict=True))
        if s < p
    ]
    datasets = sum(len(c.paper) for c in cells)
    checks.append(Check("(c) sound >= paper on the same data", not below,
                        "; ".join(below) or f"on all {datasets} datasets"))  # fmt: skip
    return checks


SPEC_SEEDS = 5
"""The spec's acceptance criteria are about means of this many seeds."""


def acceptance_rates(cells: Sequence[Cell], *, group: int = SPEC_SEEDS) -> dict[str, float]:
    """With many seeds: the fraction of disjoint groups of ``group`` consecutive seeds on which each criterion
    of :func:`acceptance` holds — how likely a five-seed run is to pass, given the seed-to-seed spread."""
    groups = min(len(c.paper) for c in cells) // group
    held: dict[str, int] = {}
    for g in range(groups):
        part = slice(g * group, (g + 1) * group)
        for check in acceptance([Cell(c.n, c.variance, c.paper[part], c.sound[part]) for c in cells]):
            held[check.name] = held.get(check.name, 0) + check.holds
    return {name: count / groups for name, count in held.items()}


# --- Fig. 7.1 -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TypeOneError:
    """Per mode and ε′: the fraction of H0-true trials rejected (naive p < 0.05, and noise-aware), the mean
    noise s.d. S/α; and the mean |t| of the augmented data (no noise)."""

    n: int
    variance: float
    delta: float
    trials: int
    epsilons: list[float]
    naive: dict[str, list[float]] = field(default_factory=dict)
    aware: dict[str, list[float]] = field(default_factory=dict)
    noise_sd: dict[str, list[float]] = field(default_factory=dict)
    mean_abs_t: float = float("nan")
    exact_naive: float = float("nan")
    """Rejection rate without any noise (the augmented test itself): ≈ 0.05 if the test is calibrated."""


def rejections(noisy: Values, sigma: Values, df: float) -> tuple[Values, Values]:
    """(naive, aware) rejection indicators: p = 2·P[T_df > |t̃|] < 0.05, and |t̃| > t_{0.975,df}·sqrt(1 + σ²)."""
    naive = 2 * stats.t.sf(np.abs(noisy), df) < SIGNIFICANCE
    aware = np.abs(noisy) > stats.t.isf(SIGNIFICANCE / 2, df) * np.sqrt(1 + sigma**2)
    return naive, aware


def type_one_error(
    *,
    trials: int = 1_000,
    seed: int = 0,
    n: int = FIG_N,
    variance: float = FIG_VARIANCE,
    epsilons: Sequence[float] = FIG_EPSILONS,
    delta: float = TABLE_DELTA,
    modes: Sequence[ttest.Mode] = ("paper", "sound"),
    workers: int = 1,
    progress: Progress = _no_progress,
) -> TypeOneError:
    """Fig. 7.1: every trial draws a fresh H0-true dataset (``sample_groups``), computes S per mode for every
    ε′ from it, and adds S/α·Z; the same Z serves both modes (common random numbers).

    df = n + 4 − 2 (the augmented groups' sizes, known here). Trials run in chunks of CHUNK, chunk c on
    data from ``default_rng((seed, 71, c))``, so the result does not depend on ``workers``.
    """
    noise = np.random.default_rng((seed, 72)).standard_normal((trials, len(epsilons)))
    parameters = [ttest.noise_parameters(epsilon=e, delta=delta) for e in epsilons]
    alphas = np.array([p[0] for p in parameters])
    betas = [p[1] for p in parameters]
    tasks = [
        (_type_one_chunk, (seed, c, min(CHUNK, trials - start), n, variance, betas, alphas, tuple(modes)))
        for c, start in enumerate(range(0, trials, CHUNK))
    ]
    chunks = run_chunks(tasks, workers=workers, progress=progress)
    t = np.concatenate([chunk[0] for chunk in chunks])
    scales = {mode: np.concatenate([chunk[1][mode] for chunk in chunks]) for mode in modes}
    df = float(n + 4 - 2)
    result = TypeOneError(n, float(variance), delta, trials, [float(e) for e in epsilons],
                          mean_abs_t=float(np.mean(np.abs(t))),
                          exact_naive=float(np.mean(2 * stats.t.sf(np.abs(t), df) < SIGNIFICANCE)))  # fmt: skip
    for mode in modes:
        naive, aware = rejections(t[:, None] + scales[mode] * noise, scales[mode], df)
        result.naive[mode] = naive.mean(axis=0).tolist()
        result.aware[mode] = aware.mean(axis=0).tolist()
        result.noise_sd[mode] = scales[mode].mean(axis=0).tolist()
    return result


def _type_one_chunk(
    seed: int,
    chunk: int,
    count: int,
    n: int,
    variance: float,
    betas: Sequence[float],
    alphas: Values,
    modes: Sequence[ttest.Mode],
) -> tuple[Values, dict[str, Values]]:
    """t and S/α (per mode, per ε′) of ``count`` fresh datasets; chunk 0 checks the walked paper-mode S."""
    rng = np.random.default_rng((seed, 71, chunk))
    t = np.empty(count)
    scales = {mode: np.empty((count, len(betas))) for mode in modes}
    for i in range(count):
        a, b = sample_groups(rng, n, variance)
        if chunk == 0 and i == 0 and "paper" in modes:
            _check_walk(a, b, m=M, dummies=DUMMIES, betas=betas)
        t[i] = augmented_t(a, b, DUMMIES)
        for mode in modes:
            scales[mode][i] = (
                smooth_sensitivities(a, b, m=M, dummies=DUMMIES, betas=betas, mode=mode) / alphas
            )
    return t, scales


def run_chunks(
    tasks: Sequence[tuple[Callable[..., Any], tuple[Any, ...]]], *, workers: int, progress: Progress
) -> list[Any]:
    """``function(*arguments)`` for every task, in order; in ``workers`` forked processes when > 1.

    ``progress(done, total)`` counts the trials of finished chunks (a task's third argument is its count).
    """
    total = sum(arguments[2] for _, arguments in tasks)
    results: list[Any] = [None] * len(tasks)
    done = 0
    if workers <= 1 or len(tasks) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        for index, (function, arguments) in enumerate(tasks):
            results[index] = function(*arguments)
            done += arguments[2]
            progress(done, total)
        return results
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {
            pool.submit(function, *arguments): index for index, (function, arguments) in enumerate(tasks)
        }
        for future in as_completed(futures):
            index = futures[future]
            results[index] = future.result()
            done += tasks[index][1][2]
            progress(done, total)
    return results


def binomial_half_width(rate: float, trials: int) -> float:
    """1.96 binomial standard errors of a rejection rate (at least the one of a 0.05 rate): a 95 % band."""
    p = min(max(rate, SIGNIFICANCE), 1 - SIGNIFICANCE)
    return 1.96 * math.sqrt(p * (1 - p) / trials)


# --- power on Adult -------------------------------------------------------------------------------------------


def load_adult(path: Path) -> pd.DataFrame:
    """sex, race and hours-per-week of adult.data (comma+space CSV, with or without a header line)."""
    if not path.is_file():
        sys.exit(f"{path} not found. {DOWNLOAD_HINT}")
    with path.open(encoding="utf-8") as handle:
        has_header = handle.readline().startswith("age,")
    frame = pd.read_csv(path, names=ADULT_COLUMNS, header=0 if has_header else None, skipinitialspace=True,
                        dtype=str).dropna(subset=["hours-per-week"])  # fmt: skip
    frame = frame[["sex", "race", "hours-per-week"]].copy()
    frame["hours-per-week"] = frame["hours-per-week"].astype(np.float64)
    return frame.reset_index(drop=True)


@dataclass(frozen=True)
class Comparison:
    """Two groups of hours-per-week, clamped to the public bounds and shifted into [0, m]; ``shuffled``:
    every trial permutes the pooled values over groups of the same sizes (H0 true)."""

    name: str
    a: Values
    b: Values
    shuffled: bool = False


def comparisons(frame: pd.DataFrame) -> list[Comparison]:
    """Sex (Male against Female), race (White against Black), and sex with shuffled labels."""
    low, high = HOURS_BOUNDS
    hours = np.clip(frame["hours-per-week"].to_numpy(np.float64), low, high) - low

    def split(column: str, first: str, second: str) -> tuple[Values, Values]:
        values = frame[column].str.strip().to_numpy()
        return hours[values == first], hours[values == second]

    sex = split("sex", "Male", "Female")
    return [
        Comparison("sex (Male − Female)", *sex),
        Comparison("race (White − Black)", *split("race", "White", "Black")),
        Comparison("sex, labels shuffled (H0 true)", *sex, shuffled=True),
    ]


@dataclass(frozen=True)
class PowerRow:
    """Rejection rates of one comparison at one (ε′, δ′), sound mode; for a shuffled comparison ``t`` is the
    mean |t| and ``noise_sd`` the mean noise s.d. over the shuffles."""

    comparison: str
    n_a: int
    n_b: int
    epsilon: float
    delta: float
    t: float
    noise_sd: float
    naive: float
    aware: float


def power(
    groups: Sequence[Comparison],
    *,
    trials: int = 1_000,
    seed: int = 0,
    epsilons: Sequence[float] = POWER_EPSILONS,
    deltas: Sequence[float] = POWER_DELTAS,
    m: float = HOURS_BOUNDS[1] - HOURS_BOUNDS[0],
    dummies: tuple[float, float] = HOURS_DUMMIES,
    workers: int = 1,
    progress: Progress = _no_progress,
) -> list[PowerRow]:
    """Per comparison and (ε′, δ′): ``trials`` releases in sound mode, fraction rejecting H0 (both rules).

    A real comparison computes t and S once and draws fresh noise per trial; a shuffled one draws a fresh
    permutation per trial, so S is computed per trial (progress counts these; chunk c of comparison i
    permutes with ``default_rng((seed, 90 + i, c))``).
    """
    grid = [(e, d) for d in deltas for e in epsilons]
    parameters = [ttest.noise_parameters(epsilon=e, delta=d) for e, d in grid]
    alphas = np.array([p[0] for p in parameters])
    betas = [p[1] for p in parameters]
    rows: list[PowerRow] = []
    for index, group in enumerate(groups):
        rng = np.random.default_rng((seed, 80 + index))
        df = float(group.a.size + group.b.size + 4 - 2)
        noise = rng.standard_normal((trials, len(grid)))
        if group.shuffled:
            pooled = np.concatenate((group.a, group.b))
            tasks = [
                (
                    _shuffle_chunk,
                    (
                        seed,
                        c,
                        min(CHUNK, trials - start),
                        index,
                        pooled,
                        group.a.size,
                        m,
                        dummies,
                        betas,
                        alphas,
                    ),
                )
                for c, start in enumerate(range(0, trials, CHUNK))
            ]
            chunks = run_chunks(tasks, workers=workers, progress=progress)
            t = np.concatenate([chunk[0] for chunk in chunks])
            scales = np.concatenate([chunk[1] for chunk in chunks])
            shown_t = float(np.mean(np.abs(t)))
        else:
            t = np.full(trials, augmented_t(group.a, group.b, dummies))
            scales = np.tile(
                smooth_sensitivities(group.a, group.b, m=m, dummies=dummies, betas=betas, mode="sound")
                / alphas,
                (trials, 1),
            )
            shown_t = float(t[0])
        naive, aware = rejections(t[:, None] + scales * noise, scales, df)
        for k, (epsilon, delta) in enumerate(grid):
            rows.append(PowerRow(group.name, group.a.size, group.b.size, epsilon, delta, shown_t,
                                 float(scales[:, k].mean()), float(naive[:, k].mean()),
                                 float(aware[:, k].mean())))  # fmt: skip
    return rows


def _shuffle_chunk(
    seed: int,
    chunk: int,
    count: int,
    index: int,
    pooled: Values,
    n_a: int,
    m: float,
    dummies: tuple[float, float],
    betas: Sequence[float],
    alphas: Values,
) -> tuple[Values, Values]:
    """t and sound-mode S/α (per (ε′, δ′)) of ``count`` random relabellings of ``pooled`` into n_a and the rest."""
    rng = np.random.default_rng((seed, 90 + index, chunk))
    t, scales = np.empty(count), np.empty((count, len(betas)))
    for i in range(count):
        permuted = rng.permutation(pooled)
        a, b = permuted[:n_a], permuted[n_a:]
        t[i] = augmented_t(a, b, dummies)
        scales[i] = smooth_sensitivities(a, b, m=m, dummies=dummies, betas=betas, mode="sound") / alphas
    return t, scales


# --- output ---------------------------------------------------------------------------------------------------


def format_table_7_1(cells: Sequence[Cell], *, seeds: int) -> str:
    ns = sorted({c.n for c in cells})
    variances = sorted({c.variance for c in cells})
    by_key = {(c.n, c.variance): c for c in cells}
    header = "| n | " + " | ".join(f"s² = {v:,g}" for v in variances) + " |"
    rule = "|---" * (len(variances) + 1) + "|"
    setting = (
        f"ε′ = {TABLE_EPSILON:g}, δ′ = {TABLE_DELTA:g}, m = {M:g}, dummies {DUMMIES[0]:g}, {DUMMIES[1]:g}; "
        f"mean ± s.d. over {seeds} seed{'s' * (seeds > 1)}"
    )
    lines = [f"Table 7.1 — noise s.d. S/α, paper mode (printed value), {setting}", "", header, rule]
    for n in ns:
        cells_n = []
        for v in variances:
            c = by_key.get((n, v))
            if c is None:
                cells_n.append("—")
                continue
            printed = n in PAPER_TABLE_7_1 and v in TABLE_VARIANCES
            suffix = f" ({PAPER_TABLE_7_1[n][TABLE_VARIANCES.index(v)]:.2f})" if printed else ""
            cells_n.append(f"{c.paper_mean:.2f} ± {np.std(c.paper):.2f}{suffix}")
        lines.append(f"| {n:,} | " + " | ".join(cells_n) + " |")
    lines += ["", f"Sound mode on the same datasets (sound / paper), {setting}", "", header, rule]
    for n in ns:
        row = [
            f"{by_key[n, v].sound_mean:.2f} ± {np.std(by_key[n, v].sound):.2f} "
            f"({by_key[n, v].sound_mean / by_key[n, v].paper_mean:.2f}×)"
            if (n, v) in by_key else "—"
            for v in variances
        ]  # fmt: skip
        lines.append(f"| {n:,} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def format_checks(checks: Sequence[Check]) -> str:
    lines = ["Acceptance (spec §8, paper-mode means):", ""]
    lines += [f"- {c.name}: **{'holds' if c.holds else 'fails'}** — {c.detail}" for c in checks]
    return "\n".join(lines)


def format_type_one(result: TypeOneError) -> str:
    modes = list(result.naive)
    lines = [
        f"Fig. 7.1 — type-I error (H0 true) at n = {result.n:,}, m = {M:g}, s² = {result.variance:g}, "
        f"δ′ = {result.delta:g}, {result.trials:,} trials per point; reject when p < {SIGNIFICANCE:g} with "
        f"df = n_A + n_B − 2 = {result.n + 2:,} (naive), or when |t̃| > t_0.975·sqrt(1 + σ²) (aware); "
        f"± = 95 % binomial half-width; without noise the test rejects {result.exact_naive:.3f} "
        f"(mean |t| {result.mean_abs_t:.2f})",
        "",
        "| ε′ | "
        + " | ".join(f"{mode}: noise s.d. | {mode}: naive | {mode}: aware" for mode in modes)
        + " |",
        "|---" * (1 + 3 * len(modes)) + "|",
    ]
    for k, epsilon in enumerate(result.epsilons):
        cells = []
        for mode in modes:
            naive, aware = result.naive[mode][k], result.aware[mode][k]
            cells += [
                f"{result.noise_sd[mode][k]:.3g}",
                f"{naive:.3f} ± {binomial_half_width(naive, result.trials):.3f}",
                f"{aware:.3f} ± {binomial_half_width(aware, result.trials):.3f}",
            ]
        lines.append(f"| {epsilon:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_power(rows: Sequence[PowerRow], *, trials: int) -> str:
    lines = [
        f"Power on Adult, hours-per-week (bounds {HOURS_BOUNDS[0]:g}–{HOURS_BOUNDS[1]:g}, dummies "
        f"{HOURS_DUMMIES[0]:g}, {HOURS_DUMMIES[1]:g}), sound mode, {trials:,} releases per cell: fraction "
        f"rejecting H0 — naive (p < {SIGNIFICANCE:g}) / noise-aware; noise s.d. S/α"
    ]
    deltas = sorted({r.delta for r in rows})
    for name in dict.fromkeys(r.comparison for r in rows):
        group = [r for r in rows if r.comparison == name]
        first = group[0]
        what = "mean |t|" if "shuffled" in name else "t"
        lines += ["", f"**{name}**: n_A = {first.n_a:,}, n_B = {first.n_b:,}, {what} = {first.t:.2f}", ""]
        lines.append("| ε′ | " + " | ".join(f"δ′ = {d:g}: noise s.d. | naive | aware" for d in deltas) + " |")
        lines.append("|---" * (1 + 3 * len(deltas)) + "|")
        for epsilon in dict.fromkeys(r.epsilon for r in group):
            cells = []
            for delta in deltas:
                row = next(r for r in group if r.epsilon == epsilon and r.delta == delta)
                cells += [f"{row.noise_sd:.3g}", f"{row.naive:.3f}", f"{row.aware:.3f}"]
            lines.append(f"| {epsilon:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _figure(width: float = 6.4, height: float = 4.0, columns: int = 1) -> tuple[Any, Any]:
    """A figure on matplotlib's Agg canvas (as anonymizers.plots draws them) and its axes."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.subplots(1, columns, sharey=True)


def plot_type_one(result: TypeOneError, path: Path) -> None:
    """Type-I error against ε′ (log axis) per mode, naive solid, noise-aware dashed, 95 % bands, and 0.05."""
    figure, axes = _figure()
    colours = {"paper": "#4477aa", "sound": "#cc3311"}
    for mode in result.naive:
        for rule, style in (("naive", "-"), ("aware", "--")):
            rates = getattr(result, rule)[mode]
            errors = [binomial_half_width(r, result.trials) for r in rates]
            axes.errorbar(result.epsilons, rates, yerr=errors, marker="o", markersize=3, linestyle=style,
                          capsize=2, color=colours.get(mode), label=f"{mode} mode, {rule}")  # fmt: skip
    axes.axhline(
        SIGNIFICANCE, color="#555555", linewidth=0.8, linestyle=":", label=f"α_sig = {SIGNIFICANCE:g}"
    )
    axes.set_xscale("log")
    axes.set_ylim(0, 1)
    axes.set_xlabel("ε′")
    axes.set_ylabel("type-I error (fraction of H0-true trials rejected)")
    axes.set_title(
        f"DP Welch t-test, n = {result.n:,}, m = {M:g}, s² = {result.variance:g}, δ′ = {result.delta:g}, "
        f"{result.trials:,} trials",
        fontsize=9,
    )
    axes.legend(loc="best", fontsize=7)
    figure.savefig(path)


def plot_power(rows: Sequence[PowerRow], path: Path, *, trials: int) -> None:
    """Rejection rate against ε′ per comparison and δ′: naive rule left, noise-aware right."""
    figure, (left, right) = _figure(9.6, 4.0, columns=2)
    names = list(dict.fromkeys(r.comparison for r in rows))
    colours = dict(zip(names, ("#4477aa", "#cc3311", "#228833", "#aa3377", "#66ccee"), strict=False))
    for axes, rule in ((left, "naive"), (right, "aware")):
        for name in names:
            for delta, style in zip(sorted({r.delta for r in rows}), ("-", "--", ":"), strict=False):
                line = [r for r in rows if r.comparison == name and r.delta == delta]
                axes.plot([r.epsilon for r in line], [getattr(r, rule) for r in line], marker="o", markersize=3,
                          linestyle=style, color=colours.get(name), label=f"{name}, δ′ = {delta:g}")  # fmt: skip
        axes.axhline(SIGNIFICANCE, color="#555555", linewidth=0.8, linestyle=":")
        axes.set_xscale("log")
        axes.set_ylim(0, 1.02)
        axes.set_xlabel("ε′")
        axes.set_title(
            f"{'naive: p < 0.05' if rule == 'naive' else 'noise-aware: |t̃| > t·sqrt(1 + σ²)'}", fontsize=9
        )
    left.set_ylabel(f"fraction of {trials:,} releases rejecting H0")
    right.legend(loc="best", fontsize=6)
    figure.suptitle("Adult hours-per-week, DP t-test (sound mode)", fontsize=10)
    figure.savefig(path)


# --- main -----------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default=",".join(TABLES), help="which of 7.1,fig7.1,power to run")
    parser.add_argument(
        "--seeds",
        type=int,
        default=SPEC_SEEDS,
        help="datasets per Table 7.1 cell (spec §8: 5; from 10 on, also how often five-seed groups pass)",
    )
    parser.add_argument("--trials", type=int, default=1_000, help="trials per Fig. 7.1 point and power cell")
    parser.add_argument("--seed", type=int, default=0, help="experiment seed (printed with the results)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="path of adult.data (power only)")
    parser.add_argument("--plot-dir", type=Path, help="write ttest_type1.png and ttest_power.png here")
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="processes for the trials (default: all CPUs)",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    tables = [t.strip() for t in args.tables.split(",") if t.strip()]
    unknown = sorted(set(tables) - set(TABLES))
    if unknown:
        parser.error(f"unknown --tables {', '.join(unknown)}; choose from {', '.join(TABLES)}")
    if args.seeds < 1 or args.trials < 1:
        parser.error("--seeds and --trials must be at least 1")
    if args.plot_dir is not None:
        try:
            require_matplotlib()
        except AnonymizationError as error:
            sys.exit(error.message)
        args.plot_dir.mkdir(parents=True, exist_ok=True)
    frame = load_adult(args.data) if "power" in tables else None  # exits with the hint before any work
    say = (lambda text: None) if args.json else print
    say(
        f"seed {args.seed}; {args.seeds} seeds for Table 7.1; {args.trials:,} trials per point; "
        f"{args.workers} worker{'s' * (args.workers > 1)}"
    )
    document: dict[str, Any] = {"seed": args.seed, "seeds": args.seeds, "trials": args.trials, "seconds": {}}
    started = time.perf_counter()
    if "7.1" in tables:
        start = time.perf_counter()
        update, close = progress_callback("Table 7.1", quiet=args.json, unit="datasets")
        cells = table_7_1(seeds=args.seeds, seed=args.seed, progress=update)
        close()
        checks = acceptance(cells)
        document["table_7_1"] = [
            asdict(c) | {"paper_mean": c.paper_mean, "sound_mean": c.sound_mean} for c in cells
        ]
        document["acceptance"] = [asdict(c) for c in checks]
        document["seconds"]["7.1"] = time.perf_counter() - start
        say(f"\n{format_table_7_1(cells, seeds=args.seeds)}\n\n{format_checks(checks)}")
        if args.seeds >= 2 * SPEC_SEEDS:
            rates = acceptance_rates(cells)
            document["acceptance_rates"] = rates
            groups = args.seeds // SPEC_SEEDS
            say(f"\nOver {groups} disjoint groups of {SPEC_SEEDS} seeds, each criterion holds on:\n")
            say("\n".join(f"- {name[:3]}: {rate:.0%} of the groups" for name, rate in rates.items()))
        say(f"({document['seconds']['7.1']:.0f} s)")
    if "fig7.1" in tables:
        start = time.perf_counter()
        update, close = progress_callback("Fig. 7.1", quiet=args.json, unit="datasets")
        result = type_one_error(trials=args.trials, seed=args.seed, workers=args.workers, progress=update)
        close()
        document["fig_7_1"] = asdict(result)
        document["seconds"]["fig7.1"] = time.perf_counter() - start
        say(f"\n{format_type_one(result)}")
        say(f"({document['seconds']['fig7.1']:.0f} s)")
        if args.plot_dir is not None:
            plot_type_one(result, args.plot_dir / "ttest_type1.png")
            say(f"plot: {args.plot_dir / 'ttest_type1.png'}")
    if frame is not None:
        start = time.perf_counter()
        update, close = progress_callback("power on Adult (shuffles)", quiet=args.json, unit="datasets")
        rows = power(
            comparisons(frame), trials=args.trials, seed=args.seed, workers=args.workers, progress=update
        )
        close()
        document["power"] = [asdict(r) for r in rows]
        document["seconds"]["power"] = time.perf_counter() - start
        say(f"\n{len(frame):,} rows of {args.data}\n\n{format_power(rows, trials=args.trials)}")
        say(f"({document['seconds']['power']:.0f} s)")
        if args.plot_dir is not None:
            plot_power(rows, args.plot_dir / "ttest_power.png", trials=args.trials)
            say(f"plot: {args.plot_dir / 'ttest_power.png'}")
    document["seconds"]["total"] = time.perf_counter() - started
    say(f"\ntotal {document['seconds']['total']:.0f} s")
    if args.json:
        print(json.dumps(document, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
