"""The weights of the bounded engine query (proxy/rewrite/bound_contributions.py): a filtered count of
people per group is a number, 0 where nobody matches; the per-person total is cast to DOUBLE on Spark only."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from proxy.analysis.parse import parse_statements
from proxy.analysis.quantities import exact_quantities
from proxy.analysis.shape import QueryShape
from proxy.analysis.statements import PrivateQuery, classify
from proxy.rewrite.bound_contributions import bounded_query
from tests.unit.proxy.policy_fixture import clinic_policy

# patient 1: two visits north, one south (note 'a'); patient 2: two visits north (note 'b');
# patient 3: one visit south (note 'c')
VISITS = [
    (1, 30, 10.0, "a", "north", "female"),
    (1, 30, 10.0, "a", "north", "female"),
    (1, 30, 10.0, "a", "south", "female"),
    (2, 60, 20.0, "b", "north", "male"),
    (2, 60, 20.0, "b", "north", "male"),
    (3, 70, 30.0, "c", "south", "male"),
]


def shape_of(sql: str) -> QueryShape:
    (tree,) = parse_statements(sql)
    statement = classify(tree, clinic_policy())
    assert isinstance(statement, PrivateQuery)
    return statement.shape


@pytest.fixture
def engine(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect(str(tmp_path / "clinic.duckdb"))
    connection.execute(
        "CREATE TABLE visits (patient_id INTEGER, age INTEGER, cost DOUBLE, note VARCHAR, region VARCHAR, sex VARCHAR)"
    )
    connection.executemany("INSERT INTO visits VALUES (?, ?, ?, ?, ?, ?)", VISITS)
    return connection


def test_a_filtered_count_of_people_is_zero_in_a_group_where_nobody_matches(
    engine: duckdb.DuckDBPyConnection,
) -> None:
    """``COUNT(DISTINCT patient_id) FILTER (WHERE note = 'b')`` per region sums each person's group weight
    over the people with a matching row. In south (patients 1 and 3, neither with note 'b') nobody
    matches: the engine must say 0 — a number, as for every other group — not the NULL that a SUM over a
    CASE without ELSE gives when no row takes its branch. (The release reads NULL as 0 today, so the noisy
    answer alone cannot tell; this checks the engine query's own contract.)"""
    shape = shape_of(
        "SELECT region, COUNT(DISTINCT patient_id) FILTER (WHERE note = 'b') FROM visits GROUP BY region"
    )
    sql = bounded_query(shape, exact_quantities(shape), dialect="duckdb").sql(dialect="duckdb")
    rows = dict(engine.execute(sql).fetchall())
    # north: patient 2 alone matches, in one group (weight 1); patient 1 has no 'b' row
    assert rows == {"north": 1, "south": 0}


def weight_sql(dialect: str) -> str:
    shape = shape_of("SELECT region, COUNT(*) FROM visits GROUP BY region")
    return bounded_query(shape, exact_quantities(shape), dialect=dialect).sql(dialect=dialect)


@pytest.mark.parametrize("dialect", ["duckdb", "postgres"])
def test_the_row_weight_reads_the_total_as_it_is_outside_spark(dialect: str) -> None:
    """``min(1, L / total)`` with L = 3 on DuckDB and PostgreSQL: the total as the engine summed it. A cast
    to DOUBLE there is no error, only slower — the bounded query took 1.9× as long on DuckDB (the
    docstring of ``_weight``, docs/benchmarks.md) — so only the SQL text can tell."""
    sql = weight_sql(dialect)
    assert "CASE WHEN _dp_person_rows <= 3.0 THEN 1.0 ELSE " in sql
    assert "CAST(_dp_person_rows" not in sql  # (sqlglot writes PostgreSQL's 3.0 / x as CAST(3.0 AS …) / x)


def test_the_row_weight_reads_the_total_as_double_on_spark() -> None:
    """On Spark, ``3.0 / total`` would be DECIMAL arithmetic (the literal is a DECIMAL): the total is read
    as DOUBLE on both sides of the CASE."""
    sql = weight_sql("spark")
    assert (
        "CASE WHEN CAST(_dp_person_rows AS DOUBLE) <= 3.0 THEN 1.0 ELSE 3.0 / CAST(_dp_person_rows AS DOUBLE) END"
        in sql
    )
