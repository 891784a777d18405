"""``kill -HUP`` reloads the policy of a running ``veil serve`` (proxy/server/reload.py) instead of
stopping it: what can change at once does, what needs a restart is logged, a broken file is refused."""

from __future__ import annotations

import signal
import time
import tomllib
from pathlib import Path
from typing import Any

import psycopg
import pytest
import tomli_w

from tests.conftest import DATASET, Admin, RunningServer, running_server
from tests.integration.slow_dataset import build_slow_dataset, connect

SETTLE_S = 10.0


def edit(config: Path, change: Any) -> None:
    document = tomllib.loads(config.read_text(encoding="utf-8"))
    change(document)
    config.write_text(tomli_w.dumps(document), encoding="utf-8")


def hang_up(server: RunningServer, expected: str) -> None:
    """SIGHUP, then wait for the log line that says how it went."""
    seen = server.output().count(expected)
    server.process.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + SETTLE_S
    while server.output().count(expected) == seen:
        assert time.monotonic() < deadline, f"no {expected!r} in the log:\n{server.output()}"
        time.sleep(0.05)


def test_sighup_applies_a_dataset_policy_and_survives_a_broken_file(tmp_path: Path) -> None:
    config = build_slow_dataset(tmp_path / "slow")
    analyst = Admin(config).add_analyst(10.0, prefix="reloaded")
    with running_server(config, tmp_path / "serve.log") as server, connect(server, analyst) as connection:
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="max_epsilon of 1"):
            connection.execute("SET veil.epsilon = 2")
        edit(config, lambda d: d["datasets"][DATASET].update(max_epsilon=5.0, default_epsilon=0.2))
        hang_up(server, "reloaded policy: applied dataset demo")
        connection.execute("SET veil.epsilon = 2")  # the running session follows the new policy
        edit(config, lambda d: d["datasets"][DATASET].update(path="elsewhere.duckdb"))
        hang_up(server, "needs a restart: dataset demo engine settings")
        config.write_text("this is [not toml", encoding="utf-8")
        hang_up(server, "reload failed, keeping the running configuration")
        assert connection.execute("SELECT COUNT(*) FROM medium WHERE v > 50").fetchone() is not None
        assert server.process.poll() is None
