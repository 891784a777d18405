"""psycopg 3 (libpq) against ``veil serve``: answers, NOTICEs, budget accounting and errors.

Every test runs twice, ``[duckdb]`` and ``[postgres]`` (see ``conftest.py``): the same rows served from a
DuckDB file and from a PostgreSQL schema. Noisy answers are checked against the exact,
contribution-bounded truth computed directly with DuckDB on the demo file, which holds for both. Veil
adds discrete Laplace noise of scale b = sensitivity / ε, and P(|noise| > t) <= exp(-t / b), so
``t = b · ln(1 / 1e-6)`` makes each check fail by chance less than once in a million runs.
"""

from __future__ import annotations

import bisect
import itertools
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

from tests.clients.conftest import ZONES
from tests.conftest import ALICE, DATASET, Admin, Analyst, Demo

pytestmark = pytest.mark.client

REGIONS = ["capital", "north", "south", "east", "west", "coast", "islands"]
VISITS_MAX_CONTRIBUTIONS = 10
AGE_UPPER = 100
INCOME_UPPER = 250_000
VISITS_CLAMP = 20  # veil_clamp(n, 0, 20) in the per-person subquery: the demo's most visits per patient
QUANTILE_GRID = 1000  # grid steps over [lower, upper]: 0.1 years (ages are then released as integers)
FAILURE_PROBABILITY = 1e-6
SPEND_NOTICE = re.compile(
    r"^differential privacy: this answer spent ε=(?P<spent>[0-9.e+-]+) .*; "
    r"(?P<remaining>[0-9.e+-]+) of (?P<granted>[0-9.e+-]+) ε remains on dataset demo"
    r"(?: \((?P<accountant>[^)]*)\))?$"
)

Connect = Callable[..., psycopg.Connection[Any]]
ANALYST_NUMBERS = itertools.count(1)


def noise_bound(sensitivity: float, epsilon: float) -> float:
    """|noise| exceeds this with probability below FAILURE_PROBABILITY."""
    return sensitivity / epsilon * math.log(1 / FAILURE_PROBABILITY)


@dataclass(frozen=True)
class Truth:
    patients: int
    patients_by_region: dict[str, int]
    patients_by_zone: dict[str, int]
    age_sum: int
    ages: list[int]  # sorted
    income_sum: float
    visits: int
    visits_bounded: int  # at most 10 visits per patient, as Veil counts them
    visits_by_sex_bounded: dict[str, int]  # visits ⋈ patients on the privacy unit, 10 per patient
    visits_by_year_bounded: dict[int, float]  # each patient's visits scaled to at most 10 over the years
    visits_by_parity_bounded: dict[int, float]  # the same over visit_id % 2, a key with no public domain
    patients_with_visits: int
    visits_per_patient_sum: int  # Σ min(visits, 20) over patients with a visit


BOUNDED_VISITS_BY = """
WITH cells AS (SELECT patient_id, {key} AS y, COUNT(*) AS n FROM visits GROUP BY ALL),
     people AS (SELECT patient_id, SUM(n) AS total FROM cells GROUP BY patient_id)
SELECT y, SUM(n * LEAST(1.0, ? / total)) FROM cells JOIN people USING (patient_id) GROUP BY y
"""


@pytest.fixture(scope="module")
def truth(demo: Demo) -> Truth:
    """Exact answers, read straight from the demo file (read-only, beside the read-only server)."""
    with duckdb.connect(str(demo.database), read_only=True) as db:
        patients, age_sum, income = db.execute(
            "SELECT COUNT(*), SUM(age), SUM(income) FROM patients"
        ).fetchone()  # type: ignore[misc]
        by_region = dict(db.execute("SELECT region, COUNT(*) FROM patients GROUP BY region").fetchall())
        by_zone = dict(
            db.execute(
                "SELECT z.zone, COUNT(p.patient_id) FROM zones z LEFT JOIN patients p ON p.region = z.code"
                " GROUP BY z.zone"
            ).fetchall()
        )
        ages = [age for (age,) in db.execute("SELECT age FROM patients ORDER BY age").fetchall()]
        per_patient = "(SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY patient_id)"
        visits, bounded, with_visits, clamped = db.execute(
            f"SELECT SUM(n), SUM(LEAST(n, $cap)), COUNT(*), SUM(LEAST(n, $clamp)) FROM {per_patient}",
            {"cap": VISITS_MAX_CONTRIBUTIONS, "clamp": VISITS_CLAMP},
        ).fetchone()  # type: ignore[misc]
        by_sex = db.execute(
            f"SELECT p.sex, SUM(LEAST(c.n, ?)) FROM {per_patient} c JOIN patients p USING (patient_id)"
            " GROUP BY p.sex",
            [VISITS_MAX_CONTRIBUTIONS],
        ).fetchall()
        cap = [float(VISITS_MAX_CONTRIBUTIONS)]
        by_year = db.execute(BOUNDED_VISITS_BY.format(key="year(visit_date)"), cap).fetchall()
        by_parity = db.execute(BOUNDED_VISITS_BY.format(key="visit_id % 2"), cap).fetchall()
    return Truth(
        patients=int(patients),
        patients_by_region=by_region,
        patients_by_zone=by_zone,
        age_sum=int(age_sum),
        ages=ages,
        income_sum=float(income),
        visits=int(visits),
        visits_bounded=int(bounded),
        visits_by_sex_bounded={sex: int(n) for sex, n in by_sex},
        visits_by_year_bounded={int(year): float(n) for year, n in by_year},
        visits_by_parity_bounded={int(parity): float(n) for parity, n in by_parity},
        patients_with_visits=int(with_visits),
        visits_per_patient_sum=int(clamped),
    )


@pytest.fixture(scope="module")
def analyst(admin: Admin) -> Analyst:
    """One analyst for this module's answer tests, with room for a few ε = 1 queries."""
    return admin.add_analyst(20.0, prefix="psycopg")


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
    # veil.round = auto moves it by at most half a unit of one digit below the noise's s.d.: < worst/20
    assert abs(average - truth.age_sum / truth.patients) <= worst * 1.05


def ratio_interval(
    total: float, count: float, *, total_error: float, count_error: float
) -> tuple[float, float]:
    """Every value (total ± total_error) / (count ± count_error) can take: where a noisy AVG must lie."""
    return (total - total_error) / (count + count_error), (total + total_error) / (count - count_error)


def add_analyst_with_delta(admin: Admin, epsilon: float, delta: float, *, prefix: str) -> Analyst:
    """A fresh analyst with one grant of (ε, δ): τ-thresholded GROUP BY spends δ."""
    analyst = Analyst(f"{prefix}{next(ANALYST_NUMBERS)}", f"pw-{prefix}")
    admin.check("analyst", "add", analyst.name, "--password-stdin", input=analyst.password + "\n")
    admin.check("budget", "grant", analyst.name, DATASET, repr(epsilon), "--delta", repr(delta))
    return analyst


def rank_error(ages: list[int], value: float, q: float) -> float:
    """|#{age < value} − q·n|: the distance in rank that the quantile mechanism's guarantee is about."""
    return abs(bisect.bisect_left(ages, value) - q * len(ages))


def quantile_rank_bound(ages: list[int], q: float, *, epsilon: float, max_contributions: int = 1) -> float:
    """With probability 1 − FAILURE_PROBABILITY, the released grid point's rank error is at most this.

    The best grid point's own rank error (ties make it non-zero) plus (2L/ε)·ln((G + 1)/β)
    (docs/privacy.md, "Quantiles").
    """
    grid = [AGE_UPPER * j / QUANTILE_GRID for j in range(QUANTILE_GRID + 1)]
    best = min(rank_error(ages, point, q) for point in grid)
    return best + 2 * max_contributions / epsilon * math.log((QUANTILE_GRID + 1) / FAILURE_PROBABILITY)


def test_sum_of_a_bounded_real_column_is_near_the_truth(
    connect: Connect, analyst: Analyst, truth: Truth
) -> None:
    connection = connect(analyst)
    connection.execute("SET veil.epsilon = 1")
    total = scalar(connection, "SELECT SUM(income) FROM patients")
    assert isinstance(total, float)
    # + rounding to the noise (veil.round = auto): at most half a unit of 10^(⌊log10 s⌋ − 1) ≤ s/20
    rounding = math.sqrt(2) * INCOME_UPPER / 1.0 / 20
    assert abs(total - truth.income_sum) <= noise_bound(INCOME_UPPER, 1.0) + 1 + rounding, (
        total,
        truth.income_sum,
    )


def test_median_and_percentile_are_grid_points_near_the_true_rank(
    connect: Connect, analyst: Analyst, truth: Truth
) -> None:
    connection = connect(analyst)
    connection.execute("SET veil.epsilon = 1")
    notices = collect_notices(connection)
    ((median, p90),) = connection.execute(
        "SELECT MEDIAN(age) AS m, PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY age) AS p90 FROM patients"
    ).fetchall()
    assert "ε=0.5" in spend_of(notices[-1])[0]  # two quantiles, half of ε each
    for value, q in ((median, 0.5), (p90, 0.9)):
        # age is an integer column: the grid point taken up to the next integer, which on integer data
        # has the grid point's rank #{age < value} (docs/privacy.md, "Post-processing")
        assert isinstance(value, int)
        assert 0 <= value <= AGE_UPPER
        bound = quantile_rank_bound(truth.ages, q, epsilon=0.5)
        assert rank_error(truth.ages, value, q) <= bound, (q, value)
    assert median <= p90 + AGE_UPPER / QUANTILE_GRID


def test_per_person_subquery_counts_people_and_their_mean_visits(
    connect: Connect, analyst: Analyst, truth: Truth
) -> None:
    connection = connect(analyst)
    connection.execute("SET veil.epsilon = 1")
    notices = collect_notices(connection)
    ((people, visits),) = connection.execute(
        "SELECT COUNT(*) AS people, AVG(veil_clamp(n, 0, 20)) AS visits"
        " FROM (SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY patient_id) AS p"
    ).fetchall()
    shares = spend_of(notices[-1])[0].count("ε=") - 1  # the total, then one ε per noisy quantity
    share = 1.0 / shares
    assert isinstance(people, int)
    assert abs(people - truth.patients_with_visits) <= noise_bound(1, share)
    low, high = ratio_interval(
        truth.visits_per_patient_sum,
        truth.patients_with_visits,
        total_error=noise_bound(VISITS_CLAMP, share),
        count_error=noise_bound(1, share),
    )
    assert low <= visits <= high, (visits, low, high)


def test_join_on_the_privacy_unit_bounds_each_patients_visits(
    connect: Connect, analyst: Analyst, truth: Truth
) -> None:
    connection = connect(analyst)
    connection.execute("SET veil.epsilon = 1")
    rows = connection.execute(
        "SELECT p.sex, COUNT(*) AS visits FROM visits v JOIN patients p ON v.patient_id = p.patient_id"
        " GROUP BY p.sex"
    ).fetchall()
    assert [sex for sex, _ in rows] == ["female", "male"]
    for sex, visits in rows:  # one patient's joined rows: at most 10 visits × 1 patient row
        bound = noise_bound(VISITS_MAX_CONTRIBUTIONS, 1.0)
        assert abs(visits - truth.visits_by_sex_bounded[sex]) <= bound, (sex, visits)


def test_lookup_join_answers_every_zone_of_the_public_table(
    connect: Connect, analyst: Analyst, truth: Truth
) -> None:
    connection = connect(analyst)
    connection.execute("SET veil.epsilon = 1")
    rows = connection.execute(
        "SELECT z.zone, COUNT(*) AS n FROM patients p JOIN zones z ON p.region = z.code GROUP BY z.zone"
    ).fetchall()
    assert sorted(zone for zone, _ in rows) == sorted({zone for _, zone in ZONES})
    for zone, n in rows:  # "overseas" has no patient: a noisy zero
        assert abs(n - truth.patients_by_zone[zone]) <= noise_bound(1, 1.0), (zone, n)


def test_a_public_table_is_read_exactly_and_for_free(connect: Connect, admin: Admin) -> None:
    analyst = admin.add_analyst(1.0, prefix="lookup")
    connection = connect(analyst)
    notices = collect_notices(connection)
    rows = connection.execute(
        "SELECT code, zone FROM zones WHERE zone <> 'mainland' ORDER BY code"
    ).fetchall()
    assert rows == sorted((code, zone) for code, zone in ZONES if zone != "mainland")
    assert notices == []
    assert admin.balance(analyst)["spent_epsilon"] == 0


def test_keys_from_the_data_are_refused_without_delta(connect: Connect, admin: Admin) -> None:
    analyst = admin.add_analyst(1.0, prefix="nodelta")
    connection = connect(analyst)
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as refused:
        connection.execute("SELECT visit_id % 2 AS parity, COUNT(*) FROM visits GROUP BY 1")
    assert "keys are not public" in (refused.value.diag.message_primary or "")
    assert "veil.delta" in (refused.value.diag.message_hint or "")
    assert "δ grant" in (refused.value.diag.message_hint or "")
    assert admin.balance(analyst)["spent_epsilon"] == 0


def test_keys_from_the_data_are_released_above_tau_with_veil_delta(
    connect: Connect, admin: Admin, truth: Truth
) -> None:
    analyst = add_analyst_with_delta(admin, 1.0, 1e-5, prefix="delta")
    connection = connect(analyst)
    notices = collect_notices(connection)
    connection.execute("SET veil.epsilon = 1")
    connection.execute("SET veil.delta = 1e-6")
    rows = connection.execute(
        "SELECT visit_id % 2 AS parity, COUNT(*) AS n FROM visits GROUP BY 1 ORDER BY 1"
    ).fetchall()
    # Thousands of patients had visits of each parity: far above τ (≈ 2·10·ln(10 / 2e-6) ≈ 300).
    assert [int(parity) for parity, _ in rows] == sorted(truth.visits_by_parity_bounded)
    for parity, n in rows:  # two noisy quantities (the counts and the people gate), ε/2 each
        bound = noise_bound(VISITS_MAX_CONTRIBUTIONS, 0.5)
        assert abs(n - truth.visits_by_parity_bounded[int(parity)]) <= bound, (parity, n)
    assert "τ=" in notices[-1].message
    balance = admin.balance(analyst)
    assert (balance["spent_epsilon"], balance["spent_delta"]) == (1.0, pytest.approx(1e-6))


def test_keys_of_a_declared_date_range_are_public_and_need_no_delta(
    connect: Connect, admin: Admin, truth: Truth
) -> None:
    """visit_date declares 2024-01-01 … 2025-12-31: its years are public keys, answered without δ."""
    analyst = admin.add_analyst(1.0, prefix="years")
    connection = connect(analyst)
    notices = collect_notices(connection)
    connection.execute("SET veil.epsilon = 1")
    rows = connection.execute(
        "SELECT EXTRACT(year FROM visit_date) AS year, COUNT(*) AS n FROM visits GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert [year for year, _ in rows] == sorted(truth.visits_by_year_bounded) == [2024, 2025]
    for year, n in rows:  # one noisy quantity, all of ε
        assert abs(n - truth.visits_by_year_bounded[year]) <= noise_bound(VISITS_MAX_CONTRIBUTIONS, 1.0)
    assert "τ=" not in notices[-1].message
    balance = admin.balance(analyst)
    assert (balance["spent_epsilon"], balance["spent_delta"]) == (1.0, 0.0)


def test_a_key_computed_from_a_private_date_is_sent_with_the_type_of_its_values(
    connect: Connect, admin: Admin, truth: Truth
) -> None:
    """Without ORDER BY the noisy table goes to the client as released, so its key column's type is the
    planner's: EXTRACT(year FROM visit_date) must be described as an integer, not as the column's
    ``date`` (psycopg could not parse '2024'), on both engines (PostgreSQL's are NUMERIC)."""
    analyst = admin.add_analyst(1.0, prefix="datekey")
    connection = connect(analyst)
    connection.execute("SET veil.epsilon = 1")
    rows = connection.execute(
        "SELECT EXTRACT(year FROM visit_date) AS year, COUNT(*) AS n FROM visits GROUP BY 1"
    ).fetchall()
    assert sorted(int(year) for year, _ in rows) == sorted(truth.visits_by_year_bounded)


def test_a_key_each_person_holds_alone_is_never_released(connect: Connect, admin: Admin) -> None:
    """Every visit_id belongs to one patient: each is released with probability at most δ / L."""
    analyst = add_analyst_with_delta(admin, 1.0, 1e-5, prefix="alone")
    connection = connect(analyst)
    connection.execute("SET veil.delta = 1e-9")
    rows = connection.execute("SELECT visit_id, COUNT(*) FROM visits GROUP BY visit_id").fetchall()
    assert rows == []
    assert admin.balance(analyst)["spent_delta"] == pytest.approx(1e-9)


def test_other_row_holds_what_the_released_keys_do_not(connect: Connect, admin: Admin, truth: Truth) -> None:
    analyst = add_analyst_with_delta(admin, 2.0, 1e-5, prefix="other")
    connection = connect(analyst)
    connection.execute("SET veil.other_row = on")
    connection.execute("SET veil.epsilon = 1")
    # Public keys: every patient has a listed region, so "(other)" is a noisy zero (the noisy total
    # minus seven noisy groups; two quantities, ε/2 each).
    rows = connection.execute("SELECT region, COUNT(*) AS n FROM patients GROUP BY region").fetchall()
    assert [region for region, _ in rows] == [*REGIONS, "(other)"]
    assert abs(rows[-1][1]) <= (len(REGIONS) + 1) * noise_bound(1, 0.5)
    # Keys from the data that no key passes τ: the whole (bounded) count lands in one row, NULL-keyed
    # because visit_id is not text. Three quantities (counts, people gate, total), ε/3 each.
    connection.execute("SET veil.delta = 1e-9")
    ((key, n),) = connection.execute("SELECT visit_id, COUNT(*) FROM visits GROUP BY visit_id").fetchall()
    assert key is None
    assert abs(n - truth.visits_bounded) <= noise_bound(VISITS_MAX_CONTRIBUTIONS, 1 / 3)


def test_show_error_adds_a_notice_with_the_95_percent_bound(connect: Connect, admin: Admin) -> None:
    analyst = admin.add_analyst(1.0, prefix="shower")
    connection = connect(analyst)
    notices = collect_notices(connection)
    connection.execute("SET veil.show_error = on")
    rows = connection.execute("SELECT region, COUNT(*) FROM patients GROUP BY region").fetchall()
    assert len(rows) == len(REGIONS)
    spend_of(notices[-2])
    message = notices[-1].message
    match = re.fullmatch(
        r"95% error bounds of the noise \(over all 7 row\(s\)\): count\(\*\) ±([0-9.]+)", message
    )
    assert match, message
    # Laplace, scale b = 1 / 0.1, union bound over 7 cells: b·ln(7 / 0.05), plus one integer step at most.
    expected = 10 * math.log(7 / 0.05)
    assert expected - 0.01 <= float(match[1]) <= expected + 1.01


def test_a_typed_date_literal_in_where_is_answered(connect: Connect, analyst: Analyst) -> None:
    connection = connect(analyst)
    count = scalar(connection, "SELECT COUNT(*) FROM visits WHERE visit_date >= DATE '2025-01-01'")
    assert isinstance(count, int)


def test_a_widening_cast_inside_an_aggregate_is_answered(connect: Connect, analyst: Analyst) -> None:
    """docs/sql.md lists AVG(CAST(x AS REAL)) among the supported aggregate arguments."""
    connection = connect(analyst)
    average = scalar(connection, "SELECT AVG(CAST(age AS REAL)) FROM patients")
    assert 0 <= average <= AGE_UPPER


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
    pytest.param("SELECT COUNT(*) FROM visits GROUP BY visit_id", "42501", "GROUP BY", id="group-private"),
    pytest.param(
        "SELECT COUNT(*) FROM visits WHERE patient_id IN (SELECT patient_id FROM patients)",
        "42501",
        "subquer",
        id="subquery-in-where",
    ),
    pytest.param(
        "SELECT MODE() WITHIN GROUP (ORDER BY age) FROM patients", "42501", "mode", id="mode-private"
    ),
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


def new_count(number: int) -> str:
    """A COUNT that no earlier query of the test asked: the answer cache serves a repeated query for free,
    so tests about spending ask different questions."""
    return f"SELECT COUNT(*) FROM patients WHERE age >= {number}"


def test_a_repeated_query_gets_the_stored_answer_for_free(connect: Connect, admin: Admin) -> None:
    analyst = admin.add_analyst(1.0, prefix="cache")
    connection = connect(analyst)
    notices = collect_notices(connection)
    sql = "SELECT region, COUNT(*) AS n FROM patients GROUP BY region"
    first = connection.execute(sql).fetchall()
    assert float(spend_of(notices[-1])["spent"]) == 0.1
    again = connection.execute(sql.replace("AS n", "AS patients") + " ORDER BY region").fetchall()
    assert sorted(again) == sorted(first)  # the same noisy values: averaging repeats learns nothing
    assert "stored answer of the same query asked before, so it spent nothing" in notices[-1].message
    assert admin.balance(analyst)["spent_epsilon"] == pytest.approx(0.1)
    connection.execute("SET veil.epsilon = 0.2")  # another ε is another question: fresh noise, charged
    connection.execute(sql).fetchall()
    assert admin.balance(analyst)["spent_epsilon"] == pytest.approx(0.3)


def test_budget_exhaustion_refuses_with_53Z01_and_spends_nothing_more(connect: Connect, admin: Admin) -> None:
    analyst = admin.add_analyst(0.25, prefix="thrifty")
    connection = connect(analyst)
    connection.execute("SET veil.epsilon = 0.1")
    answers = [scalar(connection, new_count(number)) for number in range(2)]
    assert all(isinstance(answer, int) for answer in answers)

    for number in range(2, 4):
        with pytest.raises(psycopg.Error) as refused:
            connection.execute(new_count(number))
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
    for number in range(2):
        scalar(connection, new_count(number))  # 0.1 each
    connection.execute("SET veil.epsilon = 0.05")
    scalar(connection, new_count(2))
    assert float(spend_of(notices[-1])["remaining"]) == 0
    connection.execute("SET veil.epsilon = 0.001")
    with pytest.raises(psycopg.Error) as refused:
        connection.execute(new_count(3))
    assert refused.value.sqlstate == "53Z01"
    assert admin.balance(analyst)["remaining_epsilon"] == 0


def test_a_grant_of_0_3_pays_for_three_answers_at_0_1(connect: Connect, admin: Admin) -> None:
    analyst = admin.add_analyst(0.3, prefix="decimal")
    connection = connect(analyst)
    answers = []
    for number in range(3):
        try:
            answers.append(scalar(connection, new_count(number)))
        except psycopg.Error as error:
            assert error.sqlstate == "53Z01"
    assert len(answers) == 3
    assert admin.balance(analyst)["remaining_epsilon"] == pytest.approx(0, abs=1e-12)


def test_the_exhaustion_message_states_the_remaining_epsilon_as_the_notice_does(
    connect: Connect, admin: Admin
) -> None:
    analyst = admin.add_analyst(0.25, prefix="message")
    connection = connect(analyst)
    for number in range(2):
        scalar(connection, new_count(number))
    with pytest.raises(psycopg.Error) as refused:
        connection.execute(new_count(2))
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
