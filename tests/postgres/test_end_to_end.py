"""A whole conversation on a PostgreSQL dataset: psycopg → ``veil serve`` → PostgreSQL, and back.

The data (2,000 visits of 400 people, 5 each, in a fresh schema) is made in SQL, so the exact
answers are known. Noisy answers are checked against tolerances derived from the noise scale
b = sensitivity / ε of each quantity: discrete Laplace noise exceeds k in absolute value with
probability at most 2·exp(−k/b), so ``b · ln(2/β) + 1`` (one more for the grid of real-valued
noise) fails with probability at most β = 1e-9 per released cell.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import tomli_w
from click.testing import CliRunner
from psycopg import errors as pg_errors

from proxy.cli.main import main as veil_main
from tests.conftest import Analyst, RunningServer, running_server
from tests.postgres.conftest import in_schema, schema_in

pytestmark = pytest.mark.postgres

DATASET = "clinic"
DSN_VARIABLE = "VEIL_E2E_CLINIC_DSN"
PEOPLE, VISITS_PER_PERSON = 400, 5
MAX_CONTRIBUTIONS = 5  # = visits per person, so bounding keeps every row and the truth is exact
EPSILON = 2.0
COST_LOWER, COST_UPPER = 0, 200
REGIONS = ["north", "south", "east", "west", "islands"]  # nobody lives on the islands
FAILURE_PROBABILITY = 1e-9
ANALYST = Analyst("dora", "pw-dora")
GRANT = 40.0

VISITS_SQL = f"""
CREATE TABLE visits AS
SELECT g AS visit_id,
       (g - 1) / {VISITS_PER_PERSON} + 1 AS patient_id,
       (ARRAY['north', 'south', 'east', 'west'])[((g - 1) / {VISITS_PER_PERSON}) % 4 + 1] AS region,
       ((g * 37) % 200)::double precision AS cost
FROM generate_series(1, {PEOPLE * VISITS_PER_PERSON}) AS g
"""


@dataclass(frozen=True)
class Clinic:
    server: RunningServer
    config: Path
    truth: dict[str, Any]


def tolerance(sensitivity: float, epsilon: float) -> float:
    return sensitivity / epsilon * math.log(2 / FAILURE_PROBABILITY) + 1


def policy(schema: str) -> dict[str, Any]:
    visits = {
        "privacy_unit": "patient_id",
        "max_contributions": MAX_CONTRIBUTIONS,
        "columns": {
            "visit_id": {"type": "integer"},
            "patient_id": {"type": "integer"},
            "region": {"type": "text", "public": True, "values": REGIONS},
            "cost": {"type": "real", "lower": COST_LOWER, "upper": COST_UPPER},
        },
    }
    dataset = {
        "backend": "postgres",
        "dsn_env": DSN_VARIABLE,
        "schema": schema,
        "default_epsilon": EPSILON,
        "max_epsilon": EPSILON,
        "tables": {"visits": visits},
    }
    return {"ledger": {"path": "ledger.sqlite"}, "datasets": {DATASET: dataset}}


def veil(config: Path, *args: str, input: str | None = None) -> str:
    result = CliRunner().invoke(veil_main, [*args, "--config", str(config)], input=input)
    assert result.exit_code == 0, f"veil {' '.join(args)} failed:\n{result.output}"
    return result.stdout


def measure_truth(pg: psycopg.Connection[Any], schema: str) -> dict[str, Any]:
    count, average = in_schema(pg, schema, "SELECT count(*), avg(cost) FROM visits").fetchone()  # type: ignore[misc]
    by_region = dict(pg.execute("SELECT region, count(*) FROM visits GROUP BY region").fetchall())
    (expensive,) = pg.execute("SELECT count(*) FROM visits WHERE cost >= 100").fetchone()  # type: ignore[misc]
    return {
        "count": count,
        "by_region": {region: by_region.get(region, 0) for region in REGIONS},
        "avg_cost": float(average),
        "sum_cost": float(average) * count,
        "expensive": expensive,
    }


@pytest.fixture(scope="module")
def clinic(postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clinic]:
    directory = tmp_path_factory.mktemp("postgres_e2e")
    with schema_in(postgres_dsn) as schema, contextlib.ExitStack() as stack:
        with psycopg.connect(postgres_dsn, autocommit=True) as pg:
            in_schema(pg, schema, VISITS_SQL)
            truth = measure_truth(pg, schema)
        config = directory / "veil.toml"
        config.write_text(tomli_w.dumps(policy(schema)), encoding="utf-8")
        veil(config, "analyst", "add", ANALYST.name, "--password-stdin", input=ANALYST.password + "\n")
        veil(config, "budget", "grant", ANALYST.name, DATASET, repr(GRANT))
        with pytest.MonkeyPatch.context() as environment:  # only the server process sees the DSN
            environment.setenv(DSN_VARIABLE, postgres_dsn)
            server = stack.enter_context(running_server(config, directory / "serve.log"))
        yield Clinic(server, config, truth)


@pytest.fixture
def connection(clinic: Clinic) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(
        clinic.server.conninfo(ANALYST, DATASET), prepare_threshold=None, autocommit=True
    ) as connection:
        yield connection


def spent(clinic: Clinic) -> float:
    rows = json.loads(veil(clinic.config, "budget", "show", ANALYST.name, "--json"))
    (row,) = [row for row in rows if row["dataset"] == DATASET]
    return float(row["spent_epsilon"])


def test_count_is_near_the_truth(clinic: Clinic, connection: psycopg.Connection[Any]) -> None:
    ((count,),) = connection.execute("SELECT COUNT(*) FROM visits").fetchall()
    assert isinstance(count, int)
    assert abs(count - clinic.truth["count"]) <= tolerance(MAX_CONTRIBUTIONS, EPSILON)


def test_group_by_answers_every_public_value_near_the_truth(
    clinic: Clinic, connection: psycopg.Connection[Any]
) -> None:
    rows = connection.execute("SELECT region, COUNT(*) FROM visits GROUP BY region").fetchall()
    released = dict(rows)
    assert sorted(released) == sorted(REGIONS)  # the empty "islands" group too, never others
    for region, count in released.items():
        assert abs(count - clinic.truth["by_region"][region]) <= tolerance(MAX_CONTRIBUTIONS, EPSILON), region


def test_average_is_within_the_interval_its_noisy_sum_and_count_allow(
    clinic: Clinic, connection: psycopg.Connection[Any]
) -> None:
    ((average,),) = connection.execute("SELECT AVG(cost) FROM visits").fetchall()
    share = EPSILON / 2  # AVG = noisy SUM / noisy COUNT, ε split equally (docs/privacy.md)
    sum_error = tolerance(MAX_CONTRIBUTIONS * max(abs(COST_LOWER), abs(COST_UPPER)), share)
    count_error = tolerance(MAX_CONTRIBUTIONS, share)
    total, count = clinic.truth["sum_cost"], clinic.truth["count"]
    low = max(COST_LOWER, (total - sum_error) / (count + count_error))
    high = min(COST_UPPER, (total + sum_error) / (count - count_error))
    assert low <= average <= high
    assert low <= clinic.truth["avg_cost"] <= high


def test_filtered_count_is_near_the_truth(clinic: Clinic, connection: psycopg.Connection[Any]) -> None:
    ((count,),) = connection.execute("SELECT COUNT(*) FROM visits WHERE cost >= 100").fetchall()
    assert abs(count - clinic.truth["expensive"]) <= tolerance(MAX_CONTRIBUTIONS, EPSILON)


def test_each_answer_spends_epsilon(clinic: Clinic, connection: psycopg.Connection[Any]) -> None:
    before = spent(clinic)
    # a query no other test asks: a repeat would be served, free, from the answer cache
    connection.execute("SELECT COUNT(*) FROM visits WHERE cost >= -12345").fetchall()
    assert spent(clinic) == pytest.approx(before + EPSILON, abs=1e-9)


def test_selecting_a_private_column_is_refused_with_42501_and_spends_nothing(
    clinic: Clinic, connection: psycopg.Connection[Any]
) -> None:
    before = spent(clinic)
    with pytest.raises(pg_errors.InsufficientPrivilege) as raised:
        connection.execute("SELECT patient_id FROM visits")
    assert raised.value.sqlstate == "42501"
    assert spent(clinic) == before
    ((one,),) = connection.execute("SELECT 1").fetchall()  # the session goes on
    assert one == 1


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT region, MEDIAN(cost) AS m, MAX(cost) FROM visits GROUP BY region ORDER BY region",
        "SELECT CASE WHEN region IN ('north', 'south') THEN 'n/s' ELSE 'e/w' END AS side, COUNT(*)"
        " FROM visits WHERE cost < 1000 GROUP BY 1",
        "SELECT COUNT(*) AS people, AVG(veil_clamp(n, 0, 20)) AS visits"
        " FROM (SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY patient_id) AS p",
        "SELECT region, SUM(CASE WHEN cost >= 100 THEN 1 ELSE 0 END) AS expensive, STDDEV(cost)"
        " FROM visits GROUP BY region HAVING COUNT(*) > 0 LIMIT 2",
    ],
    ids=["quantiles", "expression-key", "per-person-subquery", "expressions-having-limit"],
)
def test_the_wider_sql_surface_answers_through_psycopg(
    clinic: Clinic, connection: psycopg.Connection[Any], sql: str
) -> None:
    """The features beyond plain COUNT/SUM/AVG also run on PostgreSQL, through the wire."""
    before = spent(clinic)
    rows = connection.execute(sql).fetchall()
    assert rows, "an answer, not an error"
    assert spent(clinic) == pytest.approx(before + EPSILON)


def test_a_ttest_runs_on_postgresql_and_is_charged_epsilon_and_delta(
    clinic: Clinic, connection: psycopg.Connection[Any]
) -> None:
    veil(clinic.config, "budget", "grant", ANALYST.name, DATASET, "1", "--delta", "1e-4")
    rows = json.loads(veil(clinic.config, "budget", "show", ANALYST.name, "--json"))
    before = next(row for row in rows if row["dataset"] == DATASET)
    connection.execute("SET veil.delta = 1e-6")
    cursor = connection.execute("SELECT veil_ttest(cost, region = 'north', 'p_value') FROM visits")
    row = dict(zip([c.name for c in cursor.description or []], cursor.fetchone() or (), strict=True))
    assert math.isfinite(row["t"]) and row["noise_sd"] > 0 and 0 <= row["p_value"] <= 1
    assert (row["epsilon"], row["delta"], row["mode"]) == (EPSILON, 1e-6, "sound")
    # 100 of the 400 people live in the north: the noisy sizes are Laplace(2 / (0.1 ε)) away from them
    assert abs(row["n_a"] - 100) <= tolerance(2, 0.1 * EPSILON) and abs(row["n_b"] - 300) <= tolerance(
        2, 0.1 * EPSILON
    )
    rows = json.loads(veil(clinic.config, "budget", "show", ANALYST.name, "--json"))
    after = next(row for row in rows if row["dataset"] == DATASET)
    assert after["spent_epsilon"] == pytest.approx(before["spent_epsilon"] + EPSILON, abs=1e-9)
    assert after["spent_delta"] == pytest.approx(before["spent_delta"] + 1e-6)
