"""SIGTERM drains ``veil serve`` (docs/admin.md): nobody new is accepted, idle sessions end at once with
57P01, a running statement may finish within ``shutdown_grace_s`` and is stopped (and charged) after it,
no reservation is left behind, and the process exits 0 with a summary in the log."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import threading
from pathlib import Path

import psycopg
import pytest

from tests.conftest import Admin, start_server, wait_until_ready
from tests.integration.slow_dataset import SLOW_QUERY, build_slow_dataset, connect, with_server_settings


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()


def test_sigterm_ends_idle_sessions_stops_a_slow_statement_after_the_grace_and_exits(tmp_path: Path) -> None:
    config = with_server_settings(build_slow_dataset(tmp_path / "slow"), "drain.toml", shutdown_grace_s=1)
    admin = Admin(config)
    idle_analyst, busy_analyst = (admin.add_analyst(1.0, prefix=p) for p in ("idle", "busy"))
    process = start_server(config, tmp_path / "serve.log")
    with contextlib.ExitStack() as stack:
        stack.callback(_stop, process)
        server = wait_until_ready(process, tmp_path / "serve.log")
        idle = stack.enter_context(connect(server, idle_analyst))
        busy = stack.enter_context(connect(server, busy_analyst))
        raised: list[BaseException] = []
        started = threading.Event()

        def slow() -> None:
            started.set()
            try:
                busy.execute(SLOW_QUERY)
            except psycopg.Error as error:
                raised.append(error)

        worker = threading.Thread(target=slow)
        worker.start()
        started.wait()
        while not admin.history(busy_analyst):  # reserved: the statement is in the engine
            threading.Event().wait(0.05)
        process.send_signal(signal.SIGTERM)
        worker.join(60)
        assert process.wait(60) == 0
        (error,) = raised
        assert isinstance(error, psycopg.errors.QueryCanceled)
        assert "administrator command" in str(error)
        with pytest.raises(psycopg.OperationalError):
            idle.execute("SELECT 1")
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(server.conninfo(idle_analyst), connect_timeout=2)
    assert [spend["state"] for spend in admin.history(busy_analyst)] == ["committed"]  # charged, resolved
    assert json.loads(admin.check("budget", "reservations", "--json").stdout) == []
    log = (tmp_path / "serve.log").read_text(encoding="utf-8")
    assert "shutdown complete: 0 statements finished in the grace period, 1 stopped (and charged)" in log
