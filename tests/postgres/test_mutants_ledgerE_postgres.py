"""The ledger tests found by mutation testing (tests/unit/budget/test_mutants_ledgerE_*.py: messages,
spends, stepped caps), run again with each ledger in its own schema of the PostgreSQL test server."""

from __future__ import annotations

import pytest

from tests.unit.budget.test_ledger import Ledgers
from tests.unit.budget.test_mutants_ledgerE_caps import *  # noqa: F403 -- every test, collected again here
from tests.unit.budget.test_mutants_ledgerE_messages import *  # noqa: F403
from tests.unit.budget.test_mutants_ledgerE_spends import *  # noqa: F403

pytestmark = pytest.mark.postgres


@pytest.fixture
def ledgers(postgres_ledgers: Ledgers) -> Ledgers:
    return (
        postgres_ledgers  # the contract tests collected here run on PostgreSQL (tests/postgres/conftest.py)
    )
