"""Combined de-identification on UCI Adult: the shape of Tables 4.5-4.7 of the dissertation (seed 000, ch. 4).

Setup of spec simulated-attack-risk.md §7, with its errata: quasi-identifiers age, workclass, marital-status
and education (education-num 1..16; hours-per-week is named in the text but never used), income sensitive,
the Table 4.4 hierarchies built here in code, and five datasets:

1. every quasi-identifier at level 1 (4-anonymous);
2. Laplace noise on age and education, workclass and marital-status at level 1, Bernoulli(α) sampling;
3. age at level 1; education at level 1 and then randomized among the level-1 cells; workclass and
   marital-status randomized by the exponential mechanism over tree distance; sampling;
4. age at level 2, the others at level 1 (22-anonymous);
5. dataset 1 without the records of classes smaller than 10.

Risk is Algorithm 2 (:func:`anonymizers.risk.attack.simulate_attack`, T = 0.9, T' = k·α with k = 2) on the
release of :func:`anonymizers.combine.combine`, averaged over repetitions; utility (Table 4.7) is the
F-measure ratio of :mod:`anonymizers.utility` with a held-out 10 % of the original rows.

Two settings follow what the paper's numbers imply rather than the product's defaults (docs/reproductions.md
gives the evidence):

* ``--categorical-high value`` (default): for a randomized categorical attribute only the record's own
  category is high-confidence, as in the dissertation's worked example (§4.2.3: "Sports", kept with 80 %,
  is the only high category although T = 0.9). ``mass``: the product's rule, the categories holding
  T^(1/p) of the published-value distribution — at ε <= 1 that is every category (Table 4.6 ≈ 6,900).
* ``--features all`` (default): the classifier sees every attribute of adult.data but fnlwgt (a census
  weight) and the education text (the education quasi-identifier in words); ``qi``: the four
  quasi-identifiers only.

``--test-rows raw`` feeds the released model the raw test rows (Def 4.6 to the letter) instead of the rows
recoded to its labels.

    .venv/bin/python examples/adult_ch4.py [--reps 10] [--utility-reps 2] [--model svm|logistic]
        [--features all|qi] [--test-rows recoded|raw] [--categorical-high value|mass]
        [--low-confidence T_L] [--seed S] [--data PATH] [--plot sweep.png]

``--plot`` draws the utility lines (Table 4.7 and the sweep) as n_q against Uti per dataset, next to the
paper's points (needs the ``[plot]`` extra).

The seed is an experiment's seed, printed with the results so that they regenerate; a production release
never takes one (see anonymizers/combine.py). Results and discussion: docs/reproductions.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from anonymizers.combine import Released, combine, recode
from anonymizers.errors import AnonymizationError
from anonymizers.hierarchy import ROOT, Hierarchy
from anonymizers.plots import plot_curves, require_matplotlib
from anonymizers.risk.attack import AttackResult, default_low_threshold, simulate_attack
from anonymizers.risk.pipeline import (
    AttributePipeline,
    Generalize,
    Laplace,
    Pipeline,
    Randomize,
    Sample,
    coarsen,
)
from anonymizers.utility import Scores, Utility, holdout, model_scores
from proxy.cli.sources import progress_callback

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult.data"
COLUMNS = [
    "age",
    "workclass",
    "fnlwgt",
    "education-text",
    "education",
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
QUASI_IDENTIFIERS = ("age", "workclass", "marital-status", "education")
SENSITIVE = "income"
POSITIVE = ">50K"
NUMERIC = ("age", "education", "capital-gain", "capital-loss", "hours-per-week")
# The classifier's features: every attribute but fnlwgt (a census sampling weight, not a trait of the
# person) and education-text (the education quasi-identifier in words: releasing it would undo its
# de-identification), or the four quasi-identifiers alone.
FEATURES = {
    "all": tuple(c for c in COLUMNS if c not in ("fnlwgt", "education-text", SENSITIVE)),
    "qi": QUASI_IDENTIFIERS,
}
Law = Literal["discrete", "rounded"]
CategoricalHigh = Literal["value", "mass"]
EPSILONS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5)
ALPHAS = (0.9, 0.8, 0.7, 0.6, 0.5)
THRESHOLD = 0.9
VALUE_ONLY = 1e-12
"""T for the ``value`` rule: a highest-probability region of (per attribute) mass VALUE_ONLY^(1/p), below any
category's probability, holds only the most probable published category — the record's own one, since the
exponential mechanism over −(tree distance) gives distance 0 the unique largest weight."""
OUTLIER_K = 2.0
SMALL_CLASS = 10  # dataset 5 drops the classes smaller than this

# Public domains (UCI's adult.names), not read from the data.
AGE_RANGE = (17, 90)
EDUCATION_RANGE = (1, 16)
GOVERNMENT = ("Federal-gov", "Local-gov", "State-gov")
OTHER_WORK = ("Self-emp-not-inc", "Self-emp-inc", "Without-pay", "Never-worked", "?")
MARRIED = ("Married-civ-spouse", "Married-AF-spouse", "Married-spouse-absent")
NOT_MARRIED = ("Never-married", "Divorced", "Separated", "Widowed")

# The dissertation's numbers (spec §7.1), rows α, columns ε.
PAPER_TABLE_4_5 = {
    0.9: (1.8, 2.2, 2.5, 2.4, 3.1, 3.0),
    0.8: (1.5, 1.8, 2.2, 2.6, 2.9, 3.2),
    0.7: (1.9, 2.1, 2.1, 2.6, 2.8, 3.1),
    0.6: (2.2, 2.4, 3.0, 3.1, 3.4, 3.4),
    0.5: (2.8, 2.6, 3.2, 3.8, 3.6, 3.8),
}
PAPER_TABLE_4_6 = {
    0.9: (6.8, 7.6, 6.7, 8.1, 8.6, 9.8),
    0.8: (7.2, 7.5, 7.9, 9.6, 12.1, 14.1),
    0.7: (7.7, 8.0, 8.5, 9.6, 14.1, 16.9),
    0.6: (8.3, 8.6, 9.4, 11.3, 16.8, 18.7),
    0.5: (8.1, 9.2, 9.6, 14.1, 18.3, 19.3),
}


@dataclass(frozen=True)
class Table47Row:
    """One line of Table 4.7: the paper's n_q and Uti (None on lines of our own sweep) next to ours."""

    paper_nq: int | None
    label: str
    paper_uti: float | None
    build: Callable[[], Pipeline]
    drop_small_classes: bool = False


def load_adult(path: Path) -> pd.DataFrame:
    """The quasi-identifiers and income of adult.data (comma+space CSV, with or without a header line)."""
    if not path.exists():
        sys.exit(
            f"{path} not found. Download the UCI Adult training file "
            "(https://archive.ics.uci.edu/dataset/2/adult, file adult.data) and pass --data PATH."
        )
    with path.open(encoding="utf-8") as handle:
        has_header = handle.readline().startswith("age,")
    frame = pd.read_csv(
        path, names=COLUMNS, header=0 if has_header else None, skipinitialspace=True, dtype=str
    ).dropna(subset=["income"])
    frame = frame[[*FEATURES["all"], SENSITIVE]].copy()
    for column in NUMERIC:
        frame[column] = frame[column].astype(np.int64)
    frame[SENSITIVE] = frame[SENSITIVE].str.rstrip(".")
    return frame.reset_index(drop=True)


def table_4_4() -> dict[str, Hierarchy]:
    """The hierarchies of Table 4.4 as the spec reads them (§7), over each attribute's public domain."""
    ages = range(AGE_RANGE[0], AGE_RANGE[1] + 1)
    years = range(EDUCATION_RANGE[0], EDUCATION_RANGE[1] + 1)
    workclasses = ("Private", *GOVERNMENT, *OTHER_WORK)
    statuses = (*MARRIED, *NOT_MARRIED)
    return {
        "age": Hierarchy(
            "age",
            (
                tuple(str(a) for a in ages),
                tuple(_age_band(a) for a in ages),
                tuple("<=35" if a <= 35 else ">=36" for a in ages),
                tuple(ROOT for _ in ages),
            ),
        ),
        "workclass": Hierarchy(
            "workclass",
            (
                workclasses,
                tuple(
                    "government" if w in GOVERNMENT else "private" if w == "Private" else "other"
                    for w in workclasses
                ),
                tuple(ROOT for _ in workclasses),
            ),
        ),
        "marital-status": Hierarchy(
            "marital-status",
            (
                statuses,
                tuple("married" if s in MARRIED else "notmarried" for s in statuses),
                tuple(ROOT for _ in statuses),
            ),
        ),
        "education": Hierarchy(
            "education",
            (
                tuple(str(y) for y in years),
                tuple(_education_band(y) for y in years),
                tuple(ROOT for _ in years),
            ),
        ),
    }


def _age_band(age: int) -> str:
    return "<=27" if age <= 27 else "28-35" if age <= 35 else "36-47" if age <= 47 else ">=48"


def _education_band(years: int) -> str:
    return "<=8" if years <= 8 else "11-12" if 11 <= years <= 12 else ">=13" if years >= 13 else str(years)


def generalized(hierarchies: dict[str, Hierarchy], levels: dict[str, int]) -> Pipeline:
    """Datasets 1, 4 and 5: every quasi-identifier generalized to its level."""
    return Pipeline(
        tuple(AttributePipeline(a, (Generalize(hierarchies[a], levels[a]),)) for a in QUASI_IDENTIFIERS)
    )


def dataset_2(hierarchies: dict[str, Hierarchy], epsilon: float, alpha: float, law: Law) -> Pipeline:
    """Noise on age and education, workclass and marital-status at level 1, sampling at α."""
    return Pipeline(
        (
            AttributePipeline("age", (Laplace(epsilon, *AGE_RANGE, law=law),)),
            AttributePipeline("workclass", (Generalize(hierarchies["workclass"], 1),)),
            AttributePipeline("marital-status", (Generalize(hierarchies["marital-status"], 1),)),
            AttributePipeline("education", (Laplace(epsilon, *EDUCATION_RANGE, law=law),)),
        ),
        Sample(alpha),
    )


def dataset_3(
    hierarchies: dict[str, Hierarchy], epsilon: float, alpha: float, sensitivity: float | None
) -> Pipeline:
    """Age at level 1; education generalized then randomized; workclass, marital-status randomized; sampling."""
    education = hierarchies["education"]
    return Pipeline(
        (
            AttributePipeline("age", (Generalize(hierarchies["age"], 1),)),
            AttributePipeline("workclass", (Randomize(epsilon, hierarchies["workclass"], sensitivity),)),
            AttributePipeline(
                "marital-status", (Randomize(epsilon, hierarchies["marital-status"], sensitivity),)
            ),
            AttributePipeline(
                "education",
                (Generalize(education, 1), Randomize(epsilon, coarsen(education, 1), sensitivity)),
            ),
        ),
        Sample(alpha),
    )


def class_sizes(frame: pd.DataFrame, pipeline: Pipeline) -> pd.Series:
    """Equivalence-class sizes of the deterministic recoding (the Table 4.4 verification)."""
    return recode(frame, pipeline).groupby(list(QUASI_IDENTIFIERS)).size()


def without_small_classes(frame: pd.DataFrame, pipeline: Pipeline) -> np.ndarray:
    """Positions of the records whose level-1 class has at least SMALL_CLASS members (dataset 5)."""
    keys = recode(frame, pipeline)[list(QUASI_IDENTIFIERS)]
    sizes = keys.groupby(list(QUASI_IDENTIFIERS))[QUASI_IDENTIFIERS[0]].transform("size")
    return np.flatnonzero(sizes.to_numpy() >= SMALL_CLASS)


def release(
    frame: pd.DataFrame, pipeline: Pipeline, *, seed: int, keep: np.ndarray | None = None
) -> Released:
    """``combine`` on the kept records, with row ids mapped back to positions in ``frame``."""
    if keep is None:
        return combine(frame, pipeline, seed=seed)
    result = combine(frame.iloc[keep], pipeline, seed=seed)
    return Released(result.table, keep[result.row_ids], result.report)


@dataclass(frozen=True)
class AttackSettings:
    """How the simulated attacker reads the release: the categorical rule and T_L (module docstring)."""

    categorical_high: CategoricalHigh = "value"
    low_threshold: float = default_low_threshold(THRESHOLD)


def high_threshold(pipeline: Pipeline, rule: CategoricalHigh) -> float:
    """T for :func:`simulate_attack`: 0.9, or VALUE_ONLY when the ``value`` rule applies.

    The ``value`` rule is the paper's for randomized categories; its numeric noise keeps the box of mass T
    (worked example: "[1, 2] or [3, 4] with 90 %"). One T serves every perturbed attribute, so a pipeline
    that perturbs both kinds cannot be scored with it (none of the paper's datasets does).
    """
    perturbed = [a for a in pipeline.attributes if a.perturbed]
    noised = [a for a in perturbed if any(isinstance(step, Laplace) for step in a.steps)]
    if rule == "mass" or len(noised) == len(perturbed):
        return THRESHOLD
    if noised:
        raise AnonymizationError(
            "the 'value' rule needs every perturbed attribute to be categorical (randomized) or none",
            hint="use --categorical-high mass for a pipeline that mixes Laplace noise and randomization",
        )
    return VALUE_ONLY


def attack(
    frame: pd.DataFrame, pipeline: Pipeline, released: Released, settings: AttackSettings = AttackSettings()
) -> AttackResult:
    """Algorithm 2 on one release (k = 2), the hidden row ids passed beside the released columns."""
    table = released.table.assign(row_id=released.row_ids)
    return simulate_attack(
        frame,
        table,
        pipeline,
        sensitive=SENSITIVE,
        threshold=high_threshold(pipeline, settings.categorical_high),
        low_threshold=settings.low_threshold,
        outlier_k=OUTLIER_K,
    )


@dataclass(frozen=True)
class RiskGrid:
    """Per (α, ε) the mean over repetitions of n_q and of the median |C_i| (rows α, columns ε)."""

    n_q: dict[float, list[float]]
    median: dict[float, list[float]]


Progress = Callable[[int, int], None]


def _no_progress(done: int, total: int) -> None:
    """No bar: the default when the caller shows none."""


def risk_grid(
    frame: pd.DataFrame,
    build: Callable[[float, float], Pipeline],
    *,
    epsilons: Sequence[float],
    alphas: Sequence[float],
    reps: int,
    seed: int,
    settings: AttackSettings,
    progress: Progress = _no_progress,
) -> RiskGrid:
    """Tables 4.5 and 4.6: n_q (the minimum over records) and, to show the bulk, the median candidate count.
    ``progress(done, total)`` after each simulated attack."""
    grid = RiskGrid({}, {})
    total, done = len(alphas) * len(epsilons) * reps, 0
    for a, alpha in enumerate(alphas):
        grid.n_q[alpha], grid.median[alpha] = [], []
        for e, epsilon in enumerate(epsilons):
            pipeline = build(epsilon, alpha)
            results = []
            for r in range(reps):
                released = release(frame, pipeline, seed=seed + 1000 * a + 100 * e + r)
                results.append(attack(frame, pipeline, released, settings))
                done += 1
                progress(done, total)
            grid.n_q[alpha].append(float(np.mean([r.n_q for r in results])))
            grid.median[alpha].append(float(np.mean([r.median_size for r in results])))
    return grid


def table_4_7_rows(
    hierarchies: dict[str, Hierarchy], law: Law, sensitivity: float | None
) -> tuple[Table47Row, ...]:
    """The seven lines of Table 4.7 with the paper's n_q and Uti."""
    level_1 = dict.fromkeys(QUASI_IDENTIFIERS, 1)
    return (
        Table47Row(4, "1", 0.658, lambda: generalized(hierarchies, level_1)),
        Table47Row(4, "2 (ε=0.5, α=0.5)", 0.633, lambda: dataset_2(hierarchies, 0.5, 0.5, law)),
        Table47Row(10, "5", 0.647, lambda: generalized(hierarchies, level_1), drop_small_classes=True),
        Table47Row(10, "3 (ε=0.5, α=0.9)", 0.636, lambda: dataset_3(hierarchies, 0.5, 0.9, sensitivity)),
        Table47Row(10, "3 (ε=1.0, α=0.5)", 0.695, lambda: dataset_3(hierarchies, 1.0, 0.5, sensitivity)),
        Table47Row(22, "4", 0.588, lambda: generalized(hierarchies, {**level_1, "age": 2})),
        Table47Row(22, "3 (ε=0.5, α=0.5)", 0.650, lambda: dataset_3(hierarchies, 0.5, 0.5, sensitivity)),
    )


SWEEP_DATASET_2 = (0.5, 0.2, 0.1, 0.05)
SWEEP_DATASET_3 = (2.0, 3.0, 4.0, 5.0, 6.0, 8.0)


def sweep_rows(
    hierarchies: dict[str, Hierarchy], law: Law, sensitivity: float | None
) -> tuple[Table47Row, ...]:
    """Our own risk-utility curve at α = 0.5: smaller ε for dataset 2, larger for dataset 3.

    Why: under the product's rule (``--categorical-high mass``) dataset 3 at the paper's ε has n_q in the
    thousands, so Table 4.7's "equal privacy" pairs do not hold; the sweep shows which ε gives each n_q.
    """
    return tuple(
        Table47Row(None, f"2 (ε={e:g}, α=0.5)", None, lambda e=e: dataset_2(hierarchies, e, 0.5, law))
        for e in SWEEP_DATASET_2
    ) + tuple(
        Table47Row(None, f"3 (ε={e:g}, α=0.5)", None, lambda e=e: dataset_3(hierarchies, e, 0.5, sensitivity))
        for e in SWEEP_DATASET_3
    )


@dataclass(frozen=True)
class UtilityResult:
    """One Table 4.7 line, ours averaged over the splits: n_q, Uti and the two F-measures it divides."""

    row: Table47Row
    n_q: float
    uti: float
    f_released: float
    f_original: float


def utility_table(
    frame: pd.DataFrame,
    rows: Sequence[Table47Row],
    *,
    reps: int,
    seed: int,
    model: str,
    features: Sequence[str],
    settings: AttackSettings,
    recode_test: bool = True,
    progress: Progress = _no_progress,
) -> list[UtilityResult]:
    """Per Table 4.7 line our mean n_q, Uti, F(A(D), E) and F(D, E); each repetition a fresh 10 % split.

    F(D, E) depends on the split alone, so it is fitted once per split and shared by every line.
    ``recode_test``: the released model scores E put into the released schema (generalizations applied, no
    noise); False feeds it the raw E, Def 4.6 to the letter, so a generalized value it was trained on
    never occurs in the test rows (one-hot: all zeros).
    """
    splits = [holdout(len(frame), rng=np.random.default_rng(seed + r)) for r in range(reps)]
    originals = [
        _scores(frame.iloc[split.train], frame.iloc[split.test], model, features) for split in splits
    ]
    if any(original.f_measure == 0 for original in originals):
        raise AnonymizationError(
            f"the model trained on the original table never predicts {POSITIVE!r} correctly: Uti is undefined",
            hint="use more features (--features all) or another model",
        )
    results = []
    for index, row in enumerate(rows):
        pipeline = row.build()
        keep = without_small_classes(frame, pipeline) if row.drop_small_classes else None
        risks, utilities = [], []
        for r, split in enumerate(splits):
            released = release(frame, pipeline, seed=seed + 7919 * (index + 1) + r, keep=keep)
            risks.append(attack(frame, pipeline, released, settings).n_q)
            train = released.table[np.isin(released.row_ids, split.train)]
            test = recode(frame.iloc[split.test], pipeline) if recode_test else frame.iloc[split.test]
            scores = _scores(train, test, model, features)
            utilities.append(Utility(released=scores, original=originals[r], model=model))  # type: ignore[arg-type]
            progress(index * len(splits) + r + 1, len(rows) * len(splits))
        results.append(
            UtilityResult(
                row,
                float(np.mean(risks)),
                float(np.mean([u.uti for u in utilities])),
                float(np.mean([u.released.f_measure for u in utilities])),
                float(np.mean([u.original.f_measure for u in utilities])),
            )
        )
    return results


def _scores(train: pd.DataFrame, test: pd.DataFrame, model: str, features: Sequence[str]) -> Scores:
    """F-measure (class ``>50K``) on ``test`` of ``model`` fitted on ``train`` over ``features``."""
    truth = (test[SENSITIVE].astype(str).str.strip() == POSITIVE).to_numpy()
    return model_scores(train, test, truth, SENSITIVE, features, POSITIVE, model)  # type: ignore[arg-type]


def format_grid(
    title: str,
    ours: dict[float, list[float]],
    epsilons: Sequence[float],
    paper: dict[float, tuple[float, ...]] | None = None,
) -> str:
    """A markdown table, rows α and columns ε; each cell "ours (paper)" when the paper has the cell."""
    lines = [title, "", "| α \\ ε | " + " | ".join(f"{e:g}" for e in epsilons) + " |"]
    lines.append("|---" * (len(epsilons) + 1) + "|")
    for alpha, values in ours.items():
        cells = [
            f"{v:.1f} ({paper[alpha][EPSILONS.index(e)]})" if paper and alpha in paper and e in EPSILONS
            else f"{v:.1f}"
            for v, e in zip(values, epsilons, strict=True)
        ]  # fmt: skip
        lines.append(f"| {alpha:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_utility(results: Sequence[UtilityResult], model: str, features: str) -> str:
    """Ours next to the paper's Table 4.7; the paper's column is headed Uti but holds F-measure-sized values
    (docs/reproductions.md), so our F(A(D), E) is shown beside our ratio."""
    original = np.mean([r.f_original for r in results]) if results else float("nan")
    lines = [
        f"Utility ({model}, features: {features}; our F(D, E) = {original:.3f}), ours next to the paper's Table 4.7",
        "",
        "| paper n_q | dataset | our n_q | paper Uti | our Uti | our F(A(D), E) |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        paper_nq = "—" if r.row.paper_nq is None else str(r.row.paper_nq)
        paper_uti = "—" if r.row.paper_uti is None else f"{r.row.paper_uti:.3f}"
        lines.append(
            f"| {paper_nq} | {r.row.label} | {r.n_q:.1f} | {paper_uti} | {r.uti:.3f} | {r.f_released:.3f} |"
        )
    return "\n".join(lines)


PAPER_POINTS, GENERALIZATION = "paper (Table 4.7 as printed)", "generalization (datasets 1, 4, 5)"
UNJOINED = (PAPER_POINTS, GENERALIZATION)  # points of different datasets: no line between them


def utility_curves(results: Sequence[UtilityResult]) -> dict[str, list[tuple[float, float, str]]]:
    """(n_q, Uti, label) per dataset — generalization alone (1, 4, 5) is one curve — and the paper's."""
    curves: dict[str, list[tuple[float, float, str]]] = {}
    for result in results:
        row = result.row
        dataset, _, parameters = row.label.partition(" ")
        name = f"dataset {dataset}" if dataset in ("2", "3") else GENERALIZATION
        curves.setdefault(name, []).append((result.n_q, result.uti, parameters.strip("()") or dataset))
        if row.paper_nq is not None and row.paper_uti is not None:
            curves.setdefault(PAPER_POINTS, []).append((row.paper_nq, row.paper_uti, row.label))
    return curves


def verify_hierarchies(frame: pd.DataFrame, hierarchies: dict[str, Hierarchy]) -> str:
    """The checks of spec §7: 120 classes with minimum 4; age at level 2 → 22; dataset 5 → 14."""
    level_1 = dict.fromkeys(QUASI_IDENTIFIERS, 1)
    one = class_sizes(frame, generalized(hierarchies, level_1))
    four = class_sizes(frame, generalized(hierarchies, {**level_1, "age": 2}))
    kept = without_small_classes(frame, generalized(hierarchies, level_1))
    five = class_sizes(frame.iloc[kept], generalized(hierarchies, level_1))
    return (
        f"Table 4.4 check: dataset 1 has {len(one)} classes, smallest {one.min()}; dataset 4 smallest "
        f"{four.min()}; dataset 5 drops {len(frame) - len(kept)} rows, smallest {five.min()}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="path of adult.data")
    parser.add_argument("--reps", type=int, default=10, help="repetitions per cell (the paper: 10)")
    parser.add_argument(
        "--utility-reps",
        type=int,
        default=2,
        help="10 %% splits per Table 4.7 / sweep line (the paper: one; an SVM on all features takes ~30 s)",
    )
    parser.add_argument("--seed", type=int, default=2024, help="experiment seed (printed with the results)")
    parser.add_argument("--model", choices=("svm", "logistic"), default="svm", help="utility classifier")
    parser.add_argument(
        "--law", choices=("rounded", "discrete"), default="rounded", help="Laplace law (rounded: as [D])"
    )
    parser.add_argument(
        "--em",
        choices=("printed", "max-distance"),
        default="printed",
        help="exponential mechanism: exp(ε·u/2) as printed, or Δ_u = largest tree distance",
    )
    parser.add_argument(
        "--categorical-high",
        choices=("value", "mass"),
        default="value",
        help="high-confidence categories of a randomized attribute: the record's own (the paper's worked "
        "example), or those holding T^(1/p) of the mass (the product's rule)",
    )
    parser.add_argument(
        "--low-confidence",
        type=float,
        default=default_low_threshold(THRESHOLD),
        help="T_L, the mass of the low-confidence region (default 1 − (1 − T)² = 0.99; 1 = the whole support)",
    )
    parser.add_argument(
        "--features", choices=tuple(FEATURES), default="all", help="the utility classifier's features"
    )
    parser.add_argument(
        "--test-rows",
        choices=("recoded", "raw"),
        default="recoded",
        help="E as the released model sees it: recoded to the released labels, or raw (Def 4.6 literally)",
    )
    parser.add_argument(
        "--tables", default="4.5,4.6,4.7", help="which of 4.5,4.6,4.7,sweep to compute, comma-separated"
    )
    parser.add_argument("--epsilons", default=",".join(map(str, EPSILONS)), help="ε grid of Tables 4.5/4.6")
    parser.add_argument("--alphas", default=",".join(map(str, ALPHAS)), help="α grid of Tables 4.5/4.6")
    parser.add_argument("--plot", type=Path, help="draw the utility lines (4.7, sweep) to this PNG")
    args = parser.parse_args(argv)
    if args.plot is not None:
        try:
            require_matplotlib()
        except AnonymizationError as error:
            sys.exit(error.message)
    frame = load_adult(args.data)
    hierarchies = table_4_4()
    sensitivity = 1.0 if args.em == "printed" else None
    tables = set(args.tables.split(","))
    epsilons = [float(e) for e in args.epsilons.split(",")]
    alphas = [float(a) for a in args.alphas.split(",")]
    settings = AttackSettings(args.categorical_high, args.low_confidence)
    print(
        f"{len(frame)} rows; seed {args.seed}; {args.reps} repetitions ({args.utility_reps} for utility); "
        f"law {args.law}; EM {args.em}; categorical high-confidence {args.categorical_high}; "
        f"T_L {args.low_confidence:g}; features {args.features}; test rows {args.test_rows}"
    )
    print(verify_hierarchies(frame, hierarchies))
    grids = (
        ("4.5", "Table 4.5 — n_q of dataset 2", PAPER_TABLE_4_5,
         lambda e, a: dataset_2(hierarchies, e, a, args.law)),
        ("4.6", "Table 4.6 — n_q of dataset 3", PAPER_TABLE_4_6,
         lambda e, a: dataset_3(hierarchies, e, a, sensitivity)),
    )  # fmt: skip
    for name, title, paper, build in grids:
        if name in tables:
            start = time.perf_counter()
            update, close = progress_callback(f"Table {name}", quiet=False, unit="attacks")
            grid = risk_grid(
                frame,
                build,
                epsilons=epsilons,
                alphas=alphas,
                reps=args.reps,
                seed=args.seed,
                settings=settings,
                progress=update,
            )
            close()
            print(f"\n{format_grid(title + ', ours (paper)', grid.n_q, epsilons, paper)}")
            print(f"\n{format_grid(title + ' — median |C_i| (ours)', grid.median, epsilons)}")
            print(f"({time.perf_counter() - start:.0f} s)")
    utilities = (("4.7", table_4_7_rows), ("sweep", sweep_rows))
    measured: list[UtilityResult] = []
    for name, build_rows in utilities:
        if name in tables:
            start = time.perf_counter()
            rows = build_rows(hierarchies, args.law, sensitivity)
            update, close = progress_callback(f"{name} utility", quiet=False, unit="releases")
            results = utility_table(
                frame,
                rows,
                reps=args.utility_reps,
                seed=args.seed,
                model=args.model,
                features=FEATURES[args.features],
                settings=settings,
                recode_test=args.test_rows == "recoded",
                progress=update,
            )
            close()
            measured += results
            print(f"\n{format_utility(results, args.model, args.features)}")
            print(f"({time.perf_counter() - start:.0f} s)")
    if args.plot is not None and measured:
        title = (
            f"Adult, ch. 4: risk against utility ({args.model}, {args.utility_reps} splits, seed {args.seed})"
        )
        curves = utility_curves(measured)
        plot_curves(curves, args.plot, title=title, x="n_q (risk 1/n_q)", y="Uti", unjoined=UNJOINED)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
