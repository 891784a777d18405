"""Time of the simulated attack (Algorithm 2) on Adult with ch. 4 dataset 2, and on 1,000,000 rows.

Run with ``make bench``. Dataset 2 of [D] §4.3: discrete Laplace noise (ε = 0.5, unit 1) on age and
education-num, Table 4.4 level-1 generalization of workclass and marital-status, Bernoulli(α = 0.8) sampling,
income as the sensitive attribute. The released tables are drawn here with numpy from a fixed seed (a
benchmark, not a release). Each case runs in a child process (tests/bench/child_process.py): the attack's
wall time and the child's peak RSS — the memory of the process doing the work, not pytest's — go into
docs/benchmarks.md.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from anonymizers.hierarchy import Hierarchy
from anonymizers.risk.attack import simulate_attack
from anonymizers.risk.pipeline import AttributePipeline, Generalize, Laplace, Pipeline, Sample
from tests.bench.child_process import run_measured

pytestmark = pytest.mark.bench

ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT.parent / "shared" / "data" / "adult.data"
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


def _adult_case() -> tuple[pd.DataFrame, pd.DataFrame, Pipeline]:
    table = _adult()
    pipeline = _dataset_2(table, epsilon=0.5, alpha=0.8)
    return table, _release(table, pipeline, np.random.default_rng(7)), pipeline


def _million_case() -> tuple[pd.DataFrame, pd.DataFrame, Pipeline]:
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
    return table, _release(table, pipeline, rng), pipeline


CASES = {"adult": _adult_case, "million": _million_case}


def attack_in_child(case: str, result_path: str) -> None:
    """The child's work: build the case, time the attack, write the result (stdout is not ours)."""
    table, released, pipeline = CASES[case]()
    start = time.perf_counter()
    result = simulate_attack(table, released, pipeline, sensitive="income")
    report = {"rows": len(table), "seconds": time.perf_counter() - start, "n_q": result.n_q}
    report |= {"median": result.median_size, "risk_zero": result.records_at_risk_zero, "n_s": result.n_s}
    Path(result_path).write_text(json.dumps(report, default=str))


def _run(case: str, label: str, tmp_path: Path) -> float:
    """Run a case in a child process: the attack's time, and the peak RSS of the process that did it."""
    result_path = tmp_path / f"{case}.json"
    script = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from tests.bench.test_risk_bench import attack_in_child; "
    script += "attack_in_child(sys.argv[1], sys.argv[2])"
    usage = run_measured([sys.executable, "-c", script, case, str(result_path)])
    assert usage.returncode == 0, f"the {case} child failed"
    report = json.loads(result_path.read_text())
    print(
        f"\n{label}: {report['rows']:,} rows, attack {report['seconds']:.2f} s, peak RSS of the child "
        f"{usage.peak_mb:.0f} MB (building the table included); n_q = {report['n_q']:.2f}, "
        f"median |C_i| = {report['median']:.1f}, risk-0 records = {report['risk_zero']:,}, n_s = {report['n_s']}"
    )
    return float(report["seconds"])


def test_attack_on_adult_dataset_2(tmp_path: Path) -> None:
    if not ADULT.exists():
        pytest.skip(f"{ADULT} is not present")
    assert _run("adult", "Adult dataset 2 (ε=0.5, α=0.8)", tmp_path) < 10


def test_attack_on_a_million_rows(tmp_path: Path) -> None:
    assert _run("million", "generated table", tmp_path) < 300
