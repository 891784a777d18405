"""The upgrade of a version-4 ledger to exact amounts, on PostgreSQL: every test of
tests/unit/budget/test_upgrade_to_exact.py again, each ledger in its own schema of the test server."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.unit.budget.test_ledger import Ledgers
from tests.unit.budget.test_upgrade_to_exact import *  # noqa: F403 -- every upgrade test, collected again here

pytestmark = pytest.mark.postgres


@pytest.fixture
def ledgers(postgres_dsn: str, new_schema: Callable[[], str]) -> Iterator[Ledgers]:
    """PostgreSQL ledgers, each in a fresh schema of the test server (dropped after the test)."""
    made = Ledgers(lambda: (postgres_dsn, new_schema()))
    yield made
    made.close()
