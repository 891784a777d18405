"""A query service for in-process tests: over a given backend, with a sandbox engine of its own."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy.backends.base import Backend
from proxy.backends.duckdb import DuckDBBackend
from proxy.config import DatasetPolicy
from proxy.query.service import QueryService
from proxy.wire.scram import make_scram_verifier


@contextmanager
def serving(dataset: DatasetPolicy, backend: Backend, ledger: Ledger, *, seed: int) -> Iterator[QueryService]:
    """The service with a seeded noise source; the backend and the sandbox are closed after."""
    sandbox = DuckDBBackend.sandbox()
    try:
        yield QueryService(dataset, backend=backend, sandbox=sandbox, ledger=ledger, rng=random.Random(seed))
    finally:
        backend.close()
        sandbox.close()


def granted_ledger(path: Path, dataset: str, grant: PrivacyLoss, *, analyst: str = "alice") -> Ledger:
    """A new ledger at ``path`` where ``analyst`` (password "secret") holds ``grant`` on ``dataset``."""
    ledger = Ledger.create(path)
    ledger.add_analyst(analyst, make_scram_verifier("secret", iterations=1))
    ledger.grant(analyst, dataset, grant)
    return ledger
