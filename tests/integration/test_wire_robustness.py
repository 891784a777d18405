"""Clients that misbehave after authenticating — oversized, malformed, unknown or truncated messages,
hanging up mid-query or mid-result, reading slowly, random garbage — and crowds of clients: the
server isolates the bad connection (an error, or closing it, with one log line), and everyone else
is served as before. (``running_server`` also fails the test if the server died or logged a
traceback.)

A raw connection here is authenticated by psycopg (startup and SCRAM), whose socket the test then
drives by hand.
"""

from __future__ import annotations

import contextlib
import os
import random
import resource
import socket
import struct
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest

from tests.conftest import Admin, Analyst, RunningServer, missing, running_server
from tests.integration.slow_dataset import BIG_PUBLIC_QUERY, MEDIUM_QUERY, NUMBERS, build_slow_dataset

MAX_MESSAGE_SIZE = 65_536
IDLE, ACTIVE = 500, 100


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, Analyst]]:
    config = build_slow_dataset(
        tmp_path_factory.mktemp("robust"),
        max_connections=IDLE + ACTIVE + 50,
        max_message_size=MAX_MESSAGE_SIZE,
    )
    analyst = Admin(config).add_analyst(50.0, prefix="robust")
    with running_server(config, config.with_name("serve.log")) as server:
        yield server, analyst


@pytest.fixture
def server(served: tuple[RunningServer, Analyst]) -> RunningServer:
    return served[0]


@pytest.fixture
def analyst(served: tuple[RunningServer, Analyst]) -> Analyst:
    return served[1]


def connect(server: RunningServer, analyst: Analyst) -> psycopg.Connection[Any]:
    return psycopg.connect(server.conninfo(analyst), prepare_threshold=None, autocommit=True)


@contextlib.contextmanager
def raw_session(server: RunningServer, analyst: Analyst) -> Iterator[socket.socket]:
    """An authenticated connection, ready for a query, whose socket the test drives by hand."""
    connection = connect(server, analyst)
    sock = socket.socket(fileno=os.dup(connection.fileno()))
    sock.settimeout(10)
    try:
        yield sock
    finally:
        sock.close()
        connection.close()


def message(type_byte: bytes, payload: bytes) -> bytes:
    return type_byte + struct.pack("!i", len(payload) + 4) + payload


def query(sql: str) -> bytes:
    return message(b"Q", sql.encode() + b"\0")


def read_replies(sock: socket.socket) -> list[tuple[bytes, bytes]]:
    """Messages until ReadyForQuery or the end of the stream."""
    data, replies = b"", []
    while True:
        while len(data) >= 5 and len(data) >= 1 + struct.unpack("!i", data[1:5])[0]:
            end = 1 + struct.unpack("!i", data[1:5])[0]
            replies.append((data[:1], data[5:end]))
            data = data[end:]
            if replies[-1][0] == b"Z":
                return replies
        chunk = sock.recv(65536)
        if not chunk:
            return replies
        data += chunk


def sqlstate(payload: bytes) -> str:
    fields = {field[:1]: field[1:] for field in payload.rstrip(b"\0").split(b"\0")}
    return fields[b"C"].decode()


def check_serving(server: RunningServer, analyst: Analyst) -> None:
    with connect(server, analyst) as connection:
        assert connection.execute("SELECT 1").fetchone() == (1,)


def test_an_oversized_message_ends_only_that_connection_with_one_log_line(
    server: RunningServer, analyst: Analyst
) -> None:
    with raw_session(server, analyst) as sock:
        port = sock.getsockname()[1]
        sock.sendall(b"Q" + struct.pack("!i", MAX_MESSAGE_SIZE + 1) + b"SELECT ")
        ((kind, payload),) = read_replies(sock)
    assert kind == b"E" and sqlstate(payload) == "08P01"
    assert b"exceeds the limit of 65536 bytes" in payload
    with connect(server, analyst) as connection, pytest.raises(psycopg.errors.ProtocolViolation):
        connection.execute("SELECT 1 -- " + "x" * MAX_MESSAGE_SIZE)
    check_serving(server, analyst)
    assert server.output().count(f"peer=127.0.0.1:{port} ") == 1


def test_a_malformed_message_gets_a_protocol_error(server: RunningServer, analyst: Analyst) -> None:
    with raw_session(server, analyst) as sock:
        sock.sendall(message(b"Q", b"SELECT 1"))  # no terminating NUL
        replies = read_replies(sock)
    assert replies[0][0] == b"E" and sqlstate(replies[0][1]) == "08P01"
    check_serving(server, analyst)


@pytest.mark.parametrize(
    "query", [b"SELECT '\xc3('\0", b"SELECT 1\0; SELECT 2\0"], ids=["invalid-utf8", "nul-byte"]
)
def test_a_query_that_is_not_utf8_gets_22021_and_the_session_goes_on(
    server: RunningServer, analyst: Analyst, query: bytes
) -> None:
    """As PostgreSQL answers it: ERROR 22021 and ReadyForQuery, not a FATAL that ends the session."""
    with raw_session(server, analyst) as sock:
        sock.sendall(message(b"Q", query))
        replies = read_replies(sock)
        assert [kind for kind, _ in replies] == [b"E", b"Z"]
        assert sqlstate(replies[0][1]) == "22021"
        sock.sendall(message(b"Q", b"SELECT 7\0"))
        again = read_replies(sock)
    assert [kind for kind, _ in again] == [b"T", b"D", b"C", b"Z"]
    assert b"7" in again[1][1]


def test_an_undecodable_extended_message_discards_until_sync(server: RunningServer, analyst: Analyst) -> None:
    with raw_session(server, analyst) as sock:
        parse = message(b"P", b"\0SELECT '\xff'\0" + b"\0\0")
        sock.sendall(parse + message(b"B", b"\0\0\0\0\0\0\0\0") + message(b"S", b""))
        replies = read_replies(sock)
    assert [kind for kind, _ in replies] == [b"E", b"Z"]
    assert sqlstate(replies[0][1]) == "22021"
    check_serving(server, analyst)


def test_an_unknown_message_type_is_refused(server: RunningServer, analyst: Analyst) -> None:
    with raw_session(server, analyst) as sock:
        sock.sendall(message(b"y", b"\0\0\0\1"))
        replies = read_replies(sock)
    assert replies == [] or replies[0][0] == b"E"
    check_serving(server, analyst)


def test_a_truncated_message_then_hanging_up_disturbs_nobody(server: RunningServer, analyst: Analyst) -> None:
    with raw_session(server, analyst) as sock:
        sock.sendall(b"Q" + struct.pack("!i", 1000) + b"SELECT")
    check_serving(server, analyst)


def test_hanging_up_mid_query_disturbs_nobody(server: RunningServer, analyst: Analyst) -> None:
    with raw_session(server, analyst) as sock:
        sock.sendall(query(MEDIUM_QUERY))
    check_serving(server, analyst)  # while the orphaned engine query may still run


def reset(sock: socket.socket) -> None:
    """Close with a TCP reset rather than a goodbye, as a crashed client does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def test_hanging_up_mid_result_disturbs_nobody(server: RunningServer, analyst: Analyst) -> None:
    with raw_session(server, analyst) as sock:
        sock.sendall(query(BIG_PUBLIC_QUERY))
        assert len(sock.recv(8192)) > 0
        reset(sock)
    check_serving(server, analyst)


def test_a_slow_reader_holds_up_nobody_and_gets_its_whole_result(
    server: RunningServer, analyst: Analyst
) -> None:
    with raw_session(server, analyst) as sock, connect(server, analyst) as other:
        sock.sendall(query(BIG_PUBLIC_QUERY))
        started = time.monotonic()
        for _ in range(5):  # answered while the slow reader's megabytes wait
            assert other.execute("SELECT COUNT(*) FROM numbers WHERE n < 10").fetchone() == (10,)
        assert time.monotonic() - started < 5
        time.sleep(0.5)
        replies = read_replies(sock)
    assert sum(kind == b"D" for kind, _ in replies) == NUMBERS
    assert [kind for kind, _ in replies[-2:]] == [b"C", b"Z"]


def test_random_garbage_after_startup_ends_at_most_that_connection(
    server: RunningServer, analyst: Analyst
) -> None:
    """A socket-level fuzz with a fixed seed: random bytes, and valid messages with bytes changed.
    The server answers with an error, closes, or waits for the rest of a message; then a fresh
    connection works."""
    rng = random.Random(20260101)
    valid = [
        query("SELECT 1"),
        message(b"P", b"s\0SELECT 1\0\0\0"),
        message(b"B", b"\0s\0\0\0\0\0\0\0"),
        message(b"E", b"\0\0\0\0\0"),
        message(b"S", b""),
    ]
    for round in range(30):
        if round % 2:
            data = bytearray(rng.choice(valid))
            for _ in range(rng.randint(1, 3)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        else:
            data = bytearray(rng.randbytes(rng.randint(1, 64)))
        with raw_session(server, analyst) as sock:
            sock.sendall(bytes(data))
            sock.settimeout(0.2)
            with contextlib.suppress(TimeoutError, ConnectionResetError):
                replies = read_replies(sock)
                assert all(kind in b"EZ123nstTDCIN" for kind, _ in replies), replies
    check_serving(server, analyst)


def test_many_idle_and_active_connections_are_all_served(server: RunningServer, analyst: Analyst) -> None:
    """500 connections that only sit there, and 100 that query at the same time."""
    needed = 2 * (IDLE + ACTIVE) + 100  # a socket on each side, in this one process and the server's
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed and (hard == resource.RLIM_INFINITY or hard >= needed):
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))  # up to the hard limit, as `ulimit -n` may
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < needed:
        missing(f"the open-files limit (ulimit -n) is below {needed} and cannot be raised")

    def active(number: int) -> int:
        with connect(server, analyst) as connection:
            (count,) = connection.execute(f"SELECT COUNT(*) FROM numbers WHERE n < {number}").fetchone()  # type: ignore[misc]
            assert connection.execute("SELECT 1").fetchone() == (1,)
            return int(count)

    with contextlib.ExitStack() as stack, ThreadPoolExecutor(max_workers=ACTIVE) as pool:
        for idle in pool.map(lambda _: connect(server, analyst), range(IDLE)):
            stack.enter_context(idle)
        assert list(pool.map(active, range(ACTIVE))) == list(range(ACTIVE))
