"""A client that connects and never logs in gets its connection closed after authentication_timeout_s,
so silent connections cannot use up max_connections."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

from tests.conftest import Demo, RunningServer
from tests.integration.slow_dataset import with_server_settings

TIMEOUT_S = 0.5


def test_a_silent_client_is_disconnected_and_others_are_served(
    demo: Demo, serve: Callable[[Path], RunningServer]
) -> None:
    server = serve(with_server_settings(demo.config, "auth-timeout.toml", authentication_timeout_s=TIMEOUT_S))
    started = time.monotonic()
    with socket.create_connection((server.host, server.port), timeout=10) as silent:
        data = b""
        while chunk := silent.recv(4096):  # the server speaks first only to end it
            data += chunk
    waited = time.monotonic() - started
    assert TIMEOUT_S <= waited < 5
    assert data[:1] == b"E"
    fields = dict(
        (field[:1], field[1:])
        for field in data[5 : 1 + struct.unpack("!i", data[1:5])[0]].split(b"\0")
        if field
    )
    assert fields[b"C"] == b"57014" and b"authentication" in fields[b"M"]
    with psycopg.connect(server.conninfo(), autocommit=True) as connection:  # a prompt client is served
        assert connection.execute("SELECT 1").fetchone() == (1,)
