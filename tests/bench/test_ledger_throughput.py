"""Ledger debit throughput: reserve + commit pairs per second with 1, 10 and 100 client threads.

In process, against the ledger API (no wire, no engine): every debit is what one answered query
costs the ledger — a durable ``reserve`` (check and debit in one locked transaction) and a
``commit`` that does not wait for the disk. All threads debit the same analyst on the same dataset,
so every debit contends for the same lock: this is the worst case, and the one that matters for
"100 clients spending one grant".

Measured in the same run:

* the SQLite ledger (one file, WAL, ``BEGIN IMMEDIATE``);
* the PostgreSQL ledger (its own schema on the test server; ``-k postgres`` alone; skips without a
  server, see ``postgres_dsn``), with its pool of at most 16 connections;
* the baseline: the ledger before the running totals — version 1, taken from git (``LEGACY_COMMIT``) into
  a temporary module — which opened a connection per operation and summed every spend of the
  analyst on each reservation, so it slows down as the history grows.

Run with ``make bench`` (or ``.venv/bin/python -m pytest -q -m bench tests/bench/test_ledger_throughput.py -s``).
Results go into docs/benchmarks.md.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import pytest

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from tests.conftest import schema_in

pytestmark = pytest.mark.bench

CLIENTS = (1, 10, 100)
SECONDS = 3.0  # each (store, clients) pair debits for this long
EPSILON = PrivacyLoss(0.001)
LEGACY_COMMIT = "91b14b7"  # the last commit with the version-1 ledger (budget/ledger.py)
VERIFIER = "SCRAM-SHA-256$4096:c2FsdHNhbHQ=$c3RvcmVka2V5:c2VydmVya2V5"
REPO = Path(__file__).resolve().parents[2]


class Debitable(Protocol):
    def reserve(self, analyst: str, dataset: str, loss: Any, *, statement: str) -> int: ...

    def commit(self, reservation_id: int) -> None: ...


@dataclass(frozen=True)
class Run:
    store: str
    clients: int
    debits: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.debits / self.seconds


def debit_for(ledger: Debitable, clients: int, seconds: float) -> Run:
    """``clients`` threads, released together, each reserving and committing until time is up."""
    start = threading.Barrier(clients + 1)
    stop = threading.Event()
    counts = [0] * clients
    errors: list[BaseException] = []

    def client(number: int) -> None:
        start.wait()
        try:
            while not stop.is_set():
                ledger.commit(ledger.reserve("bench", "demo", EPSILON, statement="SELECT COUNT(*) FROM t"))
                counts[number] += 1
        except BaseException as error:  # reported below: a benchmark must not hide a failure
            errors.append(error)

    threads = [threading.Thread(target=client, args=(number,)) for number in range(clients)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    assert errors == []
    return Run("", clients, sum(counts), elapsed)


def prepared(ledger: Any) -> Any:
    ledger.add_analyst("bench", VERIFIER)
    ledger.grant("bench", "demo", PrivacyLoss(1_000_000.0))
    return ledger


@pytest.fixture(scope="module")
def legacy_ledger_module(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """budget/ledger.py as of LEGACY_COMMIT, importable as its own module."""
    shown = subprocess.run(
        ["git", "show", f"{LEGACY_COMMIT}:budget/ledger.py"], cwd=REPO, capture_output=True, text=True
    )
    if shown.returncode != 0:
        pytest.skip(f"cannot read the version-1 ledger from git: {shown.stderr.strip()}")
    path = tmp_path_factory.mktemp("legacy") / "legacy_ledger.py"
    path.write_text(shown.stdout)
    spec = importlib.util.spec_from_file_location("legacy_ledger", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["legacy_ledger"] = module
    spec.loader.exec_module(module)
    return module


RESULTS: list[Run] = []


def measure(store: str, make: Callable[[], Any]) -> list[Run]:
    runs = []
    for clients in CLIENTS:
        ledger = prepared(make())
        run = debit_for(ledger, clients, SECONDS)
        runs.append(Run(store, clients, run.debits, run.seconds))
        if hasattr(ledger, "verify"):
            assert ledger.verify() == []
            assert ledger.balance("bench", "demo").releases == run.debits
        if hasattr(ledger, "close"):
            ledger.close()
    RESULTS.extend(runs)
    print_table(runs)
    return runs


def print_table(runs: list[Run]) -> None:
    print()
    print(f"{'store':<28} {'clients':>7} {'debits':>7} {'seconds':>7} {'debits/s':>9}")
    for run in runs:
        print(f"{run.store:<28} {run.clients:>7} {run.debits:>7} {run.seconds:>7.2f} {run.per_second:>9.0f}")


@pytest.fixture
def numbered(tmp_path: Path) -> Callable[[str], Path]:
    counter = iter(range(1_000))
    return lambda stem: tmp_path / f"{stem}-{next(counter)}.sqlite"


def test_sqlite_ledger_debits_per_second(numbered: Callable[[str], Path]) -> None:
    runs = measure("SQLite (running totals)", lambda: Ledger.create(numbered("ledger")))
    assert all(run.debits > 0 for run in runs)


def test_version_1_sqlite_ledger_debits_per_second(
    legacy_ledger_module: ModuleType, numbered: Callable[[str], Path]
) -> None:
    runs = measure("SQLite version 1 (baseline)", lambda: legacy_ledger_module.Ledger.create(numbered("v1")))
    assert all(run.debits > 0 for run in runs)


@pytest.fixture
def schemas(postgres_dsn: str) -> Iterator[Callable[[], str]]:
    import contextlib

    with contextlib.ExitStack() as stack:
        yield lambda: stack.enter_context(schema_in(postgres_dsn))


def test_postgres_ledger_debits_per_second(postgres_dsn: str, schemas: Callable[[], str]) -> None:
    runs = measure("PostgreSQL", lambda: Ledger.create(postgres_dsn, schema=schemas()))
    assert all(run.debits > 0 for run in runs)


def test_zz_summary() -> None:
    """The three tables together, for docs/benchmarks.md."""
    if RESULTS:
        print("\nledger debit throughput, all stores:")
        print_table(RESULTS)
