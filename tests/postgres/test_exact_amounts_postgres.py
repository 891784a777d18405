"""Exact ledger arithmetic on PostgreSQL: every test of tests/unit/budget/test_exact_amounts.py again,
each ledger in its own schema of the test server — the stores hold amounts alike, so they must agree
to the last quantum."""

from __future__ import annotations

import pytest

from tests.unit.budget.test_exact_amounts import *  # noqa: F403 -- every exactness test, collected again here
from tests.unit.budget.test_ledger import Ledgers

pytestmark = pytest.mark.postgres


@pytest.fixture
def ledgers(postgres_ledgers: Ledgers) -> Ledgers:
    return (
        postgres_ledgers  # the contract tests collected here run on PostgreSQL (tests/postgres/conftest.py)
    )
