"""Date columns (quantiles as dates, public key domains from declared ranges) and the (y, x) aggregates
(CORR, COVAR_*, REGR_*): how they are parsed, priced, measured in the engine and post-processed."""

from __future__ import annotations

import datetime
import random
import re
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.analysis.aggregates import DAY_ZERO, AggregateKind, day_number, day_of
from proxy.analysis.parse import parse_statements
from proxy.analysis.quantities import exact_quantities, pair_statistics
from proxy.analysis.shape import MAX_DERIVED_DOMAIN, QueryShape
from proxy.analysis.statements import PrivateQuery, classify
from proxy.config import ColumnType, DatasetPolicy, parse_config
from proxy.errors import PolicyViolationError, UnsupportedQueryError
from proxy.query import planning
from proxy.query.planning import collect_histograms, prepare_release, resolve_group_domains, typed_key_rows
from proxy.release.apply import ReleasedTable, null_notes, release
from proxy.release.pairs import pair_noise_sd, pair_value
from proxy.release.plan import price_query
from proxy.rewrite.bound_contributions import bounded_query

POLICY = """
[datasets.lab]
path = "lab.duckdb"

[datasets.lab.tables.m]
privacy_unit = "pid"
max_contributions = 2

[datasets.lab.tables.m.columns]
pid = { type = "integer" }
day = { type = "date", lower = 2024-01-01, upper = 2024-12-31 }
era = { type = "date", lower = 1700-01-01, upper = 2024-01-01 }
undated = { type = "date" }
x = { type = "real", lower = -3, upper = 2 }
y = { type = "integer", lower = -1, upper = 4 }
free = { type = "integer" }
label = { type = "text" }
"""


def lab() -> DatasetPolicy:
    dataset = parse_config(POLICY, path=Path("/nonexistent/veil.toml")).dataset("lab")
    assert dataset is not None
    return dataset


def shape_of(sql: str) -> QueryShape:
    (tree,) = parse_statements(sql)
    statement = classify(tree, lab())
    assert isinstance(statement, PrivateQuery)
    return statement.shape


def engine_rows(rows: list[tuple[object, ...]]) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect()
    connection.execute("CREATE TABLE m (pid INTEGER, day DATE, x DOUBLE, y INTEGER)")
    if rows:
        connection.executemany("INSERT INTO m VALUES (?, ?, ?, ?)", rows)
    return connection


def execute(connection: duckdb.DuckDBPyConnection):  # type: ignore[no-untyped-def]
    return lambda sql: ([], connection.execute(sql).fetchall())


# --- dates ------------------------------------------------------------------------------------------------


def test_day_numbers_count_from_1970_and_round_back_to_the_nearest_date() -> None:
    day = datetime.date(2024, 2, 29)
    assert day_number(DAY_ZERO) == 0 and day_of(day_number(day)) == day
    assert day_of(day_number(day) + 0.4) == day and day_of(day_number(day) + 0.6) == datetime.date(2024, 3, 1)


def test_a_quantile_of_a_date_reads_the_day_number_clamped_to_the_bounds_days() -> None:
    (aggregate,) = shape_of("SELECT MEDIAN(day) FROM m").aggregates
    source = aggregate.column
    assert source is not None
    assert (source.type, source.text) == (ColumnType.DATE, "day")
    assert (source.lower, source.upper) == (
        day_number(datetime.date(2024, 1, 1)),
        day_number(datetime.date(2024, 12, 31)),
    )
    assert source.expression.sql(dialect="postgres") == "day - CAST('1970-01-01' AS DATE)"
    assert source.name.startswith("e_") and source.name != "day"


def test_count_of_a_date_reads_the_date_itself() -> None:
    (aggregate,) = shape_of("SELECT COUNT(undated) FROM m").aggregates
    assert aggregate.column is not None and not aggregate.column.has_bounds


def test_quantiles_of_dates_are_released_as_dates_near_the_truth() -> None:
    days = [datetime.date(2024, 1, 1) + datetime.timedelta(days=i % 366) for i in range(4000)]
    connection = engine_rows([(i // 2, day, 0.0, 0) for i, day in enumerate(days)])
    shape = shape_of("SELECT MIN(day), MEDIAN(day), MAX(day) FROM m")
    plan, sql = prepare_release(shape, epsilon=30.0, dialect="duckdb")
    assert sql is None  # only quantiles: no main engine query
    histograms = collect_histograms(plan, execute=execute(connection), dialect="duckdb")
    (row,) = release(plan, [], rng=random.Random(3), histograms=histograms).rows
    low, middle, high = row[:3]  # then each quantile's grid step, for veil.round
    assert low == datetime.date(2024, 1, 1) and high == datetime.date(2024, 12, 31)
    assert abs((middle - datetime.date(2024, 7, 1)).days) <= 3


def test_a_bounded_date_column_groups_by_every_day_of_its_range() -> None:
    (key,) = shape_of("SELECT day, COUNT(*) FROM m GROUP BY day").group_keys
    assert not key.thresholded and key.type is ColumnType.DATE
    assert key.values is not None and len(key.values) == 366
    assert (key.values[0], key.values[-1]) == (datetime.date(2024, 1, 1), datetime.date(2024, 12, 31))


@pytest.mark.parametrize(
    ("expression", "keys", "type_"),
    [
        (
            "date_trunc('month', day)",
            [datetime.date(2024, month, 1) for month in range(1, 13)],
            ColumnType.DATE,
        ),
        ("EXTRACT(year FROM day)", [2024], ColumnType.INTEGER),
        ("EXTRACT(quarter FROM day)", [1, 2, 3, 4], ColumnType.INTEGER),
        ("day - DATE '2024-12-30'", [-364 + i for i in range(366)], ColumnType.INTEGER),
    ],
)
def test_an_expression_of_a_bounded_date_has_the_public_keys_it_takes_over_the_range(
    expression: str, keys: list[object], type_: ColumnType
) -> None:
    shape = shape_of(f"SELECT {expression} AS k, COUNT(*) FROM m GROUP BY 1")
    assert not shape.thresholded
    resolved = resolve_group_domains(shape, execute=execute(engine_rows([])), dialect="duckdb")
    (key,) = resolved.group_keys
    assert (list(key.values or ()), key.type) == (keys, type_)


def test_a_range_longer_than_the_derivable_limit_keeps_quantiles_but_groups_only_with_tau() -> None:
    assert (datetime.date(2024, 1, 1) - datetime.date(1700, 1, 1)).days > MAX_DERIVED_DOMAIN
    assert shape_of("SELECT EXTRACT(year FROM era), COUNT(*) FROM m GROUP BY 1").thresholded
    assert shape_of("SELECT MEDIAN(era) FROM m").aggregates[0].column is not None


@pytest.mark.parametrize(
    ("sql", "hint"),
    [
        (
            "SELECT date_trunc('month', undated), COUNT(*) FROM m GROUP BY 1",
            "declare lower and upper dates for undated in the policy (e.g. lower = 2024-01-01, upper = 2025-12-31, "
            "at most 100,000 days apart): its days, and date_trunc or EXTRACT of it, then have public keys; or ",
        ),
        ("SELECT free % 3, COUNT(*) FROM m GROUP BY 1", "declare lower and upper for free in the policy"),
        ("SELECT label, COUNT(*) FROM m GROUP BY 1", "declare label public with its values"),
    ],
)
def test_keys_without_a_public_domain_are_refused_with_the_policy_fix_first(sql: str, hint: str) -> None:
    with pytest.raises(PolicyViolationError, match="the keys are not public") as raised:
        prepare_release(shape_of(sql), epsilon=1.0, dialect="duckdb")
    assert raised.value.hint is not None and raised.value.hint.startswith(hint)
    assert "SET veil.delta = 1e-6" in raised.value.hint and "δ grant" in raised.value.hint


def test_an_engine_timestamp_key_finds_its_public_date_cell() -> None:
    """DuckDB's (and PostgreSQL's) date_trunc of a date is a timestamp; the public cells are dates."""
    rows = [(1, datetime.date(2024, 3, 5), 0.0, 0), (2, datetime.date(2024, 3, 9), 0.0, 0)]
    connection = engine_rows(rows)
    shape = resolve_group_domains(
        shape_of("SELECT date_trunc('month', day), COUNT(*) FROM m GROUP BY 1"),
        execute=execute(connection),
        dialect="duckdb",
    )
    plan, sql = prepare_release(shape, epsilon=1.0, dialect="duckdb")
    assert sql is not None
    (row,) = typed_key_rows(plan, connection.execute(sql).fetchall())
    assert row == (datetime.date(2024, 3, 1), 2.0)


def test_a_real_key_with_whole_values_stays_real() -> None:
    """An integer times 1.0 is real in PostgreSQL, although every value in its domain is whole."""
    shape = resolve_group_domains(
        shape_of("SELECT y * 1.0, COUNT(*) FROM m GROUP BY 1"),
        execute=execute(engine_rows([])),
        dialect="duckdb",
    )
    (key,) = shape.group_keys
    assert key.values == (-1.0, 0.0, 1.0, 2.0, 3.0, 4.0)
    assert key.type is ColumnType.REAL


# --- (y, x) aggregates: analysis and price -----------------------------------------------------------------


def test_each_argument_is_read_where_the_other_is_not_null_and_the_product_of_clamped_values() -> None:
    (aggregate,) = shape_of("SELECT CORR(y, x) FROM m").aggregates
    pair = aggregate.pair
    assert pair is not None and aggregate.kind is AggregateKind.CORR and aggregate.label == "corr(y, x)"
    assert pair.y.expression.sql(dialect="postgres") == "CASE WHEN NOT x IS NULL THEN y END"
    assert pair.x.expression.sql(dialect="postgres") == "CASE WHEN NOT y IS NULL THEN x END"
    assert (pair.y.text, pair.x.text, pair.product.text) == ("y | x", "x | y", "x * y")
    assert pair.product.expression.sql(dialect="postgres") == (
        "CAST((CASE WHEN x < -3 THEN -3 WHEN x > 2 THEN 2 ELSE x END) AS DOUBLE PRECISION)"
        " * CAST((CASE WHEN y < -1 THEN -1 WHEN y > 4 THEN 4 ELSE y END) AS DOUBLE PRECISION)"
    )
    assert (pair.product.lower, pair.product.upper) == (-12, 8)  # the corners' products


def test_either_argument_order_measures_the_same_sums() -> None:
    shape = shape_of("SELECT CORR(y, x), CORR(x, y), REGR_SLOPE(x, y), COVAR_POP(y, x) FROM m")
    assert len(exact_quantities(shape)) == 6


def test_sensitivities_follow_the_spec_for_each_sum() -> None:
    """spec §2.2 with L = 2: COUNT L, SUM L·max|v|, SUM of squares L·max v², SUM(yx) L·max|corner|."""
    plan = price_query(shape_of("SELECT CORR(y, x) FROM m"), epsilon=1.2)
    assert [(m.quantity.label, m.sensitivity) for m in plan.measurements] == [
        ("count(x | y)", 2.0),
        ("sum(x | y)", 6.0),  # 2 · 3
        ("sum(y | x)", 8.0),  # 2 · 4
        ("sum((x | y) ^ 2)", 18.0),  # 2 · 9
        ("sum((y | x) ^ 2)", 32.0),  # 2 · 16
        ("sum(x * y)", 24.0),  # 2 · |-3 · 4|
    ]
    assert all(m.epsilon == pytest.approx(0.2) and 6 * m.epsilon <= 1.2 for m in plan.measurements)
    assert plan.epsilon == 1.2
    assert "count(x | y) ε=0.2, sum(x | y) ε=0.2" in plan.describe()


@pytest.mark.parametrize(
    ("aggregate", "statistics"),
    [
        ("CORR", ["n", "sx", "sy", "sxx", "syy", "sxy"]),
        ("REGR_R2", ["n", "sx", "sy", "sxx", "syy", "sxy"]),
        ("COVAR_POP", ["n", "sx", "sy", "sxy"]),
        ("COVAR_SAMP", ["n", "sx", "sy", "sxy"]),
        ("REGR_SLOPE", ["n", "sx", "sy", "sxx", "sxy"]),
        ("REGR_INTERCEPT", ["n", "sx", "sy", "sxx", "sxy"]),
        ("REGR_COUNT", ["n"]),
        ("REGR_AVGY", ["n", "sy"]),
        ("REGR_SXX", ["n", "sx", "sxx"]),
    ],
)
def test_each_aggregate_measures_only_the_sums_it_needs(aggregate: str, statistics: list[str]) -> None:
    (parsed,) = shape_of(f"SELECT {aggregate}(y, x) FROM m").aggregates
    assert list(pair_statistics(parsed)) == statistics
    assert len(price_query(shape_of(f"SELECT {aggregate}(y, x) FROM m"), epsilon=1.0).measurements) == len(
        statistics
    )


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT CORR(y, label) FROM m", 'corr(y, label): column "label" is not numeric'),
        ("SELECT CORR(free, x) FROM m", 'corr(free, x): column "free" has no declared bounds'),
        ("SELECT CORR(y, day) FROM m", 'corr(y, day): column "day" is not numeric'),
        (
            "SELECT REGR_SLOPE(y, free + 1) FROM m",
            "regr_slope(y, free + 1): the range of free + 1 cannot be",
        ),
        ("SELECT SUM(day) FROM m", 'sum(day): column "day" is not numeric'),
        ("SELECT MEDIAN(undated) FROM m", 'median(undated): column "undated" has no declared bounds'),
        (
            "SELECT MAX(day + 1) FROM m",
            "max(day + 1): only a date or timestamp column itself is answered",
        ),
    ],
)
def test_refusals_name_the_argument_and_the_fix(sql: str, message: str) -> None:
    with pytest.raises(PolicyViolationError, match=re.escape(message)):
        shape_of(sql)


# --- (y, x) aggregates: in the engine ---------------------------------------------------------------------


def pair_sums(rows: list[tuple[object, ...]]) -> dict[str, float]:
    """The bounded sums of CORR(y, x), computed by the generated SQL."""
    shape = shape_of("SELECT CORR(y, x) FROM m")
    quantities = exact_quantities(shape)
    sql = bounded_query(shape, quantities, dialect="duckdb").sql(dialect="duckdb")
    (values,) = engine_rows(rows).execute(sql).fetchall()
    names = {quantity: name for name, quantity in pair_statistics(shape.aggregates[0]).items()}
    return {names[q]: float(v or 0) for q, v in zip(quantities, values, strict=True)}


def test_the_engine_clamps_both_factors_and_keeps_only_rows_with_both_values() -> None:
    day = datetime.date(2024, 1, 1)
    rows = [
        (1, day, 10.0, 3),  # x clamped to 2
        (2, day, -1.0, -7),  # y clamped to -1
        (3, day, None, 2),  # no x: not a pair
        (4, day, 1.5, None),  # no y: not a pair
        (5, day, 1.0, 1),  # five rows, L = 2: weight 2/5 each
        (5, day, 1.0, 1),
        (5, day, 1.0, 1),
        (5, day, 1.0, 1),
        (5, day, 1.0, 1),
    ]
    sums = pair_sums(rows)
    assert sums == pytest.approx(
        {
            "n": 1 + 1 + 2,
            "sx": 2 - 1 + 2 * 1.0,
            "sy": 3 - 1 + 2 * 1,
            "sxx": 4 + 1 + 2 * 1.0,
            "syy": 9 + 1 + 2 * 1,
            "sxy": 2 * 3 + (-1) * (-1) + 2 * 1.0,
        }
    )


value = st.one_of(st.none(), st.floats(min_value=-50, max_value=50, allow_nan=False))
pair_row = st.tuples(value, st.one_of(st.none(), st.integers(min_value=-20, max_value=20)))


@settings(max_examples=30, deadline=None)
@given(
    others=st.lists(st.tuples(st.integers(min_value=0, max_value=3), pair_row), max_size=12),
    newcomer=st.lists(pair_row, min_size=1, max_size=8),
)
def test_one_person_moves_each_sum_by_at_most_its_sensitivity(
    others: list[tuple[int, tuple[float | None, int | None]]], newcomer: list[tuple[float | None, int | None]]
) -> None:
    """The privacy proof, checked on data: however a new person's values fall (out of bounds, NULL), each
    of the six sums moves by at most the sensitivity the plan prices it at."""
    day = datetime.date(2024, 1, 1)
    base = [(person, day, x, y) for person, (x, y) in others]
    before = pair_sums(base)
    after = pair_sums(base + [(99, day, x, y) for x, y in newcomer])
    plan = price_query(shape_of("SELECT CORR(y, x) FROM m"), epsilon=1.0)
    bounds = dict(
        zip(["n", "sx", "sy", "sxx", "syy", "sxy"], (m.sensitivity for m in plan.measurements), strict=True)
    )
    for name, bound in bounds.items():
        assert abs(after[name] - before[name]) <= bound + 1e-9, name


# --- (y, x) aggregates: post-processing ------------------------------------------------------------------


def exact_stats(pairs: list[tuple[float, float]]) -> dict[str, float]:
    return {
        "n": len(pairs),
        "sy": sum(y for y, _ in pairs),
        "sx": sum(x for _, x in pairs),
        "syy": sum(y * y for y, _ in pairs),
        "sxx": sum(x * x for _, x in pairs),
        "sxy": sum(y * x for y, x in pairs),
    }


def pair_of(sql: str):  # type: ignore[no-untyped-def]
    (aggregate,) = shape_of(sql).aggregates
    assert aggregate.pair is not None
    return aggregate.kind, aggregate.pair


def test_exact_sums_give_what_sql_gives() -> None:
    pairs = [(1.0, 0.5), (2.0, -1.0), (4.0, 1.5), (0.0, -2.0), (3.0, 2.0)]
    connection = duckdb.connect()
    connection.execute("CREATE TABLE p (y DOUBLE, x DOUBLE)")
    connection.executemany("INSERT INTO p VALUES (?, ?)", pairs)
    stats = exact_stats(pairs)
    for name in ("CORR", "COVAR_POP", "COVAR_SAMP", "REGR_SLOPE", "REGR_INTERCEPT", "REGR_R2", "REGR_COUNT",
                 "REGR_AVGX", "REGR_AVGY", "REGR_SXX", "REGR_SYY", "REGR_SXY"):  # fmt: skip
        kind, pair = pair_of(f"SELECT {name}(y, x) FROM m")
        (expected,) = connection.execute(f"SELECT {name}(y, x) FROM p").fetchone()  # type: ignore[misc]
        assert pair_value(kind, stats, pair) == pytest.approx(expected), name


@pytest.mark.parametrize(
    ("name", "stats", "expected"),
    [
        # noise pushed the covariance beyond what the variances allow: CORR stays in [-1, 1], R² in [0, 1]
        ("CORR", {"n": 10, "sy": 0, "sx": 0, "syy": 10, "sxx": 10, "sxy": 30}, 1.0),
        ("CORR", {"n": 10, "sy": 0, "sx": 0, "syy": 10, "sxx": 10, "sxy": -30}, -1.0),
        ("REGR_R2", {"n": 10, "sy": 0, "sx": 0, "syy": 10, "sxx": 10, "sxy": 30}, 1.0),
        # a noisy variance that is not positive: NULL (PostgreSQL: R² is 1 when only y is constant)
        ("CORR", {"n": 10, "sy": 0, "sx": 0, "syy": -1, "sxx": 10, "sxy": 1}, None),
        ("CORR", {"n": 10, "sy": 0, "sx": 0, "syy": 10, "sxx": 0, "sxy": 1}, None),
        ("REGR_R2", {"n": 10, "sy": 0, "sx": 0, "syy": -1, "sxx": 10, "sxy": 1}, 1.0),
        ("REGR_R2", {"n": 10, "sy": 0, "sx": 0, "syy": 10, "sxx": -1, "sxy": 1}, None),
        ("REGR_SLOPE", {"n": 10, "sy": 0, "sx": 0, "sxx": 0, "sxy": 1}, None),
        ("REGR_INTERCEPT", {"n": 10, "sy": 0, "sx": 0, "sxx": -2, "sxy": 1}, None),
        # too few noisy rows: NULL, as SQL over no rows (COVAR_SAMP: fewer than two)
        ("COVAR_POP", {"n": 0.4, "sy": 1, "sx": 1, "sxy": 1}, None),
        ("COVAR_SAMP", {"n": 1.5, "sy": 1, "sx": 1, "sxy": 1}, None),
        ("REGR_AVGX", {"n": -3, "sx": 1}, None),
        # the covariance of values in [-1, 4] × [-3, 2] is at most 5 · 5 / 4 in magnitude
        ("COVAR_POP", {"n": 10, "sy": 0, "sx": 0, "sxy": 1000}, 6.25),
        ("REGR_SXY", {"n": 10, "sy": 0, "sx": 0, "sxy": -1000}, -62.5),
        ("REGR_AVGX", {"n": 10, "sx": 1000}, 2.0),  # clamped into x's bounds
        ("REGR_SXX", {"n": 10, "sx": 0, "sxx": -5}, 0.0),
    ],
)
def test_results_are_post_processed_into_their_valid_ranges(
    name: str, stats: dict[str, float], expected: float | None
) -> None:
    kind, pair = pair_of(f"SELECT {name}(y, x) FROM m")
    assert pair_value(kind, stats, pair) == (None if expected is None else pytest.approx(expected))


def test_a_null_correlation_comes_with_a_notice_saying_why() -> None:
    plan = price_query(shape_of("SELECT CORR(y, x) AS r, COUNT(*), REGR_SLOPE(y, x) FROM m"), epsilon=1.0)
    table = ReleasedTable(columns=(), rows=[(None, 3, 0.5)])
    (note,) = null_notes(plan, table)
    assert note.startswith("corr(y, x) is NULL in 1 of 1 row(s): a noisy count below 1 or a noisy variance")
    assert null_notes(plan, ReleasedTable(columns=(), rows=[(0.3, 3, 0.5)])) == []


def test_squares_and_products_of_large_integers_do_not_overflow_in_the_engine() -> None:
    """An INTEGER column bounded at 100,000: its square (10^10) and a product overflow an INTEGER; the
    engine would fail only when such values occur — an error that depends on the data."""
    policy = POLICY.replace(
        'y = { type = "integer", lower = -1, upper = 4 }',
        'y = { type = "integer", lower = 0, upper = 100000 }',
    )
    dataset = parse_config(policy, path=Path("/nonexistent/veil.toml")).dataset("lab")
    assert dataset is not None
    connection = engine_rows([(1, None, 1.5, 100_000), (2, None, -2.0, 99_999), (3, None, 1.0, 5)])
    for sql in ("SELECT VAR_POP(y), STDDEV(y) FROM m", "SELECT CORR(y, x), COVAR_POP(x, y) FROM m"):
        (tree,) = parse_statements(sql)
        statement = classify(tree, dataset)
        assert isinstance(statement, PrivateQuery)
        _, bounded = prepare_release(statement.shape, epsilon=1.0, dialect="duckdb")
        assert bounded is not None
        rows = connection.execute(bounded).fetchall()  # raised OutOfRangeException before the cast
        assert rows


def test_a_pair_aggregates_noise_is_its_sums_noise_carried_through_its_formula() -> None:
    """REGR_AVGY = Σy / n: by the delta method its s.d. is √((s_Σy / n)² + (Σy / n² · s_n)²)."""
    (aggregate,) = shape_of("SELECT REGR_AVGY(y, x) FROM m").aggregates
    assert aggregate.pair is not None
    stats, sds = {"n": 400.0, "sy": 600.0}, {"n": 3.0, "sy": 12.0}
    expected = ((12.0 / 400) ** 2 + (600.0 / 400**2 * 3.0) ** 2) ** 0.5
    assert pair_noise_sd(AggregateKind.REGR_AVGY, stats, sds, aggregate.pair) == pytest.approx(
        expected, rel=1e-6
    )


def test_a_pair_aggregates_noise_is_capped_by_the_range_it_is_clamped_into() -> None:
    """Four pairs under noise of s.d. 30: the delta method says nonsense, CORR's range says at most 1."""
    (aggregate,) = shape_of("SELECT CORR(y, x), REGR_SLOPE(y, x) FROM m").aggregates[:1]
    assert aggregate.pair is not None
    stats = {"n": 4.0, "sy": 5.0, "sx": -2.0, "syy": 20.0, "sxx": 9.0, "sxy": 3.0}
    sds = dict.fromkeys(stats, 30.0)
    assert pair_noise_sd(AggregateKind.CORR, stats, sds, aggregate.pair) == 1.0
    assert pair_noise_sd(AggregateKind.REGR_R2, stats, sds, aggregate.pair) == 0.5
    assert (
        pair_noise_sd(AggregateKind.REGR_SLOPE, stats, sds, aggregate.pair) > 1.0
    )  # no range bounds a slope


@pytest.mark.parametrize(
    ("arguments", "product"),
    [
        ("abs(y), x", "abs(y) * x"),  # one call is a factor as it is
        ("y * 2, x", "x * (y * 2)"),  # factors in a fixed order, either argument order
        ("abs(y) + abs(x), x", "(abs(y) + abs(x)) * x"),  # two calls: the first ")" is not the last
        ("abs(y) * abs(x), x", "(abs(y) * abs(x)) * x"),
        ("greatest(abs(y), 0), x", "greatest(abs(y), 0) * x"),  # nested parentheses close at the end
    ],
)
def test_a_product_names_its_factors_parenthesized_only_where_needed(arguments: str, product: str) -> None:
    (aggregate,) = shape_of(f"SELECT CORR({arguments}) FROM m").aggregates
    assert aggregate.pair is not None and aggregate.pair.product.text == product


def test_an_expression_without_a_derivable_range_is_refused_with_how_to_clamp_it() -> None:
    with pytest.raises(PolicyViolationError) as refused:
        shape_of("SELECT SUM(free * 2) FROM m")
    assert str(refused.value) == "sum(free * 2): the range of free * 2 cannot be derived from the policy"
    assert refused.value.hint == (
        "clamp it explicitly: veil_clamp(free * 2, lower, upper) — or declare bounds for its columns"
    )


def test_a_group_by_with_too_many_public_cells_is_refused_before_the_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """366 days × 6 values of y: 2,196 cells, above a limit lowered to 1,000 for the test."""
    monkeypatch.setattr(planning, "MAX_GROUP_CELLS", 1000)
    shape = resolve_group_domains(
        shape_of("SELECT day, y + 0, COUNT(*) FROM m GROUP BY 1, 2"),
        execute=execute(engine_rows([])),
        dialect="duckdb",
    )
    with pytest.raises(UnsupportedQueryError) as refused:
        prepare_release(shape, epsilon=1.0, dialect="duckdb")
    assert str(refused.value) == "the GROUP BY has 2196 public cells; at most 1000 are answered"
    assert refused.value.hint == "group by fewer columns or filter with WHERE"
