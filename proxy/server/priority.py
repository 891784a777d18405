"""Statement work runs at a lower CPU priority than the wire, so logins and cancels never queue behind it.

Why: on a machine whose cores are busy with engine queries, a login's own CPU work (SCRAM, the startup
exchange) waits its turn among every runnable thread; measured on 2 cores with 8 connections running
joins, logins took 3.8–4.5× as long as on an idle server. Linux schedules threads by weight, and a thread
ten nice levels down weighs about a tenth: with statement threads — and DuckDB's own workers, which a
database starts when it opens and which inherit the niceness of the thread that opened it — at +10, the
event loop, the login threads and the audit writer get the cores first whenever they have work, and
the same logins took 1.0–1.2× (docs/benchmarks.md, "Availability under heavy statements").

Only the niceness of threads that run statements is raised (never lowered again: that needs privileges),
so nothing else on the machine is affected, and a statement on an idle machine runs as fast as before.
A GIL held by a low-priority thread does not invert priorities: a thread waiting for the GIL is not
runnable, so the holder competes only with other statement work. On systems where niceness is per
process rather than per thread (not Linux), nothing changes.
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

STATEMENT_NICENESS = 10  # added to the server's niceness for statement threads (Linux: 19 at most)

P = ParamSpec("P")
R = TypeVar("R")


def lower_this_thread() -> None:
    """Raise the calling thread's niceness by STATEMENT_NICENESS (Linux; elsewhere a no-op)."""
    if not sys.platform.startswith("linux"):
        return
    thread = threading.get_native_id()
    try:
        current = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(19, current + STATEMENT_NICENESS))
    except OSError as error:  # a sandbox that forbids it: run at normal priority, and say so
        log.warning("cannot lower the priority of a statement thread: %s", error)


def statement_executor() -> ThreadPoolExecutor:
    """The event loop's default executor (``asyncio.to_thread``): every statement's pipeline work runs
    on its threads. As many threads as asyncio's own default."""
    return ThreadPoolExecutor(
        min(32, (os.cpu_count() or 1) + 4), thread_name_prefix="veil-statement", initializer=lower_this_thread
    )


def at_statement_priority(function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``function(*args, **kwargs)`` in a fresh thread of lowered priority: an engine opened there
    starts its worker threads at that priority."""
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
