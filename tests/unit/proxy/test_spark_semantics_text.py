"""PostgreSQL's meaning on Spark, as text (rewrite/spark_semantics.py): the Spark suites
(tests/sql/test_spark_semantics.py, ``-m spark``) check the values these expressions compute against
PostgreSQL's; this checks, without a JVM, that each construct is translated as they verified, so that
``make mutants`` (which leaves the Spark suites out) notices a changed translation."""

from __future__ import annotations

import pytest
from sqlglot import parse_one

from proxy.rewrite.spark_semantics import spark_semantics
from tests.unit.proxy.visits_fixture import visits

EPOCH = (
    "DATEDIFF({m}, CAST('1970-01-01' AS DATE)) * 86400 + EXTRACT(HOUR FROM {m}) * 3600"
    " + EXTRACT(MINUTE FROM {m}) * 60 + EXTRACT(SECOND FROM {m})"
)


def on_spark(sql: str) -> str:
    return spark_semantics(parse_one(sql, dialect="postgres"), table=visits()).sql("spark")


@pytest.mark.parametrize(
    ("postgres", "spark"),
    [
        ("age / 10", "(age DIV 10)"),
        ("cost / 2", "cost / 2"),
        ("age / (age - 3)", "(age DIV (age - 3))"),
        ("born - born", "DATEDIFF(born, born)"),
        ("born - 30", "born - 30"),
        ("CAST(cost AS NUMERIC)", "CAST(cost AS DOUBLE)"),
        ("CAST(cost AS NUMERIC(10, 2))", "CAST(cost AS DECIMAL(10, 2))"),
        ("CAST(cost AS INT)", "CAST(ROUND(cost) AS INT)"),  # PostgreSQL rounds, Spark truncates
        ("TRY_CAST(cost * 2 AS BIGINT)", "TRY_CAST(ROUND(cost * 2) AS BIGINT)"),
        ("CAST(age AS INT)", "CAST(age AS INT)"),
        ("CAST(note AS INT)", "CAST(note AS INT)"),
        ("EXTRACT(dow FROM born)", "(EXTRACT(DAYOFWEEK FROM born) - 1)"),
        ("EXTRACT(isodow FROM born)", "EXTRACT(DAYOFWEEK_ISO FROM born)"),
        ("EXTRACT(isoyear FROM born)", "EXTRACT(YEAROFWEEK FROM born)"),
        ("EXTRACT(year FROM born)", "EXTRACT(YEAR FROM born)"),
        ("EXTRACT(second FROM seen)", "EXTRACT(SECOND FROM seen)"),
        ("EXTRACT(milliseconds FROM seen)", "(EXTRACT(SECOND FROM seen) * 1000)"),
        ("EXTRACT(microseconds FROM seen)", "(EXTRACT(SECOND FROM seen) * 1000000)"),
        ("EXTRACT(decade FROM born)", "CAST(FLOOR(EXTRACT(YEAR FROM born) / 10) AS BIGINT)"),
        ("EXTRACT(century FROM born)", "CAST(CEIL(EXTRACT(YEAR FROM born) / 100) AS BIGINT)"),
        ("EXTRACT(millennium FROM born)", "CAST(CEIL(EXTRACT(YEAR FROM born) / 1000) AS BIGINT)"),
        ("date_trunc('month', born)", "DATE_TRUNC('MONTH', born)"),
        ("date_trunc('microseconds', seen)", "DATE_TRUNC('MICROSECOND', seen)"),
        ("date_trunc('milliseconds', seen)", "DATE_TRUNC('MILLISECOND', seen)"),
    ],
)
def test_each_construct_gets_postgres_meaning_on_spark(postgres: str, spark: str) -> None:
    assert on_spark(postgres) == spark


def test_epoch_and_julian_day_are_computed_from_days_and_seconds() -> None:
    assert on_spark("EXTRACT(epoch FROM seen)") == f"({EPOCH.format(m='seen')})"
    assert on_spark("EXTRACT(julian FROM born)") == f"(({EPOCH.format(m='born')}) / 86400 + 2440588)"


@pytest.mark.parametrize(
    ("unit", "first_year"),
    [
        ("decade", "FLOOR(EXTRACT(YEAR FROM {m}) / 10) * 10"),
        ("century", "FLOOR((EXTRACT(YEAR FROM {m}) - 1) / 100) * 100 + 1"),
        ("millennium", "FLOOR((EXTRACT(YEAR FROM {m}) - 1) / 1000) * 1000 + 1"),
    ],
)
def test_truncation_to_decades_and_longer_is_computed_from_the_year(unit: str, first_year: str) -> None:
    """Spark answers NULL for these units; PostgreSQL's centuries and millennia start at years …01."""
    for moment in ("born", "seen"):
        expected = f"CAST(MAKE_DATE(CAST({first_year.format(m=moment)} AS INT), 1, 1) AS TIMESTAMP)"
        assert on_spark(f"date_trunc('{unit}', {moment})") == expected
