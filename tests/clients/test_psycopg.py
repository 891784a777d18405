"""psycopg 3 (libpq) against ``veil serve``: answers, NOTICEs, budget accounting and errors.

Noisy answers are checked against the exact, contribution-bounded truth computed directly with DuckDB
on the demo file. Veil adds discrete Laplace noise of scale b = sensitivity / ε, and
P(|noise| > t) <= exp(-t / b), so ``t = b · ln(1 / 1e-6)`` makes each check fail by chance less than
once in a million runs.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import duckdb
import pandas as pd
import psycopg
import pytest

from tests.conftest import ALICE, Admin, Analyst, Demo

pytestmark = pytest.mark.client

REGIONS = ["capital", "north", "south", "east", "west", "coast", "islands"]
VISITS_MAX_CONTRIBUTIONS = 10
AGE_UPPER = 100
FAILURE_PROBABILITY = 1e-6
SPEND_NOTICE = re.compile(
    r"^differential privacy: this answer spent ε=(?P<spent>[0-9.e+-]+) .*; "
    r"(?P<remaining>[0-9.e+-]+) of (?P<granted>[0-9.e+-]+) ε remains on dataset demo$"
)

Connect = Callable[..., psycopg.Connection[Any]]


def noise_bound(sensitivity: float, epsilon: float) -> float:
    """|noise| exceeds this with probability below FAILURE_PROBABILITY."""
    return sensitivity / epsilon * math.log(1 / FAILURE_PROBABILITY)


@dataclass(frozen=True)
class Truth:
    patients: int
    patients_by_region: dict[str, int]
    age_sum: int
    visits: int
    visits_bounded: int  # at most 10 visits per patient, as Veil counts them


@pytest.fixture(scope="module")
def truth(demo: Demo) -> Truth:
    """Exact answers, read straight from the demo file (read-only, beside the read-only server)."""
    with duckdb.connect(str(demo.database), read_only=True) as db:
        patients, age_sum = db.execute("SELECT COUNT(*), SUM(age) FROM patients").fetchone()  # type: ignore[misc]
        by_region = dict(db.execute("SELECT region, COUNT(*) FROM patients GROUP BY region").fetchall())
        visits, bounded = db.execute(
            "SELECT SUM(n), SUM(LEAST(n, ?)) FROM (SELECT COUNT(*) AS n FROM visits GROUP BY patient_id)",
            [VISITS_MAX_CONTRIBUTIONS],
        ).fetchone()  # type: ignore[misc]
    return Truth(int(patients), by_region, int(age_sum), int(visits), int(bounded))


@pytest.fixture(scope="module")
def analyst(admin: Admin) -> Analyst:
    """One analyst for this module's answer tests, with room for a few ε = 1 queries."""
    return admin.add_analyst(8.0, prefix="psycopg")


@dataclass(frozen=True)
class Notice:
    severity: str | None
    sqlstate: str | None
    message: str


def collect_notices(connection: psycopg.Connection[Any]) -> list[Notice]:
    """Every notice the connection receives from now on (psycopg's Diagnostic dies with the callback)."""
    notices: list[Notice] = []
    connection.add_notice_handler(
        lambda d: notices.append(Notice(d.severity, d.sqlstate, d.message_primary or ""))
    )
    return notices


def spend_of(notice: Notice) -> re.Match[str]:
    assert (notice.severity, notice.sqlstate) == ("NOTICE", "00000")
    match = SPEND_NOTICE.match(notice.message)
    assert match, f"not a spend notice: {notice.message!r}"
    return match


def scalar(connection: psycopg.Connection[Any], sql: str) -> Any:
    rows = connection.execute(sql).fetchall()
    assert len(rows) == 1 and len(rows[0]) == 1, rows
    return rows[0][0]


# --- answers ---------------------------------------------------------------------------------------------


def test_count_of_visits_is_a_noisy_integer_near_the_bounded_truth(
    connect: Connect, analyst: Analyst, truth: Truth
) -> None:
    connection = connect(analyst)
    connection.execute("SET veil.epsilon = 1")
    cursor = connection.execute("SELECT COUNT(*) FROM visits")
    ((count,),) = cursor.fetchall()
    assert cursor.description is not None and cursor.description[0].name == "count"
    assert isinstance(count, int)
    tolerance = noise_bound(VISITS_MAX_CONTRIBUTIONS, 1.0)
    assert abs(count - truth.visits_bounded) <= tolerance, (count, truth)
    if truth.visits - truth.visits_bounded > 2 * tolerance:  # the rows beyond 10 per patient were dropped
        assert count < truth.visits - tolerance


def test_count_of_patients_has_sensitivity_one(connect: Connect, analyst: Analyst, truth: Truth) -> None:
    connection = connect(analyst)
    connection.execute("SET veil.epsilon = 1")
    count = scalar(connection, "SELECT COUNT(*) FROM patients")
    assert abs(count - truth.patients) <= noise_bound(1, 1.0)


def test_group_by_lists_every_public_value_in_policy_order(
    connect: Connect, analyst: Analyst, truth: Truth
) -> None:
    connection = connect(analyst)
    connection.execute("SET veil.epsilon = 1")
    rows = connection.execute("SELECT region, COUNT(*) AS n FROM patients GROUP BY region").fetchall()
    assert [region for region, _ in rows] == REGIONS
    for region, n in rows:
        assert isinstance(n, int)
        assert abs(n - truth.patients_by_region[region]) <= noise_bound(1, 1.0), (region, n)


def test_empty_groups_are_released_as_noisy_zeros(connect: Connect, analyst: Analyst, truth: Truth) -> None:
    connection = connect(analyst)
    connection.execute("SET veil.epsilon = 1")
    rows = connection.execute(
        "SELECT region, COUNT(*) FROM patients WHERE region = 'islands' GROUP BY region"
    ).fetchall()
    assert [region for region, _ in rows] == REGIONS
    counts = dict(rows)
    assert abs(counts.pop("islands") - truth.patients_by_region["islands"]) <= noise_bound(1, 1.0)
    assert all(abs(n) <= noise_bound(1, 1.0) for n in counts.values()), counts


def test_avg_age_is_a_float_within_the_declared_bounds_and_near_the_truth(
    connect: Connect, analyst: Analyst, truth: Truth
) -> None:
    connection = connect(analyst)
    connection.execute("SET veil.epsilon = 1")
    notices = collect_notices(connection)
    average = scalar(connection, "SELECT AVG(age) FROM patients")
    assert isinstance(average, float)
    assert 0 <= average <= AGE_UPPER
    # AVG = noisy SUM / noisy COUNT, each with half of ε.
    assert "sum(age) ε=0.5" in spend_of(notices[-1])[0]
    sum_error, count_error = noise_bound(AGE_UPPER, 0.5), noise_bound(1, 0.5)
    worst = (truth.age_sum + sum_error) / (truth.patients - count_error) - truth.age_sum / truth.patients
    assert abs(average - truth.age_sum / truth.patients) <= worst


def test_each_answer_carries_a_notice_and_the_ledger_drops_by_exactly_that(
    connect: Connect, admin: Admin
) -> None:
    analyst = admin.add_analyst(1.0, prefix="notice")
    connection = connect(analyst)
    notices = collect_notices(connection)

    scalar(connection, "SELECT COUNT(*) FROM visits")

    assert len(notices) == 1
    spend = spend_of(notices[0])
    assert float(spend["spent"]) == 0.1  # the demo's default_epsilon
    balance = admin.balance(analyst)
    assert balance["spent_epsilon"] == 0.1
    assert balance["remaining_epsilon"] == pytest.approx(0.9, abs=1e-12)
    assert float(spend["remaining"]) == pytest.approx(balance["remaining_epsilon"], rel=1e-5)
    assert float(spend["granted"]) == 1.0


def test_constant_queries_are_free_and_silent(connect: Connect, admin: Admin) -> None:
    analyst = admin.add_analyst(1.0, prefix="free")
    connection = connect(analyst)
    notices = collect_notices(connection)
    assert scalar(connection, "SELECT 1") == 1
    assert "Veil" in scalar(connection, "SELECT version()")
    assert scalar(connection, "SHOW veil.epsilon") == "0.1"
    assert notices == []
    assert admin.balance(analyst)["spent_epsilon"] == 0


def test_set_veil_epsilon_changes_the_charge(connect: Connect, admin: Admin) -> None:
    analyst = admin.add_analyst(1.0, prefix="setter")
    connection = connect(analyst)
    notices = collect_notices(connection)

    connection.execute("SET veil.epsilon = 0.3")
    assert scalar(connection, "SHOW veil.epsilon") == "0.3"
    scalar(connection, "SELECT COUNT(*) FROM patients")
    assert float(spend_of(notices[-1])["spent"]) == 0.3
    assert admin.balance(analyst)["spent_epsilon"] == pytest.approx(0.3, abs=1e-12)

    connection.execute("RESET veil.epsilon")
    scalar(connection, "SELECT COUNT(*) FROM patients")
    assert float(spend_of(notices[-1])["spent"]) == 0.1
    assert admin.balance(analyst)["spent_epsilon"] == pytest.approx(0.4, abs=1e-12)


def test_epsilon_above_the_policy_maximum_is_refused_and_costs_nothing(
    connect: Connect, admin: Admin
) -> None:
    analyst = admin.add_analyst(5.0, prefix="greedy")
    connection = connect(analyst)
    # Today SET accepts any positive number and the query is refused; refusing at SET would do as well.
    with pytest.raises(psycopg.errors.InvalidParameterValue) as refused:
        connection.execute("SET veil.epsilon = 2")
        connection.execute("SELECT COUNT(*) FROM patients")
    assert refused.value.sqlstate == "22023"
    assert "max_epsilon" in str(refused.value)
    assert admin.balance(analyst)["spent_epsilon"] == 0
    connection.execute("SET veil.epsilon = 1")  # the maximum itself is allowed
    assert isinstance(scalar(connection, "SELECT COUNT(*) FROM patients"), int)
    assert admin.balance(analyst)["spent_epsilon"] == 1.0


# --- refusals --------------------------------------------------------------------------------------------

REFUSED = [
    pytest.param("SELECT * FROM visits", "42501", "private rows", id="select-star"),
    pytest.param("SELECT patient_id FROM visits", "42501", "private", id="private-column"),
    pytest.param("SELECT COUNT(*) FROM visits GROUP BY visit_date", "42501", "GROUP BY", id="group-private"),
    pytest.param(
        "SELECT COUNT(*) FROM visits WHERE patient_id IN (SELECT patient_id FROM patients)",
        "42501",
        "subquer",
        id="subquery-in-where",
    ),
    pytest.param("SELECT MODE() WITHIN GROUP (ORDER BY sex) FROM patients", "42501", "mode", id="mode"),
    pytest.param(
        "SELECT COUNT(*) FROM patients p LEFT JOIN visits v ON p.patient_id = v.patient_id",
        "42501",
        "inner joins",
        id="left-join",
    ),
    pytest.param("SELECT COUNT(*) FROM patients ORDER BY age", "42501", "private", id="order-by-private"),
    pytest.param("DELETE FROM patients", "42501", "only SELECT", id="delete"),
    pytest.param("SELECT COUNT(*) FROM nope", "42P01", 'relation "nope" does not exist', id="unknown-table"),
    pytest.param(
        "SELECT SUM(nope) FROM visits", "42703", 'column "nope" does not exist', id="unknown-column"
    ),
    pytest.param("SELEC COUNT(*) FROM visits", "42601", "syntax error", id="syntax"),
    pytest.param("SET veil.epsilon = -1", "22023", "veil.epsilon", id="negative-epsilon"),
    pytest.param("SET nope.setting = 1", "42704", "nope.setting", id="unknown-setting"),
]


@pytest.fixture(scope="module")
def refused_analyst(admin: Admin) -> Analyst:
    return admin.add_analyst(1.0, prefix="refused")


@pytest.mark.parametrize(("sql", "sqlstate", "message"), REFUSED)
def test_refused_statements_carry_their_sqlstate_and_spend_nothing(
    connect: Connect, admin: Admin, refused_analyst: Analyst, sql: str, sqlstate: str, message: str
) -> None:
    connection = connect(refused_analyst)
    notices = collect_notices(connection)
    before = admin.balance(refused_analyst)

    with pytest.raises(psycopg.Error) as refused:
        connection.execute(sql)

    assert refused.value.sqlstate == sqlstate
    assert message.lower() in (refused.value.diag.message_primary or "").lower()
    assert notices == []
    assert admin.balance(refused_analyst) == before
    assert scalar(connection, "SELECT 1") == 1  # the session goes on


def test_a_table_function_is_refused_by_name(
    connect: Connect, refused_analyst: Analyst, admin: Admin
) -> None:
    connection = connect(refused_analyst)
    before = admin.balance(refused_analyst)
    with pytest.raises(psycopg.Error) as refused:
        connection.execute("SELECT * FROM read_csv('/etc/passwd')")
    assert admin.balance(refused_analyst) == before
    assert "read_csv" in str(refused.value)


def test_budget_exhaustion_refuses_with_53Z01_and_spends_nothing_more(connect: Connect, admin: Admin) -> None:
    analyst = admin.add_analyst(0.25, prefix="thrifty")
    connection = connect(analyst)
    connection.execute("SET veil.epsilon = 0.1")
    answers = [scalar(connection, "SELECT COUNT(*) FROM patients") for _ in range(2)]
    assert all(isinstance(answer, int) for answer in answers)

    for _ in range(2):
        with pytest.raises(psycopg.Error) as refused:
            connection.execute("SELECT COUNT(*) FROM patients")
        assert refused.value.sqlstate == "53Z01"
        assert "exhausted" in str(refused.value)

    balance = admin.balance(analyst)
    assert balance["spent_epsilon"] == pytest.approx(0.2, abs=1e-12)
    assert balance["spent_epsilon"] <= balance["granted_epsilon"]
    states = [spend["state"] for spend in admin.history(analyst)]
    assert states == ["committed", "committed"]
    assert scalar(connection, "SELECT 1") == 1  # free statements still work


def test_the_last_crumb_of_budget_can_be_spent_and_then_nothing(connect: Connect, admin: Admin) -> None:
    analyst = admin.add_analyst(0.25, prefix="crumb")
    connection = connect(analyst)
    notices = collect_notices(connection)
    for _ in range(2):
        scalar(connection, "SELECT COUNT(*) FROM patients")  # 0.1 each
    connection.execute("SET veil.epsilon = 0.05")
    scalar(connection, "SELECT COUNT(*) FROM patients")
    assert float(spend_of(notices[-1])["remaining"]) == 0
    connection.execute("SET veil.epsilon = 0.001")
    with pytest.raises(psycopg.Error) as refused:
        connection.execute("SELECT COUNT(*) FROM patients")
    assert refused.value.sqlstate == "53Z01"
    assert admin.balance(analyst)["remaining_epsilon"] == 0


def test_a_grant_of_0_3_pays_for_three_answers_at_0_1(connect: Connect, admin: Admin) -> None:
    analyst = admin.add_analyst(0.3, prefix="decimal")
    connection = connect(analyst)
    answers = []
    for _ in range(3):
        try:
            answers.append(scalar(connection, "SELECT COUNT(*) FROM patients"))
        except psycopg.Error as error:
            assert error.sqlstate == "53Z01"
    assert len(answers) == 3
    assert admin.balance(analyst)["remaining_epsilon"] == pytest.approx(0, abs=1e-12)


def test_the_exhaustion_message_states_the_remaining_epsilon_as_the_notice_does(
    connect: Connect, admin: Admin
) -> None:
    analyst = admin.add_analyst(0.25, prefix="message")
    connection = connect(analyst)
    for _ in range(2):
        scalar(connection, "SELECT COUNT(*) FROM patients")
    with pytest.raises(psycopg.Error) as refused:
        connection.execute("SELECT COUNT(*) FROM patients")
    assert refused.value.sqlstate == "53Z01"
    assert "only epsilon 0.05 remains" in str(refused.value)


# --- connections -----------------------------------------------------------------------------------------


def test_wrong_password_is_refused(connect: Connect) -> None:
    with pytest.raises(psycopg.OperationalError, match='password authentication failed for user "alice"'):
        connect(Analyst("alice", "not-the-password"))


def test_unknown_analyst_gets_the_same_refusal_as_a_wrong_password(connect: Connect) -> None:
    with pytest.raises(psycopg.OperationalError, match='password authentication failed for user "mallory"'):
        connect(Analyst("mallory", "veil-demo"))


def test_unknown_database_is_refused(connect: Connect) -> None:
    with pytest.raises(psycopg.OperationalError, match='database "nowhere" does not exist') as refused:
        connect(ALICE, dbname="nowhere")
    assert "datasets on this server: demo" in str(refused.value)


def test_one_connections_error_does_not_disturb_another(connect: Connect, analyst: Analyst) -> None:
    first, second = connect(analyst), connect(analyst)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        first.execute("SELECT * FROM patients")
    assert isinstance(scalar(second, "SELECT COUNT(*) FROM patients"), int)
    assert isinstance(scalar(first, "SELECT COUNT(*) FROM patients"), int)


def test_transactions_of_a_non_autocommit_connection_work(connect: Connect, analyst: Analyst) -> None:
    connection = connect(analyst, autocommit=False)
    with connection.transaction():
        assert isinstance(scalar(connection, "SELECT COUNT(*) FROM visits"), int)
    assert scalar(connection, "SELECT 1") == 1
    connection.commit()
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        connection.execute("SELECT * FROM visits")
    connection.rollback()
    assert scalar(connection, "SELECT 1") == 1


def test_server_parameters_are_those_of_a_postgres_16(connect: Connect) -> None:
    connection = connect()
    assert connection.info.server_version == 160000
    assert connection.info.parameter_status("client_encoding") == "UTF8"
    assert connection.info.parameter_status("session_authorization") == "alice"


def test_pandas_read_sql_returns_the_group_rows(connect: Connect, analyst: Analyst) -> None:
    connection = connect(analyst)
    with warnings.catch_warnings():
        # pandas warns that it only tests SQLAlchemy connectables; a DB-API connection works all the same.
        warnings.filterwarnings("ignore", message=".*SQLAlchemy.*", category=UserWarning)
        frame = pd.read_sql(
            "SELECT sex, COUNT(*) AS n, AVG(age) AS mean_age FROM patients GROUP BY sex", connection
        )
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == ["sex", "n", "mean_age"]
    assert frame["sex"].tolist() == ["female", "male"]
    assert pd.api.types.is_integer_dtype(frame["n"])
    assert frame["mean_age"].between(0, AGE_UPPER).all()


def test_post_processing_runs_on_noisy_values(connect: Connect, admin: Admin) -> None:
    """HAVING, ORDER BY, LIMIT and arithmetic on aggregates are answered, for one charge."""
    analyst = admin.add_analyst(1.0, prefix="post")
    connection = connect(analyst)
    rows = connection.execute(
        "SELECT region AS r, COUNT(*) AS n, ROUND(AVG(age), 1) AS mean_age FROM patients"
        " GROUP BY r HAVING COUNT(*) > -1000000 ORDER BY n DESC LIMIT 3"
    ).fetchall()
    assert len(rows) == 3
    assert [row[1] for row in rows] == sorted((row[1] for row in rows), reverse=True)
    assert all(0 <= row[2] <= 100 for row in rows)
    assert admin.balance(analyst)["spent_epsilon"] == pytest.approx(0.1)


def test_join_on_the_privacy_unit_is_answered(connect: Connect, admin: Admin) -> None:
    analyst = admin.add_analyst(1.0, prefix="join")
    rows = (
        connect(analyst)
        .execute(
            "SELECT p.sex, COUNT(*) AS visits FROM visits v JOIN patients p ON v.patient_id = p.patient_id"
            " GROUP BY p.sex ORDER BY p.sex"
        )
        .fetchall()
    )
    assert [row[0] for row in rows] == ["female", "male"]
    assert all(row[1] > 0 for row in rows)
    assert admin.balance(analyst)["spent_epsilon"] == pytest.approx(0.1)
