"""The engine's threads run at a lower CPU priority than the rest of the server.

Why: on a machine whose cores are busy with engine queries, a login's own CPU work (SCRAM, the startup
exchange) waits its turn among every runnable thread: with eight analysts running heavy joins on two
cores, a login took 4–6× as long as on an idle server. Two kinds of thread do DuckDB's work: its own
workers, which a database starts when it opens and which inherit the niceness of the thread that opened
it (:func:`at_engine_priority`), and the thread that asks for a query, which works on it too
(:func:`engine_executor`: engine calls are handed to lowered threads that do nothing else). Ten nice
levels down, they yield the cores to the event loop, the login threads and the audit writer whenever
those have work (docs/benchmarks.md, "Availability under heavy statements").

Never a thread that runs Veil's Python: a low-priority thread that holds the GIL while other processes
keep the cores busy stalls every thread of the server. Lowering the statement threads was tried, helped
logins, and made a JDBC client's CancelRequests wait out the 30 s statement timeout on a loaded machine.
The engine threads hold the GIL only to enter and leave the engine. Admitting only a few engine queries at
a time was tried too and dropped: one analyst's long query then made every other analyst wait. Niceness is
raised only (lowering it again needs privileges), and only on Linux, where it is per thread.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

log = logging.getLogger("veil.server")

ENGINE_THREADS = 32  # at most one per running engine query: more than the statement threads
ENGINE_NICENESS = 10  # added to the server's niceness for the engine's worker threads (Linux: 19 at most)

P = ParamSpec("P")
R = TypeVar("R")


def lower_this_thread() -> None:
    """Raise the calling thread's niceness by ENGINE_NICENESS (Linux; elsewhere a no-op)."""
    if not sys.platform.startswith("linux"):
        return
    thread = threading.get_native_id()
    try:
        current = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(19, current + ENGINE_NICENESS))
    except OSError as error:  # a sandbox that forbids it: the engine runs at normal priority, and says so
        log.warning("cannot lower the priority of the engine's threads: %s", error)


def engine_executor() -> ThreadPoolExecutor:
    """Threads of lowered priority that only run engine calls (``cursor.execute`` and the fetch of its
    few result rows): the thread that asks DuckDB for a query works on it too, so it must be lowered
    like DuckDB's own workers. It holds the GIL only to enter and leave the engine."""
    return ThreadPoolExecutor(ENGINE_THREADS, thread_name_prefix="veil-engine", initializer=lower_this_thread)


def at_engine_priority(function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``function(*args, **kwargs)`` in a fresh thread of lowered priority, which then ends: an engine
    opened there starts its worker threads at that priority."""
    outcome: dict[str, object] = {}

    def run() -> None:
        lower_this_thread()
        try:
            outcome["value"] = function(*args, **kwargs)
        except BaseException as error:  # re-raised in the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=run, name="veil-engine-open")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
