"""Logins and CancelRequests do not wait behind statements (proxy/server/login.py): with every worker
thread of the server busy with slow engine queries, a new analyst still logs in and is answered."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

import psycopg

from tests.conftest import Admin, running_server
from tests.integration.slow_dataset import SLOW_QUERY, build_slow_dataset, connect

BUSY = 8  # more than the default thread pool of a 2-core machine (cores + 4)


def test_a_login_is_served_while_every_worker_thread_runs_a_slow_query(tmp_path: Path) -> None:
    config = build_slow_dataset(tmp_path / "slow")
    admin = Admin(config)
    with running_server(config, tmp_path / "serve.log") as server, contextlib.ExitStack() as stack:
        busy = [
            stack.enter_context(connect(server, admin.add_analyst(1.0, prefix=f"busy{i}")))
            for i in range(BUSY)
        ]
        started = threading.Barrier(BUSY + 1)

        def slow(connection: psycopg.Connection) -> None:  # type: ignore[type-arg]
            started.wait()
            with contextlib.suppress(psycopg.Error):
                connection.execute(SLOW_QUERY)

        workers = [threading.Thread(target=slow, args=(connection,)) for connection in busy]
        for worker in workers:
            worker.start()
        started.wait()
        with connect(server, admin.add_analyst(1.0, prefix="newcomer")) as newcomer:
            assert newcomer.execute("SELECT 1").fetchone() == (1,)
        still_running = sum(worker.is_alive() for worker in workers)
        for connection, worker in zip(busy, workers, strict=True):
            while worker.is_alive():
                connection.cancel_safe(timeout=5)
                worker.join(1)
    assert still_running == BUSY, "the slow queries ended before the login: nothing was tested"


def test_engine_threads_run_below_the_wire(tmp_path: Path) -> None:
    """proxy/backends/priority.py in a real server: DuckDB's workers are ten nice levels below the main
    thread (event loop), which is not lowered, nor is the thread that ran the statement's Python."""
    config = build_slow_dataset(tmp_path / "slow")
    admin = Admin(config)
    with running_server(config, tmp_path / "serve.log") as server:
        with connect(server, admin.add_analyst(1.0)) as connection:
            connection.execute("SELECT COUNT(*) FROM medium").fetchone()
        pid = server.process.pid
        levels = {}
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError):
                levels[int(task.name)] = int((task / "stat").read_text().rsplit(")", 1)[1].split()[16])
    main = levels.pop(pid)
    lowered = [level for level in levels.values() if level == min(19, main + 10)]
    assert lowered, levels  # DuckDB's worker(s)
    assert any(level == main for level in levels.values()), levels  # the statement and login threads
