"""Spark reads Veil's PostgreSQL the way DuckDB and PostgreSQL do, and never fails on a private value.

Every expression is made error-free for each engine (rewrite/safe_predicates.py) and computed over the
same rows — zero divisors, NULLs, negative numbers, a text that is not a number — by DuckDB and by Spark
(from the Parquet DuckDB wrote): the values must agree. Then what would raise in Spark's default ANSI
mode must answer on Veil's sessions, a date past year 9999 arrives as ``'infinity'``, and a
CancelRequest or the statement timeout stops a running Spark job (57014). Marked ``spark``: skipped
without pyspark and Java unless VEIL_REQUIRE_SPARK=1.
"""

from __future__ import annotations

import datetime
import math
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
import sqlglot
from sqlglot import exp

from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.interrupts import SESSION_INTERRUPTER, Interrupter
from proxy.backends.spark import SparkBackend
from proxy.config import DatasetPolicy, TablePolicy, parse_config
from proxy.errors import BackendUnavailableError, QueryCanceledError
from proxy.rewrite.safe_predicates import error_free
from tests.sql.spark_fixture import open_spark, spark_policy

pytestmark = pytest.mark.spark

LOCATION = 'path = "t.duckdb"\n'
POLICY = f"""
[datasets.t]
{LOCATION}
[datasets.t.tables.t]
privacy_unit = "pid"
max_contributions = 1

[datasets.t.tables.t.columns]
pid = {{ type = "integer" }}
n = {{ type = "integer", lower = -100, upper = 100 }}
d = {{ type = "integer", lower = -5, upper = 5 }}
x = {{ type = "real", lower = -10, upper = 10 }}
s = {{ type = "text" }}
day = {{ type = "date" }}
"""
ROWS = """
CREATE TABLE t AS SELECT * FROM (VALUES
    (1, 37, 10, 2.5, '12', DATE '2024-03-10'),
    (2, -37, 10, -2.5, 'abc', DATE '2024-03-11'),
    (3, 7, 0, 0.0, NULL, DATE '2000-01-01'),
    (4, NULL, -3, 9.75, '-4', DATE '2001-12-31'),
    (5, 100, 3, -0.5, '', DATE '1999-06-15'),
    (6, -1, -5, 1e-3, '7.5', NULL)
) AS v(pid, n, d, x, s, day)
"""
SAME = [  # PostgreSQL meaning; each engine must give the same value on every row
    "n / d",
    "n % d",
    "div(n, d)",
    "n / 4",
    "-n / 4",
    "CAST(n AS numeric) / 8",
    "day - DATE '2000-01-01'",
    "day + 30",
    "day - INTERVAL '1' YEAR",
    "EXTRACT(dow FROM day)",
    "EXTRACT(isodow FROM day)",
    "EXTRACT(doy FROM day)",
    "EXTRACT(week FROM day)",
    "EXTRACT(isoyear FROM day)",
    "EXTRACT(quarter FROM day)",
    "EXTRACT(decade FROM day)",
    "EXTRACT(century FROM day)",
    "EXTRACT(millennium FROM day)",
    "EXTRACT(epoch FROM day)",
    "EXTRACT(julian FROM day)",
    "date_trunc('month', day)",
    "date_trunc('week', day)",
    "date_trunc('decade', day)",
    "strpos(s, '2')",
    "length(s)",
    "sqrt(abs(x))",
    "ln(abs(x) + 1)",
    "abs(n) + sign(x)",
    "floor(x) + ceil(x)",
    "CASE WHEN n > 0 THEN 'up' ELSE 'down' END",
    "coalesce(n, 0) * 2",
]
NEVER_FAIL = [  # ANSI mode would raise on some row of each; Veil's Spark sessions answer (NULL)
    "1 / (n - n)",
    "n % 0",
    "CAST(s AS INTEGER)",
    "CAST(s AS DATE)",
    "ln(x - 100)",
    "sqrt(x - 100)",
    "power(x, 1000)",
    "exp(x * 1000)",
    "CAST(x * 1e300 AS INTEGER)",
    "n * 9223372036854775807",
]


@pytest.fixture(scope="module")
def engines(
    spark_ready: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[DuckDBBackend, SparkBackend, TablePolicy]]:
    directory = tmp_path_factory.mktemp("semantics")
    with duckdb.connect(str(directory / "t.duckdb")) as connection:
        connection.execute(ROWS)
    dataset = spark_policy(
        POLICY, LOCATION, name="t", duckdb_path=directory / "t.duckdb", directory=directory
    )
    duck, spark = DuckDBBackend(directory / "t.duckdb"), open_spark(dataset)
    try:
        yield duck, spark, dataset.tables["t"]
    finally:
        duck.close()
        spark.close()


def _query(expressions: list[str], table: TablePolicy, dialect: str) -> str:
    columns = [
        error_free(sqlglot.parse_one(text, dialect="postgres"), table=table, dialect=dialect).as_(f"c{i}")
        for i, text in enumerate(expressions)
    ]
    return exp.select(exp.column("pid"), *columns).from_("t").order_by("pid").sql(dialect=dialect)


def _normal(value: object) -> object:
    """Decimals as floats; a timestamp at midnight as its date (DuckDB truncates a date to a date)."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime.datetime) and value.time() == datetime.time():
        return value.date()
    return value


def _same(left: object, right: object) -> bool:
    left, right = _normal(left), _normal(right)
    if isinstance(left, float) or isinstance(right, float):
        if left is None or right is None:
            return left is right
        return math.isclose(float(left), float(right), rel_tol=1e-9, abs_tol=1e-9)  # type: ignore[arg-type]
    return left == right


def test_spark_computes_what_duckdb_computes(
    engines: tuple[DuckDBBackend, SparkBackend, TablePolicy],
) -> None:
    duck, spark, table = engines
    expected = duck.execute(_query(SAME, table, "duckdb"))[1]
    answered = spark.execute(_query(SAME, table, "spark"))[1]
    assert len(answered) == len(expected) == 6
    differences = [
        f"{text} on pid {want[0]}: DuckDB {left!r}, Spark {right!r}"
        for want, got in zip(expected, answered, strict=True)
        for text, left, right in zip(["pid", *SAME], want, got, strict=True)
        if not _same(left, right)
    ]
    assert differences == [], "\n".join(differences)


def test_centuries_start_in_year_one_as_in_postgresql(
    engines: tuple[DuckDBBackend, SparkBackend, TablePolicy],
) -> None:
    """DuckDB's date_trunc('century') starts centuries at 2000; PostgreSQL's (and Veil's on Spark) at 2001."""
    _, spark, table = engines
    sql = _query(["date_trunc('century', day)", "date_trunc('millennium', day)"], table, "spark")
    rows = {row[0]: row[1:] for row in spark.execute(sql)[1]}
    assert rows[1] == (datetime.datetime(2001, 1, 1), datetime.datetime(2001, 1, 1))  # 2024-03-10
    assert rows[3] == (datetime.datetime(1901, 1, 1), datetime.datetime(1001, 1, 1))  # 2000-01-01


def test_where_postgresql_fails_spark_answers_null(
    engines: tuple[DuckDBBackend, SparkBackend, TablePolicy],
) -> None:
    """PostgreSQL fails on these rows, so Veil's PostgreSQL rewrite answers NULL there; DuckDB's
    own answer is NaN or -Infinity. Spark follows PostgreSQL, and casts a number to an integer by
    rounding it, as PostgreSQL does (Spark itself truncates)."""
    _, spark, table = engines
    rows = spark.execute(_query(["sqrt(x)", "ln(x)", "x / d", "CAST(x AS INTEGER)"], table, "spark"))[1]
    by_pid = {row[0]: row[1:] for row in rows}
    assert by_pid[2][:2] == (None, None)  # x = -2.5
    assert by_pid[3][:3] == (0.0, None, None)  # x = 0.0, d = 0
    assert by_pid[1][0] == pytest.approx(math.sqrt(2.5)) and by_pid[1][1] == pytest.approx(math.log(2.5))
    # as Veil's PostgreSQL rewrite (NUMERIC, half away from zero); DuckDB rounds a DOUBLE half to even
    assert [by_pid[pid][3] for pid in (1, 2, 4, 5)] == [3, -3, 10, -1]


def test_what_ansi_mode_would_raise_answers_on_every_row(
    engines: tuple[DuckDBBackend, SparkBackend, TablePolicy],
) -> None:
    _, spark, table = engines
    description, rows = spark.execute(_query(NEVER_FAIL, table, "spark"))
    assert len(rows) == 6 and len(description) == len(NEVER_FAIL) + 1
    assert [row[1] for row in rows] == [None] * 6, "1 / 0 is NULL, not an error"


def test_a_date_past_year_9999_arrives_as_infinity(
    engines: tuple[DuckDBBackend, SparkBackend, TablePolicy],
) -> None:
    _, spark, _ = engines
    sql = "SELECT pid, date_add(day, 3000000) AS later, date_add(day, -3000000) AS earlier, day FROM t ORDER BY pid"
    rows = spark.execute(sql)[1]
    assert rows[0][1:] == ("infinity", "-infinity", datetime.date(2024, 3, 10))
    assert rows[-1][1:] == (None, None, None)


SLOW = "SELECT COUNT(*) FROM range(0, 200000000000) WHERE (id * 13) % 7 = 3"  # hours of work


def test_a_cancel_request_stops_the_spark_job(
    engines: tuple[DuckDBBackend, SparkBackend, TablePolicy],
) -> None:
    _, spark, _ = engines
    interrupter = Interrupter()
    SESSION_INTERRUPTER.set(interrupter)
    timer = threading.Timer(3.0, interrupter.cancel)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(QueryCanceledError, match="user request"):
            spark.execute(SLOW)
    finally:
        timer.cancel()
        SESSION_INTERRUPTER.set(None)
    assert time.monotonic() - started < 120, "the job stopped, rather than running to its end"
    assert spark.execute("SELECT COUNT(*) FROM t")[1] == [(6,)], "the session still answers"


def test_the_statement_timeout_stops_the_spark_job(
    tmp_path: Path, engines: tuple[DuckDBBackend, SparkBackend, TablePolicy]
) -> None:
    _, spark, _ = engines
    timed = SparkBackend(master="local[*]", remote=None, sources=spark._sources, statement_timeout_ms=2000)
    try:
        with pytest.raises(QueryCanceledError, match="statement timeout"):
            timed.execute(SLOW)
    finally:
        timed.close()


def test_engine_text_never_reaches_the_client(
    engines: tuple[DuckDBBackend, SparkBackend, TablePolicy],
) -> None:
    _, spark, _ = engines
    with pytest.raises(BackendUnavailableError) as raised:
        spark.execute("SELECT no_such_column FROM t")
    assert str(raised.value) == "the database engine could not run the query"
    assert "no_such_column" not in f"{raised.value} {raised.value.detail} {raised.value.hint}"


def test_data_version_follows_the_files(
    tmp_path: Path, engines: tuple[DuckDBBackend, SparkBackend, TablePolicy]
) -> None:
    _, spark, _ = engines
    before = spark.data_version()
    assert spark.data_version() == before, "stable while nothing changes"
    source = Path(spark._sources["t"].location)
    with duckdb.connect() as connection:
        connection.execute(
            f"COPY (SELECT * FROM '{source}' UNION ALL SELECT * FROM '{source}') TO '{tmp_path / 'x.parquet'}' (FORMAT parquet)"
        )
    (tmp_path / "x.parquet").replace(source)
    assert spark.data_version() != before
    assert spark.execute("SELECT COUNT(*) FROM t")[1] == [(12,)], "the view reads the new files"


def test_a_policy_names_every_table_source() -> None:
    from proxy.errors import ConfigError

    text = POLICY.replace(LOCATION, 'backend = "spark"\n')
    with pytest.raises(ConfigError, match="table t has no source"):
        parse_config(text, path=Path("/x/veil.toml"))
    assert isinstance(
        parse_config(text + '[datasets.t.sources]\nt = "t.parquet"\n', path=Path("/x/veil.toml")).dataset(
            "t"
        ),
        DatasetPolicy,
    )
