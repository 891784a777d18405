"""The engine queries of rewrite/bound_contributions.py, run on DuckDB: what the DP choices and the
bounded aggregates read. Pinned by the survivors of a sampled mutation run of proxy/rewrite/ (seed 2102,
docs/testing.md)."""

from __future__ import annotations

import dataclasses

import duckdb
import pytest

from proxy.analysis.parse import parse_statements
from proxy.analysis.quantities import exact_quantities
from proxy.analysis.statements import PrivateQuery, classify
from proxy.query.planning import Execute
from proxy.rewrite.bound_contributions import bounded_query, value_histogram_query
from tests.unit.proxy.policy_fixture import clinic_policy
from tests.unit.proxy.test_bound_contributions import run
from tests.unit.proxy.test_per_person_values import PER_PATIENT, engine, shape_of

__all__ = ["engine"]  # the fixture, shared with test_per_person_values


def test_the_value_histogram_counts_values_above_the_cap_as_the_cap(engine: Execute) -> None:
    """``dp_contribution_bound`` is told "counts above the cap reported as the cap": the 40 patients with 4
    visits, the 40 with 5 and the one with 60 all fall in the cap's cell (one person is still one count)."""
    shape = shape_of(f"SELECT AVG(n) {PER_PATIENT}")
    (bound,) = shape.value_bounds
    capped = dataclasses.replace(bound, cap=4)
    rows = engine(value_histogram_query(shape, capped, dialect="duckdb").sql(dialect="duckdb"))[1]
    assert dict(rows) == {1: 40, 2: 40, 3: 40, 4: 40 + 40 + 1}


def visits(rows: list[tuple[int, str]]) -> duckdb.DuckDBPyConnection:
    """The clinic's visits table with (patient_id, note) rows; the other columns fixed."""
    connection = duckdb.connect()
    connection.execute(
        "CREATE TABLE visits (patient_id INTEGER, age INTEGER, cost DOUBLE, note VARCHAR, region VARCHAR, sex VARCHAR)"
    )
    connection.executemany("INSERT INTO visits VALUES (?, 30, 1.0, ?, 'north', 'male')", rows)
    return connection


def test_a_person_adds_at_most_max_contributions_keys_read_from_the_data() -> None:
    """``note`` has no public domain: its keys come from the data, and the threshold's δ is calibrated
    for one person adding at most L = 3 of them. Patient 1 has a row under each of five notes: only the
    first three (by key) keep them; 'd' has no one left, and 'e' only patient 2."""
    connection = visits([(1, "a"), (1, "b"), (1, "c"), (1, "d"), (1, "e"), (2, "e")])
    rows = run(connection, "SELECT note, COUNT(*) FROM visits GROUP BY note")
    # (key, bounded COUNT(*), weighted number of people: what the threshold reads)
    assert rows == [("a", 1.0, 1.0), ("b", 1.0, 1.0), ("c", 1.0, 1.0), ("e", 1.0, 1.0)]


def test_a_table_whose_rows_are_people_counts_each_group_apart() -> None:
    """Without a privacy unit there is nothing to bound: a plain GROUP BY, one count per public key."""
    connection = duckdb.connect()
    connection.execute(
        "CREATE TABLE people AS SELECT * FROM (VALUES (1.0, true), (2.0, true), (3.0, false), (4.0, NULL))"
        " AS t(income, smoker)"
    )
    assert run(connection, "SELECT smoker, COUNT(*) FROM people GROUP BY smoker") == [(False, 1), (True, 2)]


@pytest.mark.parametrize(
    ("sql", "total"),
    [
        ("SELECT COUNT(*) FROM visits", "_dp_rows"),
        ("SELECT region, COUNT(*) FROM visits GROUP BY region", "_dp_person_rows"),
    ],
)
def test_on_spark_the_contribution_weight_is_double_arithmetic(sql: str, total: str) -> None:
    """``L / N_u`` on Spark: with the total read as DOUBLE, not Spark's DECIMAL division of the literal
    (a decimal(23,22) weight, rounded half up, and the bounded query 1.9× slower — docs/benchmarks.md)."""
    (tree,) = parse_statements(sql)
    statement = classify(tree, clinic_policy())
    assert isinstance(statement, PrivateQuery)
    spark = bounded_query(statement.shape, exact_quantities(statement.shape), dialect="spark").sql(
        dialect="spark"
    )
    weight = f"CASE WHEN CAST({total} AS DOUBLE) <= 3.0 THEN 1.0 ELSE 3.0 / CAST({total} AS DOUBLE) END"
    assert f"SUM(_dp_rows * {weight}) AS _dp_q0" in spark
