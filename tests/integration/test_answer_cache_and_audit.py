"""The answer cache, the veil.budget view and the audit log, seen from a real client (psycopg)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from budget.audit import Decision
from budget.ledger import Ledger
from tests.conftest import DATASET, Admin, Analyst, Demo

Connect = Callable[..., psycopg.Connection[Any]]
GROUPED = "SELECT region, COUNT(*) AS n FROM visits GROUP BY region"


def notices_of(connection: psycopg.Connection[Any], sql: str) -> tuple[list[tuple[Any, ...]], list[str]]:
    notices: list[str] = []
    connection.add_notice_handler(lambda diagnostic: notices.append(diagnostic.message_primary or ""))
    rows = connection.execute(sql).fetchall()
    return rows, notices


def test_a_repeated_query_gets_the_same_noisy_answer_and_spends_nothing(
    admin: Admin, connect: Connect
) -> None:
    analyst = admin.add_analyst(1.0, prefix="cache")
    connection = connect(analyst)
    first, _ = notices_of(connection, GROUPED)
    spent = admin.balance(analyst)["spent_epsilon"]
    again, notices = notices_of(connection, GROUPED)
    assert again == first  # the very same noisy values: nothing to average away
    assert admin.balance(analyst)["spent_epsilon"] == spent
    assert any("spent nothing" in notice for notice in notices), notices


def test_post_processing_variants_are_served_from_the_stored_noisy_table(
    admin: Admin, connect: Connect
) -> None:
    analyst = admin.add_analyst(1.0, prefix="cache")
    connection = connect(analyst)
    first = dict(connection.execute(GROUPED).fetchall())
    spent = admin.balance(analyst)["spent_epsilon"]
    variant = "SELECT region AS r, COUNT(*) * 2 AS twice FROM visits GROUP BY region ORDER BY r DESC LIMIT 3"
    rows = connection.execute(variant).fetchall()
    assert admin.balance(analyst)["spent_epsilon"] == spent
    assert [r for r, _ in rows] == sorted(first, reverse=True)[:3]
    assert all(twice == 2 * first[r] for r, twice in rows)


def test_reordered_conditions_and_in_lists_are_the_same_query(admin: Admin, connect: Connect) -> None:
    analyst = admin.add_analyst(1.0, prefix="cache")
    connection = connect(analyst)
    first = connection.execute(
        "SELECT COUNT(*) FROM visits WHERE cost > 20 AND region IN ('north', 'south')"
    ).fetchall()
    again = connection.execute(
        "select count(*) from visits where region in ('south', 'north') and cost > 20"
    ).fetchall()
    assert again == first
    assert admin.balance(analyst)["spent_epsilon"] == pytest.approx(0.1)


def test_a_different_epsilon_is_a_different_query_and_is_charged(admin: Admin, connect: Connect) -> None:
    analyst = admin.add_analyst(1.0, prefix="cache")
    connection = connect(analyst)
    connection.execute(GROUPED)
    connection.execute("SET veil.epsilon = 0.2")
    connection.execute(GROUPED)
    assert admin.balance(analyst)["spent_epsilon"] == pytest.approx(0.1 + 0.2)


def test_answers_are_cached_per_analyst(admin: Admin, connect: Connect) -> None:
    first, second = admin.add_analyst(1.0, prefix="cache"), admin.add_analyst(1.0, prefix="cache")
    connect(first).execute(GROUPED)
    connect(second).execute(GROUPED)
    assert admin.balance(second)["spent_epsilon"] == pytest.approx(0.1)


def test_the_budget_view_shows_what_this_analyst_has_left_and_costs_nothing(
    admin: Admin, connect: Connect
) -> None:
    analyst = admin.add_analyst(0.5, prefix="viewer")
    connection = connect(analyst)
    connection.execute("SELECT COUNT(*) FROM visits")
    (row,) = connection.execute(
        "SELECT dataset, granted_epsilon, spent_epsilon, remaining_epsilon, accountant FROM veil.budget"
    ).fetchall()
    assert row == (DATASET, 0.5, pytest.approx(0.1), pytest.approx(0.4), "basic")
    everything = connection.execute("SELECT * FROM veil.budget")
    assert [column.name for column in everything.description or []][:4] == [
        "dataset",
        "granted_epsilon",
        "spent_epsilon",
        "remaining_epsilon",
    ]
    assert len(everything.fetchall()) == 1
    shown = connection.execute("SHOW veil.budget").fetchall()
    assert [r[0] for r in shown] == [DATASET]
    filtered = connection.execute("SELECT dataset FROM veil.budget WHERE remaining_epsilon > 100").fetchall()
    assert filtered == []
    assert admin.balance(analyst)["spent_epsilon"] == pytest.approx(0.1)


def test_a_bad_comparison_on_the_budget_view_is_a_clear_error(admin: Admin, connect: Connect) -> None:
    analyst = admin.add_analyst(0.5, prefix="viewer")
    connection = connect(analyst)
    with pytest.raises(
        psycopg.errors.InvalidParameterValue, match=r"could not answer the query on veil\.budget"
    ):
        connection.execute("SELECT * FROM veil.budget WHERE remaining_epsilon = 'not a number'")
    assert connection.execute("SELECT 1").fetchall() == [(1,)]


def test_the_budget_view_cannot_be_joined_with_data(admin: Admin, connect: Connect) -> None:
    analyst = admin.add_analyst(0.5, prefix="viewer")
    with pytest.raises(psycopg.errors.FeatureNotSupported, match=r"veil\.budget can only be read on its own"):
        connect(analyst).execute("SELECT * FROM veil.budget b JOIN visits v ON true")


def test_every_statement_is_audited_with_its_decision_and_cost(
    admin: Admin, connect: Connect, demo: Demo
) -> None:
    analyst: Analyst = admin.add_analyst(0.25, prefix="audited")
    connection = connect(analyst)
    connection.execute("SELECT COUNT(*) FROM visits WHERE cost > 10")
    connection.execute("SELECT COUNT(*) FROM visits WHERE cost > 10")
    connection.execute("SELECT 1")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        connection.execute("SELECT * FROM visits")
    connection.execute("SET veil.epsilon = 0.2")
    with pytest.raises(psycopg.Error) as exhausted:
        connection.execute("SELECT COUNT(*) FROM visits")
    assert exhausted.value.sqlstate == "53Z01"
    entries = Ledger.open(demo.ledger).audit_log.entries(analyst=analyst.name)
    decisions = [(entry.decision, entry.epsilon, entry.sqlstate) for entry in entries]
    assert decisions == [
        (Decision.ANSWERED, 0.1, ""),
        (Decision.CACHED, 0.0, ""),
        (Decision.ANSWERED, 0.0, ""),
        (Decision.REFUSED, 0.0, "42501"),
        (Decision.ANSWERED, 0.0, ""),
        (Decision.REFUSED, 0.0, "53Z01"),
    ]
    assert entries[0].statement == "SELECT COUNT(*) FROM visits WHERE cost > 10"
    assert entries[0].mechanisms and entries[0].accountant == "basic"
    assert entries[0].client.startswith("127.0.0.1:")
    assert {entry.dataset for entry in entries} == {DATASET}
