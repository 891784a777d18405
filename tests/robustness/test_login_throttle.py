"""Failed logins slow down per client address and role, through ``veil serve`` (docs/admin.md)."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest

from tests.conftest import Admin, Analyst, running_server
from tests.integration.slow_dataset import build_slow_dataset, with_server_settings

BASE_MS = 200


def test_wrong_passwords_wait_longer_each_time_and_the_right_one_starts_over(tmp_path: Path) -> None:
    config = with_server_settings(
        build_slow_dataset(tmp_path / "slow"), "throttled.toml", auth_failure_delay_ms=BASE_MS
    )
    analyst = Admin(config).add_analyst(1.0, prefix="guessed")
    wrong = Analyst(analyst.name, "not-the-password")
    with running_server(config, tmp_path / "serve.log") as server:
        for failures in range(1, 4):
            started = time.monotonic()
            with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
                psycopg.connect(server.conninfo(wrong)).close()
            assert time.monotonic() - started >= BASE_MS / 1000 * 2 ** (failures - 1)
        with psycopg.connect(server.conninfo(analyst)) as connection:
            assert connection.execute("SELECT 1").fetchone() == (1,)
        started = time.monotonic()
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(server.conninfo(wrong)).close()
        assert time.monotonic() - started >= BASE_MS / 1000  # counted from 1 again
        assert "delay=0.8s" in server.output()
