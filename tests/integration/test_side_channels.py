"""Whether a query on private data is answered must not depend on one person's data.

Each case is a pair of WHERE clauses that differ only in a guess about one patient (their exact age,
or whether they exist). Under differential privacy both queries must end the same way: both answered
(and charged) or both refused. If one of them fails in the engine instead, the error is an exact,
noise-free answer to the guess; and since Veil cancels the reservation of a query that fails in the
engine, the failed guess would cost nothing. Veil evaluates filters under ``TRY(…)`` so that no row
can make the query fail (proxy/rewrite/safe_predicates.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import duckdb
import psycopg
import pytest

from tests.conftest import Admin, Demo

VICTIM = 42
ABSENT = 10_000_000

Connect = Callable[..., psycopg.Connection[Any]]


@pytest.fixture(scope="module")
def victim_age(demo: Demo) -> int:
    with duckdb.connect(str(demo.database), read_only=True) as db:
        (age,) = db.execute("SELECT age FROM patients WHERE patient_id = ?", [VICTIM]).fetchone()  # type: ignore[misc]
    return int(age)


def outcome(connection: psycopg.Connection[Any], where: str) -> str:
    try:
        connection.execute(f"SELECT COUNT(*) FROM patients WHERE {where}").fetchall()
    except psycopg.Error as error:
        return error.sqlstate or "?"
    return "answered"


GUESSES = {
    "modulo-by-zero": "1 % CASE WHEN patient_id = {victim} AND age = {age} THEN 0 ELSE 1 END = 0",
    "integer-division-by-zero": "div(1, CASE WHEN patient_id = {victim} AND age = {age} THEN 0 ELSE 1 END) = 1",
    "multiplication-overflow": (
        "CASE WHEN patient_id = {victim} AND age = {age} THEN (age + 2) * 9223372036854775807 ELSE 0 END = 0"
    ),
}


@pytest.mark.parametrize("template", GUESSES.values(), ids=GUESSES.keys())
def test_guessing_one_patients_age_gets_the_same_kind_of_answer_either_way(
    connect: Connect, admin: Admin, victim_age: int, template: str
) -> None:
    connection = connect(admin.add_analyst(1.0, prefix="guess"))
    right = outcome(connection, template.format(victim=VICTIM, age=victim_age))
    wrong = outcome(connection, template.format(victim=VICTIM, age=victim_age + 1))
    assert (right, wrong) == ("answered", "answered")


def test_guessing_whether_a_patient_exists_gets_the_same_kind_of_answer_either_way(
    connect: Connect, admin: Admin
) -> None:
    connection = connect(admin.add_analyst(1.0, prefix="member"))
    template = "CASE WHEN patient_id = {who} THEN region ELSE '1' END = 1"
    present = outcome(connection, template.format(who=VICTIM))
    absent = outcome(connection, template.format(who=ABSENT))
    assert (present, absent) == ("answered", "answered")


def test_a_query_that_failed_in_the_engine_stays_visible_to_an_auditor(
    connect: Connect, admin: Admin, victim_age: int
) -> None:
    analyst = admin.add_analyst(1.0, prefix="recorded")
    connection = connect(analyst)
    outcomes = [
        outcome(connection, GUESSES["modulo-by-zero"].format(victim=VICTIM, age=age))
        for age in (victim_age + 1, victim_age)
    ]
    history = admin.history(analyst)
    assert len(history) == 2
    assert [spend["state"] for spend in history] == [
        "committed" if result == "answered" else "cancelled" for result in outcomes
    ]
    assert all("1 % CASE WHEN patient_id = 42" in spend["statement"] for spend in history)
