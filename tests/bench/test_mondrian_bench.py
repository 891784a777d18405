"""Mondrian on ARX's Adult (30,162 rows, the 8 non-salary QIs) at k = 5: time and GCP against the references.

Run with ``make bench``. References from the issue, measured on this machine class: ARX local recoding
3.0 s / GCP 0.061; anonypy's Mondrian 51.8 s / GCP 0.032. Goal: GCP ≤ 0.035 in ≤ 1 s.

Categoricals use ARX's hierarchies, age is numeric. GCP is printed two ways (anonymizers/gcp.py): ``lca`` —
each categorical class costs the leaves under its lowest common ancestor, which is what Veil publishes;
``set`` — it costs the distinct values it holds, which is what anonypy publishes (``"Divorced,Separated"``)
and reproduces anonypy's 0.032.

anonypy itself runs in the same session when VEIL_ANONYPY_PYTHON names a python that has it (it lives in
its own virtualenv: ``python3 -m venv /tmp/anonypy-venv && /tmp/anonypy-venv/bin/pip install anonypy
pandas``); its partition is scored with the same gcp.py. Without it only Veil's numbers print.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from anonymizers.gcp import partition_gcp
from anonymizers.hierarchy import Hierarchy, load_arx_hierarchy
from anonymizers.mondrian import mondrian

pytestmark = pytest.mark.bench

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
K = 5
RUNS = 5
# anonypy's own example: categoricals as pandas categories, the partition as row labels per class.
ANONYPY = """
import json, sys, time
import pandas as pd
from anonypy import mondrian
frame = pd.read_csv(sys.argv[1], sep=";")
qis = json.loads(sys.argv[3])
for column in qis:
    if column != "age":
        frame[column] = frame[column].astype("category")
start = time.perf_counter()
partitions = mondrian.Mondrian(frame, qis, "salary-class").partition(k=int(sys.argv[2]))
seconds = time.perf_counter() - start
classes = [0] * len(frame)
for number, partition in enumerate(partitions):
    for row in partition:
        classes[row] = number
json.dump({"seconds": seconds, "classes": classes}, sys.stdout)
"""


@pytest.fixture(scope="module")
def adult() -> tuple[pd.DataFrame, dict[str, Hierarchy]]:
    if not (DATA / "adult.csv").exists():
        pytest.skip(f"{DATA / 'adult.csv'} is not present (ARX's Adult)")
    frame = pd.read_csv(DATA / "adult.csv", sep=";")
    hierarchies = {q: load_arx_hierarchy(DATA / f"adult_hierarchy_{q}.csv", q) for q in QIS if q != "age"}
    return frame, hierarchies


def anonypy_run() -> dict[str, object] | None:
    python = os.environ.get("VEIL_ANONYPY_PYTHON")
    if not python:
        return None
    output = subprocess.run(
        [python, "-c", ANONYPY, str(DATA / "adult.csv"), str(K), json.dumps(QIS)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(output.stdout)


def test_mondrian_on_adult_against_arx_and_anonypy(adult: tuple[pd.DataFrame, dict[str, Hierarchy]]) -> None:
    frame, hierarchies = adult
    timings = []
    for _ in range(RUNS):
        start = time.perf_counter()
        result = mondrian(frame, QIS, k=K, hierarchies=hierarchies)
        timings.append(time.perf_counter() - start)
    set_timings = []
    for _ in range(RUNS):
        start = time.perf_counter()
        published_sets = mondrian(frame, QIS, k=K, hierarchies=hierarchies, categorical="set")
        set_timings.append(time.perf_counter() - start)
    seconds = statistics.median(timings)
    lines = [
        f"Veil Mondrian (strict): {seconds:.3f} s (median of {RUNS}), {result.summary.classes} classes, "
        f"GCP lca {result.summary.gcp:.4f}",
        f"Veil Mondrian (strict, --categorical set): {statistics.median(set_timings):.3f} s, "
        f"{published_sets.summary.classes} classes, GCP set {published_sets.summary.gcp:.4f}",
        "references: ARX local recoding 3.0 s, 4,386 classes, GCP 0.061; "
        "anonypy Mondrian 51.8 s, 3,816 classes, GCP 0.032; goal GCP <= 0.035 in <= 1 s",
    ]
    theirs = anonypy_run()
    if theirs is None:
        lines.append(
            "(anonypy not run: set VEIL_ANONYPY_PYTHON to a python with anonypy and pandas installed)"
        )
    else:
        their_classes = np.asarray(theirs["classes"])
        lca, _ = partition_gcp(frame, their_classes, QIS, hierarchies)
        sets, _ = partition_gcp(frame, their_classes, QIS, hierarchies, categorical="set")
        their_seconds = float(theirs["seconds"])  # type: ignore[arg-type]
        lines.append(
            f"anonypy (same run): {their_seconds:.1f} s, {len(np.unique(their_classes))} classes, "
            f"GCP lca {lca:.4f}, set {sets:.4f}; speed-up {their_seconds / seconds:.0f}x"
        )
    print("\nAdult, k = 5, 8 QIs\n" + "\n".join(lines))
    assert min(len(part) for part in result.partition) >= K
    assert published_sets.summary.gcp <= 0.035 and statistics.median(set_timings) <= 1.0
