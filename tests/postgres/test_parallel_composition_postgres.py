"""Parallel composition in a PostgreSQL ledger: every test of tests/unit/budget/test_parallel_composition.py,
run again with each ledger in its own schema of the test server."""

from __future__ import annotations

import pytest

from tests.unit.budget.test_ledger import Ledgers
from tests.unit.budget.test_parallel_composition import *  # noqa: F403 -- every test, collected again here

pytestmark = pytest.mark.postgres


@pytest.fixture
def ledgers(postgres_ledgers: Ledgers) -> Ledgers:
    return (
        postgres_ledgers  # the contract tests collected here run on PostgreSQL (tests/postgres/conftest.py)
    )
