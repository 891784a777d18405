"""The bounded engine query, run on a real DuckDB file: it must cap each person at
max_contributions rows, clamp summed values, and keep only public group keys."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from proxy.analysis.aggregates import AggregateInput
from proxy.analysis.parse import parse_statements
from proxy.analysis.quantities import exact_quantities
from proxy.analysis.statements import PrivateQuery, classify
from proxy.errors import PolicyViolationError
from proxy.query.planning import resolve_group_domains
from proxy.rewrite.bound_contributions import (
    bounded_query,
    contributions_histogram_query,
    distinct_inputs,
    mode_histogram_query,
)
from tests.unit.proxy.policy_fixture import clinic_policy

# patient 1 has 5 visits (max_contributions is 3), patient 2 has 2, patient 3 has 1 with an
# out-of-bounds cost, patient 4 has a visit in a region outside the public domain, patient 5 NULL age.
VISITS = [
    (1, 30, 10.0, "a", "north", "female"),
    (1, 30, 10.0, "a", "north", "female"),
    (1, 30, 10.0, "a", "south", "female"),
    (1, 30, 10.0, "a", "south", "female"),
    (1, 30, 10.0, "a", "south", "female"),
    (2, 60, 20.0, "b", "north", "male"),
    (2, 60, 20.0, "b", "north", "male"),
    (3, 150, 9999.0, "c", "south", "male"),
    (4, 40, 1.0, "d", "west", "male"),
    (5, None, -100.0, "e", "north", "female"),
]


@pytest.fixture
def engine(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect(str(tmp_path / "clinic.duckdb"))
    connection.execute(
        "CREATE TABLE visits (patient_id INTEGER, age INTEGER, cost DOUBLE, note VARCHAR, region VARCHAR, sex VARCHAR)"
    )
    connection.executemany("INSERT INTO visits VALUES (?, ?, ?, ?, ?, ?)", VISITS)
    connection.execute(
        "CREATE TABLE patients AS SELECT * FROM (VALUES (1, 30, 'female'), (2, 60, 'male'), (3, 99, 'male'),"
        " (4, 40, 'male'), (6, 50, 'female')) AS t(patient_id, age, sex)"
    )
    connection.execute(
        "CREATE TABLE zones AS SELECT * FROM (VALUES ('north', 'N'), ('south', 'S'), ('west', 'W'), ('east', 'E'))"
        " AS t(code, zone)"
    )
    return connection


def run(engine: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[object, ...]]:
    (tree,) = parse_statements(sql)
    statement = classify(tree, clinic_policy())
    assert isinstance(statement, PrivateQuery)
    query = bounded_query(statement.shape, exact_quantities(statement.shape), dialect="duckdb")
    return sorted(engine.execute(query.sql(dialect="duckdb")).fetchall(), key=repr)


def test_caps_rows_per_person(engine: duckdb.DuckDBPyConnection) -> None:
    # 3 (capped from 5) + 2 + 1 + 1 + 1
    assert run(engine, "SELECT COUNT(*) FROM visits") == [(8,)]


def test_cap_holds_across_groups(engine: duckdb.DuckDBPyConnection) -> None:
    """Patient 1 keeps 3 rows in total, however they fall between north and south."""
    rows = dict(run(engine, "SELECT region, COUNT(*) FROM visits GROUP BY region"))
    assert set(rows) == {"north", "south"}, "the non-public region 'west' is dropped"
    assert rows["north"] + rows["south"] == 3 + 2 + 1 + 1
    assert 2 + 1 <= rows["north"] <= 2 + 2 + 1


def test_clamps_summed_values(engine: duckdb.DuckDBPyConnection) -> None:
    # 3×10 + 2×20 + 500.5 (clamped from 9999) + 1 + (-50, clamped from -100)
    assert run(engine, "SELECT SUM(cost) FROM visits") == [(30.0 + 40.0 + 500.5 + 1.0 - 50.0,)]


def test_keeps_nulls_out_of_counts(engine: duckdb.DuckDBPyConnection) -> None:
    """Clamping must not turn a NULL age into a bound (LEAST/GREATEST would)."""
    rows = run(engine, "SELECT COUNT(age), SUM(age) FROM visits")
    assert rows == [(7, 3 * 30 + 2 * 60 + 100 + 40)]


def test_where_filters_before_sampling(engine: duckdb.DuckDBPyConnection) -> None:
    assert run(engine, "SELECT COUNT(*) FROM visits WHERE note = 'b'") == [(2,)]


def test_failing_cast_in_where_is_null_not_an_error(engine: duckdb.DuckDBPyConnection) -> None:
    """An error that depends on one row's value would be a side channel; TRY_CAST gives NULL."""
    # no row selected: the weighted total is SQL NULL, which the release treats as 0
    assert run(engine, "SELECT COUNT(*) FROM visits WHERE CAST(note AS INTEGER) = 1") == [(None,)]


def test_row_privacy_unit_has_no_sampling() -> None:
    (tree,) = parse_statements("SELECT COUNT(*) FROM people")
    statement = classify(tree, clinic_policy())
    assert isinstance(statement, PrivateQuery)
    sql = bounded_query(statement.shape, exact_quantities(statement.shape), dialect="duckdb").sql(
        dialect="duckdb"
    )
    assert "ROW_NUMBER" not in sql
    assert "WHERE" not in sql, "each row is one person: nothing to cap"


def test_the_contributions_histogram_cannot_fail_on_one_row_s_value() -> None:
    """The histogram that chooses max_contributions filters rows as the query does, made error-free for
    the engine it runs on: on DuckDB a cost of 1e20 read as PostgreSQL's NUMERIC would fail the query."""
    (tree,) = parse_statements("SELECT COUNT(*) FROM visits WHERE cost * 2 > 1")
    statement = classify(tree, clinic_policy())
    assert isinstance(statement, PrivateQuery)
    sql = contributions_histogram_query(statement.shape, cap=10, dialect="duckdb").sql(dialect="duckdb")
    with duckdb.connect() as connection:
        connection.execute(
            "CREATE TABLE visits AS SELECT * FROM (VALUES (1, 1e20), (1, 5.0), (2, 3.0)) AS t(patient_id, cost)"
        )
        assert sorted(connection.execute(sql).fetchall()) == [
            (1, 1),
            (2, 1),
        ]  # one person with 1 row, one with 2


def test_without_a_privacy_unit_the_mode_histogram_counts_rows_per_public_value() -> None:
    """Each row is one person: no weights, one count per value in the domain (NULL left out)."""
    (tree,) = parse_statements("SELECT MODE() WITHIN GROUP (ORDER BY smoker) FROM people")
    statement = classify(tree, clinic_policy())
    assert isinstance(statement, PrivateQuery)
    shape = statement.shape
    sql = mode_histogram_query(shape, shape.aggregates[0].inputs[0], dialect="duckdb").sql(dialect="duckdb")
    with duckdb.connect() as connection:
        connection.execute(
            "CREATE TABLE people AS SELECT * FROM (VALUES (1.0, true), (2.0, true), (3.0, false), (4.0, NULL))"
            " AS t(income, smoker)"
        )
        assert sorted(connection.execute(sql).fetchall()) == [(False, 1), (True, 2)]


def test_generated_sql_is_deterministic() -> None:
    def build() -> str:
        (tree,) = parse_statements("SELECT sex, AVG(cost) FROM visits WHERE age > 3 GROUP BY sex")
        statement = classify(tree, clinic_policy())
        assert isinstance(statement, PrivateQuery)
        return bounded_query(statement.shape, exact_quantities(statement.shape), dialect="duckdb").sql(
            dialect="duckdb"
        )

    first = build()
    assert first == build()
    assert "_dp_q0" in first and "_dp_q1" in first and "_dp_key_0" in first


row_strategy = st.tuples(
    st.sampled_from(["north", "south", "west", None]),
    st.one_of(st.none(), st.integers(min_value=-20, max_value=150)),
)


def bounded_vectors(rows: list[tuple[int, str | None, int | None]]) -> dict[str, list[float]]:
    """Per-region bounded COUNT(*) and SUM(age) computed by the generated SQL on an in-memory table."""
    connection = duckdb.connect()
    connection.execute(
        "CREATE TABLE visits (patient_id INTEGER, age INTEGER, cost DOUBLE, note VARCHAR, region VARCHAR, sex VARCHAR)"
    )
    if rows:
        connection.executemany(
            "INSERT INTO visits VALUES (?, ?, 1.0, 'n', ?, 'male')",
            [(p, age, region) for p, region, age in rows],
        )
    result = dict.fromkeys(["north", "south"], (0.0, 0.0))
    for region, count, total in run(
        connection, "SELECT region, COUNT(*), SUM(age) FROM visits GROUP BY region"
    ):
        result[str(region)] = (float(count or 0), float(total or 0))
    return {
        "count": [result[r][0] for r in ("north", "south")],
        "sum": [result[r][1] for r in ("north", "south")],
    }


@settings(max_examples=40, deadline=None)
@given(
    others=st.lists(st.tuples(st.integers(min_value=0, max_value=4), row_strategy), max_size=25),
    newcomer=st.lists(row_strategy, min_size=1, max_size=12),
)
def test_one_person_moves_the_bounded_vectors_by_at_most_the_sensitivity(
    others: list[tuple[int, tuple[str | None, int | None]]], newcomer: list[tuple[str | None, int | None]]
) -> None:
    """The privacy proof, checked on data: add one person (id 99) with any rows; the ℓ1 change of the
    count vector is at most L = 3 and of the SUM(age) vector at most L·max(|0|, |100|) = 300."""
    base = [(person, region, age) for person, (region, age) in others]
    with_newcomer = base + [(99, region, age) for region, age in newcomer]
    before, after = bounded_vectors(base), bounded_vectors(with_newcomer)
    count_change = sum(abs(a - b) for a, b in zip(before["count"], after["count"], strict=True))
    sum_change = sum(abs(a - b) for a, b in zip(before["sum"], after["sum"], strict=True))
    assert count_change <= 3 + 1e-9
    assert sum_change <= 300 + 1e-9


def test_expression_aggregates_are_computed_and_clamped_in_the_engine(
    engine: duckdb.DuckDBPyConnection,
) -> None:
    # per person (weights 3/5 for patient 1): CASE is 1 for ages > 50 (patient 2's two rows and
    # patient 3's clamped-from-150 row), so the weighted total is 2 + 1 = 3
    assert run(engine, "SELECT SUM(CASE WHEN age > 50 THEN 1 ELSE 0 END) FROM visits") == [(3.0,)]
    # veil_clamp bounds the unbounded patient_id to [0, 2]: 1·3 (patient 1, weighted) + 2·2 + 2 + 2 + 2
    assert run(engine, "SELECT SUM(veil_clamp(patient_id, 0, 2)) FROM visits") == [(3.0 + 4 + 2 + 2 + 2,)]


def test_per_person_subquery_counts_people_and_averages_their_totals(
    engine: duckdb.DuckDBPyConnection,
) -> None:
    # 5 people with 5, 2, 1, 1, 1 visits; clamped to [0, 3]: 3, 2, 1, 1, 1
    rows = run(
        engine,
        "SELECT COUNT(*), SUM(veil_clamp(n, 0, 3)) FROM (SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY patient_id) p",
    )
    assert rows == [(5, 8)]


def test_join_on_the_privacy_unit_bounds_each_person_across_both_tables(
    engine: duckdb.DuckDBPyConnection,
) -> None:
    """max_contributions 3 (visits) × 1 (patients) = 3 joined rows per person; patient 5 has no
    patients row and patient 6 no visit, so neither appears in the inner join."""
    rows = dict(
        run(
            engine,
            "SELECT p.sex, COUNT(*) FROM visits AS v JOIN patients AS p ON v.patient_id = p.patient_id GROUP BY p.sex",
        )
    )
    # female: patient 1 (5 visits scaled to 3); male: patients 2 (2), 3 (1), 4 (1)
    assert rows == {"female": 3.0, "male": 4.0}


def test_lookup_join_groups_by_the_lookup_tables_values(engine: duckdb.DuckDBPyConnection) -> None:
    (tree,) = parse_statements(
        "SELECT z.zone, COUNT(*) FROM visits v JOIN zones z ON v.region = z.code GROUP BY z.zone"
    )
    statement = classify(tree, clinic_policy())
    assert isinstance(statement, PrivateQuery)

    def execute(sql: str) -> tuple[list[tuple[str, str]], list[tuple[object, ...]]]:
        return [], engine.execute(sql).fetchall()

    shape = resolve_group_domains(statement.shape, execute=execute, dialect="duckdb")
    assert shape.group_keys[0].values == ("E", "N", "S", "W"), (
        "every zone of the public table, with or without rows"
    )
    assert shape.table.max_contributions == 3, "a unique key keeps the private bound"
    query = bounded_query(shape, exact_quantities(shape), dialect="duckdb")
    counts = dict(engine.execute(query.sql(dialect="duckdb")).fetchall())
    # north: patient 1 (2 rows × 3/5) + patient 2 (2) + patient 5 (1); south: 3 × 3/5 + 1; west: 1
    assert counts == pytest.approx({"N": 1.2 + 2 + 1, "S": 1.8 + 1, "W": 1.0})


def test_a_lookup_key_that_is_not_unique_is_refused(engine: duckdb.DuckDBPyConnection) -> None:
    engine.execute("INSERT INTO zones VALUES ('north', 'N2')")
    (tree,) = parse_statements("SELECT COUNT(*) FROM visits v JOIN zones z ON v.region = z.code")
    statement = classify(tree, clinic_policy())
    assert isinstance(statement, PrivateQuery)
    with pytest.raises(PolicyViolationError, match="is not unique"):
        resolve_group_domains(
            statement.shape, execute=lambda sql: ([], engine.execute(sql).fetchall()), dialect="duckdb"
        )


def domain_and_counts(
    engine: duckdb.DuckDBPyConnection, sql: str
) -> tuple[tuple[object, ...], dict[object, float]]:
    (tree,) = parse_statements(sql)
    statement = classify(tree, clinic_policy())
    assert isinstance(statement, PrivateQuery)
    shape = resolve_group_domains(
        statement.shape, execute=lambda sql: ([], engine.execute(sql).fetchall()), dialect="duckdb"
    )
    query = bounded_query(shape, exact_quantities(shape), dialect="duckdb")
    values = shape.group_keys[0].values
    assert values is not None
    return values, dict(engine.execute(query.sql(dialect="duckdb")).fetchall())


def test_an_empty_key_domain_keeps_no_row(engine: duckdb.DuckDBPyConnection) -> None:
    """``IN ()`` is not SQL on PostgreSQL: an empty domain filters with FALSE."""
    assert domain_and_counts(
        engine, "SELECT COUNT(*) FROM visits GROUP BY CASE WHEN age > 100 THEN 'old' END"
    ) == (
        (),
        {},
    )


def test_a_key_no_answer_could_hold_is_left_out_of_the_domain(engine: duckdb.DuckDBPyConnection) -> None:
    """exp(3000) is infinite on DuckDB: no SQL literal, no released key — for every dataset alike."""
    values, counts = domain_and_counts(
        engine, "SELECT COUNT(*) FROM visits GROUP BY CASE WHEN age = 30 THEN EXP(age * 100) ELSE 1 END"
    )
    assert values == (1.0,)
    assert counts == pytest.approx({1.0: 5.0})  # the visits not at age 30; the rest form no released group


def test_one_expression_under_two_clamps_is_two_inputs_each_clamped_by_its_own_bounds(
    engine: duckdb.DuckDBPyConnection,
) -> None:
    """Names of expression inputs digest the bounds too: a sum priced for veil_clamp(age, 0, 1) must
    never read the values clamped to [0, 100] (it once did — the name hashed the expression alone)."""
    rows = run(engine, "SELECT SUM(veil_clamp(age, 0, 1)), SUM(veil_clamp(age, 0, 100)) FROM visits")
    # ages 30 (3 kept), 60, 60, 150 → 100, 40; NULL skipped
    assert rows == [(3 * 1 + 2 * 1 + 1 + 1, 3 * 30 + 2 * 60 + 100 + 40)]


def test_two_inputs_under_one_name_are_refused() -> None:
    narrow = AggregateInput("e_same", exp.column("age"), lower=0.0, upper=1.0)
    wide = AggregateInput("e_same", exp.column("age"), lower=0.0, upper=100.0)
    assert distinct_inputs([narrow, narrow]) == [narrow]
    with pytest.raises(PolicyViolationError, match="cannot be told apart"):
        distinct_inputs([narrow, wide])
    with pytest.raises(PolicyViolationError, match="cannot be told apart"):
        distinct_inputs([narrow, AggregateInput("e_same", exp.column("cost"), lower=0.0, upper=1.0)])


def test_a_per_person_subquerys_distinct_count_is_made_error_free_and_counted(
    engine: duckdb.DuckDBPyConnection,
) -> None:
    """``COUNT(DISTINCT …)`` inside the per-person subquery: its arguments go through the same
    error-free rewrite as any other aggregate's (fresh mutation sample, seed 1142); each person's
    distinct count is the engine's own, clamped to [0, 3]."""
    truth = engine.execute(
        "SELECT COUNT(*), SUM(LEAST(n, 3)) FROM "
        "(SELECT patient_id, COUNT(DISTINCT upper(region)) AS n FROM visits GROUP BY patient_id)"
    ).fetchall()
    rows = run(
        engine,
        "SELECT COUNT(*), SUM(veil_clamp(n, 0, 3)) FROM (SELECT patient_id, COUNT(DISTINCT upper(region)) AS n"
        " FROM visits GROUP BY patient_id) p",
    )
    assert rows == truth and truth[0][0] == 5


def test_a_per_person_subquerys_aggregate_argument_cannot_fail_on_one_row(
    engine: duckdb.DuckDBPyConnection,
) -> None:
    """A per-person SUM over a cast that fails on some rows' text ('e' is no integer) must not raise:
    whether the query fails would tell what one person's rows hold. The argument goes through the
    error-free rewrite (TRY_CAST), so the failing rows count as NULL (fresh mutation sample, seed 1143)."""
    sql = (
        "SELECT COUNT(*), SUM(veil_clamp(s, 0, 3)) FROM (SELECT patient_id, SUM(CAST(note AS INTEGER)) AS s"
        " FROM visits GROUP BY patient_id) p"
    )
    with pytest.raises(duckdb.ConversionException):  # the analyst's SQL as written does fail in the engine
        engine.execute(sql.replace("veil_clamp(s, 0, 3)", "s")).fetchall()
    assert run(engine, sql) == [(5, None)]
