"""Parallel composition across statements through ``veil serve`` and psycopg: one query per region, each
charged to its region only, on a DuckDB dataset and on a PostgreSQL dataset, with the ledger in SQLite
or in PostgreSQL; and the tricks that must not open a fresh partition.

The data (``REGION_SQL``) is made in SQL, the same on both engines: 2,000 patients, one row each in
``patients``, one to three visits each in ``visits``, everyone's rows in one region — except every
hundredth patient, whose second visit is in the next region (a person who moved): the engine guard
leaves them out of statements pinned to a region, and only of those.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest
import tomli_w

from tests.conftest import Admin, Analyst, RunningServer, running_server, schema_in
from tests.postgres.conftest import in_schema

PEOPLE = 2000
REGIONS = ["north", "south", "east", "west", "islands"]  # nobody lives on the islands
GRANT = 1.0
DSN_VARIABLE = "VEIL_PARALLEL_DSN"
ORDINARY_REFUSAL = r'on dataset "regions", but only epsilon 0\.0 remains\n'


def region_of(expression: str) -> str:
    return f"CASE {expression} % 4 WHEN 0 THEN 'north' WHEN 1 THEN 'south' WHEN 2 THEN 'east' ELSE 'west' END"


REGION_SQL = f"""
CREATE TABLE patients AS
SELECT g AS patient_id, {region_of("g")} AS region, g % 90 AS age
FROM generate_series(1, {PEOPLE}) AS p(g);
CREATE TABLE visits AS
SELECT g AS patient_id,
       CASE WHEN g % 100 = 0 AND k = 2 THEN {region_of("g + 1")} ELSE {region_of("g")} END AS region,
       (g * 7 + k * 13) % 100 AS cost
FROM generate_series(1, {PEOPLE}) AS p(g), generate_series(1, 3) AS v(k)
WHERE k <= g % 3 + 1
"""


def truth() -> dict[str, Any]:
    """Exact answers, from the same formulas as REGION_SQL."""
    regions = ["north", "south", "east", "west"]
    patients = {g: regions[g % 4] for g in range(1, PEOPLE + 1)}
    stayers = {region: 0 for region in regions}
    visits_of_stayers = {region: 0 for region in regions}
    for g, region in patients.items():
        if g % 100 == 0 and g % 3 + 1 >= 2:
            continue  # moved: rows in two regions
        stayers[region] += 1
        visits_of_stayers[region] += g % 3 + 1
    return {
        "patients": {r: sum(1 for v in patients.values() if v == r) for r in regions},
        "visits_of_stayers": visits_of_stayers,
    }


def policy(backend: dict[str, Any], ledger: dict[str, Any]) -> dict[str, Any]:
    region = {"type": "text", "public": True, "values": REGIONS, "partition": True}
    tables = {
        "patients": {
            "privacy_unit": "patient_id",
            "max_contributions": 1,
            "columns": {
                "patient_id": {"type": "integer"},
                "region": region,
                "age": {"type": "integer", "lower": 0, "upper": 100},
            },
        },
        "visits": {
            "privacy_unit": "patient_id",
            "max_contributions": 3,
            "columns": {
                "patient_id": {"type": "integer"},
                "region": region,
                "cost": {"type": "real", "lower": 0, "upper": 100},
            },
        },
    }
    dataset = {**backend, "default_epsilon": 0.5, "max_epsilon": 200.0, "tables": tables}
    return {"ledger": ledger, "datasets": {"regions": dataset}}


@dataclass(frozen=True)
class Site:
    """A ``veil serve`` of dataset ``regions`` on one engine, with its ledger in one store."""

    server: RunningServer
    admin: Admin

    def analyst(self, epsilon: float = GRANT) -> Analyst:
        analyst = Analyst(f"analyst{next(_numbers)}", "pw")
        self.admin.check("analyst", "add", analyst.name, "--password-stdin", input=analyst.password + "\n")
        self.admin.check("budget", "grant", analyst.name, "regions", repr(epsilon))
        return analyst

    def connect(self, analyst: Analyst) -> psycopg.Connection[Any]:
        return psycopg.connect(self.server.conninfo(analyst, "regions"), autocommit=True)


_numbers = iter(range(1, 1_000_000))


@contextlib.contextmanager
def serve_site(
    directory: Path, backend: dict[str, Any], ledger: dict[str, Any], dsn: str | None
) -> Iterator[Site]:
    config = directory / "veil.toml"
    config.write_text(tomli_w.dumps(policy(backend, ledger)), encoding="utf-8")
    admin = Admin(config)
    admin.check("analyst", "add", "first", "--password-stdin", input="pw\n")  # makes the ledger
    with pytest.MonkeyPatch.context() as environment:  # veil serve and veil explain read the DSN
        if dsn is not None:
            environment.setenv(DSN_VARIABLE, dsn)
        with running_server(config, directory / "serve.log") as server:
            yield Site(server, admin)


@pytest.fixture(scope="module")
def duckdb_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("parallel") / "regions.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.execute(REGION_SQL)
    return path


@pytest.fixture(scope="module")
def duckdb_site(tmp_path_factory: pytest.TempPathFactory, duckdb_file: Path) -> Iterator[Site]:
    """DuckDB data, SQLite ledger."""
    directory = tmp_path_factory.mktemp("duckdb_site")
    backend = {"backend": "duckdb", "path": str(duckdb_file)}
    with serve_site(directory, backend, {"path": "ledger.sqlite"}, None) as site:
        yield site


@pytest.fixture(scope="module")
def postgres_site(tmp_path_factory: pytest.TempPathFactory, postgres_dsn: str) -> Iterator[Site]:
    """PostgreSQL data, PostgreSQL ledger."""
    directory = tmp_path_factory.mktemp("postgres_site")
    with schema_in(postgres_dsn) as data, schema_in(postgres_dsn) as ledger_schema:
        with psycopg.connect(postgres_dsn, autocommit=True) as pg:
            in_schema(pg, data, REGION_SQL)
        backend = {"backend": "postgres", "dsn_env": DSN_VARIABLE, "schema": data}
        ledger = {"dsn": postgres_dsn, "schema": ledger_schema}
        with serve_site(directory, backend, ledger, postgres_dsn) as site:
            yield site


@pytest.fixture(scope="module")
def mixed_site(
    tmp_path_factory: pytest.TempPathFactory, duckdb_file: Path, postgres_dsn: str
) -> Iterator[Site]:
    """DuckDB data, PostgreSQL ledger."""
    directory = tmp_path_factory.mktemp("mixed_site")
    with schema_in(postgres_dsn) as ledger_schema:
        backend = {"backend": "duckdb", "path": str(duckdb_file)}
        with serve_site(directory, backend, {"dsn": postgres_dsn, "schema": ledger_schema}, None) as site:
            yield site


SITES = [
    pytest.param("duckdb_site", id="duckdb-data-sqlite-ledger"),
    pytest.param("postgres_site", id="postgres-data-postgres-ledger", marks=pytest.mark.postgres),
    pytest.param("mixed_site", id="duckdb-data-postgres-ledger", marks=pytest.mark.postgres),
]


@pytest.fixture(params=SITES)
def site(request: pytest.FixtureRequest) -> Site:
    site: Site = request.getfixturevalue(request.param)
    return site


Query = Callable[..., tuple[list[tuple[Any, ...]], list[str]]]


@pytest.fixture
def query(site: Site) -> Iterator[Callable[[Analyst], Query]]:
    """``query(analyst)(sql, *params, epsilon=…)`` → (rows, notices), on a fresh connection per analyst."""
    opened: list[psycopg.Connection[Any]] = []

    def for_analyst(analyst: Analyst) -> Query:
        connection = site.connect(analyst)
        opened.append(connection)
        notices: list[str] = []
        connection.add_notice_handler(lambda diagnostic: notices.append(diagnostic.message_primary or ""))

        def run(sql: str, *params: Any, epsilon: float = 0.5) -> tuple[list[tuple[Any, ...]], list[str]]:
            connection.execute(f"SET veil.epsilon = {epsilon!r}")
            notices.clear()
            rows = connection.execute(sql, params or None).fetchall()
            return rows, list(notices)

        return run

    yield for_analyst
    for connection in opened:
        connection.close()


def budget_rows(site: Site, analyst: Analyst) -> dict[str, tuple[float, float]]:
    """veil.budget as the analyst sees it: (spent, remaining) of the dataset and of each value of
    patients.region ("(other)": any value not charged)."""
    with site.connect(analyst) as connection:
        rows = connection.execute(
            "SELECT partition_column, partition_value, spent_epsilon, remaining_epsilon FROM veil.budget"
            " WHERE partition_column IS NULL OR partition_column = 'patients.region'"
        ).fetchall()
    return {
        "dataset" if column is None else value or "(other)": (spent, left)
        for column, value, spent, left in rows
    }


def refused(run: Query, sql: str, *, epsilon: float, match: str) -> None:
    """The statement is refused for want of budget (53Z01), with ``match`` in its message."""
    with pytest.raises(psycopg.Error, match=match) as raised:
        run(sql, epsilon=epsilon)
    assert raised.value.sqlstate == "53Z01"


def tolerance(sensitivity: float, epsilon: float) -> float:
    return sensitivity / epsilon * math.log(2 / 1e-9) + 1


# -- one query per region ----------------------------------------------------------------------------


def test_one_query_per_region_costs_one_query(site: Site, query: Callable[[Analyst], Query]) -> None:
    analyst = site.analyst()
    run = query(analyst)
    expected = truth()["patients"]
    for region in ("north", "south", "east", "west"):
        (row,), notices = run("SELECT COUNT(*) FROM patients WHERE region = %s", region, epsilon=1.0)
        assert abs(row[0] - expected[region]) <= tolerance(1, 1.0)
        assert (
            f"charged to the partition patients.region = '{region}' only (parallel composition)" in notices[0]
        )
        assert f"0 of 1 ε remains for statements pinned to patients.region = '{region}'" in notices[0]
    assert budget_rows(site, analyst) == {
        "dataset": (1.0, 0.0),
        "east": (1.0, 0.0),
        "north": (1.0, 0.0),
        "south": (1.0, 0.0),
        "west": (1.0, 0.0),
        "(other)": (0.0, 1.0),
    }


def test_no_region_gets_more_than_the_grant(site: Site, query: Callable[[Analyst], Query]) -> None:
    analyst = site.analyst()
    run = query(analyst)
    run("SELECT AVG(age) FROM patients WHERE region = 'north'")
    run("SELECT SUM(age) FROM patients WHERE region = 'north'")  # another query: no stored answer
    refused(
        run,
        "SELECT COUNT(*) FROM patients WHERE region = 'north' AND age > 3",
        epsilon=0.1,
        match=r"in partition patients\.region = 'north', but only epsilon 0\.0 remains there",
    )
    run("SELECT COUNT(*) FROM patients WHERE region = 'south'", epsilon=1.0)
    refused(run, "SELECT COUNT(*) FROM patients", epsilon=0.1, match=ORDINARY_REFUSAL)


def test_an_ordinary_statement_counts_in_every_region(site: Site, query: Callable[[Analyst], Query]) -> None:
    analyst = site.analyst()
    run = query(analyst)
    run("SELECT COUNT(*) FROM patients", epsilon=0.4)
    run("SELECT COUNT(*) FROM patients WHERE region = 'east'", epsilon=0.6)
    refused(run, "SELECT COUNT(*) FROM patients WHERE region = 'east'", epsilon=0.1, match="partition")
    (_, notices) = run("SELECT COUNT(*) FROM patients WHERE region = 'west'", epsilon=0.6)
    assert (
        "0 of 1 ε remains for statements pinned to patients.region = 'west', 0 for any statement"
        in notices[0]
    )


# -- tricks that must not open a fresh partition ------------------------------------------------------

TRICKS = [
    "SELECT COUNT(*) FROM patients WHERE region = 'North'",
    "SELECT COUNT(*) FROM patients WHERE region = 'north '",
    "SELECT COUNT(*) FROM patients WHERE region = 'atlantis'",
    "SELECT COUNT(*) FROM patients WHERE region IN ('north', 'atlantis')",
    "SELECT COUNT(*) FROM patients WHERE region = 'north' OR region = 'south'",
    "SELECT COUNT(*) FROM patients WHERE NOT region <> 'north'",
    "SELECT COUNT(*) FROM patients WHERE (region = 'north') IS NOT FALSE",
    "SELECT COUNT(*) FROM patients WHERE region IN ('north', NULL)",
    "SELECT COUNT(*) FROM patients WHERE LOWER(region) = 'north'",
    "SELECT COUNT(*) FROM patients WHERE region = 'north' AND region = 'south'",
]


@pytest.mark.parametrize("sql", TRICKS)
def test_a_trick_is_charged_as_an_ordinary_statement(
    site: Site, query: Callable[[Analyst], Query], sql: str
) -> None:
    """After a whole grant spent on the north, anything not pinned exactly to another region is refused."""
    analyst = site.analyst()
    run = query(analyst)
    run("SELECT COUNT(*) FROM patients WHERE region = 'north'", epsilon=1.0)
    refused(run, sql, epsilon=0.01, match=ORDINARY_REFUSAL)
    history = json.loads(site.admin.check("budget", "history", analyst.name, "--json").stdout)
    assert [spend["partition"] for spend in history] == [{"column": "patients.region", "values": ["north"]}]


def test_an_in_list_with_repeats_is_charged_once_to_each_value(
    site: Site, query: Callable[[Analyst], Query]
) -> None:
    analyst = site.analyst()
    run = query(analyst)
    (_, notices) = run(
        "SELECT COUNT(*) FROM patients WHERE region IN ('south', 'north', 'south')", epsilon=0.7
    )
    assert "charged to the partition patients.region IN ('north', 'south') only" in notices[0]
    assert budget_rows(site, analyst) == {
        "dataset": (0.7, 0.3),
        "north": (0.7, 0.3),
        "south": (0.7, 0.3),
        "(other)": (0.0, 1.0),
    }
    run("SELECT COUNT(*) FROM patients WHERE region = 'east'", epsilon=1.0)
    refused(run, "SELECT COUNT(*) FROM patients WHERE region = 'south'", epsilon=0.4, match="partition")


# -- the engine guard, the other table, prepared statements ---------------------------------------


def test_a_pinned_query_on_visits_leaves_out_people_who_moved(
    site: Site, query: Callable[[Analyst], Query]
) -> None:
    analyst = site.analyst(epsilon=100.0)
    run = query(analyst)
    expected = truth()["visits_of_stayers"]
    for region in ("north", "west"):
        (row,), notices = run("SELECT COUNT(*) FROM visits WHERE region = %s", region, epsilon=50.0)
        assert abs(row[0] - expected[region]) <= tolerance(3, 50.0)
        assert f"visits.region = '{region}'" in notices[0]
    (row,), _ = run(
        "SELECT COUNT(*) FROM visits WHERE region IN ('north', 'south', 'east', 'west')", epsilon=1.0
    )
    assert budget_rows(site, analyst)["dataset"] == (
        51.0,
        49.0,
    )  # the IN list covers every region: it is in each


def test_a_prepared_statement_is_charged_to_the_value_bound_to_it(site: Site) -> None:
    analyst = site.analyst()
    with site.connect(analyst) as connection:
        connection.execute("SET veil.epsilon = 1")
        with connection.cursor() as cursor:
            for region in ("north", "south", "east"):
                cursor.execute("SELECT COUNT(*) FROM patients WHERE region = %s", [region], prepare=True)
                assert cursor.fetchall()
    assert budget_rows(site, analyst)["dataset"] == (1.0, 0.0)


def test_explain_names_the_partition(site: Site) -> None:
    output = site.admin.check(
        "explain", "SELECT COUNT(*) FROM patients WHERE region = 'south' AND age > 30", "--dataset", "regions"
    ).stdout
    assert "charged to the partition patients.region = 'south' only (parallel composition)" in output
    assert "_dp_same_person" in output


def test_budget_show_and_history_show_the_partitions(site: Site, query: Callable[[Analyst], Query]) -> None:
    analyst = site.analyst()
    run = query(analyst)
    run("SELECT COUNT(*) FROM patients WHERE region = 'north'", epsilon=0.25)
    run("SELECT COUNT(*) FROM visits WHERE region = 'south'", epsilon=0.5)
    (record,) = json.loads(site.admin.check("budget", "show", analyst.name, "--json").stdout)
    assert record["spent_epsilon"] == 0.75  # one person may hold both: the columns add up
    assert [(p["column"], p["value"], p["remaining_epsilon"]) for p in record["partitions"]] == [
        ("patients.region", "north", 0.25),
        ("patients.region", None, 0.5),
        ("visits.region", "south", 0.25),
        ("visits.region", None, 0.75),
    ]
    text = site.admin.check("budget", "show", analyst.name).stdout
    assert "statements pinned to a partition (parallel composition):" in text
    assert "patients.region = 'north'" in text and "visits.region (any other value)" in text
    history = site.admin.check("budget", "history", analyst.name).stdout
    assert "patients.region = 'north'" in history and "visits.region = 'south'" in history
