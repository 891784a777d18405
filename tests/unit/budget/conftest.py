"""Fixtures shared by the ledger store suites of this package."""

from __future__ import annotations

from pathlib import Path

import pytest

from budget.ledger import Ledger


@pytest.fixture
def path(tmp_path: Path) -> Path:
    """An empty ledger file (its schema holds the audit and answers tables)."""
    location = tmp_path / "ledger.sqlite"
    Ledger.create(location).close()
    return location
