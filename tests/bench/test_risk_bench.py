"""Time of the simulated attack (Algorithm 2) on Adult with ch. 4 dataset 2, and on 1,000,000 rows.

Run with ``make bench``. Dataset 2 of [D] §4.3: discrete Laplace noise (ε = 0.5, unit 1) on age and
education-num, Table 4.4 level-1 generalization of workclass and marital-status, Bernoulli(α = 0.8) sampling,
income as the sensitive attribute. The released tables are drawn here with numpy from a fixed seed (a
benchmark, not a release). Prints wall time and peak RSS; the numbers go into docs/benchmarks.md.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from anonymizers.hierarchy import Hierarchy
from anonymizers.risk.attack import simulate_attack
from anonymizers.risk.pipeline import AttributePipeline, Generalize, Laplace, Pipeline, Sample

pytestmark = pytest.mark.bench

ADULT = Path(__file__).resolve().parents[3] / "shared" / "data" / "adult.data"
COLUMNS = ["age", "workclass", "education-num", "marital-status", "income"]
GOVERNMENT = {"Federal-gov", "Local-gov", "State-gov"}
MARRIED = {"Married-civ-spouse", "Married-AF-spouse", "Married-spouse-absent"}


def _two_level(attribute: str, leaves: list[str], group: dict[str, str]) -> Hierarchy:
    """Table 4.4 (spec §7): leaf → named group → ``*``."""
    return Hierarchy(attribute, (tuple(leaves), tuple(group[v] for v in leaves), ("*",) * len(leaves)))


def _workclass(values: list[str]) -> Hierarchy:
    group = {v: "government" if v in GOVERNMENT else "private" if v == "Private" else "other" for v in values}
    return _two_level("workclass", values, group)


def _marital(values: list[str]) -> Hierarchy:
    return _two_level(
        "marital-status", values, {v: "married" if v in MARRIED else "notmarried" for v in values}
    )


def _dataset_2(table: pd.DataFrame, epsilon: float, alpha: float) -> Pipeline:
    workclass = _workclass(sorted(table["workclass"].unique()))
    marital = _marital(sorted(table["marital-status"].unique()))
    return Pipeline(
        (
            AttributePipeline("age", (Laplace(epsilon, lower=17, upper=90),)),
            AttributePipeline("education-num", (Laplace(epsilon, lower=1, upper=16),)),
            AttributePipeline("workclass", (Generalize(workclass, 1),)),
            AttributePipeline("marital-status", (Generalize(marital, 1),)),
        ),
        Sample(alpha),
    )


def _release(table: pd.DataFrame, pipeline: Pipeline, rng: np.random.Generator) -> pd.DataFrame:
    """Apply the pipeline: discrete Laplace as a difference of geometrics, clamp, generalize, sample."""
    released = {"row_id": np.arange(len(table)), "income": table["income"].to_numpy()}
    for attribute in pipeline.attributes:
        step = attribute.steps[0]
        values = table[attribute.attribute]
        if isinstance(step, Laplace):
            p = 1 - np.exp(-step.unit / step.scale)
            noise = rng.geometric(p, len(values)) - rng.geometric(p, len(values))
            released[attribute.attribute] = np.clip(values.to_numpy() + noise, step.lower, step.upper)
        else:
            released[attribute.attribute] = values.map(step.hierarchy.mapping(step.level)).to_numpy()
    frame = pd.DataFrame(released)
    assert pipeline.sample is not None
    return frame[rng.random(len(frame)) < pipeline.sample.rate].reset_index(drop=True)


def _timed(original: pd.DataFrame, released: pd.DataFrame, pipeline: Pipeline, label: str) -> float:
    start = time.perf_counter()
    result = simulate_attack(original, released, pipeline, sensitive="income")
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"\n{label}: {len(original):,} rows, attack {elapsed:.2f} s, peak RSS {peak:.0f} MB; "
        f"n_q = {result.n_q:.2f}, median |C_i| = {result.median_size:.1f}, "
        f"risk-0 records = {result.records_at_risk_zero:,}, n_s = {result.n_s}"
    )
    return elapsed


def _adult() -> pd.DataFrame:
    if not ADULT.exists():
        pytest.skip(f"{ADULT} is not present")
    names = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
             "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country",
             "income"]  # fmt: skip
    table = pd.read_csv(ADULT, header=None, names=names, skipinitialspace=True, dtype=str).dropna()
    table = table[table["age"] != "age"]  # some copies carry a header line
    return table.assign(
        age=table["age"].astype(int), **{"education-num": table["education-num"].astype(int)}
    )[COLUMNS].reset_index(drop=True)


def test_attack_on_adult_dataset_2() -> None:
    table = _adult()
    pipeline = _dataset_2(table, epsilon=0.5, alpha=0.8)
    released = _release(table, pipeline, np.random.default_rng(7))
    assert _timed(table, released, pipeline, "Adult dataset 2 (ε=0.5, α=0.8)") < 10


def test_attack_on_a_million_rows() -> None:
    rng = np.random.default_rng(11)
    n = 1_000_000
    workclass = np.array(["Private", "State-gov", "Local-gov", "Self-emp-inc", "Without-pay", "?"])
    marital = np.array(["Married-civ-spouse", "Never-married", "Divorced", "Widowed"])
    table = pd.DataFrame(
        {
            "age": rng.integers(17, 91, n),
            "workclass": workclass[rng.integers(0, len(workclass), n)],
            "education-num": rng.integers(1, 17, n),
            "marital-status": marital[rng.integers(0, len(marital), n)],
            "income": np.array(["<=50K", ">50K"])[rng.integers(0, 2, n)],
        }
    )
    pipeline = _dataset_2(table, epsilon=0.5, alpha=0.8)
    released = _release(table, pipeline, rng)
    assert _timed(table, released, pipeline, "generated table") < 300
