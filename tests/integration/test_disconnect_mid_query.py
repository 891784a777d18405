"""A client that closes its connection while a DP query runs, through ``veil serve`` on the slow dataset.

Nobody can receive the answer, so the session interrupts the engine query as a CancelRequest would.
The statement is charged all the same — leaving must not take back a slow outcome (docs/privacy.md,
"Side channels") —, the audit log records it as failed with 57014 and the ε charged, the server logs
one line, and it goes on answering other clients. Messages a client pipelines
behind a running query are not mistaken for a disconnection.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import Admin, Analyst, RunningServer
from tests.integration.slow_dataset import MEDIUM_QUERY, SLOW_QUERY, connect

ENGINE_START_SECONDS = 0.5  # the slow query has reserved and reached the engine by then
SETTLE_TIMEOUT = 15.0  # the interrupted statement ends well within this (uninterrupted: a minute)


def terminate(connection: psycopg.Connection[Any]) -> None:
    """As a client process that exits: libpq sends Terminate, then closes the socket."""
    connection.pgconn.finish()


def reset(connection: psycopg.Connection[Any]) -> None:
    """As a client that crashes or loses the network: the socket goes, with no Terminate."""
    with socket.socket(fileno=os.dup(connection.pgconn.socket)) as duplicate:
        duplicate.shutdown(socket.SHUT_RDWR)  # ends the connection for every descriptor of it
    connection.close()


def audit_entries(admin: Admin, analyst: Analyst) -> list[dict[str, Any]]:
    return json.loads(admin.check("audit", "--analyst", analyst.name, "--json").stdout)  # type: ignore[no-any-return]


def spend_states(admin: Admin, analyst: Analyst) -> list[str]:
    return [spend["state"] for spend in admin.history(analyst)]


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, f"not within {SETTLE_TIMEOUT:g} s: {what}"
        time.sleep(0.1)


@pytest.mark.parametrize("leave", [terminate, reset], ids=["terminate", "reset"])
def test_a_client_leaving_mid_query_stops_it_and_is_charged(
    slow_server: RunningServer, slow_config: Path, leave: Callable[[psycopg.Connection[Any]], None]
) -> None:
    admin = Admin(slow_config)
    analyst = admin.add_analyst(1.0, prefix=f"leaver-{leave.__name__}")
    connection = connect(slow_server, analyst)
    connection.pgconn.send_query(SLOW_QUERY.encode())  # sent; its answer is never read
    time.sleep(ENGINE_START_SECONDS)
    assert spend_states(admin, analyst) == ["reserved"], "the query had not reserved yet: nothing tested"
    left = time.monotonic()
    leave(connection)

    wait_for(lambda: spend_states(admin, analyst) == ["committed"], "the reservation was committed")
    assert time.monotonic() - left < SETTLE_TIMEOUT
    (spend,) = admin.history(analyst)
    assert spend["epsilon"] > 0
    assert admin.balance(analyst)["spent_epsilon"] == pytest.approx(spend["epsilon"])
    wait_for(lambda: audit_entries(admin, analyst) != [], "the statement was audited")
    (entry,) = audit_entries(admin, analyst)
    assert (entry["statement"], entry["decision"], entry["sqlstate"]) == (SLOW_QUERY, "failed", "57014")
    assert (entry["epsilon"], entry["outcome"]) == (pytest.approx(spend["epsilon"]), "disconnected")
    assert "client disconnected" in entry["error"]
    assert "client disconnected mid-statement" in slow_server.output()
    with connect(slow_server, admin.add_analyst(1.0, prefix="after")) as other:
        assert other.execute("SELECT COUNT(*) FROM medium WHERE v > 50").fetchone() is not None


def test_messages_pipelined_behind_a_running_query_are_answered(
    slow_server: RunningServer, slow_config: Path
) -> None:
    """While MEDIUM_QUERY runs, the rest of the pipeline arrives: read ahead, then answered in order."""
    admin = Admin(slow_config)
    analyst = admin.add_analyst(1.0, prefix="pipeliner")
    with connect(slow_server, analyst) as connection, connection.pipeline():
        slow = connection.execute(MEDIUM_QUERY)
        rest = [connection.execute("SELECT %s::int", [number]) for number in range(50)]
    assert isinstance(slow.fetchone()[0], int | float)  # type: ignore[index]
    assert [cursor.fetchone() for cursor in rest] == [(number,) for number in range(50)]
    assert spend_states(admin, analyst) == ["committed"]
