"""The pipeline without the wire, on both engines: a real DuckDB file or a real PostgreSQL schema holding
the same rows, a real SQLite ledger, a seeded RandomSource.

Every test that takes ``service`` runs twice: ``[duckdb]`` always, ``[postgres]`` (marked ``postgres``)
on the server of ``tests/postgres/conftest.py`` — skipped when it is unreachable, unless
``VEIL_REQUIRE_POSTGRES=1``. The module lives here, not under ``tests/unit``, because that conftest's
fixtures are visible only below ``tests/postgres``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import duckdb
import psycopg
import pytest
from psycopg import sql as pgsql

from budget.ledger import Ledger, SpendState
from budget.loss import PrivacyLoss
from proxy.analysis.statements import PrivateQuery, classify
from proxy.backends.base import Backend
from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.postgres import PostgresBackend
from proxy.config import ColumnType
from proxy.errors import (
    BackendUnavailableError,
    BudgetExhaustedError,
    InvalidParameterValueError,
    PolicyViolationError,
    as_proxy_error,
)
from proxy.query.planning import prepare_release
from proxy.query.service import Principal, QueryService, StatementOutcome
from proxy.release.apply import release
from proxy.settings import SessionSettings
from proxy.wire.scram import make_scram_verifier
from tests.postgres.conftest import in_schema
from tests.service_fixture import serving
from tests.unit.proxy.policy_fixture import clinic_policy, clinic_postgres_policy

ALICE = Principal("alice")

# The same rows in both engines, with the column types DuckDB infers for its statements (BIGINT from
# range(), DECIMAL(3,1) for the literal 10.0, VARCHAR = text). No `people` table: queries on it fail
# in the engine. One person alone holds the note 'secret': a data-derived key that must never be
# released. 2,000 users with 4 ratings each and one heavy user with 90: "auto" should choose L near 4.
DUCKDB_CLINIC = [
    "CREATE TABLE visits AS SELECT i // 3 AS patient_id, 20 + i % 50 AS age, 10.0 AS cost, 'x' AS note,"
    " CASE WHEN i % 2 = 0 THEN 'north' ELSE 'south' END AS region,"
    " CASE WHEN i % 3 = 0 THEN 'female' ELSE 'male' END AS sex FROM range(3000) t(i)",
    "INSERT INTO visits VALUES (99999, 25, 10.0, 'secret', 'north', 'male')",
    "CREATE TABLE ratings AS SELECT i // 4 AS user_id, 1 + i % 5 AS stars FROM range(8000) t(i)"
    " UNION ALL SELECT 5000, 3 FROM range(90)",
    "CREATE TABLE zones AS SELECT * FROM (VALUES ('north', 'N'), ('south', 'S'), ('east', 'E')) AS t(code, zone)",
]
POSTGRES_CLINIC = """
CREATE TABLE visits (
    patient_id bigint, age bigint, cost numeric(3, 1), note text, region text, sex text
);
INSERT INTO visits
SELECT i / 3, 20 + i % 50, 10.0, 'x',
       CASE WHEN i % 2 = 0 THEN 'north' ELSE 'south' END,
       CASE WHEN i % 3 = 0 THEN 'female' ELSE 'male' END
FROM generate_series(0::bigint, 2999) AS t(i);
INSERT INTO visits VALUES (99999, 25, 10.0, 'secret', 'north', 'male');
CREATE TABLE ratings (user_id bigint, stars bigint);
INSERT INTO ratings
SELECT i / 4, 1 + i % 5 FROM generate_series(0::bigint, 7999) AS t(i)
UNION ALL SELECT 5000, 3 FROM generate_series(1, 90);
CREATE TABLE zones (code text, zone text);
INSERT INTO zones VALUES ('north', 'N'), ('south', 'S'), ('east', 'E');
"""
BACKENDS = ["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)]


def duckdb_clinic(directory: Path) -> Path:
    path = directory / "clinic.duckdb"
    with duckdb.connect(str(path)) as connection:
        for statement in DUCKDB_CLINIC:
            connection.execute(statement)
    return path


def postgres_clinic(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as connection:
        in_schema(connection, schema, POSTGRES_CLINIC)


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    ledger.add_analyst("alice", make_scram_verifier("secret", iterations=1))
    ledger.grant("alice", "clinic", PrivacyLoss(1.0, 1e-5))
    return ledger


@pytest.fixture(params=BACKENDS)
def service(request: pytest.FixtureRequest, tmp_path: Path, ledger: Ledger) -> Iterator[QueryService]:
    backend: Backend
    if request.param == "duckdb":
        dataset = clinic_policy(tmp_path)
        backend = DuckDBBackend(duckdb_clinic(tmp_path))
    else:
        dsn = request.getfixturevalue("postgres_dsn")  # skips (or fails) here when the server is down
        schema = request.getfixturevalue("fresh_schema")  # dropped after this fixture's teardown
        postgres_clinic(dsn, schema)
        dataset = clinic_postgres_policy(dsn, schema)
        assert dataset.dsn is not None
        backend = PostgresBackend(
            dataset.dsn,
            schema=dataset.schema,
            pool_size=dataset.pool_size,
            statement_timeout_ms=dataset.statement_timeout_ms,
        )
    with serving(dataset, backend, ledger, seed=7) as service:
        yield service


@pytest.mark.postgres
def test_both_engines_hold_the_same_rows(tmp_path: Path, postgres_dsn: str, fresh_schema: str) -> None:
    postgres_clinic(postgres_dsn, fresh_schema)
    with (
        duckdb.connect(str(duckdb_clinic(tmp_path)), read_only=True) as duck,
        psycopg.connect(postgres_dsn, autocommit=True) as pg,
    ):
        for table in ("visits", "ratings"):
            expected = sorted(duck.execute(f"SELECT * FROM {table}").fetchall())
            name = pgsql.Identifier(fresh_schema, table)
            actual = sorted(pg.execute(pgsql.SQL("SELECT * FROM {}").format(name)).fetchall())
            assert len(actual) == len(expected) > 3000
            assert actual == expected  # values and Python types: int, Decimal('10.0'), str


def run(service: QueryService, sql: str, settings: SessionSettings | None = None) -> StatementOutcome:
    (tree,) = service.parse(sql)
    return service.run(tree, principal=ALICE, settings=settings or SessionSettings())


def test_answer_is_noisy_near_the_truth_and_debited(service: QueryService, ledger: Ledger) -> None:
    outcome = run(service, "SELECT COUNT(*) FROM visits")
    assert outcome.table is not None
    (count,) = outcome.table.rows[0]
    # sensitivity 3, ε = 0.1 → scale 30; P(|noise| > 600) = e^-20
    assert abs(count - 3000) <= 600
    assert ledger.balance("alice", "clinic").spent_epsilon == pytest.approx(0.1)
    assert [spend.state for spend in ledger.history("alice")] == [SpendState.COMMITTED]
    assert "0.9 of 1 ε remains" in outcome.notices[0]


def test_session_epsilon_changes_the_charge(service: QueryService, ledger: Ledger) -> None:
    settings = SessionSettings()
    run(service, "SET veil.epsilon = 0.25", settings)
    run(service, "SELECT sex, AVG(age) FROM visits GROUP BY sex", settings)
    assert ledger.balance("alice", "clinic").spent_epsilon == pytest.approx(0.25)
    assert run(service, "SHOW veil.epsilon", settings).table.rows == [("0.25",)]  # type: ignore[union-attr]


def test_engine_failure_is_charged_with_a_constant_error(service: QueryService, ledger: Ledger) -> None:
    """Whether and how a query fails in the engine may depend on private rows: charged, one message."""
    with pytest.raises(BackendUnavailableError) as raised:
        run(service, "SELECT COUNT(*) FROM people")
    assert raised.value.message == "the database engine failed while answering the query"
    assert "people" not in str(raised.value.detail), "engine text is not forwarded"
    assert ledger.balance("alice", "clinic").spent_epsilon == pytest.approx(0.1)
    assert [spend.state for spend in ledger.history("alice")] == [SpendState.COMMITTED]


def test_over_budget_is_refused_and_spends_nothing(service: QueryService, ledger: Ledger) -> None:
    settings = SessionSettings()
    run(service, "SET veil.epsilon = 0.6", settings)
    run(service, "SELECT COUNT(*) FROM visits", settings)
    with pytest.raises(Exception) as raised:  # another query: a repeat would be served from the cache
        run(service, "SELECT COUNT(*) FROM visits WHERE age > 30", settings)
    error = as_proxy_error(raised.value)
    assert isinstance(error, BudgetExhaustedError) and error.sqlstate == "53Z01"
    assert ledger.balance("alice", "clinic").spent_epsilon == pytest.approx(0.6)
    assert len(ledger.history("alice")) == 1


def test_epsilon_above_the_dataset_maximum_is_refused(service: QueryService, ledger: Ledger) -> None:
    """A startup parameter bypasses SET; the query itself refuses too, before spending."""
    settings = SessionSettings({"veil.epsilon": "2"})
    with pytest.raises(InvalidParameterValueError, match="max_epsilon"):
        run(service, "SELECT COUNT(*) FROM visits", settings)
    assert ledger.history("alice") == []


def test_invalid_epsilon_setting_is_refused() -> None:
    with pytest.raises(
        InvalidParameterValueError, match=r'invalid value for parameter "veil\.epsilon"'
    ) as raised:
        SessionSettings().set("veil.epsilon", "-1")
    assert raised.value.hint == "epsilon must be greater than 0"


def test_constant_query_reads_no_data(service: QueryService, ledger: Ledger) -> None:
    outcome = run(service, "SELECT 1 + 1 AS two, current_user, current_database()")
    assert outcome.table is not None
    assert outcome.table.rows == [(2, "alice", "clinic")]
    assert [c.name for c in outcome.table.columns] == ["two", "current_user", "current_database"]
    assert ledger.history("alice") == []


def test_set_refuses_epsilon_above_the_maximum_and_keeps_the_old_value(service: QueryService) -> None:
    settings = SessionSettings()
    run(service, "SET veil.epsilon = 0.5", settings)
    with pytest.raises(InvalidParameterValueError, match="max_epsilon"):
        run(service, "SET veil.epsilon = 2", settings)
    assert settings.get("veil.epsilon") == "0.5"


def test_three_tenths_pay_for_three_queries_of_a_tenth(service: QueryService, ledger: Ledger) -> None:
    """Decimal accounting: binary float sums would refuse the third query (0.1+0.1+0.1 > 0.3)."""
    ledger.add_analyst("carol", make_scram_verifier("pw", iterations=1))
    ledger.grant("carol", "clinic", PrivacyLoss(0.3))
    for age in range(4):  # four different queries: a repeat would be served from the answer cache
        (tree,) = service.parse(f"SELECT COUNT(*) FROM visits WHERE age > {age}")
        if age == 3:
            with pytest.raises(Exception, match=r"asked for epsilon 0\.1 .* only epsilon 0\.0 remains"):
                service.run(tree, principal=Principal("carol"), settings=SessionSettings())
        else:
            service.run(tree, principal=Principal("carol"), settings=SessionSettings())
    assert ledger.balance("carol", "clinic").remaining_epsilon == 0


def test_group_by_expression_releases_every_key_of_its_derived_domain(service: QueryService) -> None:
    outcome = run(service, "SELECT FLOOR(age / 10) * 10 AS decade, COUNT(*) AS n FROM visits GROUP BY 1")
    assert outcome.table is not None
    decades = [row[0] for row in outcome.table.rows]
    assert decades == [float(d) for d in range(0, 101, 10)], "keys come from the bounds 0..100, not the data"
    counts = dict(outcome.table.rows)
    # ages 20..69 evenly (60 visits per age); sensitivity 3, ε 0.1: |noise| > 600 has probability e^-20
    assert abs(counts[30.0] - 600) <= 600
    assert abs(counts[90.0]) <= 600, "an empty decade is released as pure noise"


def test_post_processing_orders_limits_and_computes(service: QueryService, ledger: Ledger) -> None:
    outcome = run(
        service,
        "SELECT sex, COUNT(*) AS n, SUM(cost) / COUNT(*) AS mean_cost FROM visits"
        " GROUP BY sex HAVING COUNT(*) > -100000 ORDER BY n DESC LIMIT 1",
    )
    assert outcome.table is not None
    assert [c.name for c in outcome.table.columns] == ["sex", "n", "mean_cost"]
    assert len(outcome.table.rows) == 1
    assert outcome.tag == "SELECT 1"
    assert ledger.balance("alice", "clinic").spent_epsilon == pytest.approx(0.1)


def test_group_keys_from_the_data_need_delta(service: QueryService, ledger: Ledger) -> None:
    with pytest.raises(PolicyViolationError, match="keys are not public") as raised:
        run(service, "SELECT note, COUNT(*) FROM visits GROUP BY note")
    assert "veil.delta" in (raised.value.hint or "")
    assert ledger.history("alice") == []


def test_thresholding_releases_shared_keys_and_hides_a_single_persons_key(
    service: QueryService, ledger: Ledger
) -> None:
    settings = SessionSettings({"veil.epsilon": "1", "veil.delta": "1e-6"})
    outcome = run(service, "SELECT note, COUNT(*) FROM visits GROUP BY note", settings)
    assert outcome.table is not None
    assert [row[0] for row in outcome.table.rows] == ["x"]
    balance = ledger.balance("alice", "clinic")
    assert (balance.spent_epsilon, balance.spent_delta) == (pytest.approx(1.0), pytest.approx(1e-6))
    assert "τ=" in outcome.notices[0]


def test_a_key_held_by_one_person_is_never_released_over_many_draws(service: QueryService) -> None:
    """P(release) per draw is at most δ / L = 3.3e-7 (spec: union bound); 2,000 seeded draws."""
    (tree,) = service.parse("SELECT note, COUNT(*) FROM visits GROUP BY note")
    statement = classify(tree, service.dataset)
    assert isinstance(statement, PrivateQuery)
    plan, _ = prepare_release(statement.shape, epsilon=1.0, delta=1e-6, dialect=service.backend.dialect)
    # exact rows: key, COUNT(*) total, people count (the threshold quantity)
    exact = [("x", 3000.0, 1000.0), ("secret", 1.0, 1.0)]
    released = [
        {row[0] for row in release(plan, exact, rng=random.Random(seed)).rows} for seed in range(2000)
    ]
    assert all(keys == {"x"} for keys in released)


def test_show_error_adds_the_95_percent_bounds(service: QueryService) -> None:
    settings = SessionSettings({"veil.show_error": "on"})
    outcome = run(service, "SELECT sex, COUNT(*) FROM visits GROUP BY sex", settings)
    # sensitivity 3, ε 0.1: (3/0.1)·ln(2/0.05) = 110.67 over 2 cells
    assert outcome.notices[1] == "95% error bounds of the noise (over all 2 row(s)): count(*) ±110.7"


def test_median_comes_from_an_engine_histogram_near_the_truth(service: QueryService) -> None:
    settings = SessionSettings({"veil.epsilon": "1"})
    outcome = run(service, "SELECT MEDIAN(age) AS m, MAX(age) FROM visits", settings)
    assert outcome.table is not None
    median, maximum = outcome.table.rows[0]
    # ages 20..69, 60 rows each: median 44.5. Rank error bound at ε/2 per quantile, L = 3, G = 1000,
    # β = 1e-6: (2·3/0.5)·ln(1001/1e-6) = 249 rows ≈ 4.2 ages; plus one grid step (0.1).
    assert abs(median - 44.5) <= 4.5
    assert 69 - 4.5 <= maximum <= 100


def test_auto_contribution_bound_is_chosen_with_dp_and_reported(
    service: QueryService, ledger: Ledger
) -> None:
    settings = SessionSettings({"veil.epsilon": "1"})
    outcome = run(service, "SELECT COUNT(*) FROM ratings", settings)
    assert outcome.table is not None
    (count,) = outcome.table.rows[0]
    notice = outcome.notices[0]
    assert "contribution bound L=" in notice
    bound = int(notice.split("contribution bound L=")[1].split()[0])
    assert 4 <= bound <= 100, "at least everyone's 4 rows, at most the policy's contribution_cap"
    # truth 8,000 + min(90, L); noise scale L / 0.9 (ε after the bound's tenth): e^-20 tail at 20 scales
    assert abs(count - (8000 + bound)) <= 20 * bound / 0.9
    assert ledger.balance("alice", "clinic").spent_epsilon == pytest.approx(1.0)


# Integer division: analysts write PostgreSQL, where `/` on two integers truncates toward zero. Both
# engines must answer as PostgreSQL itself would (DuckDB through `rewrite.integer_division`).


def test_integer_division_in_a_group_key_truncates_as_in_postgresql(service: QueryService) -> None:
    outcome = run(service, "SELECT age / 10 AS d, COUNT(*) AS n FROM visits GROUP BY 1")
    assert outcome.table is not None
    assert [row[0] for row in outcome.table.rows] == list(range(11)), "ages 0..100 truncated: 0..10"
    counts = dict(outcome.table.rows)
    # ages 30..39: 600 visits; sensitivity 3, ε 0.1: |noise| > 600 has probability e^-20
    assert abs(counts[3] - 600) <= 600


def test_integer_division_in_where_truncates_as_in_postgresql(service: QueryService) -> None:
    settings = SessionSettings({"veil.epsilon": "1"})
    outcome = run(service, "SELECT COUNT(*) FROM visits WHERE age / 10 = 3", settings)
    assert outcome.table is not None
    (count,) = outcome.table.rows[0]
    # ages 30..39 (600 visits), not age 30 alone (60); sensitivity 3, ε 1: |noise| > 60 has p = e^-20
    assert abs(count - 600) <= 60


def test_a_floored_group_key_is_double_precision_as_in_postgresql(service: QueryService) -> None:
    """PostgreSQL's FLOOR of an integer expression is double precision: so is the released key."""
    outcome = run(service, "SELECT FLOOR(age / 10) * 10 AS decade, COUNT(*) AS n FROM visits GROUP BY 1")
    assert outcome.table is not None
    assert outcome.table.columns[0].type is ColumnType.REAL
    assert all(type(row[0]) is float for row in outcome.table.rows)


def test_per_person_subquery_counts_people(service: QueryService) -> None:
    """1,000 patients with 3 visits each and one with 1: one row per person inside the subquery."""
    settings = SessionSettings({"veil.epsilon": "1"})
    outcome = run(
        service,
        "SELECT COUNT(*) AS people, AVG(veil_clamp(n, 0, 10)) AS visits FROM"
        " (SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY patient_id) AS p",
        settings,
    )
    assert outcome.table is not None
    people, visits = outcome.table.rows[0]
    # COUNT: sensitivity 1 at ε = 1/3 → scale 3; AVG clamped into [0, 10] from noisy sum and count
    assert abs(people - 1001) <= 60
    assert visits is not None and abs(visits - 3.0) <= 0.5


def test_lookup_join_and_public_table_queries(service: QueryService, ledger: Ledger) -> None:
    settings = SessionSettings({"veil.epsilon": "1"})
    outcome = run(
        service,
        "SELECT z.zone, COUNT(*) AS n FROM visits v JOIN zones z ON v.region = z.code GROUP BY z.zone",
        settings,
    )
    assert outcome.table is not None
    counts = dict(outcome.table.rows)
    assert sorted(counts) == ["E", "N", "S"], "every zone of the lookup table, east included though empty"
    # north: 1,500 visits + the 'secret' one; south: 1,500; east: 0. Scale 3/1 = 3: e^-20 tail at 60
    assert abs(counts["N"] - 1501) <= 60 and abs(counts["S"] - 1500) <= 60 and abs(counts["E"]) <= 60
    spent = ledger.balance("alice", "clinic").spent_epsilon
    public = run(service, "SELECT zone FROM zones WHERE code <> 'east' ORDER BY zone")
    assert public.table is not None and public.table.rows == [("N",), ("S",)]
    assert ledger.balance("alice", "clinic").spent_epsilon == spent, "public tables cost nothing"


def test_gaussian_mechanism_spends_epsilon_and_delta(service: QueryService, ledger: Ledger) -> None:
    with pytest.raises(InvalidParameterValueError, match=r"needs veil\.delta > 0"):
        run(service, "SELECT COUNT(*) FROM visits", SessionSettings({"veil.mechanism": "gaussian"}))
    settings = SessionSettings({"veil.mechanism": "gaussian", "veil.delta": "1e-6", "veil.epsilon": "0.5"})
    outcome = run(service, "SELECT COUNT(*) FROM visits", settings)
    assert outcome.table is not None
    (count,) = outcome.table.rows[0]
    # Δ = 3 at (0.5, 1e-6): σ ≈ 27; |noise| > 10σ has probability ~1e-23
    assert abs(count - 3001) <= 300
    balance = ledger.balance("alice", "clinic")
    assert (balance.spent_epsilon, balance.spent_delta) == (pytest.approx(0.5), pytest.approx(1e-6))
    assert "δ=1e-06" in outcome.notices[0]


def test_other_row_carries_the_suppressed_groups(service: QueryService) -> None:
    settings = SessionSettings({"veil.other_row": "on", "veil.epsilon": "1", "veil.delta": "1e-6"})
    outcome = run(service, "SELECT note, COUNT(*) AS n FROM visits GROUP BY note", settings)
    assert outcome.table is not None
    rows = dict(outcome.table.rows)
    assert list(rows) == ["x", "(other)"], "the single person's note is suppressed, not shown"
    # three shares of ε = 1 (group counts, people gate, total): count noise scale 3 / (1/3) = 9;
    # (other) = total − released: the secret row (1) plus two noises, each beyond 180 with prob e^-20
    assert abs(rows["x"] - 3000) <= 180
    assert abs(rows["(other)"] - 1) <= 360
    assert "count(*) ε=0.3333" in outcome.notices[0]
