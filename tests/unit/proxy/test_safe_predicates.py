"""Filters, keys and aggregate arguments that cannot fail on one row's value, on PostgreSQL (the
rewrites of rewrite/safe_predicates.py; tests/postgres/test_error_free_postgres.py runs them)."""

from __future__ import annotations

import pytest
from sqlglot import parse_one

from proxy.analysis.function_safety import rewritten_on_postgres
from proxy.errors import PolicyViolationError, UnsupportedQueryError
from proxy.rewrite.safe_predicates import POSTGRES_RULES, error_free
from tests.unit.proxy.people_fixture import people


def on_postgres(sql: str) -> str:
    return error_free(parse_one(sql, dialect="postgres"), table=people(), dialect="postgres").sql("postgres")


def on_duckdb(sql: str) -> str:
    return error_free(parse_one(sql, dialect="postgres"), table=people(), dialect="duckdb").sql("duckdb")


def read(column: str) -> str:
    """How a numeric column that feeds arithmetic reads on PostgreSQL: NUMERIC, saturated at ±1e308."""
    number = f"CAST({column} AS DECIMAL)"
    return f"CASE WHEN {number} > 1e308 THEN 1e308 WHEN {number} < -1e308 THEN -1e308 ELSE {number} END"


def within_years(moment: str) -> str:
    first, after = "CAST('0001-01-01' AS DATE)", "CAST('10000-01-01' AS DATE)"
    return f"CASE WHEN {moment} >= {first} AND {moment} < {after} THEN {moment} END"


def test_every_rewrite_the_table_declares_exists() -> None:
    assert set(POSTGRES_RULES) == rewritten_on_postgres()


@pytest.mark.parametrize(
    "sql",
    [
        "CAST(note AS INT) > 1",  # text → integer fails on 'abc'
        "CAST(note AS DATE) IS NULL",
        "CAST(cost AS NUMERIC(3, 1)) > 1",  # a constrained numeric overflows
        "CAST(age AS BOOLEAN)",
        "age * 1e100000 * 1e100000 > 0",  # beyond NUMERIC's 131,072 digits
    ],
)
def test_what_can_fail_on_one_row_is_refused(sql: str) -> None:
    with pytest.raises(PolicyViolationError, match="can fail on a single row's value"):
        on_postgres(sql)


def test_a_column_and_an_integer_literal_are_numeric() -> None:
    """``CASE … THEN 2000000000 END * 2`` would overflow int4 on the rows that reach the branch."""
    assert on_postgres("CASE WHEN id = 42 THEN 2000000000 END * 2 > 0") == (
        "CASE WHEN CAST(id AS DECIMAL) = CAST(42 AS DECIMAL) THEN CAST(2000000000 AS DECIMAL) END"
        " * CAST(2 AS DECIMAL) > CAST(0 AS DECIMAL)"
    )


def test_a_compared_column_is_read_as_numeric_without_saturation() -> None:
    """A comparison cannot overflow: the cheaper reading is enough."""
    assert on_postgres("age > 30 AND cost * 2 > 1") == (
        f"CAST(age AS DECIMAL) > CAST(30 AS DECIMAL) AND {read('cost')} * CAST(2 AS DECIMAL) > CAST(1 AS DECIMAL)"
    )


def test_an_integer_result_is_numeric() -> None:
    assert on_postgres("length(note) * 2 > 4").startswith("CAST(LENGTH(note) AS DECIMAL) * ")


def test_every_divisor_is_guarded_nested_ones_too() -> None:
    sql = on_postgres("1 / (age / (cost - 1)) > 0")
    assert sql.count("NULLIF(") == 2
    assert "DOUBLE PRECISION" not in sql  # the division stays PostgreSQL's own (numeric), not float8


def test_integers_still_divide_as_integers() -> None:
    assert (
        on_postgres("age / 10 = 3")
        == f"TRUNC({read('age')} / NULLIF(CAST(10 AS DECIMAL), 0)) = CAST(3 AS DECIMAL)"
    )


@pytest.mark.parametrize("target", ["REAL", "DOUBLE PRECISION", "NUMERIC", "FLOAT"])
def test_a_widening_cast_of_a_number_is_dropped(target: str) -> None:
    """Columns are read as NUMERIC already; the cast could only add an out-of-range failure."""
    assert on_postgres(f"CAST(cost AS {target}) > 1") == f"({read('cost')}) > CAST(1 AS DECIMAL)"


def test_a_float_literal_becomes_numeric() -> None:
    """``'1e400'::float8`` overflows, and a float8 would turn the arithmetic around it into float8."""
    assert on_postgres("CAST('1e400' AS DOUBLE PRECISION) < cost").startswith("CAST('1e400' AS DECIMAL) < ")


def test_a_number_cast_to_an_integer_type_is_null_outside_its_range() -> None:
    assert on_postgres("CAST(cost AS SMALLINT) > 1") == (
        f"CASE WHEN {read('cost')} > -32768.5 AND {read('cost')} < 32767.5 THEN CAST({read('cost')} AS SMALLINT) END"
        " > CAST(1 AS DECIMAL)"
    )


def test_a_cast_of_a_literal_is_kept() -> None:
    """It converts when the query is planned: it fails for every row or for none."""
    assert "CAST('2025-01-01' AS DATE)" in on_postgres(
        "note <> 'x' AND CAST('2025-01-01' AS DATE) IS NOT NULL"
    )


def test_a_cast_to_text_is_kept() -> None:
    assert on_postgres("CAST(age AS TEXT) = '30'") == f"CAST({read('age')} AS TEXT) = '30'"


@pytest.mark.parametrize(
    ("sql", "guarded"),
    [
        ("SQRT(cost) > 1", "CASE WHEN {c} >= 0 THEN SQRT({c}) END"),
        ("LN(cost) > 1", "CASE WHEN {c} > 0 THEN LN({c}) END"),
        ("EXP(cost) > 1", "CASE WHEN {c} <= 709 THEN EXP({c}) END"),
    ],
)
def test_a_function_defined_on_part_of_the_numbers_is_computed_there_only(sql: str, guarded: str) -> None:
    assert on_postgres(sql) == guarded.format(c=read("cost")) + " > CAST(1 AS DECIMAL)"


def test_a_logarithm_to_a_base_needs_a_valid_base() -> None:
    assert "> 0 AND CAST(2 AS DECIMAL) <> 1 AND" in on_postgres("LOG(2, cost) > 1")


def test_a_power_is_computed_only_where_it_is_defined_and_finite() -> None:
    sql = on_postgres("POWER(cost, 2) > 4")
    assert sql.startswith(f"CASE WHEN {read('cost')} = 0 THEN CASE WHEN CAST(2 AS DECIMAL) >= 0 THEN POWER(")
    assert "CAST(2 AS DECIMAL) * LN(ABS(" in sql and ")) <= 709 THEN POWER(" in sql


def test_a_moved_date_is_read_within_years_1_to_9999() -> None:
    assert on_postgres("born + 30 > CAST('2000-01-01' AS DATE)") == (
        f"{within_years('born')} + 30 > CAST('2000-01-01' AS DATE)"
    )


def test_a_difference_of_dates_is_numeric() -> None:
    assert on_postgres("born - born > 1").startswith(
        f"CAST({within_years('born')} - {within_years('born')} AS DECIMAL)"
    )


def test_a_time_part_of_a_date_reads_the_date_as_a_timestamp() -> None:
    assert on_postgres("EXTRACT(HOUR FROM born) = 0") == (
        f"EXTRACT(HOUR FROM CAST({within_years('born')} AS TIMESTAMP)) = CAST(0 AS DECIMAL)"
    )
    assert on_postgres("EXTRACT(YEAR FROM born) = 2000") == "EXTRACT(YEAR FROM born) = CAST(2000 AS DECIMAL)"


def test_a_truncated_date_is_read_within_years_1_to_9999() -> None:
    assert (
        on_postgres("date_trunc('month', born) IS NULL")
        == f"DATE_TRUNC('MONTH', {within_years('born')}) IS NULL"
    )


def test_literals_that_must_be_integers_stay_integers() -> None:
    sql = on_postgres("ROUND(cost, 2) > 1 AND SUBSTRING(note, -1, 3) = 'a'")
    assert ", 2) > " in sql and "SUBSTRING(note FROM -1 FOR 3)" in sql


@pytest.mark.parametrize("dialect", ["duckdb", "postgres"])
@pytest.mark.parametrize(
    "sql",
    [
        "born + age > born",
        "born + (born - born) > born",
        "INTERVAL '1' DAY * age IS NULL",
        "EXTRACT(YEAR FROM note) = 1",
    ],
)
def test_date_arithmetic_that_could_leave_the_range_is_refused_on_both_engines(
    sql: str, dialect: str
) -> None:
    with pytest.raises(UnsupportedQueryError, match="not supported in a query on private data"):
        error_free(parse_one(sql, dialect="postgres"), table=people(), dialect=dialect)


def test_duckdb_runs_the_expression_under_try_with_try_cast_nested_casts_too() -> None:
    assert (
        on_duckdb("CAST(CAST(note AS INT) AS TEXT) = '1'")
        == "TRY(TRY_CAST(TRY_CAST(note AS INT) AS TEXT) = '1')"
    )
