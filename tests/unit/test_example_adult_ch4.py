"""Smoke test of examples/adult_ch4.py on a small synthetic adult.data (UCI Adult not needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

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


def test_missing_data_says_where_to_get_it(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--data", str(tmp_path / "absent.data")], capture_output=True, text=True
    )
    assert result.returncode != 0 and "archive.ics.uci.edu" in result.stderr
