"""Which partition a WHERE pins (analysis/partitions.py): only the declared column itself, unqualified as
QueryShape writes it, pins its values."""

from __future__ import annotations

import pytest

from proxy.config import DatasetPolicy
from tests.unit.proxy.test_partition_pins import NORTH, dataset, where

__all__ = ["dataset"]  # the fixture, shared with the partition-pin tests


@pytest.mark.parametrize(
    "condition", ["patients.region = 'north'", "p.region IN ('north')", "x.region = 'north'"]
)
def test_a_qualified_column_pins_no_partition(dataset: DatasetPolicy, condition: str) -> None:
    """QueryShape leaves the partition column unqualified; a qualified one names another table's column
    (a join's), whose rows say nothing of the partition this table's rows are in."""
    assert where(dataset, "patients", condition) is None
    assert where(dataset, "patients", condition.split(".", 1)[1]) == NORTH
