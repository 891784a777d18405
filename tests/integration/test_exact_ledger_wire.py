"""Issue 21's bug, end to end through ``veil serve``: once a grant is spent, ``SET veil.epsilon =
1e-30`` must not buy answers. The dataset's ε floor (min_epsilon) refuses it first; with the floor
moved out of the way, the ledger's exact arithmetic refuses it on its own."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
import tomli_w

from tests.conftest import DATASET, Admin, Analyst, Demo, RunningServer

QUERY = "SELECT COUNT(*) FROM patients"


def spend_the_grant(server: RunningServer, analyst: Analyst) -> psycopg.Connection[object]:
    connection = psycopg.connect(server.conninfo(analyst), autocommit=True)
    connection.execute("SET veil.epsilon = 0.01")
    connection.execute(QUERY).fetchall()  # the whole grant
    return connection


def refused(connection: psycopg.Connection[object], sql: str) -> psycopg.Error:
    with pytest.raises(psycopg.Error) as error:
        connection.execute(sql).fetchall()
    return error.value


def test_the_epsilon_floor_refuses_1e_30_after_the_grant_is_spent(
    veil_server: RunningServer, admin: Admin
) -> None:
    analyst = admin.add_analyst(0.01, prefix="floor")
    with spend_the_grant(veil_server, analyst) as connection:
        error = refused(connection, "SET veil.epsilon = 1e-30")
        assert error.sqlstate == "22023" and "min_epsilon" in str(error)
        # still at 0.01, and exhausted (another query: the same one would be the stored answer, free)
        assert refused(connection, "SELECT COUNT(*) FROM visits").sqlstate == "53Z01"
    assert admin.balance(analyst)["remaining_epsilon"] == 0
    assert len(admin.history(analyst)) == 1


def test_without_the_floor_the_ledger_alone_refuses_1e_30_after_the_grant_is_spent(
    demo: Demo, serve: Callable[[Path], RunningServer]
) -> None:
    document = tomllib.loads(demo.config.read_text(encoding="utf-8"))
    document["datasets"][DATASET]["min_epsilon"] = 1e-40  # no floor to speak of
    config = demo.config.with_name("no-floor.toml")
    config.write_text(tomli_w.dumps(document), encoding="utf-8")
    server = serve(config)
    admin = Admin(config)
    analyst = admin.add_analyst(0.01, prefix="nofloor")
    with spend_the_grant(server, analyst) as connection:
        connection.execute("SET veil.epsilon = 1e-30")  # one quantum: representable, and too much
        exhausted = refused(connection, QUERY)
        assert exhausted.sqlstate == "53Z01" and "privacy budget exhausted" in str(exhausted)
        connection.execute("SET veil.epsilon = 1e-31")  # below the quantum: cannot be charged at all
        below = refused(connection, QUERY)
        assert below.sqlstate == "22023" and "below the ledger's quantum" in str(below)
    balance = admin.balance(analyst)
    assert (balance["spent_epsilon"], balance["remaining_epsilon"]) == (0.01, 0)
    assert [spend["epsilon"] for spend in admin.history(analyst)] == [0.01]
