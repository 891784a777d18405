"""Constant-time release (docs/privacy.md, "Side channels" 3c): with ``response_deadline_ms`` every
statement on private data ends no earlier than its deadline, fixed before anything runs; one still
running then is stopped, charged and answered with one constant error."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from proxy.errors import ConfigError, QueryCanceledError
from tests.adversarial.probe_dataset import BACKENDS, SLOW_QUERY, TARGET, probe_policy, probe_service

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
