"""Veil against the closest peer, smartnoise-sql, on UCI Adult at a total ε = 1 per query (issues 3, 12).

Queries: COUNT(*); COUNT(*) GROUP BY education; AVG(age), SUM(hours_per_week) GROUP BY sex — each row
one person, as smartnoise's ``row_privacy``. Veil runs in process (QueryService, seeded noise, answer
cache off so every run is a fresh draw, charged); smartnoise-sql runs in its own virtualenv (it pins
older pandas/SQLAlchemy than Veil) as a child process that answers one query per request: set
VEIL_SMARTNOISE_PYTHON to that venv's python (e.g. ``python3 -m venv /tmp/sn && /tmp/sn/bin/pip
install smartnoise-sql``). Without it (or without ../shared/data/adult.data) only Veil's numbers print.

Honest comparison:

* **Equal total charge.** Veil's ``SET veil.epsilon`` is the query's total ε, split over its noisy
  quantities; smartnoise's ``Privacy(epsilon=…)`` is per mechanism (its AVG/SUM query uses four and costs
  4ε). The runner divides the total by smartnoise's own count of mechanisms (``get_privacy_cost``), so
  both spend ε = 1 per query. The bench prints what each tool actually charged per run: Veil's from its
  ledger, smartnoise's from its odometer (ε and δ; smartnoise also spends δ on thresholding, Veil δ = 0).
* **Interleaved.** Round by round, query by query, Veil then smartnoise, with the order flipped every
  round; each tool's time is measured in its own process around its own call (no pipe time), so both see
  the same machine load.

Differences in what is released: Veil answers GROUP BY over the declared public value lists (every
education level, noisy zeros included); smartnoise thresholds keys (censor_dims).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pytest

from proxy.cli.sources import progress_callback
from proxy.query.service import QueryService
from tests.bench.in_process import answer, create_ledger, seeded_service, spent

pytestmark = pytest.mark.bench

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "adult.data"
RUNS = 20  # rounds after one warm-up round; each round asks every query once of each tool
EPSILON = 1.0  # total per query, for both tools
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
default_epsilon = {EPSILON!r}  # the total per query, split over its noisy quantities
max_epsilon = {EPSILON!r}
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


class SmartnoiseChild:
    """smartnoise_runner.py in its venv: one request (a query name) in, one JSON answer out."""

    def __init__(self, python: str) -> None:
        runner = Path(__file__).with_name("smartnoise_runner.py")
        self.process = subprocess.Popen(
            [python, str(runner), str(DATA), repr(EPSILON)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout
        self.setup: dict[str, dict[str, Any]] = json.loads(self.stdout.readline())

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        self.stdin.write(json.dumps(message) + "\n")
        self.stdin.flush()
        line = self.stdout.readline()
        if not line:
            raise RuntimeError(f"smartnoise_runner.py ended (exit code {self.process.wait()})")
        return dict(json.loads(line))

    def close(self) -> None:
        self.stdin.close()
        self.process.wait(timeout=60)
        self.stdout.close()


@dataclass
class Runs:
    """One tool's runs of one query: seconds, answer rows and the (ε, δ) charged, per run."""

    seconds: list[float] = field(default_factory=list)
    answers: list[list[list[Any]]] = field(default_factory=list)
    charges: list[tuple[float, float]] = field(default_factory=list)

    def add(self, seconds: float, rows: list[list[Any]], charge: tuple[float, float]) -> None:
        self.seconds.append(seconds)
        self.answers.append(rows)
        self.charges.append(charge)

    def charged(self) -> str:
        text = "ε " + _span([e for e, _ in self.charges], "g")
        deltas = [d for _, d in self.charges]
        return text + (f", δ {_span(deltas, '.2g')}" if max(deltas) > 0 else "") + " per run"


def _span(values: list[float], spec: str) -> str:
    low, high = min(values), max(values)
    return format(low, spec) if math.isclose(low, high, rel_tol=1e-9) else f"{low:{spec}}–{high:{spec}}"


def veil_once(service: QueryService, sql: str) -> tuple[float, list[list[Any]], tuple[float, float]]:
    before = spent(service)
    start = time.perf_counter()
    table = answer(service, sql)
    seconds = time.perf_counter() - start
    after = spent(service)
    return seconds, [list(row) for row in table.rows], (after[0] - before[0], after[1] - before[1])


@dataclass
class Session:
    """Both tools' runs of every query, and each tool's total charge over the measured rounds."""

    ours: dict[str, Runs]
    theirs: dict[str, Runs]
    veil_total: tuple[float, float]  # the ledger's spend over the measured rounds (basic composition)
    smartnoise_totals: dict[str, list[float]] | None  # its odometer per query (advanced composition)


def interleaved_runs(directory: Path, smartnoise: SmartnoiseChild | None) -> Session:
    """Round 0 warms both tools up and is dropped; then RUNS rounds, the order flipped each round."""
    service = seeded_service(
        (directory / "veil.toml").read_text(encoding="utf-8"), directory, "adult", seed=3
    )
    ours = {name: Runs() for name in QUERIES}
    theirs = {name: Runs() for name in QUERIES}
    update, close = progress_callback("interleaved rounds", quiet=False, unit="rounds")
    try:
        for round_ in range(RUNS + 1):
            update(round_, RUNS + 1)
            if round_ == 1:  # the warm-up is over: count spends from here
                veil_start = spent(service)
                if smartnoise is not None:
                    smartnoise.request({"reset": True})
            for name, sql in QUERIES.items():
                for tool in ("veil", "smartnoise") if round_ % 2 == 0 else ("smartnoise", "veil"):
                    if tool == "veil":
                        seconds, rows, charge = veil_once(service, sql)
                        if round_:
                            ours[name].add(seconds, rows, charge)
                    elif smartnoise is not None:
                        reply = smartnoise.request({"query": name})
                        if round_:
                            theirs[name].add(reply["seconds"], reply["answer"], tuple(reply["charge"]))
        veil_end = spent(service)
    finally:
        close()
        service.backend.close()
    totals = smartnoise.request({"totals": True}) if smartnoise is not None else None
    veil_total = (veil_end[0] - veil_start[0], veil_end[1] - veil_start[1])
    return Session(ours, theirs, veil_total, totals)


def test_veil_against_smartnoise_on_adult(adult: tuple[Path, dict[str, list[tuple[object, ...]]]]) -> None:
    directory, truth = adult
    python = os.environ.get("VEIL_SMARTNOISE_PYTHON")
    smartnoise = SmartnoiseChild(python) if python else None
    try:
        session = interleaved_runs(directory, smartnoise)
    finally:
        if smartnoise is not None:
            smartnoise.close()
    ours, theirs = session.ours, session.theirs
    lines = [f"\nAdult, total ε = {EPSILON:g} per query for each tool, {RUNS} interleaved rounds (medians)"]
    for name in QUERIES:
        veil_ms = statistics.median(ours[name].seconds) * 1000
        veil_error = relative_errors(ours[name].answers, truth[name], KEYS[name])
        line = f"{name}: Veil {veil_ms:.2f} ms, mean relative error {veil_error:.4f}, charged {ours[name].charged()}"
        if smartnoise is not None:
            sn_ms = statistics.median(theirs[name].seconds) * 1000
            sn_error = relative_errors(theirs[name].answers, truth[name], KEYS[name])
            setup = smartnoise.setup[name]
            line += (
                f"\n  smartnoise-sql {sn_ms:.1f} ms, error {sn_error:.4f}, charged {theirs[name].charged()}"
                f" (its odometer, each query alone; ε {setup['epsilon_per_mechanism']:g} per mechanism;"
                f" documented cost ε {setup['documented_cost'][0]:g}, δ {setup['documented_cost'][1]:.2g});"
                f" smartnoise / Veil time {sn_ms / veil_ms:.1f}×"
            )
        lines.append(line)
    lines.append(
        f"session totals over the {RUNS} rounds: Veil's ledger ε {session.veil_total[0]:g},"
        f" δ {session.veil_total[1]:g} (sum of the queries)"
    )
    if session.smartnoise_totals is not None:
        lines[-1] += "; smartnoise's odometers (advanced composition per query) " + ", ".join(
            f"{name} ε {epsilon:.2f}, δ {delta:.2g}"
            for name, (epsilon, delta) in session.smartnoise_totals.items()
        )
    print("\n".join(lines))
    if smartnoise is None:
        print(
            "(smartnoise-sql not run: set VEIL_SMARTNOISE_PYTHON to a python with smartnoise-sql installed)"
        )
    for name in QUERIES:
        assert [e for e, _ in ours[name].charges] == pytest.approx([EPSILON] * RUNS), (
            "Veil: fresh, charged draws"
        )
        if smartnoise is not None:
            assert [e for e, _ in theirs[name].charges] == pytest.approx([EPSILON] * RUNS), "equal total ε"
