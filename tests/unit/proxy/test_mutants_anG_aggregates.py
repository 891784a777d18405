"""Which aggregates of a query on private data are answered, and as what (analysis/aggregates.py).
``SUM(DISTINCT patient_id)`` is no count of people: answering it as one would release a different
statistic from the one asked, under the name the analyst gave it."""

from __future__ import annotations

import pytest

from tests.unit.proxy.test_mutants_anD_joins import refusal, shape_of


@pytest.mark.parametrize("function", ["SUM", "AVG", "STDDEV"])
def test_only_count_reads_distinct_privacy_units(function: str) -> None:
    refused = refusal(f"SELECT {function}(DISTINCT patient_id) FROM visits")
    assert refused.message == "DISTINCT aggregates are only supported as COUNT(DISTINCT <privacy unit>)"
    assert refused.hint == "count people with COUNT(DISTINCT patient_id)"


def test_an_input_is_named_in_postgresql_not_in_a_generic_sql() -> None:
    """Labels and hints are SQL the analyst can paste back into a PostgreSQL session: ``DOUBLE
    PRECISION``, not the ``DOUBLE`` of sqlglot's generic dialect, which PostgreSQL does not know."""
    shape = shape_of("SELECT SUM(CAST(cost AS DOUBLE PRECISION)), AVG(v.cost::float8) FROM visits v")
    assert [aggregate.label for aggregate in shape.aggregates] == [
        "sum(CAST(cost AS DOUBLE PRECISION))",
        "avg(CAST(v.cost AS DOUBLE PRECISION))",
    ]
    refused = refusal("SELECT SUM(CAST(patient_id AS DOUBLE PRECISION)) FROM visits")
    assert refused.message == (
        "sum(CAST(patient_id AS DOUBLE PRECISION)): the range of CAST(patient_id AS DOUBLE PRECISION) "
        "cannot be derived from the policy"
    )
    assert refused.hint == (
        "clamp it explicitly: veil_clamp(CAST(patient_id AS DOUBLE PRECISION), lower, upper) — or declare "
        "bounds for its columns"
    )


@pytest.mark.parametrize("function", ["PERCENTILE_CONT", "PERCENTILE_DISC"])
def test_a_percentile_within_an_empty_group_is_refused_with_what_to_write(function: str) -> None:
    """``WITHIN GROUP ()`` parses with no ORDER BY at all: a refusal that says what to write, not an
    internal error."""
    refused = refusal(f"SELECT {function}(0.5) WITHIN GROUP () FROM visits")
    assert refused.message == "PERCENTILE needs WITHIN GROUP (ORDER BY one column) in ascending order"
