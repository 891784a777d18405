"""Which aggregates of a query on private data are answered, and as what (analysis/aggregates.py).
``SUM(DISTINCT patient_id)`` is no count of people: answering it as one would release a different
statistic from the one asked, under the name the analyst gave it."""

from __future__ import annotations

import pytest

from tests.unit.proxy.test_mutants_anD_joins import refusal


@pytest.mark.parametrize("function", ["SUM", "AVG", "STDDEV"])
def test_only_count_reads_distinct_privacy_units(function: str) -> None:
    refused = refusal(f"SELECT {function}(DISTINCT patient_id) FROM visits")
    assert refused.message == "DISTINCT aggregates are only supported as COUNT(DISTINCT <privacy unit>)"
    assert refused.hint == "count people with COUNT(DISTINCT patient_id)"
