"""Veil against the closest peer, smartnoise-sql, on UCI Adult at ε = 1 per query (issue 3).

Queries: COUNT(*); COUNT(*) GROUP BY education; AVG(age), SUM(hours_per_week) GROUP BY sex — each row
one person, as smartnoise's ``row_privacy``. Veil runs in process (QueryService, seeded noise);
smartnoise-sql runs in its own virtualenv (it pins older pandas/SQLAlchemy than Veil): set
VEIL_SMARTNOISE_PYTHON to that venv's python (e.g. ``python3 -m venv /tmp/sn && /tmp/sn/bin/pip
install smartnoise-sql``). Without it, or without ../shared/data/adult.data, the smartnoise half is
skipped and only Veil's numbers print. Differences in what is released: Veil answers GROUP BY over the
declared public value lists (every education level, noisy zeros included); smartnoise thresholds keys
(censor_dims) and spends δ = 1e-5 for that.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from pathlib import Path

import duckdb
import pytest

from tests.bench.in_process import answer, create_ledger, seeded_service

pytestmark = pytest.mark.bench

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "adult.data"
RUNS = 20
QUERIES = {
    "count": "SELECT COUNT(*) AS n FROM adult",
    "count_by_education": "SELECT education, COUNT(*) AS n FROM adult GROUP BY education",
    "avg_sum_by_sex": "SELECT sex, AVG(age) AS a, SUM(hours_per_week) AS h FROM adult GROUP BY sex",
}


@pytest.fixture(scope="module")
def adult(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[tuple[object, ...]]]]:
    if not DATA.exists():
        pytest.skip(f"{DATA} is not present (UCI Adult)")
    directory = tmp_path_factory.mktemp("adult")
    with duckdb.connect(str(directory / "adult.duckdb")) as connection:
        connection.execute(
            "CREATE TABLE adult AS SELECT column00::INTEGER AS age, trim(column03) AS education,"
            " trim(column09) AS sex, column12::INTEGER AS hours_per_week"
            " FROM read_csv(?, header = false, skip = 1, delim = ',')",
            [str(DATA)],
        )
        truth = {name: connection.execute(sql).fetchall() for name, sql in QUERIES.items()}
        educations = [
            row[0] for row in connection.execute("SELECT DISTINCT education FROM adult ORDER BY 1").fetchall()
        ]
    policy = f"""
[datasets.adult]
path = "adult.duckdb"
default_epsilon = 1.0
max_epsilon = 1.0
answer_cache = false  # every run is a fresh DP answer, as in smartnoise (which has no cache)
[datasets.adult.tables.adult]
privacy_unit = "row"
[datasets.adult.tables.adult.columns]
age = {{ type = "integer", lower = 17, upper = 90 }}
hours_per_week = {{ type = "integer", lower = 1, upper = 99 }}
sex = {{ type = "text", public = true, values = ["Female", "Male"] }}
education = {{ type = "text", public = true, values = {json.dumps(educations)} }}
"""
    (directory / "veil.toml").write_text(policy, encoding="utf-8")
    create_ledger(directory, "adult")
    return directory, truth


KEYS = {"count": 0, "count_by_education": 1, "avg_sum_by_sex": 1}


def relative_errors(answers: list[list[list[object]]], truth: list[tuple[object, ...]], keys: int) -> float:
    """Mean over runs and released numbers of |noisy − true| / |true|, rows matched by their key."""
    exact = {tuple(row[:keys]): row[keys:] for row in truth}
    errors = [
        abs(float(noisy) - float(true)) / abs(float(true))  # type: ignore[arg-type]
        for answer in answers
        for row in answer
        if tuple(row[:keys]) in exact
        for noisy, true in zip(row[keys:], exact[tuple(row[:keys])], strict=True)
        if noisy is not None and true
    ]
    return statistics.mean(errors)


def veil_runs(directory: Path) -> dict[str, dict[str, list]]:
    service = seeded_service(
        (directory / "veil.toml").read_text(encoding="utf-8"), directory, "adult", seed=3
    )
    results: dict[str, dict[str, list]] = {}
    for name, sql in QUERIES.items():
        timings, answers = [], []
        for _ in range(RUNS + 1):
            start = time.perf_counter()
            table = answer(service, sql)
            timings.append(time.perf_counter() - start)
            answers.append([list(row) for row in table.rows])
        results[name] = {"seconds": timings[1:], "answers": answers[1:]}
    service.backend.close()
    return results


def smartnoise_runs() -> dict[str, dict[str, list]] | None:
    python = os.environ.get("VEIL_SMARTNOISE_PYTHON")
    if not python:
        return None
    runner = Path(__file__).with_name("smartnoise_runner.py")
    output = subprocess.run(
        [python, str(runner), str(DATA), str(RUNS)], check=True, capture_output=True, text=True
    )
    return json.loads(output.stdout)


def test_veil_against_smartnoise_on_adult(adult: tuple[Path, dict[str, list[tuple[object, ...]]]]) -> None:
    directory, truth = adult
    ours = veil_runs(directory)
    theirs = smartnoise_runs()
    lines = []
    for name in QUERIES:
        veil_ms = statistics.median(ours[name]["seconds"]) * 1000
        veil_error = relative_errors(ours[name]["answers"], truth[name], KEYS[name])
        line = f"{name}: Veil {veil_ms:.2f} ms, mean relative error {veil_error:.4f}"
        if theirs is not None:
            sn_ms = statistics.median(theirs[name]["seconds"]) * 1000
            sn_error = relative_errors(theirs[name]["answers"], truth[name], KEYS[name])
            line += f"; smartnoise-sql {sn_ms:.1f} ms, error {sn_error:.4f}; speed-up {sn_ms / veil_ms:.0f}x"
        lines.append(line)
    print("\nAdult, ε = 1 per query, median of", RUNS, "\n" + "\n".join(lines))
    if theirs is None:
        print(
            "(smartnoise-sql not run: set VEIL_SMARTNOISE_PYTHON to a python with smartnoise-sql installed)"
        )
    assert all(statistics.median(ours[name]["seconds"]) > 0 for name in QUERIES)
