"""DuckDB's worker threads run ten nice levels below the rest of the server (proxy/backends/priority.py).
Linux only: niceness is per thread there."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import duckdb
import pytest

from proxy.backends.priority import ENGINE_NICENESS, at_engine_priority

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread niceness is Linux's")


def niceness(thread: int) -> int:
    """Field 19 of /proc/self/task/TID/stat (after the parenthesised command name)."""
    stat = Path(f"/proc/self/task/{thread}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[16])


def alive_niceness(threads: set[int]) -> dict[int, int]:
    """Niceness of those of ``threads`` that still exist (one may end while it is read)."""
    found = {}
    for thread in threads:
        try:
            found[thread] = niceness(thread)
        except FileNotFoundError:
            continue
    return found


def thread_ids() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/task")}


def test_an_engine_opened_at_engine_priority_starts_its_workers_there() -> None:
    base = niceness(threading.get_native_id())
    before = thread_ids()
    connection = at_engine_priority(duckdb.connect, ":memory:", config={"threads": 4})
    try:
        started = alive_niceness(thread_ids() - before)  # DuckDB's workers; the opening thread has ended
        assert started, "DuckDB started no worker threads: nothing was tested"
        assert set(started.values()) == {min(19, base + ENGINE_NICENESS)}
    finally:
        connection.close()
    assert niceness(threading.get_native_id()) == base


def test_an_error_in_the_lowered_thread_reaches_the_caller() -> None:
    with pytest.raises(duckdb.IOException):
        at_engine_priority(duckdb.connect, "/nonexistent/dir/x.duckdb")
