"""Long statement texts are analysed first in worker processes, so that no parse holds up other sessions.

Why processes, not threads: sqlglot's parser is compiled (mypyc) and holds the GIL for a whole parse —
26 ms for a 4,000-value IN list, without a single switch — so a few connections sending long statements
starve the event loop that serves every other session: measured, eight such connections made a newcomer's
login 122× slower than on an idle server (docs/benchmarks.md, "Availability under heavy statements").

A text longer than the session parses on its event loop goes to a worker process with the dataset's
policy. The worker parses it and classifies each statement (:func:`proxy.analysis.statements.classify`:
the complexity budget, unknown names, unsupported constructs — everything refused before an engine
sees data, nothing that depends on rows) and returns, per statement, its span in the text and its
refusal, if any. The main process then parses only the statements that passed — whose size the limits
they just passed bound — and answers each refused one with its error when the batch reaches it, as if it
had refused it itself. It does not take the worker's trees: unpickling a sqlglot tree costs more than
parsing it (39 ms against 26 ms for the 4,000 values).

The verdict is advisory in one direction only: a statement the worker accepts is parsed and classified
again in the main process, which decides; a statement it refuses is refused with exactly the error the
main process would give (same code, same policy). A text the worker cannot split faithfully into
statements, or any failure of the pool, falls back to analysing everything in the main process.
"""

from __future__ import annotations

import asyncio
import copyreg
import logging
import multiprocessing
import os
import signal
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from proxy.analysis.parameters import Tree, parameter_count
from proxy.analysis.parse import parse_statements, statement_spans, too_deep
from proxy.analysis.statements import classify
from proxy.config import DatasetPolicy
from proxy.errors import ProxyError
from proxy.query.service import QueryService

log = logging.getLogger("veil.server")

WORKER_NICENESS = 10  # added to the server's: the workers' analyses are background work
TASKS_PER_PROCESS = 500  # then the worker is replaced: what a huge parse allocated goes back to the OS


@dataclass(frozen=True)
class StatementVerdict:
    """One statement of the text: where it is (``text[start:end]``) and why it is refused, if it is."""

    start: int
    end: int
    refusal: ProxyError | None


@dataclass(frozen=True)
class TextVerdict:
    """The worker's analysis of a whole text: a refusal of all of it (a syntax error, too many tokens),
    or a verdict per statement."""

    refusal: ProxyError | None = None
    statements: tuple[StatementVerdict, ...] = ()


@dataclass(frozen=True)
class RefusedStatement:
    """A statement of a long text that the analysis worker refused: its text (for the audit log) and
    the error the batch answers when it reaches it."""

    text: str
    refusal: ProxyError


class AnalysisPool:
    """Worker processes that analyse long statement texts; started on first use (most servers never
    see a long statement, and every worker costs an interpreter's memory)."""

    def __init__(self, processes: int) -> None:
        self.processes = processes
        self._executor: ProcessPoolExecutor | None = None

    async def verdict(self, dataset: DatasetPolicy, sql: str) -> TextVerdict | None:
        """The worker's verdict on ``sql``, or None when the pool cannot give one (then the caller
        analyses the text itself)."""
        try:
            return await asyncio.to_thread(self._analyse, dataset, sql)
        except (BrokenProcessPool, OSError, RuntimeError) as error:
            log.warning("analysis worker failed (%s): the statement is analysed in the server process", error)
            self._executor = None  # a broken pool is replaced on the next long statement
            return None

    def _analyse(self, dataset: DatasetPolicy, sql: str) -> TextVerdict | None:
        """Submit and wait from a thread, not the event loop: the first submission starts the forkserver,
        which imports Veil before it forks a worker — a second or two the loop must not wait through."""
        return self._started().submit(analyse_text, dataset, sql).result()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    def _started(self) -> ProcessPoolExecutor:
        if self._executor is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload([__name__])
            self._executor = ProcessPoolExecutor(
                self.processes,
                mp_context=context,
                initializer=_start_worker,
                max_tasks_per_child=TASKS_PER_PROCESS,
            )
        return self._executor


def analyse_text(dataset: DatasetPolicy, sql: str) -> TextVerdict | None:
    """In the worker: parse the whole text (a syntax error refuses all of it, as in the main process),
    then classify each statement that has no parameters ($1 is typed and classified at Bind)."""
    try:
        trees = parse_statements(sql, max_tokens=dataset.limits.max_tokens)
        spans = statement_spans(sql)
    except ProxyError as error:
        return TextVerdict(refusal=error)
    if len(spans) != len(trees):
        return None  # not the split the parser made: let the main process do it all
    verdicts = []
    for tree, (start, end) in zip(trees, spans, strict=True):
        refusal = None
        if parameter_count(tree) == 0:
            try:
                classify(tree, dataset)
            except ProxyError as error:
                refusal = error
            except RecursionError:
                refusal = too_deep()
        verdicts.append(StatementVerdict(start, end, refusal))
    return TextVerdict(statements=tuple(verdicts))


def parse_accepted(service: QueryService, sql: str, verdict: TextVerdict) -> list[Tree | RefusedStatement]:
    """In the main process (a worker thread): each accepted statement parsed on its own, each refused
    one as its refusal, in order. A statement that does not parse to exactly one tree on its own makes
    the whole text parsed as usual instead."""
    items: list[Tree | RefusedStatement] = []
    for statement in verdict.statements:
        text = sql[statement.start : statement.end]
        if statement.refusal is not None:
            items.append(RefusedStatement(text, statement.refusal))
            continue
        trees = service.parse(text)
        if len(trees) != 1:
            return list(service.parse(sql))
        items.append(trees[0])
    return items


def _start_worker() -> None:
    """Ctrl-C reaches the whole process group: the server shuts its workers down, they do not die
    mid-task with a traceback of their own. A lower CPU priority: a long statement's analysis yields
    the cores to logins, cancels and short statements in the server process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.nice(WORKER_NICENESS)


def _frozen_mapping(items: dict[Any, Any]) -> Mapping[Any, Any]:
    return MappingProxyType(items)


# Policies are immutable mappings (MappingProxyType), which pickle cannot send as they are: send the
# items and freeze them again on the other side.
copyreg.pickle(MappingProxyType, lambda mapping: (_frozen_mapping, (dict(mapping),)))
