"""``veil federate test``: two local Veil sites, generated data, one federated count — and what each site
learned (docs/federation.md)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from proxy.cli.support import echo_json, friendly_errors, json_option, print_table
from proxy.errors import ConfigError

READY = re.compile(r"listening on (?P<host>\S+):(?P<port>\d+)")
START_TIMEOUT_S = 60.0


@click.group(short_help="Federations: joint counts with another Veil site.")
def federate() -> None:
    """Federations: tables shared with another Veil site, released only where joint counts reach k."""


@federate.command("test", short_help="Run a federated count between two local servers on generated data.")
@click.option(
    "--cells", type=click.IntRange(2, 10), default=8, show_default=True, help="Regions (group cells)."
)
@click.option("--threshold", type=click.IntRange(min=1), default=20, show_default=True, help="k.")
@click.option(
    "--key-bits",
    type=click.Choice(["1024", "2048"]),
    default="2048",
    show_default=True,
    help="Paillier modulus (1024: the dissertation's setting).",
)
@click.option("--epsilon", type=float, default=1.0, show_default=True, help="ε of each site's counts.")
@click.option(
    "--directory",
    type=click.Path(path_type=Path, file_okay=False),
    help="Keep the two sites here (default: a temporary directory, removed afterwards).",
)
@json_option
@friendly_errors
def federate_test(
    cells: int, threshold: int, key_bits: str, epsilon: float, directory: Path | None, as_json: bool
) -> None:
    """Build two sites (DuckDB, policy, ledger) that share the federation `hospitals`, start `veil serve` on
    both, count patients per region at site A as an analyst, and show per region: the exact counts (which
    only this harness knows), what A's analyst got, and what each site learned of the other.

    \b
    Example:
      veil federate test --cells 6 --threshold 20 --key-bits 1024
    """
    from proxy.federation.sites import SECRET_ENV, build_sites

    with _workspace(directory) as workspace:
        site_a, site_b = build_sites(
            workspace, cells=cells, threshold=threshold, key_bits=int(key_bits), epsilon=epsilon
        )
        environment = {**os.environ, SECRET_ENV: os.environ.get(SECRET_ENV) or os.urandom(24).hex()}
        with _served(site_b.config, environment) as _, _served(site_a.config, environment) as port_a:
            started = time.monotonic()
            rows, notices = _federated_count(port_a)
            seconds = time.monotonic() - started
    report = _learned(rows, site_a.counts, site_b.counts, threshold)
    if as_json:
        echo_json({"cells": report, "notices": notices, "seconds": round(seconds, 2)})
        return
    print_table(report, ["region", "exact_a", "exact_b", "answer", "site_a_learned", "site_b_learned"])
    for notice in notices:
        click.echo(f"NOTICE: {notice}")
    click.echo(f"{seconds:.1f} s for the federated query ({key_bits}-bit Paillier)")


@contextlib.contextmanager
def _workspace(directory: Path | None) -> Iterator[Path]:
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        yield directory
        return
    with tempfile.TemporaryDirectory(prefix="veil-federate-") as temporary:
        yield Path(temporary)


@contextlib.contextmanager
def _served(config: Path, environment: dict[str, str]) -> Iterator[int]:
    """``veil serve`` on ``config`` until the block ends; yields its port."""
    log = config.with_name("serve.log")
    command = [sys.executable, "-c", "from proxy.cli.main import main; main()", "serve", "--config", str(config),
               "--port", "0", "--log-level", "warning"]  # fmt: skip
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT, env=environment
        )
    try:
        yield _wait_ready(process, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def _wait_ready(process: subprocess.Popen[bytes], log: Path) -> int:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if match := READY.search(log.read_text(errors="replace")):
            return int(match["port"])
        if process.poll() is not None:
            raise ConfigError(f"veil serve stopped before it was ready:\n{log.read_text(errors='replace')}")
        time.sleep(0.05)
    raise ConfigError(f"veil serve was not ready within {START_TIMEOUT_S:g} s")


def _federated_count(port: int) -> tuple[list[tuple[Any, ...]], list[str]]:
    import psycopg

    from proxy.federation.sites import ANALYST, ANALYST_PASSWORD, DATASET, FEDERATION

    notices: list[str] = []
    conninfo = f"host=127.0.0.1 port={port} dbname={DATASET} user={ANALYST} password={ANALYST_PASSWORD}"
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.add_notice_handler(lambda diagnostic: notices.append(diagnostic.message_primary or ""))
        rows = connection.execute(f"SELECT region, COUNT(*) FROM {FEDERATION} GROUP BY region").fetchall()
    return rows, notices


def _learned(
    rows: list[tuple[Any, ...]], exact_a: dict[str, int], exact_b: dict[str, int], threshold: int
) -> list[dict[str, Any]]:
    report = []
    for region, answer in rows:
        released = answer is not None
        report.append(
            {
                "region": region,
                "exact_a": exact_a[region],
                "exact_b": exact_b[region],
                "answer": round(answer, 1) if released else None,
                "site_a_learned": f"reached k = {threshold}; B's noisy count"
                if released
                else f"below k = {threshold}, nothing more",
                "site_b_learned": f"reached k = {threshold}"
                if released
                else f"below k = {threshold}, nothing more",
            }
        )
    return report
