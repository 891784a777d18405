"""The factorized release at the issue's scale (issue 16): a 10,000 users × 5,000 items window, r = 20,
100 epochs — time and memory of the factorization (SGD and ALS), of the de-identification of U, of the
Hungarian attacks, and of ``veil materialize factorize`` end to end on a DuckDB event table.

Run with ``.venv/bin/python -m pytest -q -m bench tests/bench/test_factorize_bench.py -s`` (part of ``make
bench``; needs no data; about 21 minutes on the shared 2-core project machine, most of it SGD and the command).

Data, generated with numpy from a fixed seed inside every child: each user belongs to one of 50 taste
profiles; a profile favours 250 items (each seen with probability 0.4 in a window), a user has 20 personal
favourites (0.7) and every other item is a background flip (0.003). Window w is a fresh Bernoulli draw from
the same probabilities, so the same users behave alike in both windows: low rank (the profiles) plus
user-specific structure plus noise, at ~2.6 % density (~128 items per user per window).

Each measurement is a child process started from a small helper (:mod:`tests.bench.child_process`), so its
peak RSS is that of the process doing the work; phases inside a child are timed with ``perf_counter`` (wall)
and ``process_time`` (CPU of all its threads), and the child's ``VmHWM`` is read after each phase.

* ``imports``: the interpreter and the libraries only (the fixed cost).
* ``sgd`` / ``als``: ``factorize(M1, rank=20, iterations=100, solver=…)``; L1 error curve (Σ|M − UVᵀ|, the
  papers' Fig. 5.2) and the objective both solvers minimize, Σ(M − UVᵀ)² + λ(m‖U‖² + n‖V‖²), at the end. A
  second 5-epoch run from the same seed reproduces the first five epochs, so the objective after epoch 5
  is known too: the bench asserts it fell from epoch 5 to 100 (the L1 curve is not what either solver
  minimizes, and ALS's L1 first *rises* from a near-zero fit).
* ``als`` also: k-member clustering of U (k = 4), Laplace noise on U (φ = 0.15), X = U′Vᵀ for both, Theorem
  5.1 on X (every distinct row ≥ k times), then window 2 the same way; both releases are saved for:
* ``attacks``: :func:`score_windows` as the command runs it — Hungarian re-identification of each window
  (original against its release) and linkage of the two releases, on float32 10,000 × 10,000 cost
  matrices — and, before it, one re-identification split into the cost matrix and
  ``linear_sum_assignment`` (which converts its input to float64: an 800 MB copy beside the 400 MB matrix).
* ``events`` builds a DuckDB table from the two windows' cells (1 + Poisson(0.25) events per cell at random
  times in its 8 h window) and ``veil materialize factorize --solver als --k 4 --threshold 0.5
  --utility-columns 10`` runs on it as a data holder would (the venv's ``veil`` script).

Timings go into the printed table, never into assertions; the bench asserts correctness only.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

from tests.bench.child_process import run_measured

pytestmark = pytest.mark.bench

USERS, ITEMS, RANK, ITERATIONS, K, NOISE, SEED = 10_000, 5_000, 20, 100, 4, 0.15, 16
CURVE_EPOCHS = (1, 5, 25, 100)
START = "2024-03-04 16:00:00"
PARAMETERS = {  # the generator's (see the module docstring) and the runs'
    **{"users": USERS, "items": ITEMS, "seed": SEED, "profiles": 50, "favoured": 250, "personal": 20},
    **{"p_favoured": 0.4, "p_personal": 0.7, "p_background": 0.003},
    **{"rank": RANK, "iterations": ITERATIONS, "k": K, "noise": NOISE, "start": START},
}

COMMON = """
import json, sys, time
from pathlib import Path
started = time.perf_counter()
import numpy as np

how, folder, params = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
USERS, ITEMS, SEED = params["users"], params["items"], params["seed"]
PROFILES, FAVOURED, PERSONAL = params["profiles"], params["favoured"], params["personal"]
P_FAVOURED, P_PERSONAL, P_BACKGROUND = params["p_favoured"], params["p_personal"], params["p_background"]

def structure():
    rng = np.random.default_rng([SEED, 0])
    profile = rng.integers(PROFILES, size=USERS)
    favoured = np.stack([rng.choice(ITEMS, size=FAVOURED, replace=False) for _ in range(PROFILES)])
    personal = np.stack([rng.choice(ITEMS, size=PERSONAL, replace=False) for _ in range(USERS)])
    return profile, favoured, personal

def window(w, shape):
    # window w's 0/1 matrix (float32): the same probabilities every window, a fresh draw
    profile, favoured, personal = shape
    rng = np.random.default_rng([SEED, w])
    prob = np.full((PROFILES, ITEMS), P_BACKGROUND, dtype=np.float32)
    np.put_along_axis(prob, favoured, P_FAVOURED, axis=1)
    m = np.empty((USERS, ITEMS), dtype=np.float32)
    for start in range(0, USERS, 1000):
        rows = slice(start, start + 1000)
        p = prob[profile[rows]]
        np.put_along_axis(p, personal[rows], P_PERSONAL, axis=1)
        m[rows] = rng.random(p.shape, dtype=np.float32) < p
    return m

def vmhwm():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None

class Phase:
    # wall and CPU seconds of a block, and VmHWM after it, into report[name]
    def __init__(self, report, name):
        self.report, self.name = report, name
    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self
    def __exit__(self, *exc):
        self.report[self.name] = {"seconds": time.perf_counter() - self.wall,
                                  "cpu": time.process_time() - self.cpu, "vmhwm_mb": vmhwm()}

def objective(m, u, v, lam):
    # the objective SGD and ALS both minimize, in float64, 1,000 rows at a time
    total = 0.0
    for start in range(0, m.shape[0], 1000):
        d = m[start:start + 1000].astype(np.float64) - u[start:start + 1000] @ v.T
        total += float(np.einsum("ij,ij->", d, d))
    return total + lam * (m.shape[1] * float((u * u).sum()) + m.shape[0] * float((v * v).sum()))
"""

CHILD = (
    COMMON
    + """
rank, iterations, k, noise = params["rank"], params["iterations"], params["k"], params["noise"]
from anonymizers.factorization import factorize, k_member_clusters, laplace_rows, release
from anonymizers.factorized_release import published_groups, score_windows
from anonymizers.risk.linkage import cost_matrix, score_assignment
from scipy.optimize import linear_sum_assignment
report = {"imports": time.perf_counter() - started, "vmhwm_mb": {"imports": vmhwm()}}
LAM = 0.01  # factorize's default λ, the command's default

def factorization(m, solver, name, seed):
    with Phase(report, name):
        f = factorize(m, rank=rank, iterations=iterations, solver=solver, rng=np.random.default_rng(seed))
    report[name]["errors"] = f.errors.tolist()
    report[name]["objective"] = objective(m, f.u, f.v, LAM)
    return f

if how in ("sgd", "als"):
    with Phase(report, "generate"):
        shape = structure()
        m1 = window(1, shape)
    report["ones"] = float(m1.sum())
    f1 = factorization(m1, how, "factorize", [SEED, 10])
    with Phase(report, "rerun_5"):  # the same seed for five epochs: the same first five epochs
        f5 = factorize(m1, rank=rank, iterations=5, solver=how, rng=np.random.default_rng([SEED, 10]))
    report["rerun_5"]["errors"] = f5.errors.tolist()
    report["rerun_5"]["objective"] = objective(m1, f5.u, f5.v, LAM)
    del f5
if how == "als":
    rng = np.random.default_rng([SEED, 20])
    with Phase(report, "k_member"):
        clustering = k_member_clusters(f1.u, k, rng)
    report["k_member"]["sizes"] = [int(clustering.sizes.min()), int(clustering.sizes.max())]
    report["k_member"]["clusters"] = int(clustering.sizes.size)
    with Phase(report, "release_k"):
        x1 = release(clustering.rows, f1.v).astype(np.float32)  # the command scores float32 values
    with Phase(report, "laplace"):
        noisy = laplace_rows(f1.u, noise, rng)
    with Phase(report, "release_noise"):
        release(noisy, f1.v)
    with Phase(report, "theorem"):
        _, counts = np.unique(x1, axis=0, return_counts=True)
    report["theorem"]["min_count"] = [int(counts.min())]
    np.save(folder / "x1.npy", x1)
    del x1, noisy, f1, m1
    m2 = window(2, shape)
    f2 = factorization(m2, "als", "factorize_2", [SEED, 11])
    clustering = k_member_clusters(f2.u, k, rng)
    x2 = release(clustering.rows, f2.v).astype(np.float32)
    _, counts = np.unique(x2, axis=0, return_counts=True)
    report["theorem"]["min_count"].append(int(counts.min()))
    np.save(folder / "x2.npy", x2)
elif how == "attacks":
    with Phase(report, "load"):
        shape = structure()
        originals = [window(1, shape), window(2, shape)]
        published = [np.load(folder / "x1.npy"), np.load(folder / "x2.npy")]
    with Phase(report, "groups"):
        groups = published_groups(published[0])
    with Phase(report, "cost_matrix"):
        cost = cost_matrix(originals[0], published[0])
    with Phase(report, "assignment"):
        _, columns = linear_sum_assignment(cost)
    del cost
    report["split_risk"] = score_assignment(columns, labels=groups, k=k).risk
    marks = [(time.perf_counter(), time.process_time())]
    def progress(done, total):
        marks.append((time.perf_counter(), time.process_time()))
        report["vmhwm_mb"][f"attack {done}"] = vmhwm()
    risks = score_windows(originals, published, k=k, progress=progress)
    report["attacks"] = [{"seconds": b[0] - a[0], "cpu": b[1] - a[1]} for a, b in zip(marks, marks[1:])]
    report["risks"] = risks.to_dict()
elif how == "events":
    import duckdb
    import pandas as pd
    shape, rng, frames = structure(), np.random.default_rng([SEED, 30]), []
    for w in (1, 2):
        users, items = np.nonzero(window(w, shape))
        repeats = 1 + rng.poisson(0.25, size=users.size)
        users, items = np.repeat(users, repeats), np.repeat(items, repeats)
        offsets = (w - 1) * 8 * 3600 + rng.integers(0, 8 * 3600, size=users.size)
        frames.append(pd.DataFrame({"u": users, "i": items, "s": offsets}))
    frame = pd.concat(frames, ignore_index=True)
    with duckdb.connect(str(folder / "events.duckdb")) as connection:
        connection.register("frame", frame)
        connection.execute(
            "CREATE TABLE events AS SELECT printf('u%05d', u) AS uid, printf('i%04d', i) AS item, "
            f"TIMESTAMP '{params['start']}' + to_seconds(s) AS ts FROM frame"
        )
        report["events"], report["users"], report["items"] = connection.execute(
            "SELECT COUNT(*), COUNT(DISTINCT uid), COUNT(DISTINCT item) FROM events"
        ).fetchone()
report["seconds"] = time.perf_counter() - started
(folder / f"{how}.json").write_text(json.dumps(report))
"""
)


def run_child(how: str, folder: Path) -> dict[str, Any]:
    """One child; its report with its peak RSS (MB, from the helper's RUSAGE_CHILDREN), CPU and wall time."""
    started = time.perf_counter()
    usage = run_measured([sys.executable, "-c", CHILD, how, str(folder), json.dumps(PARAMETERS)])
    wall = time.perf_counter() - started
    assert usage.returncode == 0, f"the {how} child failed"
    report: dict[str, Any] = json.loads((folder / f"{how}.json").read_text())
    report.update(peak_mb=usage.peak_mb, cpu=usage.cpu_seconds, wall=wall)
    print(f"[{how}: {wall:.0f} s, peak RSS {usage.peak_mb:.0f} MB]", flush=True)
    return report


def curve(errors: list[float]) -> str:
    return ", ".join(f"{errors[epoch - 1] / 1e6:.3f} M" for epoch in CURVE_EPOCHS)


def phase(report: dict[str, Any], name: str) -> str:
    values = report[name]
    return f"{values['seconds']:.2f} s wall, {values['cpu']:.2f} CPU-s"


def test_factorize_deidentify_and_attack_at_10000_by_5000(tmp_path: Path) -> None:
    fixed = run_child("imports", tmp_path)
    als = run_child("als", tmp_path)
    attacks = run_child("attacks", tmp_path)
    sgd = run_child("sgd", tmp_path)

    lines = [
        f"{USERS:,} users × {ITEMS:,} items, {als['ones']:,.0f} ones ({als['ones'] / USERS / ITEMS:.2%}); "
        f"r = {RANK}, {ITERATIONS} epochs, λ = 0.01; L1 at epochs {', '.join(map(str, CURVE_EPOCHS))}; "
        f"fixed cost (imports only) {fixed['peak_mb']:.0f} MB"
    ]
    for name, report in (("sgd", sgd), ("als", als)):
        f = report["factorize"]
        rerun = report["rerun_5"]
        lines.append(
            f"factorize {name}: {f['seconds']:.1f} s wall ({f['seconds'] / ITERATIONS:.2f} s/epoch), "
            f"{f['cpu']:.1f} CPU-s, VmHWM after it {f['vmhwm_mb']:.0f} MB (generation "
            f"{report['generate']['vmhwm_mb']:.0f} MB); L1 {curve(f['errors'])}; objective after epoch 5 "
            f"{rerun['objective'] / 1e6:.4f} M, after {ITERATIONS} {f['objective'] / 1e6:.4f} M; child peak "
            f"RSS {report['peak_mb']:.0f} MB, {report['cpu']:.1f} CPU-s, {report['wall']:.0f} s"
        )
    sgd_f, als_f = sgd["factorize"], als["factorize"]
    lines.append(
        f"SGD / ALS: wall {sgd_f['seconds'] / als_f['seconds']:.1f}×, final objective "
        f"{sgd_f['objective'] / als_f['objective']:.4f}, final L1 {sgd_f['errors'][-1] / als_f['errors'][-1]:.4f}"
    )
    k_member = als["k_member"]
    lines.append(
        f"k-member clustering of U (k = {K}): {phase(als, 'k_member')} ({k_member['clusters']:,} clusters, "
        f"sizes {k_member['sizes'][0]}–{k_member['sizes'][1]}); X = U′Vᵀ {phase(als, 'release_k')}; "
        f"Laplace φ = {NOISE} on U {phase(als, 'laplace')}, its X {phase(als, 'release_noise')}; Theorem 5.1 "
        f"check (np.unique of X) {phase(als, 'theorem')}, min row count {als['theorem']['min_count']}"
    )
    lines.append(
        f"window 2 (ALS again): {phase(als, 'factorize_2')}; als child peak RSS {als['peak_mb']:.0f} MB"
    )
    hwm = attacks["vmhwm_mb"]
    lines.append(
        f"attacks child: load (2 originals regenerated, 2 releases) {phase(attacks, 'load')}, VmHWM "
        f"{attacks['load']['vmhwm_mb']:.0f} MB; one re-identification split: grouping X "
        f"{phase(attacks, 'groups')}, float32 cost matrix {phase(attacks, 'cost_matrix')} (VmHWM "
        f"{attacks['cost_matrix']['vmhwm_mb']:.0f} MB), linear_sum_assignment "
        f"{phase(attacks, 'assignment')} (VmHWM {attacks['assignment']['vmhwm_mb']:.0f} MB)"
    )
    risks = attacks["risks"]
    names = ["re-identification window 1 (incl. grouping both releases)", "re-identification window 2",
             "linkage 1→2"]  # fmt: skip
    scores = [*risks["reidentification"], *risks["linkage"]]
    for number, (name, timing, score) in enumerate(zip(names, attacks["attacks"], scores, strict=True), 1):
        lines.append(
            f"score_windows {name}: {timing['seconds']:.1f} s wall, {timing['cpu']:.1f} CPU-s, VmHWM "
            f"{hwm[f'attack {number}']:.0f} MB; risk {score['risk']:.4f} (exact credit "
            f"{score['risk_exact_credit']:.4f}, {score['successes']:,} cluster hits)"
        )
    lines.append(
        f"attacks child peak RSS {attacks['peak_mb']:.0f} MB, {attacks['cpu']:.1f} CPU-s, "
        f"{attacks['wall']:.0f} s"
    )
    print("\nMatrix factorization at 10,000 × 5,000\n" + "\n".join(lines))

    for report in (sgd, als):
        for name in ("factorize", "rerun_5"):
            errors = report[name]["errors"]
            assert all(math.isfinite(e) for e in errors)
        full, five = report["factorize"], report["rerun_5"]
        assert np.allclose(full["errors"][:5], five["errors"], rtol=1e-6)
        # the objective both solvers minimize fell from epoch 5 to 100, below the zero factorization's (Σ M²)
        assert full["objective"] < five["objective"] < report["ones"]
    assert len(sgd_f["errors"]) == len(als_f["errors"]) == ITERATIONS
    assert k_member["sizes"][0] >= K and k_member["sizes"][1] <= 2 * K - 1
    assert min(als["theorem"]["min_count"]) >= K  # Theorem 5.1 on X
    for score in scores:
        assert 0.0 <= score["risk"] <= 1.0 / K and 0.0 <= score["risk_exact_credit"] <= 1.0
    assert attacks["split_risk"] == scores[0]["risk"]  # the split path is score_windows' path


def test_materialize_factorize_end_to_end_on_duckdb(tmp_path: Path) -> None:
    events = run_child("events", tmp_path)
    config = tmp_path / "veil.toml"
    config.write_text(f'[datasets.d]\nbackend = "duckdb"\npath = "{tmp_path / "events.duckdb"}"\n')
    out, report_path = tmp_path / "x.parquet", tmp_path / "r.json"
    command = [str(Path(sys.executable).parent / "veil"), "materialize", "factorize", "--config", str(config)]
    command += ["--dataset", "d", "--table", "events", "--user", "uid", "--item", "item", "--time", "ts"]
    command += ["--window", "8h", "--windows", "2", "--start", START, "--solver", "als", "--k", str(K)]
    command += ["--threshold", "0.5", "--utility-columns", "10", "--seed", str(SEED), "--json"]
    command += ["--out", str(out), "--report", str(report_path)]
    started = time.perf_counter()
    usage = run_measured(command)
    wall = time.perf_counter() - started
    assert usage.returncode == 0, "veil materialize factorize failed"
    report = json.loads(report_path.read_text())
    with duckdb.connect() as connection:
        written = connection.execute(f"SELECT COUNT(*) FROM '{out}'").fetchone()[0]
        # every distinct published row (a pseudonym's set of 1 cells; absent pseudonyms are all-zero rows)
        groups = connection.execute(
            'SELECT "window", COUNT(*) FROM (SELECT "window", pseudonym, list(item ORDER BY item) AS cells '
            f'FROM \'{out}\' GROUP BY "window", pseudonym) GROUP BY "window", cells'
        ).fetchall()
    counts = {w: [c for window, c in groups if window == w] for w in (1, 2)}
    zero_rows = {w: USERS - sum(counts[w]) for w in (1, 2)}
    risk, utility = report["risk"], report["utility"]
    lines = [
        f"DuckDB table: {events['events']:,} events, {events['users']:,} users, {events['items']:,} items "
        f"(built in {events['seconds']:.0f} s)",
        f"veil materialize factorize --solver als --k {K} --threshold 0.5 --utility-columns 10: "
        f"{wall:.1f} s wall (report: {report['seconds']} s), {usage.cpu_seconds:.1f} CPU-s, peak RSS "
        f"{usage.peak_mb:.0f} MB",
        f"{len(report['users']):,} × {len(report['items']):,} per window, solvers {report['settings']['solver']}, "
        f"final L1 {[round(e[-1]) for e in report['errors']]}; wrote {written:,} rows (the 1 cells); distinct "
        f"published rows per window {[len(counts[w]) + (zero_rows[w] > 0) for w in (1, 2)]}, all-zero rows "
        f"{list(zero_rows.values())}",
        f"re-identification {[round(r['risk'], 4) for r in risk['reidentification']]}, linkage "
        f"{[round(r['risk'], 4) for r in risk['linkage']]} (exact credit "
        f"{[round(r['risk_exact_credit'], 4) for r in [*risk['reidentification'], *risk['linkage']]]}), "
        f"Uti {utility['uti_mean']:.3f}",
    ]
    print("\nveil materialize factorize end to end\n" + "\n".join(lines))
    assert (events["users"], events["items"]) == (USERS, ITEMS)
    assert (len(report["users"]), len(report["items"])) == (USERS, ITEMS)
    assert report["settings"]["solver"] == ["als", "als"]
    for w in (1, 2):  # Theorem 5.1 on what was written
        assert min(counts[w], default=K) >= K and (zero_rows[w] == 0 or zero_rows[w] >= K)
    for score in [*risk["reidentification"], *risk["linkage"]]:
        assert 0.0 <= score["risk"] <= 1.0 / K
    assert math.isfinite(utility["uti_mean"])
