"""What clients read right after connecting (ParameterStatus, BackendKeyData), and the session-reset
commands pools send when they hand a connection back (DISCARD ALL, DEALLOCATE)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

Connect = Callable[..., psycopg.Connection[Any]]

EXPECTED_PARAMETERS = {
    "server_version": "16.0",
    "server_encoding": "UTF8",
    "client_encoding": "UTF8",
    "DateStyle": "ISO, MDY",
    "IntervalStyle": "postgres",
    "TimeZone": "UTC",
    "integer_datetimes": "on",
    "standard_conforming_strings": "on",
    "default_transaction_read_only": "on",
    "in_hot_standby": "off",
    "is_superuser": "off",
    "session_authorization": "alice",
}


def test_startup_reports_the_parameters_clients_read(connect: Connect) -> None:
    connection = connect()
    reported = {name: connection.info.parameter_status(name) for name in EXPECTED_PARAMETERS}
    assert reported == EXPECTED_PARAMETERS
    assert connection.info.parameter_status("application_name") is not None


def test_each_session_gets_its_own_cancel_key(connect: Connect) -> None:
    assert connect().info.backend_pid != connect().info.backend_pid


def test_discard_all_resets_the_session(connect: Connect) -> None:
    connection = connect()
    connection.execute("SET veil.epsilon = 0.5")
    cursor = connection.execute("DISCARD ALL")
    assert cursor.statusmessage == "DISCARD ALL"
    assert connection.execute("SHOW veil.epsilon").fetchone() != ("0.5",)


def test_deallocate_is_accepted(connect: Connect) -> None:
    connection = connect()
    assert connection.execute("DEALLOCATE ALL").statusmessage == "DEALLOCATE ALL"
    assert connection.execute("DEALLOCATE PREPARE ALL").statusmessage == "DEALLOCATE ALL"
