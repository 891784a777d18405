"""TLS: with a certificate, ``veil serve`` answers SSLRequest with 'S' and wraps the connection;
without one, clients that require TLS are told it is not available. ``require_tls_for_remote`` turns
away clients on other hosts that did not negotiate it.

The certificate is self-signed, made by ``openssl`` for this module (skipped without it); clients
use ``sslmode=require``, which encrypts without verifying the certificate.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import Admin, Demo, RunningServer, missing, running_server
from tests.integration.slow_dataset import with_server_settings
from tests.tls_certificates import make_certificate

SSL_REQUEST = struct.pack("!ii", 8, 80877103)
PROTOCOL_3 = 196608


@pytest.fixture(scope="module")
def certificate(demo: Demo) -> Path:
    """``tls/server.crt`` and ``tls/server.key`` in the demo directory (named relative to it in policies)."""
    return make_certificate(demo.directory / "tls")


def tls_policy(demo: Demo, name: str, **server: Any) -> Path:
    return with_server_settings(
        demo.config,
        name,
        tls_cert="tls/server.crt",
        tls_key="tls/server.key",
        require_tls_for_remote=True,
        **server,
    )


@pytest.fixture(scope="module")
def tls_server(demo: Demo, certificate: Path) -> Iterator[RunningServer]:
    config = tls_policy(demo, "tls.toml")
    with running_server(config, demo.directory / "tls-serve.log") as server:
        yield server


def connect(server: RunningServer, sslmode: str, **options: Any) -> psycopg.Connection[Any]:
    conninfo = psycopg.conninfo.make_conninfo(server.conninfo(), sslmode=sslmode, **options)
    return psycopg.connect(conninfo, prepare_threshold=None, autocommit=True)


def test_psycopg_connects_with_tls_and_gets_dp_answers(tls_server: RunningServer, admin: Admin) -> None:
    analyst = admin.add_analyst(1.0, prefix="tls")
    conninfo = psycopg.conninfo.make_conninfo(tls_server.conninfo(analyst), sslmode="require")
    with psycopg.connect(conninfo, prepare_threshold=None, autocommit=True) as connection:
        assert connection.pgconn.ssl_in_use
        (count,) = connection.execute("SELECT COUNT(*) FROM visits").fetchone()  # type: ignore[misc]
        assert isinstance(count, int)
    assert admin.balance(analyst)["spent_epsilon"] > 0


def test_psql_connects_with_sslmode_require(tls_server: RunningServer) -> None:
    psql = shutil.which("psql")
    if psql is None:
        missing("psql is not installed")
    result = subprocess.run(
        [psql, f"{tls_server.url()}?sslmode=require", "-X", "-c", r"\conninfo", "-c", "SELECT 1"],
        env={**os.environ, "PGPASSWORD": "veil-demo", "PGCONNECT_TIMEOUT": "10"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "SSL connection (protocol: TLSv1." in result.stdout


def test_a_client_on_this_host_may_still_connect_without_tls(tls_server: RunningServer) -> None:
    with connect(tls_server, "disable") as connection:
        assert not connection.pgconn.ssl_in_use
        assert connection.execute("SELECT 1").fetchone() == (1,)


def test_a_cancel_request_over_tls_is_harmless(tls_server: RunningServer) -> None:
    """libpq sends its CancelRequest over TLS, too, when the connection uses it."""
    with connect(tls_server, "require") as connection:
        connection.cancel_safe(timeout=5)
        assert connection.execute("SELECT 1").fetchone() == (1,)


def test_sslmode_require_fails_cleanly_without_a_certificate(veil_server: RunningServer) -> None:
    with pytest.raises(psycopg.OperationalError, match="server does not support SSL"):
        connect(veil_server, "require")
    with connect(veil_server, "prefer") as connection:  # and the server goes on serving
        assert not connection.pgconn.ssl_in_use


def test_plaintext_pipelined_after_the_ssl_request_is_refused(tls_server: RunningServer) -> None:
    """Bytes sent before the handshake must not be taken as encrypted ones (CVE-2021-23214)."""
    body = struct.pack("!i", PROTOCOL_3) + b"user\0alice\0database\0demo\0\0"
    with socket.create_connection((tls_server.host, tls_server.port), timeout=5) as sock:
        sock.sendall(SSL_REQUEST + struct.pack("!i", len(body) + 4) + body)
        reply = sock.recv(4096)
    assert reply[:1] == b"E" and b"C08P01\0" in reply and b"unencrypted data after SSL request" in reply


def test_a_failed_tls_handshake_closes_only_that_connection(tls_server: RunningServer) -> None:
    with socket.create_connection((tls_server.host, tls_server.port), timeout=5) as sock:
        sock.sendall(SSL_REQUEST)
        assert sock.recv(1) == b"S"
        sock.sendall(b"this is not a TLS ClientHello" * 10)
        while sock.recv(4096):  # maybe a TLS alert; then the server closes
            pass
    with connect(tls_server, "require") as connection:
        assert connection.execute("SELECT 1").fetchone() == (1,)
    assert "TLS handshake failed" in tls_server.output()


def non_loopback_address() -> str | None:
    """This host's address on its default route (no packet is sent), or None if it has none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


def test_clients_on_other_hosts_must_use_tls(demo: Demo, certificate: Path) -> None:
    address = non_loopback_address()
    if address is None:
        missing("this host has no address but loopback")
    config = tls_policy(demo, "tls-remote.toml", host=address)
    with running_server(config, demo.directory / "tls-remote.log") as server:
        with pytest.raises(
            psycopg.OperationalError, match="connections from other hosts must use TLS"
        ) as raised:
            connect(server, "disable")
        assert "sslmode=require" in str(raised.value)
        with connect(server, "require") as connection:
            assert connection.execute("SELECT 1").fetchone() == (1,)


def test_psycopg2_connects_with_tls(tls_server: RunningServer) -> None:
    import psycopg2

    connection = psycopg2.connect(tls_server.conninfo(), sslmode="require")
    try:
        assert connection.info.ssl_in_use
        cursor = connection.cursor()
        cursor.execute("SELECT COUNT(*) FROM visits WHERE cost > %s", (10,))  # interpolated by psycopg2
        assert isinstance(cursor.fetchone()[0], int)
    finally:
        connection.close()


def test_asyncpg_connects_with_tls_and_binds_parameters(
    tls_server: RunningServer, veil_server: RunningServer
) -> None:
    """asyncpg given an SSL context insists on TLS: the same client is refused by a server without a
    certificate, so an answer from the TLS server came over TLS."""
    import asyncio
    import ssl

    import asyncpg

    async def count_over_tls(server: RunningServer) -> int:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = (
            False,
            ssl.CERT_NONE,
        )  # self-signed, like sslmode=require
        connection = await asyncpg.connect(
            host=server.host, port=server.port, user="alice", password="veil-demo", database="demo",
            ssl=context,
        )  # fmt: skip
        try:
            return int(await connection.fetchval("SELECT COUNT(*) FROM visits WHERE cost > $1", 10.0))
        finally:
            await connection.close()

    assert asyncio.run(count_over_tls(tls_server)) > 0
    with pytest.raises((ConnectionError, OSError, asyncpg.PostgresError)):
        asyncio.run(count_over_tls(veil_server))


def test_pg8000_connects_with_tls(tls_server: RunningServer) -> None:
    import ssl

    import pg8000.native

    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    connection = pg8000.native.Connection(
        "alice", host=tls_server.host, port=tls_server.port, database="demo", password="veil-demo",
        ssl_context=context,
    )  # fmt: skip
    try:
        ((count,),) = connection.run("SELECT COUNT(*) FROM visits WHERE cost > :c", c=10)
        assert isinstance(count, int)
    finally:
        connection.close()


def test_sqlalchemy_and_pandas_read_sql_over_tls(tls_server: RunningServer) -> None:
    import pandas as pd
    import sqlalchemy

    engine = sqlalchemy.create_engine(
        f"postgresql+psycopg://alice:veil-demo@{tls_server.host}:{tls_server.port}/demo?sslmode=require"
    )
    try:
        frame = pd.read_sql("SELECT region, COUNT(*) AS n FROM visits GROUP BY region", engine)
        assert list(frame.columns) == ["region", "n"] and len(frame) > 0
        assert "visits" in sqlalchemy.inspect(engine).get_table_names()
    finally:
        engine.dispose()
