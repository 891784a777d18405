"""Exact ledger arithmetic on PostgreSQL: every test of tests/unit/budget/test_exact_amounts.py again,
each ledger in its own schema of the test server — the stores hold amounts alike, so they must agree
to the last quantum."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.unit.budget.test_exact_amounts import *  # noqa: F403 -- every exactness test, collected again here
from tests.unit.budget.test_ledger import Ledgers

pytestmark = pytest.mark.postgres


@pytest.fixture
def ledgers(postgres_dsn: str, new_schema: Callable[[], str]) -> Iterator[Ledgers]:
    """PostgreSQL ledgers, each in a fresh schema of the test server (dropped after the test)."""
    made = Ledgers(lambda: (postgres_dsn, new_schema()))
    yield made
    made.close()
