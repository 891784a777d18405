"""proxy/query/planning.py pinned where ``make mutants`` found it loose (docs/testing.md, issue 21): the
refusals an analyst reads before any engine query (with the fix each one names), the ε a query may
spend, how engine keys are typed into the public cells, and what each planning step asks the engine."""

from __future__ import annotations

import datetime
import math
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest

from proxy.analysis.parse import parse_statements
from proxy.analysis.shape import QueryShape
from proxy.analysis.statements import PrivateQuery, classify
from proxy.config import ColumnType, DatasetPolicy, parse_config
from proxy.errors import InvalidParameterValueError, PolicyViolationError, UnsupportedQueryError
from proxy.query import planning
from proxy.query.planning import prepare_release, resolve_group_domains
from tests.unit.proxy.policy_fixture import clinic_policy

POLICY = """
[datasets.lab]
path = "lab.duckdb"

[datasets.lab.tables.m]
privacy_unit = "pid"
max_contributions = 2

[datasets.lab.tables.m.columns]
pid = { type = "integer" }
undated = { type = "date" }
stamp = { type = "timestamp" }
free = { type = "integer" }
label = { type = "text" }
"""

THRESHOLD_HINT = (
    "SET veil.delta = 1e-6 (for example) to release only keys that enough people share (τ-thresholding); "
    "it is paid from a δ grant (an administrator adds one: veil budget grant ANALYST DATASET EPSILON --delta 1e-5)"
)


def lab() -> DatasetPolicy:
    dataset = parse_config(POLICY, path=Path("/nonexistent/veil.toml")).dataset("lab")
    assert dataset is not None
    return dataset


def shape_of(sql: str, dataset: DatasetPolicy | None = None) -> QueryShape:
    (tree,) = parse_statements(sql)
    statement = classify(tree, dataset or lab())
    assert isinstance(statement, PrivateQuery)
    return statement.shape


# -- keys from the data without δ: refused, with the policy's fix for the key's type --------------------


@pytest.mark.parametrize(
    ("key", "column", "fix"),
    [
        (
            "undated",
            "undated",
            "declare lower and upper dates for undated in the policy (e.g. lower = 2024-01-01, upper = "
            "2025-12-31, at most 100,000 days apart): its days, and date_trunc or EXTRACT of it, then have "
            "public keys",
        ),
        (
            "stamp",
            "stamp",
            "group by a day or longer of stamp — date_trunc('day', stamp) (or 'week', 'month', 'year'…), "
            "EXTRACT(year FROM stamp) (or month, day, dow…) or CAST(stamp AS DATE) — and declare lower and "
            "upper timestamps for stamp in the policy (e.g. lower = 2024-01-01T00:00:00, upper = "
            "2025-12-31T23:59:59, at most 100,000 days apart): those keys are then public; a timestamp "
            "itself, its hour, minute or second has no public domain",
        ),
        # an integer column itself needs its values listed; bounds alone give only expressions of it
        ("free", "free", "declare free public with its values in the policy"),
        ("free % 3", "free", "declare lower and upper for free in the policy"),
        ("label", "label", "declare label public with its values in the policy"),
        ("upper(label)", "label", "declare label public with its values in the policy"),
    ],
)
def test_private_keys_without_delta_are_refused_with_the_whole_hint(key: str, column: str, fix: str) -> None:
    """The message, its detail and its hint word for word: the policy's fix for the key's type first
    (it costs no δ), then τ-thresholding."""
    shape = shape_of(f"SELECT {key}, COUNT(*) FROM m GROUP BY 1")
    assert shape.thresholded
    with pytest.raises(PolicyViolationError) as refused:
        prepare_release(shape, epsilon=1.0, dialect="duckdb")
    label = shape.group_keys[0].label
    assert str(refused.value) == f"GROUP BY {label}: the keys are not public"
    assert refused.value.detail == (
        f'"{column}" is private and has no public value list, so its keys would come from the data'
    )
    assert refused.value.hint == f"{fix}; or {THRESHOLD_HINT}"


def test_the_refusal_names_the_private_key_not_the_public_one_beside_it() -> None:
    shape = shape_of("SELECT region, note, COUNT(*) FROM visits GROUP BY region, note", clinic_policy())
    with pytest.raises(PolicyViolationError) as refused:
        prepare_release(shape, epsilon=1.0, dialect="duckdb")
    assert str(refused.value) == "GROUP BY note: the keys are not public"
    assert refused.value.hint == f"declare note public with its values in the policy; or {THRESHOLD_HINT}"


# -- lookup tables: their values are read in the engine's dialect ------------------------------------------

LOOKUP_POLICY = """
[datasets.shop]
path = "shop.duckdb"

[datasets.shop.tables.m]
privacy_unit = "pid"
max_contributions = 2

[datasets.shop.tables.m.columns]
pid = { type = "integer" }
code = { type = "text" }

[datasets.shop.tables.zones]
public = true
key = "order"

[datasets.shop.tables.zones.columns]
order = { type = "text" }
end = { type = "text" }
"""

LOOKUP_QUERY = 'SELECT z."end", COUNT(*) FROM m JOIN zones z ON m.code = z."order" GROUP BY z."end"'


def shop() -> DatasetPolicy:
    dataset = parse_config(LOOKUP_POLICY, path=Path("/nonexistent/veil.toml")).dataset("shop")
    assert dataset is not None
    return dataset


def zones_engine(rows: list[tuple[str, str | None]]) -> duckdb.DuckDBPyConnection:
    engine = duckdb.connect()
    engine.execute('CREATE TABLE zones ("order" TEXT, "end" TEXT)')
    engine.executemany("INSERT INTO zones VALUES (?, ?)", rows)
    return engine


def test_a_lookup_column_named_by_a_keyword_is_quoted_for_the_engine() -> None:
    """A lookup table whose key and value columns are SQL keywords ("order", "end"): the uniqueness check
    and the value list must be written in the engine's dialect, which quotes them — sqlglot's generic
    SQL leaves them bare, a syntax error in DuckDB and PostgreSQL. The NULL value is no key."""
    engine = zones_engine([("a", "x"), ("b", "y"), ("c", None), ("d", "x")])
    asked: list[str] = []

    def execute(sql: str) -> tuple[list[tuple[str, str]], list[tuple[Any, ...]]]:
        asked.append(sql)
        return [], engine.execute(sql).fetchall()

    shape = resolve_group_domains(shape_of(LOOKUP_QUERY, shop()), execute=execute, dialect="duckdb")
    (key,) = shape.group_keys
    assert key.values == ("x", "y") and key.type is ColumnType.TEXT
    assert asked == [
        'SELECT COUNT(*) - COUNT(DISTINCT "order") FROM zones',
        'SELECT DISTINCT "end" FROM zones',
    ]


def test_a_lookup_key_named_by_a_keyword_that_repeats_is_refused() -> None:
    engine = zones_engine([("a", "x"), ("a", "y")])
    with pytest.raises(PolicyViolationError) as refused:
        resolve_group_domains(
            shape_of(LOOKUP_QUERY, shop()),
            execute=lambda sql: ([], engine.execute(sql).fetchall()),
            dialect="duckdb",
        )
    assert str(refused.value) == 'the key "order" of lookup table "zones" is not unique'
    assert refused.value.hint == "fix the lookup table, or declare a unique key column in the policy"


# -- key types -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "whole"),
    [
        (3, True),
        (-3.0, True),
        (Decimal("2024"), True),
        (3.5, False),
        (Decimal("NaN"), False),
        (math.inf, False),
        (10**400, False),  # does not convert to a float (OverflowError)
        ("x", False),  # ValueError
        (None, False),  # TypeError
        (datetime.date(2024, 1, 1), False),
    ],
)
def test_only_numbers_with_no_fraction_are_whole(value: object, whole: bool) -> None:
    """What decides that an integer-typed key's values are integers: anything that is not a finite
    number without a fraction is not."""
    assert planning._whole_number(value) is whole


# -- max_contributions = "auto": the choice is anchored at the policy's hint -----------------------------

HINTED = """
[datasets.hinted]
path = "hinted.duckdb"

[datasets.hinted.tables.ratings]
privacy_unit = "user_id"
max_contributions = "auto"
contribution_cap = 100
contribution_hint = 48

[datasets.hinted.tables.ratings.columns]
user_id = { type = "integer" }
stars = { type = "integer", lower = 1, upper = 5 }
"""


def _hinted(hint: bool = True) -> DatasetPolicy:
    policy = HINTED if hint else HINTED.replace("contribution_hint = 48\n", "")
    dataset = parse_config(policy, path=Path("/nonexistent/veil.toml")).dataset("hinted")
    assert dataset is not None
    return dataset


@pytest.mark.parametrize("hinted", [True, False])
def test_without_rows_the_contribution_bound_is_the_policys_hint(hinted: bool) -> None:
    """No person has a row: every candidate L fits the data equally, so the prior decides — the
    candidate at the policy's contribution_hint (48), else the smallest (1). The selection's ε is 40
    (a tenth of 400) and each grid step from the anchor costs one rank, so another candidate is accepted
    with probability at most 2·Σ e^(−40k/2) < 5e-9 per draw (permute-and-flip)."""
    shape = shape_of("SELECT COUNT(*) FROM ratings", _hinted(hinted))
    epsilon = 400.0
    plan, _ = prepare_release(
        shape, epsilon=epsilon, dialect="duckdb", bound_epsilon=planning.bound_choice_epsilon(shape, epsilon)
    )
    assert plan.bound_epsilon == 40.0
    engine = duckdb.connect()
    engine.execute("CREATE TABLE ratings (user_id INTEGER, stars INTEGER)")
    asked: list[str] = []

    def execute(sql: str) -> tuple[list[tuple[str, str]], list[tuple[Any, ...]]]:
        asked.append(sql)
        return [], engine.execute(sql).fetchall()

    bound = planning.choose_contribution_bound(plan, execute=execute, dialect="duckdb", rng=random.Random(3))
    assert bound == (48 if hinted else 1)
    assert asked == [planning.bound_histogram_sql(plan, "duckdb")]


def test_the_people_per_row_count_histogram_filters_as_the_engine_reads_it() -> None:
    """The histogram the choice of L reads counts each person's rows under the query's WHERE, written
    for the engine: an integer column cast to text reads '3' (sqlglot's generic SQL widens it to a
    DECIMAL first, '3.000' on DuckDB, and no row would match). Person 1 has one row with 3 stars,
    person 2 three, person 3 none."""
    shape = shape_of("SELECT COUNT(*) FROM ratings WHERE CAST(stars AS TEXT) = '3'", _hinted())
    plan, _ = prepare_release(shape, epsilon=1.0, dialect="duckdb", bound_epsilon=0.1)
    engine = duckdb.connect()
    engine.execute("CREATE TABLE ratings (user_id INTEGER, stars INTEGER)")
    engine.executemany(
        "INSERT INTO ratings VALUES (?, ?)", [(1, 2), (1, 3), (1, 4), (1, 5), (2, 3), (2, 3), (2, 3), (3, 5)]
    )
    histogram = dict(engine.execute(planning.bound_histogram_sql(plan, "duckdb")).fetchall())
    assert histogram == {1: 1, 3: 1}


# -- the ε one query may spend -------------------------------------------------------------------------

BOUNDED_EPSILON = """
[datasets.lab]
path = "lab.duckdb"
default_epsilon = 0.5
min_epsilon = 0.25
max_epsilon = 2.0

[datasets.lab.tables.m]
privacy_unit = "pid"
max_contributions = 2

[datasets.lab.tables.m.columns]
pid = { type = "integer" }
"""


def bounded_epsilon() -> DatasetPolicy:
    dataset = parse_config(BOUNDED_EPSILON, path=Path("/nonexistent/veil.toml")).dataset("lab")
    assert dataset is not None
    return dataset


@pytest.mark.parametrize(("chosen", "epsilon"), [(None, 0.5), (0.25, 0.25), (1.0, 1.0), (2.0, 2.0)])
def test_epsilon_is_the_sessions_or_the_default_within_both_limits_inclusive(
    chosen: float | None, epsilon: float
) -> None:
    assert planning.checked_epsilon(bounded_epsilon(), chosen) == epsilon


def test_epsilon_below_the_floor_is_refused_with_why_and_the_fix() -> None:
    with pytest.raises(InvalidParameterValueError) as refused:
        planning.checked_epsilon(bounded_epsilon(), math.nextafter(0.25, 0.0))
    assert str(refused.value) == "veil.epsilon = 0.25 is below this dataset's min_epsilon of 0.25"
    assert (
        refused.value.detail == "every answer costs at least min_epsilon, so that nothing it reveals is free"
    )
    assert refused.value.hint == "SET veil.epsilon to at least 0.25"


def test_epsilon_above_the_cap_is_refused_with_the_fix() -> None:
    with pytest.raises(InvalidParameterValueError) as refused:
        planning.checked_epsilon(bounded_epsilon(), 2.5)
    assert str(refused.value) == "veil.epsilon = 2.5 exceeds this dataset's max_epsilon of 2"
    assert refused.value.detail is None
    assert refused.value.hint == "SET veil.epsilon to at most 2"


# -- a mode's values are typed as their column before they are looked up ----------------------------------

DATED = """
[datasets.lab]
path = "lab.duckdb"

[datasets.lab.tables.m]
privacy_unit = "pid"
max_contributions = 2

[datasets.lab.tables.m.columns]
pid = { type = "integer" }
day = { type = "date", public = true, values = [2024-01-01, 2024-06-01] }
"""


def test_a_mode_of_a_date_the_engine_holds_as_a_timestamp_finds_its_public_values() -> None:
    """The engine's column is a TIMESTAMP at midnight; the policy's values are dates. A datetime is
    never equal to a date in Python, so each value must be typed as the column (a date) before its
    place in the histogram is looked up — else every row is dropped and the mode is noise alone.
    Weights: K = 2,520 per row of a person with at most L = 2 rows (rewrite/bound_contributions.py)."""
    dataset = parse_config(DATED, path=Path("/nonexistent/veil.toml")).dataset("lab")
    assert dataset is not None
    plan, sql = prepare_release(
        shape_of("SELECT MODE() WITHIN GROUP (ORDER BY day) FROM m", dataset), epsilon=1.0, dialect="duckdb"
    )
    assert sql is None
    engine = duckdb.connect()
    engine.execute("CREATE TABLE m (pid INTEGER, day TIMESTAMP)")
    engine.execute(
        "INSERT INTO m VALUES (1, '2024-06-01'), (2, '2024-06-01'), (3, '2024-01-01'), (4, '2024-03-01')"
    )
    histograms = planning.collect_histograms(
        plan, execute=lambda text: ([], engine.execute(text).fetchall()), dialect="duckdb"
    )
    assert histograms == {"mode(day)": {(): [2520, 2 * 2520]}}


# -- key types from the expression and the values -----------------------------------------------------------

INTEGER_LOOKUP = """
[datasets.shop]
path = "shop.duckdb"

[datasets.shop.tables.m]
privacy_unit = "pid"
max_contributions = 2

[datasets.shop.tables.m.columns]
pid = { type = "integer" }
code = { type = "text" }

[datasets.shop.tables.zones]
public = true
key = "code"

[datasets.shop.tables.zones.columns]
code = { type = "text" }
floor = { type = "integer" }
"""


def test_an_integer_lookup_column_without_values_stays_integer() -> None:
    """An empty lookup table gives no key; the column is still an integer (from its expression), not
    the real a value-less key of unknown type falls back to."""
    dataset = parse_config(INTEGER_LOOKUP, path=Path("/nonexistent/veil.toml")).dataset("shop")
    assert dataset is not None
    engine = duckdb.connect()
    engine.execute("CREATE TABLE zones (code TEXT, floor INTEGER)")
    shape = shape_of("SELECT z.floor, COUNT(*) FROM m JOIN zones z ON m.code = z.code GROUP BY 1", dataset)
    resolved = resolve_group_domains(
        shape, execute=lambda sql: ([], engine.execute(sql).fetchall()), dialect="duckdb"
    )
    (key,) = resolved.group_keys
    assert (key.values, key.type) == ((), ColumnType.INTEGER)


def test_an_integer_typed_key_with_a_fraction_among_its_values_is_real() -> None:
    """``CASE … THEN 1 ELSE 0.5 END`` is typed integer by the analysis, but not every value is whole:
    its keys are reals, 0.5 and 1.0 — as integers 0.5 would become the key 0."""
    engine = duckdb.connect()
    sql = "SELECT CASE WHEN age > 50 THEN 1 ELSE 0.5 END AS k, COUNT(*) FROM visits GROUP BY 1"
    shape = shape_of(sql, clinic_policy())
    assert shape.group_keys[0].type is ColumnType.INTEGER
    resolved = resolve_group_domains(
        shape, execute=lambda sql: ([], engine.execute(sql).fetchall()), dialect="duckdb"
    )
    (key,) = resolved.group_keys
    assert key.type is ColumnType.REAL and key.values == (0.5, 1.0)
    assert all(type(value) is float for value in key.values)


def test_engine_rows_whose_real_key_is_not_finite_are_dropped_and_null_keys_kept() -> None:
    """A key the engine computed as ∞ or NaN cannot be written back as a public cell: its row is dropped
    before any threshold, whoever's it is. A NULL key is a key (SQL groups NULLs together)."""
    engine = duckdb.connect()
    sql = "SELECT age / 2.0 AS k, COUNT(*) FROM visits GROUP BY 1"
    shape = resolve_group_domains(
        shape_of(sql, clinic_policy()),
        execute=lambda sql: ([], engine.execute(sql).fetchall()),
        dialect="duckdb",
    )
    assert shape.group_keys[0].type is ColumnType.REAL
    plan, _ = prepare_release(shape, epsilon=1.0, dialect="duckdb")
    rows: list[tuple[Any, ...]] = [
        (math.inf, 1),
        (Decimal("2.5"), 2),
        (math.nan, 3),
        (None, 4),
        (Decimal("-Infinity"), 5),
        (3, 6),
    ]
    assert planning.typed_key_rows(plan, rows) == [(2.5, 2), (None, 4), (3.0, 6)]


# -- refusals of prepare_release, before any engine query -------------------------------------------------


def test_gaussian_noise_without_delta_is_refused_with_both_fixes() -> None:
    shape = shape_of("SELECT region, COUNT(*) FROM visits GROUP BY region", clinic_policy())
    for delta in (0.0, -1e-6):
        with pytest.raises(InvalidParameterValueError) as refused:
            prepare_release(shape, epsilon=1.0, dialect="duckdb", delta=delta, gaussian=True)
        assert str(refused.value) == "veil.mechanism = gaussian needs veil.delta > 0"
        assert refused.value.hint == "SET veil.delta = 1e-6, or SET veil.mechanism = laplace"
    plan, _ = prepare_release(shape, epsilon=1.0, dialect="duckdb", delta=1e-6, gaussian=True)
    assert plan.delta == 1e-6


def test_public_keys_under_laplace_spend_no_delta_whatever_the_session_offers() -> None:
    """δ is spent only by keys from the data (τ) or Gaussian noise; a Laplace plan over public keys
    carries δ = 0 even when the session set veil.delta, so the ledger charges none."""
    shape = shape_of("SELECT region, COUNT(*) FROM visits GROUP BY region", clinic_policy())
    plan, _ = prepare_release(shape, epsilon=1.0, dialect="duckdb", delta=1e-6)
    assert plan.delta == 0.0
    thresholded = shape_of("SELECT note, COUNT(*) FROM visits GROUP BY note", clinic_policy())
    plan, _ = prepare_release(thresholded, epsilon=1.0, dialect="duckdb", delta=1e-6)
    assert plan.delta == 1e-6


def test_the_cell_limit_is_inclusive(monkeypatch: pytest.MonkeyPatch) -> None:
    """region × sex: 4 public cells, answered at a limit of 4, refused at 3 (the limit lowered for the
    test; test_dates_and_pairs.py checks the message at a larger count)."""
    shape = shape_of("SELECT region, sex, COUNT(*) FROM visits GROUP BY region, sex", clinic_policy())
    assert shape.cells == 4
    monkeypatch.setattr(planning, "MAX_GROUP_CELLS", 4)
    plan, sql = prepare_release(shape, epsilon=1.0, dialect="duckdb")
    assert sql is not None and plan.shape.cells == 4
    monkeypatch.setattr(planning, "MAX_GROUP_CELLS", 3)
    with pytest.raises(UnsupportedQueryError) as refused:
        prepare_release(shape, epsilon=1.0, dialect="duckdb")
    assert str(refused.value) == "the GROUP BY has 4 public cells; at most 3 are answered"


TOP_PER_REGION = (
    "SELECT region, sex, n FROM (SELECT region, sex, COUNT(*) AS n, ROW_NUMBER() OVER"
    " (PARTITION BY region ORDER BY COUNT(*) DESC, sex) AS r FROM visits GROUP BY region, sex)"
    " AS ranked WHERE r <= 1 ORDER BY region, r"
)


def test_an_other_row_for_a_top_k_per_partition_is_refused() -> None:
    shape = shape_of(TOP_PER_REGION, clinic_policy())
    assert shape.top_k is not None and shape.top_k.partition
    with pytest.raises(UnsupportedQueryError) as refused:
        prepare_release(shape, epsilon=1.0, dialect="duckdb", other_row=True)
    assert str(refused.value) == "veil.other_row does not apply to a top k per partition"
    assert refused.value.hint == "SET veil.other_row = off"
    _, sql = prepare_release(shape, epsilon=1.0, dialect="duckdb")
    assert sql is not None


def test_an_expression_of_an_empty_lookup_tables_column_has_no_keys() -> None:
    """An empty lookup table: the column itself has no keys, and neither has an expression of it (it is
    evaluated over no values). The engine is not asked to evaluate it over an empty VALUES list, which
    is no SQL at all: the query failed with "the database engine could not run the query" (a bug found
    while writing these tests), while ``GROUP BY z.floor`` answered an empty table."""
    dataset = parse_config(INTEGER_LOOKUP, path=Path("/nonexistent/veil.toml")).dataset("shop")
    assert dataset is not None
    engine = duckdb.connect()
    engine.execute("CREATE TABLE zones (code TEXT, floor INTEGER)")
    sql = "SELECT z.floor * 2 AS f, COUNT(*) FROM m JOIN zones z ON m.code = z.code GROUP BY 1"
    resolved = resolve_group_domains(
        shape_of(sql, dataset), execute=lambda sql: ([], engine.execute(sql).fetchall()), dialect="duckdb"
    )
    (key,) = resolved.group_keys
    assert (key.values, key.type) == ((), ColumnType.INTEGER)


def test_engine_rows_whose_integer_key_does_not_convert_are_dropped() -> None:
    """An integer key the engine returned as NaN or ∞ (a NUMERIC NaN on PostgreSQL) does not convert to
    an int: the row is dropped, not the query failed on one person's key."""
    engine = duckdb.connect()
    shape = resolve_group_domains(
        shape_of("SELECT age % 7 AS k, COUNT(*) FROM visits GROUP BY 1", clinic_policy()),
        execute=lambda sql: ([], engine.execute(sql).fetchall()),
        dialect="duckdb",
    )
    assert shape.group_keys[0].type is ColumnType.INTEGER
    plan, _ = prepare_release(shape, epsilon=1.0, dialect="duckdb")
    rows: list[tuple[Any, ...]] = [(Decimal("NaN"), 1), (math.inf, 2), (Decimal("4"), 3), (5.0, 4)]
    typed = planning.typed_key_rows(plan, rows)
    assert typed == [(4, 3), (5, 4)]
    assert all(type(row[0]) is int for row in typed)


STAMPED = """
[datasets.lab]
path = "lab.duckdb"

[datasets.lab.tables.events]
privacy_unit = "pid"
max_contributions = 2

[datasets.lab.tables.events.columns]
pid = { type = "integer" }
ts = { type = "timestamp", lower = 2024-01-01T06:00:00, upper = 2024-03-03T12:00:00 }
"""


def test_a_timestamp_key_the_engine_returns_as_a_date_is_read_as_its_midnight() -> None:
    """``date_trunc('month', ts)`` is a timestamp (its public cells are midnights); an engine that hands
    back a date for it (or a timestamptz) still finds the cell: the date as its midnight, the
    timestamptz in UTC. A value that is no date at all is dropped."""
    dataset = parse_config(STAMPED, path=Path("/nonexistent/veil.toml")).dataset("lab")
    assert dataset is not None
    engine = duckdb.connect()
    shape = resolve_group_domains(
        shape_of("SELECT date_trunc('month', ts) AS mo, COUNT(*) FROM events GROUP BY 1", dataset),
        execute=lambda sql: ([], engine.execute(sql).fetchall()),
        dialect="duckdb",
    )
    (key,) = shape.group_keys
    assert key.type is ColumnType.TIMESTAMP
    assert key.values == tuple(datetime.datetime(2024, month, 1) for month in (1, 2, 3))
    plan, _ = prepare_release(shape, epsilon=1.0, dialect="duckdb")
    east = datetime.timezone(datetime.timedelta(hours=-5))
    rows: list[tuple[Any, ...]] = [
        (datetime.date(2024, 2, 1), 7),
        (datetime.datetime(2024, 2, 29, 19, 0, tzinfo=east), 8),
        ("2024-01-01", 9),
    ]
    assert planning.typed_key_rows(plan, rows) == [
        (datetime.datetime(2024, 2, 1), 7),
        (datetime.datetime(2024, 3, 1), 8),
    ]


# -- two quantile inputs under one name -------------------------------------------------------------------


def test_two_quantile_inputs_under_one_name_are_refused_before_the_engine() -> None:
    """An expression's input is named by a digest of its text and bounds; a per-person subquery may name
    a column by that very digest ("by design"). Their histograms would then share one name, and a
    quantile priced on one input's bounds would read the other's grid: refused before any histogram
    query is written, as the scalar aggregates are (bound_contributions.distinct_inputs)."""
    inner = "SELECT patient_id, AVG(age) AS a, MAX(age) AS {name} FROM visits GROUP BY patient_id"
    probe = shape_of(f"SELECT MEDIAN(a + 1) FROM ({inner.format(name='b')}) AS p", clinic_policy())
    column = probe.aggregates[0].column
    assert column is not None and column.name.startswith("e_")
    digest = column.name
    shape = shape_of(
        f"SELECT MEDIAN({digest}), MEDIAN(a + 1) FROM ({inner.format(name=digest)}) AS p", clinic_policy()
    )
    plan, sql = prepare_release(shape, epsilon=1.0, dialect="duckdb")
    assert sql is None  # quantiles only: their histograms are the only engine queries
    with pytest.raises(PolicyViolationError) as refused:
        planning.histogram_queries(plan, dialect="duckdb")
    assert str(refused.value) == f'the aggregate inputs "{digest}" and "a + 1" cannot be told apart'
    with pytest.raises(PolicyViolationError, match="cannot be told apart"):
        planning.collect_histograms(
            plan, execute=lambda sql: pytest.fail(f"the engine was asked {sql}"), dialect="duckdb"
        )


def test_a_key_expressions_domain_is_evaluated_as_the_engine_will_evaluate_the_key() -> None:
    """``CAST(age AS TEXT)`` over the bounds 0..100: the keys are the texts the engine gives the real
    query's rows, '0' … '100' — the domain query is made error-free for the engine's own dialect
    (sqlglot's generic rewrite widens the integer to a DECIMAL first: '30.000' on DuckDB, a key no row
    would have)."""
    engine = duckdb.connect()
    shape = resolve_group_domains(
        shape_of("SELECT CAST(age AS TEXT) AS a, COUNT(*) FROM visits GROUP BY 1", clinic_policy()),
        execute=lambda sql: ([], engine.execute(sql).fetchall()),
        dialect="duckdb",
    )
    (key,) = shape.group_keys
    assert key.type is ColumnType.TEXT
    assert key.values == tuple(sorted(str(age) for age in range(101)))


@pytest.mark.parametrize(
    ("expression", "keys"),
    [
        ("CASE WHEN age = 30 THEN CAST('inf' AS DOUBLE) ELSE 1 END", (1.0,)),
        ("CASE WHEN age = 30 THEN CAST('NaN' AS DOUBLE) ELSE 1.5 END", (1.5,)),
    ],
)
def test_a_domain_value_that_is_not_finite_is_no_public_key(expression: str, keys: tuple[float, ...]) -> None:
    """∞ and NaN from the engine have no SQL literal to be written back as a public cell: left out of
    the domain (rows with them are dropped too: typed_key_rows)."""
    engine = duckdb.connect()
    shape = resolve_group_domains(
        shape_of(f"SELECT {expression} AS k, COUNT(*) FROM visits GROUP BY 1", clinic_policy()),
        execute=lambda sql: ([], engine.execute(sql).fetchall()),
        dialect="duckdb",
    )
    assert shape.group_keys[0].values == keys
