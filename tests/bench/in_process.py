"""Veil's query pipeline in process, for benchmarks: a policy, a ledger with one generous analyst, and
a query service with seeded noise (benchmarks compare runs; production noise is the OS CSPRNG).

Accuracy benchmarks need a fresh noisy draw per run: their policies set ``answer_cache = false``
(a repeated query would otherwise get its stored answer, free), and :func:`spent` reads what the
ledger actually charged so that a bench can report it."""

from __future__ import annotations

import random
from pathlib import Path

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy.backends.duckdb import DuckDBBackend
from proxy.config import parse_config
from proxy.query.service import Principal, QueryService
from proxy.release.apply import ReleasedTable
from proxy.settings import SessionSettings
from proxy.wire.scram import make_scram_verifier

ANALYST = "bench"


def create_ledger(directory: Path, dataset: str) -> None:
    ledger = Ledger.create(directory / "ledger.sqlite")
    ledger.add_analyst(ANALYST, make_scram_verifier(ANALYST, iterations=1))
    ledger.grant(ANALYST, dataset, PrivacyLoss(10_000.0))


def seeded_service(policy: str, directory: Path, dataset: str, *, seed: int) -> QueryService:
    """The policy's dataset must be a DuckDB file in ``directory``; the ledger from create_ledger."""
    policy_dataset = parse_config(policy, path=directory / "veil.toml").dataset(dataset)
    assert policy_dataset is not None and policy_dataset.path is not None
    return QueryService(
        policy_dataset,
        backend=DuckDBBackend(policy_dataset.path),
        sandbox=DuckDBBackend.sandbox(),
        ledger=Ledger.open(directory / "ledger.sqlite"),
        rng=random.Random(seed),
    )


def spent(service: QueryService) -> tuple[float, float]:
    """(ε, δ) the ledger has charged the bench analyst on the service's dataset so far."""
    balance = service.ledger.balance(ANALYST, service.dataset.name)
    return balance.spent_epsilon, balance.spent_delta


def answer(service: QueryService, sql: str) -> ReleasedTable:
    (tree,) = service.parse(sql)
    outcome = service.run(tree, principal=Principal(ANALYST), settings=SessionSettings())
    assert outcome.table is not None
    return outcome.table
