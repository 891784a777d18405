"""Timestamp columns (issue 18, dates and times), table-driven, on DuckDB and PostgreSQL.

12,000 events of 6,000 people (two each, ``max_contributions = 2``) carry a timestamp ``ts`` inside its
declared range, 2024-01-01T00:00:00 … 2025-12-31T23:59:59, in whole seconds. Each accepted shape runs
through the query service at a large ε with a seeded RandomSource and is checked for its price (the
NOTICE's split, the ledger's ε and no δ), its accuracy against the engine's exact answer, and its types:
quantiles of a timestamp are timestamps (whole seconds), ``date_trunc`` of it a timestamp, ``CAST(ts AS
DATE)`` a date, ``EXTRACT`` an integer. Each refusal is checked for its SQLSTATE, message, hint, and for
spending nothing; the policy's timestamp bounds for their validation messages; and a psycopg client of
``veil serve`` for receiving ``datetime.datetime`` values.

A quantile is chosen among 1,001 grid points over the range (one step: 63,072 s, about 17.5 hours, for
two years), accurate in rank: the tolerance is two grid steps.
"""

from __future__ import annotations

import datetime
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from budget.ledger import Ledger
from proxy.config import ColumnType, parse_config
from proxy.errors import ConfigError
from proxy.query.service import QueryService
from tests.conftest import Admin, RunningServer
from tests.sql.answer_checks import Shape, assert_answered, assert_refused
from tests.sql.engines import (
    Engine,
    Rows,
    on_duckdb,
    on_postgres,
    query_service,
    run,
)

FIRST, LAST = datetime.datetime(2024, 1, 1), datetime.datetime(2025, 12, 31, 23, 59, 59)
GRID_STEP = (LAST - FIRST).total_seconds() / 1000  # seconds between two grid points of a quantile
ROWS = 12_000
SPAN = 731 * 86_400  # seconds in the two years

POLICY = """
[datasets.demo]
path = "events.duckdb"
default_epsilon = 1.0
max_epsilon = 100.0

[datasets.demo.tables.events]
privacy_unit = "pid"
max_contributions = 2

[datasets.demo.tables.events.columns]
pid = { type = "integer" }
ts = { type = "timestamp", lower = 2024-01-01T00:00:00, upper = "2025-12-31 23:59:59" }
unbounded = { type = "timestamp" }
region = { type = "text", public = true, values = ["north", "south"] }
"""

# Row i belongs to person i // 2; its second of the two years is (i · 7,919 · 37) mod SPAN, a spread
# that covers every month (row 0 is the range's first second).
DUCKDB_EVENTS = f"""
CREATE TABLE events AS SELECT
    i // 2 AS pid,
    TIMESTAMP '2024-01-01 00:00:00' + to_seconds((i * 7919 * 37) % {SPAN}) AS ts,
    TIMESTAMP '2024-01-01 00:00:00' + to_seconds((i * 7919 * 37) % {SPAN}) AS unbounded,
    CASE WHEN (i // 2) % 3 = 0 THEN 'north' ELSE 'south' END AS region
FROM range({ROWS}) t(i)
"""
POSTGRES_EVENTS = f"""
CREATE TABLE events AS SELECT
    i / 2 AS pid,
    TIMESTAMP '2024-01-01 00:00:00' + make_interval(secs => (i * 7919 * 37) % {SPAN}) AS ts,
    TIMESTAMP '2024-01-01 00:00:00' + make_interval(secs => (i * 7919 * 37) % {SPAN}) AS unbounded,
    CASE WHEN (i / 2) % 3 = 0 THEN 'north' ELSE 'south' END AS region
FROM generate_series(0::bigint, {ROWS - 1}) AS t(i)
"""


EVENTS = Rows("demo", POLICY, "events.duckdb", {"duckdb": DUCKDB_EVENTS, "postgres": POSTGRES_EVENTS})


@pytest.fixture(scope="module")
def rows() -> Rows:
    return EVENTS


@pytest.fixture(params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest) -> Engine:
    return request.getfixturevalue(f"{request.param}_engine")  # type: ignore[no-any-return]


# --- accepted shapes --------------------------------------------------------------------------------------

TS, D, N = ColumnType.TIMESTAMP, ColumnType.DATE, ColumnType.INTEGER
QUANTILE_SENSITIVITY = 5040.0  # L · K: rank sensitivity in histogram weights, as for dates and numbers


SHAPES = {
    "timestamp-min-max-percentiles": Shape(
        "SELECT MIN(ts), MAX(ts), MEDIAN(ts), PERCENTILE_DISC(0.25) WITHIN GROUP (ORDER BY ts),"
        " PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY ts) FROM events",
        "SELECT MIN(ts), MAX(ts), quantile_disc(ts, 0.5), quantile_disc(ts, 0.25),"
        " quantile_disc(ts, 0.9) FROM events",
        (
            ("min(ts)", QUANTILE_SENSITIVITY),
            ("max(ts)", QUANTILE_SENSITIVITY),
            ("median(ts)", QUANTILE_SENSITIVITY),
            ("percentile_cont(0.25) WITHIN GROUP (ORDER BY ts)", QUANTILE_SENSITIVITY),
            ("percentile_cont(0.9) WITHIN GROUP (ORDER BY ts)", QUANTILE_SENSITIVITY),
        ),
        (2 * GRID_STEP,) * 5,
        (TS,) * 5,
        exact_by_engine={
            "postgres": "SELECT MIN(ts), MAX(ts), percentile_disc(0.5) WITHIN GROUP (ORDER BY ts),"
            " percentile_disc(0.25) WITHIN GROUP (ORDER BY ts), percentile_disc(0.9) WITHIN GROUP"
            " (ORDER BY ts) FROM events"
        },
    ),
    "timestamp-quantiles-under-a-filter": Shape(
        "SELECT MIN(ts) FILTER (WHERE region = 'north'), MAX(ts) FILTER (WHERE region = 'south') FROM events",
        "SELECT MIN(ts) FILTER (WHERE region = 'north'), MAX(ts) FILTER (WHERE region = 'south') FROM events",
        (
            ("min(ts) FILTER (WHERE region = 'north')", QUANTILE_SENSITIVITY),
            ("max(ts) FILTER (WHERE region = 'south')", QUANTILE_SENSITIVITY),
        ),
        (2 * GRID_STEP,) * 2,
        (TS,) * 2,
    ),
    "timestamp-median-per-year": Shape(
        "SELECT EXTRACT(year FROM ts) AS year, COUNT(*) AS events, MEDIAN(ts) AS middle FROM events"
        " GROUP BY 1 ORDER BY 1",
        "SELECT EXTRACT(year FROM ts)::INTEGER, COUNT(*), quantile_disc(ts, 0.5) FROM events"
        " GROUP BY 1 ORDER BY 1",
        (("count(*)", 2.0), ("median(ts)", QUANTILE_SENSITIVITY)),
        (0, 2, 2 * GRID_STEP),
        (N, N, TS),
        rows=2,
        exact_by_engine={
            "postgres": "SELECT EXTRACT(year FROM ts)::int, COUNT(*), percentile_disc(0.5) WITHIN GROUP"
            " (ORDER BY ts) FROM events GROUP BY 1 ORDER BY 1"
        },
    ),
    "group-by-month-of-a-timestamp": Shape(
        "SELECT date_trunc('month', ts) AS month, COUNT(*) AS events FROM events GROUP BY 1 ORDER BY 1",
        "SELECT date_trunc('month', ts), COUNT(*) FROM events GROUP BY 1 ORDER BY 1",
        (("count(*)", 2.0),),
        (0, 2),
        (TS, N),
        rows=24,
    ),
    "group-by-day-and-region": Shape(
        "SELECT CAST(ts AS DATE) AS day, region, COUNT(*) FROM events WHERE ts >= '2025-12-01'"
        " GROUP BY 1, 2 HAVING COUNT(*) > 0 ORDER BY 1, 2",
        "SELECT CAST(ts AS DATE), region, COUNT(*) FROM events WHERE ts >= '2025-12-01'"
        " GROUP BY 1, 2 ORDER BY 1, 2",
        (("count(*)", 2.0),),
        (0, 0, 2),
        (D, ColumnType.TEXT, N),
        rows=62,
    ),
    "group-by-weekday": Shape(
        "SELECT EXTRACT(dow FROM ts) AS weekday, COUNT(*) FROM events GROUP BY 1 ORDER BY 1",
        "SELECT EXTRACT(dow FROM ts)::INTEGER, COUNT(*) FROM events GROUP BY 1 ORDER BY 1",
        (("count(*)", 2.0),),
        (0, 2),
        (N, N),
        rows=7,
        exact_by_engine={
            "postgres": "SELECT EXTRACT(dow FROM ts)::int, COUNT(*) FROM events GROUP BY 1 ORDER BY 1"
        },
    ),
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_each_timestamp_shape_is_answered_priced_and_accurate(
    name: str, engine: Engine, service: QueryService, ledger: Ledger
) -> None:
    assert_answered(SHAPES[name], engine=engine, service=service, ledger=ledger)


def test_a_timestamp_quantile_is_released_in_whole_seconds_within_the_bounds(service: QueryService) -> None:
    """Post-processing: the chosen grid point is taken up to the next whole second, never past upper."""
    for seed in range(5):
        service.rng = random.Random(seed)
        outcome = run(service, f"SELECT MIN(ts), MEDIAN(ts), MAX(ts) FROM events WHERE pid >= {seed}", 1.0)
        assert outcome.table is not None
        for value in outcome.table.rows[0]:
            assert isinstance(value, datetime.datetime) and value.microsecond == 0
            assert FIRST <= value <= LAST


def test_timestamps_keep_their_type_through_post_processing(service: QueryService) -> None:
    outcome = run(
        service,
        "SELECT region, MIN(ts) AS first, MAX(ts) - MIN(ts) AS span FROM events GROUP BY region"
        " HAVING MIN(ts) < TIMESTAMP '2024-01-02 00:00:00' ORDER BY region",
    )
    assert outcome.table is not None
    assert [(column.name, column.type) for column in outcome.table.columns][:2] == [
        ("region", ColumnType.TEXT),
        ("first", TS),
    ]
    assert [row[0] for row in outcome.table.rows] == ["north", "south"]
    for _, first, _ in outcome.table.rows:
        assert isinstance(first, datetime.datetime) and first - FIRST <= datetime.timedelta(seconds=GRID_STEP)


# --- refusals ---------------------------------------------------------------------------------------------

KEYS_HINT = "group by a day or longer of ts"
REFUSALS = {
    "sum-of-a-timestamp": (
        "SELECT SUM(ts) FROM events",
        'sum(ts): column "ts" is not numeric',
        "timestamp column",
    ),
    "avg-of-a-timestamp": ("SELECT AVG(ts) FROM events", 'avg(ts): column "ts" is not numeric', "MIN, MAX"),
    "quantile-of-an-unbounded-timestamp": (
        "SELECT MAX(unbounded) FROM events",
        'max(unbounded): column "unbounded" has no declared bounds',
        "declare lower and upper timestamps for column unbounded",
    ),
    "quantile-of-a-timestamp-expression": (
        "SELECT MIN(ts + INTERVAL '1' HOUR) FROM events",
        "only a date or timestamp column itself is answered",
        "timestamp column answers",
    ),
    "group-by-the-timestamp-itself": (
        "SELECT ts, COUNT(*) FROM events GROUP BY ts",
        "GROUP BY ts: the keys are not public",
        KEYS_HINT,
    ),
    "group-by-the-hour": (
        "SELECT date_trunc('hour', ts), COUNT(*) FROM events GROUP BY 1",
        "GROUP BY DATE_TRUNC('HOUR', ts): the keys are not public",
        KEYS_HINT,
    ),
    "group-by-the-hour-of-day": (
        "SELECT EXTRACT(hour FROM ts), COUNT(*) FROM events GROUP BY 1",
        "GROUP BY EXTRACT(HOUR FROM ts): the keys are not public",
        "its hour, minute or second has no public domain",
    ),
    "group-by-the-day-of-an-unbounded-timestamp": (
        "SELECT CAST(unbounded AS DATE), COUNT(*) FROM events GROUP BY 1",
        "the keys are not public",
        "declare lower and upper timestamps for unbounded",
    ),
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_each_timestamp_refusal_says_what_is_wrong_and_spends_nothing(
    name: str, service: QueryService, ledger: Ledger
) -> None:
    assert_refused(*REFUSALS[name], service=service, ledger=ledger)


# --- the policy's timestamp bounds ------------------------------------------------------------------------

BOUNDS = {
    "toml-datetimes": ("lower = 2024-01-01T00:00:00, upper = 2024-12-31T23:59:59", None),
    "iso-strings": ('lower = "2024-01-01 00:00:00", upper = "2024-12-31T23:59:59"', None),
    "dates-as-midnights": ("lower = 2024-01-01, upper = 2024-12-31", None),
    "an-offset": (
        "lower = 2024-01-01T00:00:00Z, upper = 2024-12-31T23:59:59Z",
        "a timestamp column is a timestamp without time zone",
    ),
    "not-a-timestamp": (
        'lower = "yesterday", upper = "2024-12-31T23:59:59"',
        "'yesterday' is not a timestamp",
    ),
    "upper-not-after-lower": (
        "lower = 2024-01-01T00:00:01, upper = 2024-01-01T00:00:01",
        "upper must be greater",
    ),
}


@pytest.mark.parametrize("name", list(BOUNDS))
def test_timestamp_bounds_are_datetimes_without_a_time_zone(name: str, tmp_path: Path) -> None:
    bounds, error = BOUNDS[name]
    text = POLICY.replace(
        'ts = { type = "timestamp", lower = 2024-01-01T00:00:00, upper = "2025-12-31 23:59:59" }',
        f'ts = {{ type = "timestamp", {bounds} }}',
    )
    if error is not None:
        with pytest.raises(ConfigError, match=r"columns\.ts") as raised:
            parse_config(text, path=tmp_path / "veil.toml")
        assert error in raised.value.message
        return
    dataset = parse_config(text, path=tmp_path / "veil.toml").dataset("demo")
    assert dataset is not None
    column = dataset.tables["events"].columns["ts"]
    assert (column.lower, column.upper) in (
        (datetime.datetime(2024, 1, 1), datetime.datetime(2024, 12, 31, 23, 59, 59)),
        (datetime.datetime(2024, 1, 1), datetime.datetime(2024, 12, 31)),
    )
    assert type(column.lower) is datetime.datetime


# --- a client ---------------------------------------------------------------------------------------------


def test_a_psycopg_client_receives_timestamps_as_datetimes(
    engine: Engine, tmp_path: Path, serve: Callable[[Path], RunningServer]
) -> None:
    """Over the wire (simple and extended protocol), a timestamp answer is described as ``timestamp``
    (OID 1114) and psycopg hands back ``datetime.datetime`` values; the catalog shows the column as
    ``timestamp without time zone``."""
    config = tmp_path / "veil.toml"
    config.write_text(f'[ledger]\npath = "ledger.sqlite"\n{engine.policy}', encoding="utf-8")
    Ledger.create(tmp_path / "ledger.sqlite").close()
    analyst = Admin(config).add_analyst(10.0, prefix="stamps")
    server = serve(config)
    with psycopg.connect(server.conninfo(analyst), autocommit=True) as connection:
        connection.execute("SET veil.epsilon = 1")
        for prepare in (False, True):
            cursor = connection.execute(
                "SELECT MIN(ts) AS first, date_trunc('year', ts) AS year FROM events GROUP BY 2 ORDER BY 2",
                prepare=prepare,
            )
            assert [column.type_code for column in cursor.description or []] == [1114, 1114]
            rows = cursor.fetchall()
            assert [year for _, year in rows] == [
                datetime.datetime(2024, 1, 1),
                datetime.datetime(2025, 1, 1),
            ]
            assert all(type(first) is datetime.datetime and FIRST <= first <= LAST for first, _ in rows)
        (data_type,) = connection.execute(
            "SELECT data_type FROM information_schema.columns WHERE table_name = 'events' AND column_name = 'ts'"
        ).fetchone() or (None,)
        assert data_type == "timestamp without time zone"


# 23:30 at -05 is 04:30 the next day in UTC: every row falls in February
NEW_YORK_EVENTS = (
    "CREATE TABLE events AS SELECT i AS pid, TIMESTAMPTZ '2024-01-31 23:30:00-05' AS ts,"
    " NULL::timestamp AS unbounded, 'north'::text AS region FROM generate_series(1, 400) AS t(i)"
)
NEW_YORK = Rows("demo", POLICY, "events.duckdb", {"duckdb": NEW_YORK_EVENTS, "postgres": NEW_YORK_EVENTS})


@pytest.fixture
def new_york_engine(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Engine]:
    """The rows with their timestamps stored with a time zone, where the default time zone is New York:
    the machine's (``TZ``, which DuckDB takes when it opens a database) and the PostgreSQL session's
    (from the connection string)."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        if request.param == "duckdb":
            yield on_duckdb(NEW_YORK, tmp_path)
        else:
            dsn = request.getfixturevalue("postgres_dsn")
            with on_postgres(NEW_YORK, make_conninfo(dsn, options="-c TimeZone=America/New_York")) as engine:
                yield engine
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize(
    "new_york_engine", ["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_a_timestamptz_column_is_read_in_utc(new_york_engine: Engine, ledger: Ledger) -> None:
    """A column stored as ``TIMESTAMP WITH TIME ZONE`` and declared ``timestamp`` is read in UTC on both
    engines, whatever their default time zone: Veil's engine sessions run with ``TimeZone = 'UTC'``."""
    with query_service(new_york_engine, ledger, seed=3) as service:
        outcome = run(service, "SELECT date_trunc('month', ts) AS month, COUNT(*) FROM events GROUP BY 1")
    assert outcome.table is not None
    counts = dict(outcome.table.rows)
    assert (
        abs(counts[datetime.datetime(2024, 2, 1)] - 400) <= 2
        and abs(counts[datetime.datetime(2024, 1, 1)]) <= 2
    )
