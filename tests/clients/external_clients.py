"""Shared parts of the scenarios run through clients that are not Python packages: node-postgres
(``test_node_pg.py``) and pgjdbc (``test_jdbc.py``).

Each runs one program per transport (``tcp``: the package's ``veil_server``; ``tls``: a copy of its
policy with a self-signed certificate, ``sslmode=require``-style) that prints one JSON line per step;
the tests assert on those lines. Cancel runs against a server on the slow dataset of
``tests/integration/slow_dataset.py`` (DuckDB, with the same certificate, serving both transports).

A missing tool (``node``, ``npm``'s ``node_modules``, ``java``, ``javac``, the pgjdbc jar) skips the tests
with the reason — unless ``VEIL_REQUIRE_CLIENTS=1`` (set by ``.ci/run``): then they fail, so that CI
cannot pass by skipping.
"""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from proxy.config import read_document
from tests.clients.conftest import DSN_VARIABLE, Served
from tests.conftest import DATASET, Admin, Analyst, Demo, RunningServer, running_server
from tests.integration.slow_dataset import SLOW_QUERY, build_slow_dataset, with_server_settings
from tests.tls_certificates import make_certificate

TRANSPORTS = ["tcp", "tls"]
EPSILON = 1.0
NOISE_BOUND = math.log(1e6) / EPSILON  # a count's noise exceeds this with probability below 1e-6
MIN_AGE = 40
SCENARIO_TIMEOUT = 60.0


@dataclass(frozen=True)
class Target:
    """Where a scenario connects: a server, the analyst, and whether to use TLS."""

    server: RunningServer
    analyst: Analyst
    tls: bool


@dataclass(frozen=True)
class SlowTarget:
    server: RunningServer
    admin: Admin
    query: str = SLOW_QUERY


def assert_cancel_charged(slow: SlowTarget, analyst: Analyst) -> None:
    """A cancelled query is charged like an answered one (docs/privacy.md, "Side channels"): its one
    reservation was committed, and what the analyst spent is exactly that spend's ε."""
    (spend,) = slow.admin.history(analyst)
    assert spend["state"] == "committed"
    assert spend["epsilon"] > 0
    assert slow.admin.balance(analyst)["spent_epsilon"] == pytest.approx(spend["epsilon"])


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certificate(tmp_path_factory.mktemp("external-tls"))


def tls_settings(certificate: Path) -> dict[str, str]:
    return {"tls_cert": str(certificate / "server.crt"), "tls_key": str(certificate / "server.key")}


@pytest.fixture(scope="module")
def tls_server(served: Served, certificate: Path, request: pytest.FixtureRequest) -> Iterator[RunningServer]:
    """The package's served policy (either backend) again, with a certificate: clients may use TLS."""
    name = f"tls-{request.module.__name__.rsplit('.', 1)[-1]}"
    config = with_server_settings(served.admin.config, f"{name}.toml", **tls_settings(certificate))
    with pytest.MonkeyPatch.context() as environment:
        if served.backend == "postgres":  # only the server process sees the DSN
            environment.setenv(DSN_VARIABLE, request.getfixturevalue("postgres_dsn"))
        server = running_server(config, config.with_name(f"{name}.log"))
        running = server.__enter__()
    try:
        yield running
    finally:
        server.__exit__(None, None, None)


@pytest.fixture(scope="module")
def slow_target(tmp_path_factory: pytest.TempPathFactory, certificate: Path) -> Iterator[SlowTarget]:
    config = build_slow_dataset(tmp_path_factory.mktemp("external-slow"), **tls_settings(certificate))
    with running_server(config, config.with_name("serve.log")) as server:
        yield SlowTarget(server, Admin(config))


def target_for(transport: str, plain: RunningServer, tls: RunningServer, analyst: Analyst) -> Target:
    return Target(tls if transport == "tls" else plain, analyst, transport == "tls")


def run_scenario(command: Sequence[str], *, cwd: Path | None = None) -> dict[str, dict[str, Any]]:
    """Run a scenario program; → its JSON lines by step. Fails with its output if it did not finish."""
    result = subprocess.run(
        list(command), cwd=cwd, capture_output=True, text=True, timeout=SCENARIO_TIMEOUT, check=False
    )
    steps: dict[str, dict[str, Any]] = {}
    for line in result.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            steps[record.pop("step")] = record
    output = f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0 and "done" in steps, output
    return steps


def exact_count(demo: Demo, minimum_age: int) -> int:
    with duckdb.connect(str(demo.database), read_only=True) as db:
        (count,) = db.execute("SELECT COUNT(*) FROM patients WHERE age > ?", [minimum_age]).fetchone()  # type: ignore[misc]
    return int(count)


def visits_columns(demo: Demo) -> list[str]:
    """The columns of ``visits`` as the policy declares them, in its order."""
    return list(read_document(demo.config)["datasets"][DATASET]["tables"]["visits"]["columns"])


def check_common_steps(steps: dict[str, dict[str, Any]], demo: Demo, tls: bool) -> None:
    """What both clients must see: SELECT 1, a noisy count near the truth, a refusal then a good query."""
    for name, record in steps.items():
        if name not in ("refused", "cancel"):
            assert "error" not in record, f"step {name} failed: {record}"
    assert steps["connect"]["encrypted"] is tls
    assert steps["select1"]["value"] == 1
    truth = exact_count(demo, MIN_AGE)
    assert abs(steps["dp_count"]["value"] - truth) <= NOISE_BOUND
    assert steps["refused"]["sqlstate"] == "42501", steps["refused"]
    # the same query with the same value again: the stored answer, on the connection that saw the refusal
    assert steps["after_refusal"]["value"] == steps["dp_count"]["value"]
    cancel = steps["cancel"]
    assert cancel["sqlstate"] == "57014", cancel
    assert cancel["after"] == 1
    assert cancel["seconds"] < 20, cancel
    assert "disconnect" in steps
