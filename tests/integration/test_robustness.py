"""Clients that misbehave on the socket get a FATAL error or a closed connection, and the server
goes on serving everyone else. (The ``veil_server`` fixture also fails the session if the server
died or logged a traceback.)"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from tests.conftest import RunningServer

Connect = Callable[..., psycopg.Connection[Any]]
PROTOCOL_3 = 196608


def exchange(server: RunningServer, data: bytes) -> bytes:
    """Send raw bytes and return the server's first reply: one byte for an SSL probe, else one message."""
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(data)
        received = sock.recv(4096)
        if received == b"N":
            return received
        while len(received) < 5 or len(received) < 1 + struct.unpack("!i", received[1:5])[0]:
            chunk = sock.recv(4096)
            assert chunk, f"the server closed the connection mid-message: {received!r}"
            received += chunk
        return received


def startup(**parameters: str) -> bytes:
    body = (
        struct.pack("!i", PROTOCOL_3)
        + b"".join(f"{k}\0{v}\0".encode() for k, v in parameters.items())
        + b"\0"
    )
    return struct.pack("!i", len(body) + 4) + body


def error_fields(message: bytes) -> dict[str, str]:
    assert message[:1] == b"E", message
    (length,) = struct.unpack("!i", message[1:5])
    fields = message[5 : 1 + length].rstrip(b"\0").split(b"\0")
    return {field[:1].decode(): field[1:].decode() for field in fields}


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"GET / HTTP/1.1\r\nHost: veil\r\n\r\n", id="http"),
        pytest.param(struct.pack("!ii", 0x7FFFFFFF, PROTOCOL_3), id="huge-length"),
        pytest.param(struct.pack("!ii", 8, 131072), id="protocol-2"),
    ],
)
def test_garbage_gets_a_fatal_protocol_violation(veil_server: RunningServer, data: bytes) -> None:
    fields = error_fields(exchange(veil_server, data))
    assert fields["S"] == "FATAL"
    assert fields["C"] == "08P01"


def test_a_client_that_leaves_during_authentication_does_not_disturb_others(
    veil_server: RunningServer, connect: Connect
) -> None:
    survivor = connect()
    for _ in range(5):
        answer = exchange(veil_server, startup(user="alice", database="demo"))
        assert answer.startswith(b"R")  # the SASL offer; then the client hangs up
    assert exchange(veil_server, struct.pack("!ii", 8, 80877103)) == b"N"  # SSL probe, then gone
    assert survivor.execute("SELECT 1").fetchone() == (1,)
    assert connect().execute("SELECT 1").fetchone() == (1,)


def test_a_cancel_request_is_harmless(connect: Connect) -> None:
    connection = connect()
    connection.cancel_safe(timeout=5)
    assert connection.execute("SELECT 1").fetchone() == (1,)


def test_a_startup_without_a_user_is_refused(veil_server: RunningServer) -> None:
    fields = error_fields(exchange(veil_server, startup(database="demo")))
    assert (fields["S"], fields["C"]) == ("FATAL", "28000")
    assert "no PostgreSQL user name" in fields["M"]


def test_transaction_status_follows_begin_error_and_rollback(connect: Connect) -> None:
    """psycopg's non-autocommit mode relies on the status ReadyForQuery reports."""
    connection = connect()
    connection.autocommit = False
    assert connection.execute("SELECT 1").fetchone() == (1,)  # psycopg sent BEGIN first
    assert connection.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        connection.execute("SELECT * FROM visits")
    assert connection.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
    with pytest.raises(psycopg.errors.InFailedSqlTransaction):
        connection.execute("SELECT 1")
    connection.rollback()
    assert connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert connection.execute("SELECT 1").fetchone() == (1,)
