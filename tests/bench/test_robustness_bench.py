"""Issue 13's measurements (``make bench``; numbers in docs/benchmarks.md).

1. Login latency (connect + SCRAM + ``SELECT 1``, psycopg) on an idle ``veil serve``, then while 8
   connections of other analysts keep sending the heaviest statements allowed — an IN list near
   ``max_tokens`` (analysis) and a join that keeps the engine busy — measured in the same run, as a
   ratio (goal ≤ 3×). Three loads — only long texts (``analysis``), only the join (``engine``), both
   alternating — each with long texts analysed in worker processes (``analysis_processes = 2``, the
   default) and in the server process (``0``, the previous design). The server's peak RSS (VmHWM of
   its process, not counting the workers) after the load.
2. How long a statement of 1k / 10k / 20k ``OR``ed comparisons or ``IN`` values takes to be answered
   or refused, in process (goal: linear, 20k < 1 s).
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from pathlib import Path

import psycopg
import pytest

from tests.conftest import Admin, running_server
from tests.integration.slow_dataset import MEDIUM_QUERY, build_slow_dataset, connect, with_server_settings

pytestmark = pytest.mark.bench

LOGINS = 40
HEAVY = "SELECT COUNT(*) FROM medium WHERE v IN ({})".format(", ".join(map(str, range(4000))))


def login_times(server, analyst) -> list[float]:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(LOGINS):
        started = time.perf_counter()
        with connect(server, analyst) as connection:
            connection.execute("SELECT 1").fetchone()
        times.append((time.perf_counter() - started) * 1000)
    return times


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def analysis(load: str, n: int) -> bool:
    """Whether the load's n-th statement is the long text (else the engine-heavy join)."""
    return load == "analysis" or (load == "both" and n % 2 == 1)


@pytest.mark.parametrize("processes", [2, 0], ids=["analysis-processes", "threads-only"])
@pytest.mark.parametrize("load", ["analysis", "engine", "both"])
def test_login_latency_under_heavy_statements(tmp_path: Path, load: str, processes: int) -> None:
    config = with_server_settings(
        build_slow_dataset(tmp_path / "slow"),
        "bench.toml",
        auth_failure_delay_ms=0,
        analysis_processes=processes,
    )
    admin = Admin(config)
    newcomer = admin.add_analyst(1.0, prefix="newcomer")
    loaders = [admin.add_analyst(1000.0, prefix=f"load{i}") for i in range(8)]
    with running_server(config, tmp_path / "serve.log") as server:
        idle = login_times(server, newcomer)
        stop = threading.Event()

        def keep_busy(analyst) -> None:  # type: ignore[no-untyped-def]
            with connect(server, analyst) as connection:
                n = 0
                while not stop.is_set():
                    with contextlib.suppress(psycopg.Error):
                        connection.execute(
                            HEAVY + f" AND v > -{n}"
                            if analysis(load, n)
                            else MEDIUM_QUERY + f" AND a.v > -{n}"
                        )
                    n += 1

        workers = [threading.Thread(target=keep_busy, args=(analyst,)) for analyst in loaders]
        for worker in workers:
            worker.start()
        time.sleep(2)
        loaded = login_times(server, newcomer)
        stop.set()
        for worker in workers:
            worker.join(120)
        status = Path(f"/proc/{server.process.pid}/status").read_text()
        peak = next(line for line in status.splitlines() if line.startswith("VmHWM"))
    p50 = (statistics.median(idle), statistics.median(loaded))
    p99 = (percentile(idle, 0.99), percentile(loaded, 0.99))
    print(
        f"\n{load} load, analysis_processes = {processes} — login + SELECT 1, {LOGINS} each: idle p50 {p50[0]:.1f} ms p99 {p99[0]:.1f} ms; "
        f"under 8 heavy connections p50 {p50[1]:.1f} ms p99 {p99[1]:.1f} ms; "
        f"ratio p50 {p50[1] / p50[0]:.2f}×, p99 {p99[1] / p99[0]:.2f}×; server {peak}"
    )


@pytest.mark.parametrize("terms", [1_000, 10_000, 20_000])
@pytest.mark.parametrize("shape", ["or", "in"])
def test_analysis_time_of_long_chains(
    terms: int, shape: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from proxy.errors import ProxyError
    from tests.adversarial.probe_dataset import probe_service

    condition = (
        " OR ".join(f"age = {i}" for i in range(terms))
        if shape == "or"
        else f"age IN ({', '.join(map(str, range(terms)))})"
    )
    sql = f"SELECT COUNT(*) FROM people WHERE {condition}"
    with probe_service("duckdb", tmp_path, request) as probe:
        started = time.perf_counter()
        try:
            probe.run(sql)
            outcome = "answered"
        except ProxyError as error:
            outcome = f"refused {error.sqlstate}"
        elapsed = time.perf_counter() - started
    print(
        f"\n{shape.upper()} of {terms:,} terms ({len(sql):,} characters): {elapsed * 1000:.0f} ms, {outcome}"
    )
