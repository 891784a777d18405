"""Connection slots (docs/policy.md ``[server]``): sockets that never log in hold at most
``authentication_slots`` of ``max_connections``, so analysts who do log in keep theirs; a client refused
for lack of a slot reads a proper 53300 whether or not it asked for TLS; and a CancelRequest is served
even when the server is full."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import Admin, RunningServer, running_server
from tests.integration.slow_dataset import SLOW_QUERY, build_slow_dataset, connect, with_server_settings


@contextlib.contextmanager
def silent_sockets(server: RunningServer, count: int) -> Iterator[None]:
    """Clients that connect and never say a word (until the authentication timeout)."""
    sockets = [socket.create_connection((server.host, server.port)) for _ in range(count)]
    time.sleep(0.3)  # accepted by the server
    try:
        yield
    finally:
        for sock in sockets:
            sock.close()


def test_silent_sockets_cannot_take_the_slots_of_analysts(tmp_path: Path) -> None:
    config = with_server_settings(
        build_slow_dataset(tmp_path / "slow"), "slots.toml", max_connections=4, authentication_slots=2
    )
    admin = Admin(config)
    analyst = admin.add_analyst(1.0, prefix="slotted")
    with running_server(config, tmp_path / "serve.log") as server, connect(server, analyst) as logged_in:
        with silent_sockets(server, 2):
            with pytest.raises(psycopg.OperationalError, match="too many clients already") as refused:
                psycopg.connect(server.conninfo(analyst), sslmode="prefer").close()
            assert "SSL" not in str(refused.value)
            assert logged_in.execute("SELECT 1").fetchone() == (1,)  # the analyst's slot was kept
            stopped = cancelled_while_full(logged_in)
        assert isinstance(stopped, psycopg.errors.QueryCanceled)
        with connect(server, analyst) as again:  # the silent ones are gone: logins work again
            assert again.execute("SELECT 1").fetchone() == (1,)
        assert "reason=authentication_slots limit=2" in server.output()


def cancelled_while_full(connection: psycopg.Connection) -> BaseException | None:  # type: ignore[type-arg]
    """Run a slow query and cancel it with a CancelRequest on a new connection, the slots all taken."""
    raised: list[BaseException] = []

    def slow() -> None:
        try:
            connection.execute(SLOW_QUERY)
        except psycopg.Error as error:
            raised.append(error)

    worker = threading.Thread(target=slow)
    worker.start()
    time.sleep(0.5)
    while worker.is_alive():
        connection.cancel_safe(timeout=5)
        worker.join(1)
    return raised[0] if raised else None
