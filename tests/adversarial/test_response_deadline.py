"""Constant-time release (docs/privacy.md, "Side channels" 3c): with ``response_deadline_ms`` every
statement on private data ends no earlier than its deadline, fixed before anything runs; one still
running then is stopped, charged and answered with one constant error."""

from __future__ import annotations

import json
import time
import tomllib
from pathlib import Path

import psycopg
import pytest
import tomli_w

from proxy.backends.interrupts import RELEASE_AT, response_deadline
from proxy.errors import ConfigError, QueryCanceledError
from tests.adversarial.probe_dataset import BACKENDS, SLOW_QUERY, TARGET, probe_policy, probe_service
from tests.conftest import DATASET, Admin, running_server
from tests.integration.slow_dataset import SLOW_QUERY as SLOW_QUERY_OF_SLOW_DATASET
from tests.integration.slow_dataset import build_slow_dataset, connect

DEADLINE_MS = 400


@pytest.mark.parametrize("backend", BACKENDS)
def test_answers_and_misses_leave_at_the_deadline(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with probe_service(backend, tmp_path, request, response_deadline_ms=DEADLINE_MS) as probe:
        for condition in (f"id = {TARGET}", "id <> 1"):  # the target present or not
            started = time.monotonic()
            assert probe.run(f"SELECT COUNT(*) FROM people WHERE {condition}").table is not None
            assert time.monotonic() - started >= DEADLINE_MS / 1000
        started = time.monotonic()
        with pytest.raises(QueryCanceledError) as missed:
            probe.run(SLOW_QUERY)
        assert time.monotonic() - started >= DEADLINE_MS / 1000
        assert missed.value.message == "canceling statement: the response deadline passed"
        assert missed.value.outcome == "deadline missed"
        assert "this failed query was charged ε=0.1" in (missed.value.detail or "")
        assert probe.states() == ["committed"] * 3


def test_the_deadline_is_off_by_default_and_within_the_timeout() -> None:
    assert probe_policy({"path": "p.duckdb"}).response_deadline_ms is None
    with pytest.raises(ConfigError, match="response_deadline_ms: must not exceed statement_timeout_ms"):
        probe_policy({"path": "p.duckdb"}, response_deadline_ms=5000, statement_timeout_ms=1000)


def test_a_caller_that_waits_itself_is_handed_the_deadline() -> None:
    """The session waits on its event loop: the worker thread is not held until the deadline."""
    waiter: list[float] = []
    token = RELEASE_AT.set(waiter)
    try:
        with response_deadline(60_000):
            pass
    finally:
        RELEASE_AT.reset(token)
    (deadline,) = waiter
    assert deadline - time.monotonic() > 50  # handed over, not slept through


def test_through_the_wire_answers_and_misses_leave_at_the_deadline(tmp_path: Path) -> None:
    base = build_slow_dataset(tmp_path / "slow")
    document = tomllib.loads(base.read_text(encoding="utf-8"))
    document["datasets"][DATASET]["response_deadline_ms"] = DEADLINE_MS
    config = base.with_name("deadline.toml")
    config.write_text(tomli_w.dumps(document), encoding="utf-8")
    admin = Admin(config)
    analyst = admin.add_analyst(1.0, prefix="timed")
    with running_server(config, tmp_path / "serve.log") as server, connect(server, analyst) as connection:
        started = time.monotonic()
        assert connection.execute("SELECT COUNT(*) FROM medium WHERE v > 50").fetchone() is not None
        assert time.monotonic() - started >= DEADLINE_MS / 1000
        started = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled, match="the response deadline passed") as missed:
            connection.execute(SLOW_QUERY_OF_SLOW_DATASET)
        assert time.monotonic() - started >= DEADLINE_MS / 1000
        assert "this failed query was charged" in (missed.value.diag.message_detail or "")
        assert connection.execute("SELECT 1").fetchone() == (1,)
    entries = json.loads(admin.check("audit", "--analyst", analyst.name, "--json").stdout)
    assert [(e["decision"], e["outcome"]) for e in entries if e["epsilon"] > 0] == [
        ("answered", ""),
        ("failed", "deadline missed"),
    ]
