"""The upgrade of a version-4 ledger to exact amounts, on PostgreSQL: every test of
tests/unit/budget/test_upgrade_to_exact.py again, each ledger in its own schema of the test server."""

from __future__ import annotations

import pytest

from tests.unit.budget.test_ledger import Ledgers
from tests.unit.budget.test_upgrade_to_exact import *  # noqa: F403 -- every upgrade test, collected again here

pytestmark = pytest.mark.postgres


@pytest.fixture
def ledgers(postgres_ledgers: Ledgers) -> Ledgers:
    return (
        postgres_ledgers  # the contract tests collected here run on PostgreSQL (tests/postgres/conftest.py)
    )
