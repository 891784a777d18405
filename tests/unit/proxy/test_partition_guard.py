"""The engine side of parallel composition, run on a real DuckDB file: a pinned query reads only people
all of whose rows hold one value of the partition column — so adding one person, whatever their rows,
changes only answers charged to one value."""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.analysis.parse import parse_statements
from proxy.analysis.quantities import exact_quantities
from proxy.analysis.statements import PrivateQuery, classify
from proxy.config import DatasetPolicy, parse_config
from proxy.rewrite.bound_contributions import bounded_query

POLICY = """
[datasets.clinic]
path = "clinic.duckdb"

[datasets.clinic.tables.visits]
privacy_unit = "patient_id"
max_contributions = 3

[datasets.clinic.tables.visits.columns]
patient_id = { type = "integer" }
region = { type = "text", public = true, values = ["north", "south", "east"], partition = true }
cost = { type = "real", lower = 0, upper = 100 }

[datasets.clinic.tables.people]
privacy_unit = "row"

[datasets.clinic.tables.people.columns]
region = { type = "text", public = true, values = ["north", "south", "east"], partition = true }
"""
REGIONS = ("north", "south", "east")
# Patients 1 and 2 live in the north, 3 in the south; 4 moved (rows in both), 5 has a NULL row, and a
# row without a patient is in the north.
VISITS = [
    (1, "north", 10.0),
    (1, "north", 20.0),
    (2, "north", 5.0),
    (3, "south", 7.0),
    (4, "north", 1.0),
    (4, "south", 1.0),
    (5, "south", 2.0),
    (5, None, 2.0),
    (None, "north", 3.0),
]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> DatasetPolicy:
    policy = parse_config(POLICY, path=tmp_path_factory.mktemp("guard") / "veil.toml").dataset("clinic")
    assert policy is not None
    return policy


def engine_with(rows: list[tuple[int | None, str | None, float]]) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect()
    connection.execute("CREATE TABLE visits (patient_id INTEGER, region VARCHAR, cost DOUBLE)")
    if rows:
        connection.executemany("INSERT INTO visits VALUES (?, ?, ?)", rows)
    connection.execute("CREATE TABLE people AS SELECT region FROM visits")
    return connection


def answer(engine: duckdb.DuckDBPyConnection, dataset: DatasetPolicy, sql: str) -> tuple[object, ...]:
    (tree,) = parse_statements(sql)
    statement = classify(tree, dataset)
    assert isinstance(statement, PrivateQuery)
    query = bounded_query(statement.shape, exact_quantities(statement.shape), dialect="duckdb")
    (row,) = engine.execute(query.sql(dialect="duckdb")).fetchall()
    return tuple(row)


def test_a_pinned_count_keeps_only_people_whose_rows_all_hold_the_value(dataset: DatasetPolicy) -> None:
    engine = engine_with(VISITS)
    assert answer(engine, dataset, "SELECT COUNT(*) FROM visits WHERE region = 'north'") == (3,)  # 1, 1, 2
    assert answer(engine, dataset, "SELECT COUNT(*) FROM visits WHERE region = 'south'") == (1,)  # 3
    assert answer(engine, dataset, "SELECT SUM(cost) FROM visits WHERE region IN ('north', 'south')") == (
        42.0,
    )


def test_an_ordinary_count_keeps_everyone(dataset: DatasetPolicy) -> None:
    engine = engine_with(VISITS)
    assert answer(engine, dataset, "SELECT COUNT(*) FROM visits WHERE region <> 'east'") == (
        8,
    )  # the row without a patient too


def test_a_table_whose_rows_are_people_needs_no_guard(dataset: DatasetPolicy) -> None:
    engine = engine_with(VISITS)
    assert answer(engine, dataset, "SELECT COUNT(*) FROM people WHERE region = 'north'") == (5,)


QUERIES = {
    **{(region,): f"SELECT COUNT(*), SUM(cost) FROM visits WHERE region = '{region}'" for region in REGIONS},
    ("north", "south"): "SELECT COUNT(*) FROM visits WHERE region IN ('south', 'north') AND cost > 1",
    ("east",): "SELECT COUNT(*) FROM visits WHERE cost >= 0 AND (region = 'east')",
}
row = st.tuples(
    st.one_of(st.none(), st.integers(1, 6)),
    st.one_of(st.none(), st.sampled_from([*REGIONS, "west", "North"])),
    st.floats(0, 100, allow_nan=False),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.lists(row, max_size=12),
    person=st.lists(
        st.tuples(st.one_of(st.none(), st.sampled_from([*REGIONS, "west", "North"])), st.floats(0, 100)),
        min_size=1,
        max_size=5,
    ),
)
def test_one_more_person_changes_only_answers_charged_to_one_value(
    dataset: DatasetPolicy,
    data: list[tuple[int | None, str | None, float]],
    person: list[tuple[str | None, float]],
) -> None:
    """Whatever rows the new person (patient 99) has — several regions, NULL, values outside the
    domain — every pinned answer that moves is charged to one common value: the ledger, charging each
    value apart, then charges that person for all of them."""
    before = engine_with(data)
    after = engine_with(data + [(99, region, cost) for region, cost in person])
    moved = [
        set(values)
        for values, sql in QUERIES.items()
        if answer(before, dataset, sql) != answer(after, dataset, sql)
    ]
    if moved:
        assert set.intersection(*moved), f"one person moved answers charged to disjoint values: {moved}"
