"""Sensitive quasi-identifiers at the scale of the seed's US Census table: 2,458,285 rows × 68 categorical
attributes, domain sizes 2–18 — anonymization for l = 3 and reconstruction of cross-tabulations at q' = 4.

Run with ``.venv/bin/python -m pytest -m bench tests/bench/test_sensitive_qid_bench.py -s`` (part of ``make
bench``). The US Census (1990) file is not in ../shared/data, so the table is generated with numpy in the
shape the paper gives: attribute j has domain size 2 + j mod 17 (each size 2..18 four times), and each row
belongs to one of 8 latent groups whose per-attribute distributions are drawn from Dirichlet(0.3): skewed
marginals and correlated attributes, so that the cross-tabulations are not flat.

* Anonymization (:mod:`anonymizers.sensitive_qid`): every attribute at l = 3 (l_j = d_j − 1 when d_j <= 3),
  so (p_j, η_j) = (1, l_j) — ``plan_attribute`` per attribute, ``randomize``, ``verify_release``. Goal
  (issue 15): under 10 s.
* Reconstruction (:mod:`anonymizers.reconstruction`) at q' = 4: the four attributes of domain 18 (104,976
  cells, the largest table) and three random four-attribute subsets — ``published_counts``, EM with the
  library's default stopping rule (``em_from_counts``), ValueAdding and the Random baseline, with their L1.
  Goal (issue 15): under 10 s per cross-tabulation.

The seed's figures are **recorded references, not measured here**: "several tens of seconds" to anonymize
the US Census table and "less than 10 minutes on average" to reconstruct at q' = 4, on a Xeon E5-2687W v2
with 128 GB (Sei et al. §VI). They are printed next to ours; the bench asserts correctness, and the seed's
figures as loose ceilings (60 s, 600 s) — never the 10 s goals, which a loaded 2-core machine may miss.

The work runs in a child process started from a small helper whose ``RUSAGE_CHILDREN`` is the child's alone
(:mod:`tests.bench.child_process`): its peak RSS is printed, next to a child that only imports the
libraries (the fixed cost), and the child's own ``VmHWM`` after each phase.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from tests.bench.child_process import run_measured

pytestmark = pytest.mark.bench

ROWS = 2_458_285
ATTRIBUTES = 68
L = 3
GROUPS = 8
SEED = 15
RANDOM_SUBSETS = 3
REFERENCE = (
    "the seed's figures (recorded references, Xeon E5-2687W v2, not measured here): anonymization "
    '"several tens of seconds", reconstruction at q\' = 4 "< 10 minutes on average"'
)

CHILD = """
import json, sys, time
from pathlib import Path
started = time.perf_counter()
rows, attributes, l, groups, seed, random_subsets = (int(value) for value in sys.argv[1:7])
result_path, how = Path(sys.argv[7]), sys.argv[8]
import numpy as np
from anonymizers.reconstruction import (
    cross_tabulation, em_from_counts, l1, published_counts, random_baseline, reconstruct_value_adding,
)
from anonymizers.sensitive_qid import plan_attribute, randomize, verify_release

def vmhwm():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None

report = {"imports": time.perf_counter() - started, "vmhwm_mb": {"imports": vmhwm()}}
if how == "work":
    rng = np.random.default_rng(seed)
    sizes = [2 + j % 17 for j in range(attributes)]
    start = time.perf_counter()
    counts = rng.multinomial(rows, rng.dirichlet(np.full(groups, 2.0)))
    codes = np.empty((rows, attributes), dtype=np.uint8)
    for j, d in enumerate(sizes):
        column, at = np.empty(rows, dtype=np.uint8), 0
        for size in counts:  # rows in group order: the order of rows changes nothing below
            column[at : at + size] = rng.choice(d, size=size, p=rng.dirichlet(np.full(d, 0.3)))
            at += size
        codes[:, j] = column
    report["generate"] = time.perf_counter() - start
    report["vmhwm_mb"]["generate"] = vmhwm()

    start = time.perf_counter()
    releases = [
        plan_attribute(f"a{j}", [str(v) for v in range(d)], codes[:, j], l=l if d > l else d - 1)
        for j, d in enumerate(sizes)
    ]
    planned = time.perf_counter()
    published = randomize(codes, releases, rng)
    randomized = time.perf_counter()
    verify_release(codes, published, releases)
    verified = time.perf_counter()
    report["anonymize"] = {"plan": planned - start, "randomize": randomized - planned,
                           "verify": verified - randomized, "total": verified - start}
    report["published_mb"] = sum(array.nbytes for array in published) / 2**20
    report["etas"] = sorted({release.eta for release in releases})
    report["vmhwm_mb"]["anonymize"] = vmhwm()

    largest = [j for j, d in enumerate(sizes) if d == max(sizes)][:4]
    chosen = [largest] + [sorted(rng.choice(attributes, size=4, replace=False).tolist())
                          for _ in range(random_subsets)]
    report["queries"] = []
    for subset in chosen:
        sets, rel = [published[j] for j in subset], [releases[j] for j in subset]
        domain = [release.d for release in rel]
        start = time.perf_counter()
        observed = published_counts(sets, domain)
        counted = time.perf_counter()
        em, iterations = em_from_counts(observed, rel, n=rows)
        reconstructed = time.perf_counter()
        value_adding = reconstruct_value_adding(sets, rel)
        added = time.perf_counter()
        truth = cross_tabulation([codes[:, j] for j in subset], domain)
        random = random_baseline(rows, truth.shape, rng)
        report["queries"].append({
            "attributes": subset, "domains": domain, "etas": [release.eta for release in rel],
            "cells": int(truth.size), "count": counted - start, "em": reconstructed - counted,
            "iterations": iterations, "value_adding": added - reconstructed,
            "observed_sum": int(observed.sum()), "em_sum": float(em.sum()), "va_sum": float(value_adding.sum()),
            "truth_sum": int(truth.sum()), "l1": {"em": l1(truth, em), "value_adding": l1(truth, value_adding),
            "random": l1(truth, random)},
        })
    report["vmhwm_mb"]["reconstruct"] = vmhwm()
report["seconds"] = time.perf_counter() - started
result_path.write_text(json.dumps(report))
"""


def run_child(how: str, folder: Path) -> dict[str, object]:
    """One child; its report with its peak RSS (MB, from the helper's RUSAGE_CHILDREN) and CPU time."""
    result_path = folder / f"{how}.json"
    arguments = [ROWS, ATTRIBUTES, L, GROUPS, SEED, RANDOM_SUBSETS]
    usage = run_measured([sys.executable, "-c", CHILD, *map(str, arguments), str(result_path), how])
    assert usage.returncode == 0, f"the {how} child failed"
    report: dict[str, object] = json.loads(result_path.read_text())
    report.update(peak_mb=usage.peak_mb, cpu=usage.cpu_seconds)
    return report


def test_census_scale_anonymization_and_reconstruction(tmp_path: Path) -> None:
    fixed = run_child("imports", tmp_path)
    work = run_child("work", tmp_path)
    anonymize: dict[str, float] = work["anonymize"]  # type: ignore[assignment]
    hwm: dict[str, float] = work["vmhwm_mb"]  # type: ignore[assignment]
    queries: list[dict[str, object]] = work["queries"]  # type: ignore[assignment]
    lines = [
        f"{ROWS:,} rows × {ATTRIBUTES} attributes (domains 2–18), l = {L}: η in {work['etas']}, published sets "
        f"{work['published_mb']:.0f} MB (uint8); generated in {work['generate']:.1f} s",
        f"anonymization: plan {anonymize['plan']:.2f} s + randomize {anonymize['randomize']:.2f} s + verify "
        f"{anonymize['verify']:.2f} s = {anonymize['total']:.2f} s "
        f"(goal < 10 s: {'met' if anonymize['total'] < 10 else 'NOT met'})",
    ]
    for query in queries:
        total = float(query["count"]) + float(query["em"])  # type: ignore[arg-type]
        errors: dict[str, float] = query["l1"]  # type: ignore[assignment]
        lines.append(
            f"q' = 4, attributes {query['attributes']} (d {query['domains']}, η {query['etas']}, "
            f"{query['cells']:,} cells): count {query['count']:.2f} s + EM {query['em']:.2f} s "
            f"({query['iterations']:,} steps) = {total:.2f} s (goal < 10 s: {'met' if total < 10 else 'NOT met'}); "
            f"ValueAdding {query['value_adding']:.2f} s; L1 EM {errors['em']:,.0f}, ValueAdding "
            f"{errors['value_adding']:,.0f}, Random {errors['random']:,.0f}"
        )
    lines.append(
        f"child: {work['seconds']:.1f} s wall, {work['cpu']:.1f} CPU-s, peak RSS {work['peak_mb']:.0f} MB "
        f"(VmHWM after imports {hwm['imports']:.0f}, generation {hwm['generate']:.0f}, anonymization "
        f"{hwm['anonymize']:.0f}, reconstruction {hwm['reconstruct']:.0f} MB); fixed cost (imports only) "
        f"{fixed['peak_mb']:.0f} MB"
    )
    lines.append(REFERENCE)
    print("\nSensitive QIDs at US Census scale\n" + "\n".join(lines))
    # verify_release raised in the child if a promise were broken; every estimate is a table of N records
    for query in queries:
        assert query["truth_sum"] == ROWS
        assert query["observed_sum"] == ROWS * math.prod(query["etas"])  # type: ignore[arg-type]
        assert abs(float(query["em_sum"]) - ROWS) < 1e-6 * ROWS  # type: ignore[arg-type]
        assert abs(float(query["va_sum"]) - ROWS) < 1e-6 * ROWS  # type: ignore[arg-type]
        errors = query["l1"]  # type: ignore[assignment]
        assert errors["em"] < errors["value_adding"] < errors["random"]
    assert anonymize["total"] < 60  # the seed's "several tens of seconds", as a loose ceiling
    assert all(float(q["count"]) + float(q["em"]) < 600 for q in queries)  # type: ignore[arg-type]
