"""Survivors of the fresh mutation sample (seed 1143) in budget/ledger.py."""

from __future__ import annotations

import pytest

from budget.errors import InvalidNameError
from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from tests.unit.budget.test_ledger import ledger, ledgers  # noqa: F401  (the SQLite ledger fixtures)


@pytest.mark.parametrize("name", ["a b", "x" * 64, "bob;drop"])
def test_a_grant_on_an_invalid_dataset_name_says_it_is_the_dataset_name(
    ledger: Ledger,  # noqa: F811
    name: str,
) -> None:
    """The admin reads which name was refused: the dataset's, quoted, and how to spell a valid one."""
    with pytest.raises(InvalidNameError) as refused:
        ledger.grant("alice", name, PrivacyLoss(1.0, 0))
    assert refused.value.message == f"dataset name {name!r} is not allowed"
    assert refused.value.hint == 'use 1 to 63 ASCII letters, digits, "_", "-" or "."'
    assert [b.dataset for b in ledger.balances("alice")] == ["demo"]
