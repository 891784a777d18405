"""Smoke test of examples/adult_ch4.py on a small synthetic adult.data (UCI Adult not needed)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pytest

from anonymizers.combine import Released
from anonymizers.errors import AnonymizationError
from anonymizers.hierarchy import Hierarchy
from anonymizers.risk.pipeline import AttributePipeline, Laplace, Pipeline, Randomize, Sample
from tests.unit.example_module import example_module

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "adult_ch4.py"
WORKCLASSES = ["Private", "State-gov", "Local-gov", "Self-emp-not-inc", "?"]
STATUSES = ["Married-civ-spouse", "Never-married", "Divorced", "Widowed"]


def synthetic_adult(path: Path, rows: int = 600) -> None:
    """adult.data's layout (15 comma+space fields, no header); income depends on age and education."""
    rng = np.random.default_rng(3)
    lines = []
    for _ in range(rows):
        age, years = int(rng.integers(17, 91)), int(rng.integers(1, 17))
        rich = age + 3 * years + rng.normal(0, 10) > 75
        fields = [age, rng.choice(WORKCLASSES), 1000, "Some", years, rng.choice(STATUSES), "Sales", "Husband",
                  "White", "Male", 0, 0, 40, "United-States", ">50K" if rich else "<=50K"]  # fmt: skip
        lines.append(", ".join(str(f) for f in fields))
    path.write_text("\n".join(lines) + "\n")


def test_example_prints_tables_shaped_like_the_papers(tmp_path: Path) -> None:
    data = tmp_path / "adult.data"
    synthetic_adult(data)
    arguments = ["--data", str(data), "--reps", "1", "--model", "logistic", "--tables", "4.5,4.7",
                 "--epsilons", "1.0,0.5", "--alphas", "0.9", "--seed", "1"]  # fmt: skip
    result = subprocess.run(
        [sys.executable, str(SCRIPT), *arguments], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert "4.5" in result.stdout and "4.7" in result.stdout
    assert "1.0" in result.stdout and "0.5" in result.stdout
    assert "attacks/s" not in result.stderr  # no progress bar when stderr is not a terminal


def test_missing_data_says_where_to_get_it(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--data", str(tmp_path / "absent.data")], capture_output=True, text=True
    )
    assert result.returncode != 0 and "archive.ics.uci.edu" in result.stderr


@pytest.fixture(scope="module")
def example() -> Iterator[ModuleType]:
    with example_module(SCRIPT, "adult_ch4_example") as module:
        yield module


def _two_leaf_case(rate: float | None) -> tuple[pd.DataFrame, Pipeline, Released]:
    """One attribute with leaves a, b under the root, randomized with exp(ε·u/2) at ε = 1: a record keeps its
    leaf with probability 1/(1 + e^-1) = 0.731 < T = 0.9. Originals a, a, b are released as a, b, b."""
    tree = Hierarchy("x", (("a", "b"), ("*", "*")))
    pipeline = Pipeline(
        (AttributePipeline("x", (Randomize(1.0, tree, sensitivity=1.0),)),),
        None if rate is None else Sample(rate),
    )
    original = pd.DataFrame({"x": ["a", "a", "b"], "income": ["<=50K", ">50K", "<=50K"]})
    table = pd.DataFrame({"x": ["a", "b", "b"], "income": ["<=50K", ">50K", "<=50K"]})
    return original, pipeline, Released(table, np.arange(3), None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("rule", "rate", "sizes"),
    [
        # value: record 0 kept a, C^H = the one released a; record 1 became b, so C = C^H ∪ C^L = every row
        # (T_L = 0.99 > 0.731 holds both leaves); record 2 kept b, C^H = the two released b.
        ("value", None, [1, 3, 2]),
        # mass: a region of mass >= 0.9 needs both leaves, so every C^H is the whole release.
        ("mass", None, [3, 3, 3]),
        # sampling at 0.5: N_i = 3 > T' = 2 × 0.5, no record is an outlier, every |C_i| is divided by 0.5.
        ("value", 0.5, [2, 6, 4]),
    ],
)
def test_categorical_high_confidence_rules_by_hand(
    example: ModuleType, rule: str, rate: float | None, sizes: list[float]
) -> None:
    original, pipeline, released = _two_leaf_case(rate)
    result = example.attack(original, pipeline, released, example.AttackSettings(rule))
    assert result.sizes.tolist() == pytest.approx(sizes)
    assert result.n_q == min(sizes)


def test_value_rule_refuses_a_pipeline_mixing_noise_and_randomization(example: ModuleType) -> None:
    tree = Hierarchy("x", (("a", "b"), ("*", "*")))
    mixed = Pipeline(
        (
            AttributePipeline("x", (Randomize(1.0, tree),)),
            AttributePipeline("y", (Laplace(1.0, 0, 10),)),
        )
    )
    with pytest.raises(AnonymizationError, match="value"):
        example.high_threshold(mixed, "value")
    assert example.high_threshold(mixed, "mass") == example.THRESHOLD


def test_risk_grid_reports_progress_after_every_attack(example: ModuleType, tmp_path: Path) -> None:
    data = tmp_path / "adult.data"
    synthetic_adult(data, rows=200)
    frame = example.load_adult(data)
    hierarchies = example.table_4_4()
    calls: list[tuple[int, int]] = []
    example.risk_grid(
        frame,
        lambda e, a: example.dataset_2(hierarchies, e, a, "rounded"),
        epsilons=[1.0, 0.5],
        alphas=[0.9],
        reps=2,
        seed=1,
        settings=example.AttackSettings("value"),
        progress=lambda done, total: calls.append((done, total)),
    )
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]
