"""THE client scenario through every Python client and psql, over plain TCP and over TLS.

One scenario function per client — psql (the binary), psycopg 3, psycopg2, asyncpg, pg8000, SQLAlchemy 2
with pandas.read_sql — each doing what an analyst's session does: connect with SCRAM (checking that the
connection is encrypted exactly when the transport is ``tls``), ``SELECT 1``, a DP count with a
parameter, the list of tables through the driver's own way of introspecting, a refused query (42501)
then a good one on the same connection, cancel of a slow query, disconnect. Each returns what it saw as
a :class:`Seen`; :func:`check_seen` holds the assertions they share, so every client is held to the
same outcome. node-postgres and pgjdbc run the same scenario in ``test_node_pg.py`` and ``test_jdbc.py``.

The tests run on both engines (``[duckdb]``, ``[postgres]``, see ``conftest.py``); TLS uses
``external_clients.py``'s self-signed certificate with ``sslmode=require``-style settings, and cancel
runs on its slow dataset (DuckDB, serving both transports). The cancel is sent once the slow query's
reservation is in the ledger (its engine query starts right after), and its outcome is checked where
the server records it — the reservation is committed (a cancel is charged), the audit log says 57014
— as well as in the client's exception where the driver reports one.

A missing client (the psql binary, a Python driver) skips with the reason, or fails when
``VEIL_REQUIRE_CLIENTS=1`` (see ``missing()`` in ``tests/conftest.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import psycopg
import pytest

from budget.ledger import Ledger
from tests.clients.external_clients import (
    EPSILON,
    MIN_AGE,
    NOISE_BOUND,
    TRANSPORTS,
    SlowTarget,
    Target,
    assert_cancel_charged,
    certificate,
    exact_count,
    slow_target,
    target_for,
    tls_server,
)
from tests.conftest import DATASET, Admin, Analyst, Demo, RunningServer, missing

__all__ = ["certificate", "slow_target", "tls_server"]  # fixtures used by name

pytestmark = pytest.mark.client

DEMO_TABLES = {"patients", "visits", "zones"}
REFUSED_SQL = "SELECT * FROM visits"
CANCEL_REQUEST_CODE = 80877102
ERROR_LINE = re.compile(r"ERROR:  ([0-9A-Z]{5}): ")
RESERVED_TIMEOUT = 10.0
CANCEL_RETRY_SECONDS = 1.0  # a cancel that arrived before the engine query started is sent again


@dataclass(frozen=True)
class Seen:
    """What a client saw; ``cancel_sqlstate`` is None for a driver that does not report the cancelled
    query's error (asyncpg raises CancelledError in the task that awaited it)."""

    encrypted: bool
    select1: int
    dp_count: float
    tables: set[str]
    refused_sqlstate: str
    after_refusal: float
    cancel_sqlstate: str | None
    after_cancel: int


@dataclass(frozen=True)
class Slow:
    """The slow server, with the analyst whose query gets cancelled."""

    target: SlowTarget
    analyst: Analyst

    def states(self) -> list[str]:
        ledger = Ledger.open(self.target.admin.config.with_name("ledger.sqlite"))
        try:
            return [spend.state for spend in ledger.history(self.analyst.name)]
        finally:
            ledger.close()


@contextlib.contextmanager
def cancelling(slow: Slow, cancel: Callable[[], None]) -> Iterator[None]:
    """While the block runs the slow query: once its reservation exists, ``cancel()`` — again every
    CANCEL_RETRY_SECONDS while it is still reserved, in case the first came before the engine query."""
    done = threading.Event()

    def run() -> None:
        deadline = time.monotonic() + RESERVED_TIMEOUT
        while "reserved" not in slow.states():
            if done.wait(0.05) or time.monotonic() > deadline:
                return
        while not done.wait(0.1) and slow.states() == ["reserved"]:
            cancel()
            done.wait(CANCEL_RETRY_SECONDS)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def driver(name: str) -> ModuleType:
    if importlib.util.find_spec(name.split(".")[0]) is None:
        missing(f"the Python client {name} is not installed (pip install -e '.[dev]')")
    return importlib.import_module(name)


def psql_binary() -> str:
    psql = shutil.which("psql")
    if psql is None:
        missing("psql is not installed (apt-get install postgresql-client)")
    return str(psql)


def count_sql(placeholder: str) -> str:
    return f"SELECT COUNT(*) AS n FROM patients WHERE age > {placeholder}"


def libpq_conninfo(server: RunningServer, analyst: Analyst, tls: bool) -> str:
    return psycopg.conninfo.make_conninfo(server.conninfo(analyst), sslmode="require" if tls else "disable")


def client_tls_context() -> ssl.SSLContext:
    """``sslmode=require``: encrypt, without checking the test's self-signed certificate."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


# ---- psql -------------------------------------------------------------------------------------------

PSQL_SCRIPT = f"""\\echo step:conninfo
\\conninfo
\\echo step:select1
SELECT 1;
SET veil.epsilon = {EPSILON};
\\echo step:dp_count
{count_sql(":min_age")};
\\echo step:tables
\\dt
\\echo step:refused
{REFUSED_SQL};
\\echo step:after_refusal
{count_sql(":min_age")};
"""


def psql_run(psql: str, target: Target, *arguments: str, script: str | None = None) -> subprocess.Popen[str]:
    """``psql -X -A -t`` (values only) with SQLSTATEs in its error lines; no ON_ERROR_STOP: after an
    error the script goes on, on the same connection."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PG")},
        "PGPASSWORD": target.analyst.password,
        "PGCONNECT_TIMEOUT": "10",
        "PGSSLMODE": "require" if target.tls else "disable",
    }
    command = [psql, "-X", "-A", "-t", "-v", "VERBOSITY=verbose", "-v", f"min_age={MIN_AGE}"]
    return subprocess.Popen(
        [*command, target.server.url(target.analyst.name, DATASET), *arguments],
        stdin=subprocess.PIPE if script is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def psql_steps(stdout: str) -> dict[str, list[str]]:
    steps: dict[str, list[str]] = {}
    current: list[str] = []
    for line in stdout.splitlines():
        if line.startswith("step:"):
            current = steps.setdefault(line.removeprefix("step:"), [])
        elif line:
            current.append(line)
    return steps


def sqlstates(stderr: str) -> list[str]:
    """``psql:<stdin>:11: ERROR:  42501: SELECT * would…`` (VERBOSITY=verbose) → the SQLSTATEs, in order."""
    return ERROR_LINE.findall(stderr)


def psql_scenario(target: Target, slow: Slow) -> Seen:
    psql = psql_binary()
    process = psql_run(psql, target, "-f", "-", script=PSQL_SCRIPT)
    stdout, stderr = process.communicate(PSQL_SCRIPT, timeout=30)
    steps = psql_steps(stdout)
    assert process.returncode == 0, stderr
    slow_target = Target(slow.target.server, slow.analyst, target.tls)
    canceller = psql_run(psql, slow_target, "-c", slow.target.query)
    with cancelling(slow, lambda: canceller.send_signal(signal.SIGINT)):  # psql's Ctrl+C
        _, slow_err = canceller.communicate(timeout=30)
    # Ctrl+C ends a non-interactive psql (after printing the error): ask the server again afresh
    after = psql_run(psql, slow_target, "-c", "SELECT 1")
    after_out, after_err = after.communicate(timeout=30)
    assert after.returncode == 0, after_err
    conninfo = " ".join(steps["conninfo"])  # "You are connected …" [+ "SSL connection (protocol: …)"]
    return Seen(
        encrypted="SSL connection (protocol: TLSv1." in conninfo,
        select1=int(steps["select1"][0]),
        dp_count=float(steps["dp_count"][0]),
        tables={line.split("|")[1] for line in steps["tables"]},
        refused_sqlstate=sqlstates(stderr)[0],
        after_refusal=float(steps["after_refusal"][0]),
        cancel_sqlstate=sqlstates(slow_err)[0],
        after_cancel=int(after_out),
    )


# ---- psycopg 3 ----------------------------------------------------------------------------------------


def psycopg_scenario(target: Target, slow: Slow) -> Seen:
    """Server-side parameters, a prepared statement, binary results and pipeline mode."""
    with psycopg.connect(libpq_conninfo(target.server, target.analyst, target.tls), autocommit=True) as conn:
        conn.execute(f"SET veil.epsilon = {EPSILON}")
        with conn.pipeline():
            one = conn.execute("SELECT 1")
            count = conn.cursor(binary=True).execute(count_sql("%s"), [MIN_AGE], prepare=True)
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", ["public"]
        )
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as refused:
            conn.execute(REFUSED_SQL)
        again = conn.execute(count_sql("%s"), [MIN_AGE], prepare=True)  # the prepared statement, again
        seen = dict(
            encrypted=conn.pgconn.ssl_in_use,
            select1=one.fetchone()[0],
            dp_count=count.fetchone()[0],
            tables={name for (name,) in tables},
            refused_sqlstate=refused.value.sqlstate,
            after_refusal=again.fetchone()[0],
        )
    with psycopg.connect(
        libpq_conninfo(slow.target.server, slow.analyst, target.tls), autocommit=True
    ) as conn:
        with cancelling(slow, conn.cancel_safe), pytest.raises(psycopg.errors.QueryCanceled) as cancelled:
            conn.execute(slow.target.query)
        after = conn.execute("SELECT 1").fetchone()[0]
    return Seen(**seen, cancel_sqlstate=cancelled.value.sqlstate, after_cancel=after)


# ---- psycopg2 -----------------------------------------------------------------------------------------


def psycopg2_scenario(target: Target, slow: Slow) -> Seen:
    """Interpolates parameters on the client and speaks the simple protocol only."""
    psycopg2 = driver("psycopg2")
    driver("psycopg2.errors")

    def connect(server: RunningServer, analyst: Analyst) -> Any:
        connection = psycopg2.connect(libpq_conninfo(server, analyst, target.tls))
        connection.autocommit = True
        return connection

    conn = connect(target.server, target.analyst)
    try:
        cursor = conn.cursor()
        cursor.execute("SELECT 1")
        (one,) = cursor.fetchone()
        cursor.execute(f"SET veil.epsilon = {EPSILON}")
        cursor.execute(count_sql("%s"), [MIN_AGE])
        (count,) = cursor.fetchone()
        cursor.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", ["public"])
        tables = {name for (name,) in cursor.fetchall()}
        with pytest.raises(psycopg2.errors.InsufficientPrivilege) as refused:
            cursor.execute(REFUSED_SQL)
        cursor.execute(count_sql("%s"), [MIN_AGE])
        (again,) = cursor.fetchone()
        encrypted = bool(conn.info.ssl_in_use)
    finally:
        conn.close()
    conn = connect(slow.target.server, slow.analyst)
    try:
        cursor = conn.cursor()
        with cancelling(slow, conn.cancel), pytest.raises(psycopg2.errors.QueryCanceled) as cancelled:
            cursor.execute(slow.target.query)
        cursor.execute("SELECT 1")
        (after,) = cursor.fetchone()
    finally:
        conn.close()
    return Seen(encrypted, one, count, tables, refused.value.pgcode, again, cancelled.value.pgcode, after)


# ---- asyncpg ------------------------------------------------------------------------------------------


def asyncpg_scenario(target: Target, slow: Slow) -> Seen:
    """``$n`` parameters (always the extended protocol, binary results); cancel is asyncpg's own: the
    task awaiting the query is cancelled, and asyncpg sends the CancelRequest."""
    asyncpg = driver("asyncpg")

    async def connect(server: RunningServer, analyst: Analyst) -> Any:
        return await asyncpg.connect(
            host=server.host,
            port=server.port,
            user=analyst.name,
            password=analyst.password,
            database=DATASET,
            ssl=client_tls_context() if target.tls else False,
            timeout=10,
        )

    async def main() -> Seen:
        conn = await connect(target.server, target.analyst)
        try:
            one = await conn.fetchval("SELECT 1")
            await conn.execute(f"SET veil.epsilon = {EPSILON}")
            count = await conn.fetchval(count_sql("$1"), MIN_AGE)
            rows = await conn.fetch(
                "SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = $1", "public"
            )
            with pytest.raises(asyncpg.exceptions.InsufficientPrivilegeError) as refused:
                await conn.fetch(REFUSED_SQL)
            again = await conn.fetchval(count_sql("$1"), MIN_AGE)
            # asyncpg has no public way to ask; its transport knows
            encrypted = conn._transport.get_extra_info("ssl_object") is not None
        finally:
            await conn.close()
        conn = await connect(slow.target.server, slow.analyst)
        try:
            running = asyncio.ensure_future(conn.fetchval(slow.target.query))
            loop = asyncio.get_running_loop()
            cancel = functools.partial(loop.call_soon_threadsafe, running.cancel)
            with cancelling(slow, cancel), pytest.raises(asyncio.CancelledError):
                await running
            after = await conn.fetchval("SELECT 1")
        finally:
            await conn.close()
        tables = {row["tablename"] for row in rows}
        return Seen(encrypted, one, count, tables, refused.value.sqlstate, again, None, after)

    return asyncio.run(asyncio.wait_for(main(), timeout=60))


# ---- pg8000 -------------------------------------------------------------------------------------------


def send_cancel_request(server: RunningServer, backend_key_data: bytes) -> None:
    """pg8000 has no cancel call: send the CancelRequest a client sends, quoting pg8000's key."""
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(struct.pack("!ii", 16, CANCEL_REQUEST_CODE) + backend_key_data)
        sock.recv(1)  # the server closes the connection once it has acted


def pg8000_scenario(target: Target, slow: Slow) -> Seen:
    pg8000 = driver("pg8000.native")

    def connect(server: RunningServer, analyst: Analyst) -> Any:
        return pg8000.Connection(
            analyst.name,
            host=server.host,
            port=server.port,
            password=analyst.password,
            database=DATASET,
            ssl_context=client_tls_context() if target.tls else None,
        )

    conn = connect(target.server, target.analyst)
    try:
        ((one,),) = conn.run("SELECT 1")
        conn.run(f"SET veil.epsilon = {EPSILON}")
        ((count,),) = conn.run(count_sql(":age"), age=MIN_AGE)
        rows = conn.run(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = :schema", schema="public"
        )
        with pytest.raises(pg8000.DatabaseError) as refused:
            conn.run(REFUSED_SQL)
        ((again,),) = conn.run(count_sql(":age"), age=MIN_AGE)
        encrypted = isinstance(conn._usock, ssl.SSLSocket)  # pg8000 has no public way to ask
    finally:
        conn.close()
    conn = connect(slow.target.server, slow.analyst)
    try:
        key = conn._backend_key_data  # what BackendKeyData carried: process id and secret
        with (
            cancelling(slow, lambda: send_cancel_request(slow.target.server, key)),
            pytest.raises(pg8000.DatabaseError) as cancelled,
        ):
            conn.run(slow.target.query)
        ((after,),) = conn.run("SELECT 1")
    finally:
        conn.close()
    tables = {name for (name,) in rows}
    return Seen(
        encrypted, one, count, tables, refused.value.args[0]["C"], again, cancelled.value.args[0]["C"], after
    )


# ---- SQLAlchemy 2 and pandas ------------------------------------------------------------------------------


def sqlalchemy_scenario(target: Target, slow: Slow) -> Seen:
    """SQLAlchemy over psycopg 3, as analysts create it: the DP count through ``pandas.read_sql``, the
    tables through the inspector, a rollback after the refusal (the driver's transaction failed)."""
    sqlalchemy = driver("sqlalchemy")
    pd = driver("pandas")
    from sqlalchemy.pool import NullPool

    def engine_for(server: RunningServer, analyst: Analyst) -> Any:
        url = sqlalchemy.URL.create(
            "postgresql+psycopg",
            username=analyst.name,
            password=analyst.password,
            host=server.host,
            port=server.port,
            database=DATASET,
            query={"sslmode": "require" if target.tls else "disable"},
        )
        return sqlalchemy.create_engine(url, poolclass=NullPool)

    count = sqlalchemy.text(count_sql(":age"))
    engine = engine_for(target.server, target.analyst)
    try:
        with engine.connect() as conn:
            one = conn.execute(sqlalchemy.text("SELECT 1")).scalar_one()
            conn.execute(sqlalchemy.text(f"SET veil.epsilon = {EPSILON}"))
            frame = pd.read_sql(count, conn, params={"age": MIN_AGE})
            tables = set(sqlalchemy.inspect(conn).get_table_names())
            with pytest.raises(sqlalchemy.exc.ProgrammingError) as refused:
                conn.execute(sqlalchemy.text(REFUSED_SQL))
            conn.rollback()
            again = conn.execute(count, {"age": MIN_AGE}).scalar_one()
            encrypted = conn.connection.dbapi_connection.pgconn.ssl_in_use
    finally:
        engine.dispose()
    engine = engine_for(slow.target.server, slow.analyst)
    try:
        with engine.connect() as conn:
            cancel = conn.connection.dbapi_connection.cancel_safe
            with cancelling(slow, cancel), pytest.raises(sqlalchemy.exc.OperationalError) as cancelled:
                conn.execute(sqlalchemy.text(slow.target.query))
            conn.rollback()
            after = conn.execute(sqlalchemy.text("SELECT 1")).scalar_one()
    finally:
        engine.dispose()
    assert list(frame.columns) == ["n"] and len(frame) == 1
    return Seen(
        encrypted,
        one,
        float(frame["n"].iloc[0]),
        tables,
        refused.value.orig.sqlstate,
        again,
        cancelled.value.orig.sqlstate,
        after,
    )


SCENARIOS: dict[str, Callable[[Target, Slow], Seen]] = {
    "psql": psql_scenario,
    "psycopg": psycopg_scenario,
    "psycopg2": psycopg2_scenario,
    "asyncpg": asyncpg_scenario,
    "pg8000": pg8000_scenario,
    "sqlalchemy+pandas": sqlalchemy_scenario,
}

HIDES_CANCEL_ERROR = {"asyncpg"}


def check_seen(seen: Seen, *, tls: bool, truth: int, cancel_sqlstate: str | None) -> None:
    assert seen.encrypted is tls
    assert seen.select1 == 1
    assert abs(seen.dp_count - truth) <= NOISE_BOUND
    assert seen.tables >= DEMO_TABLES
    assert seen.refused_sqlstate == "42501"
    # the same query with the same value: the stored answer, on the connection that saw the refusal
    assert seen.after_refusal == seen.dp_count
    assert seen.cancel_sqlstate == cancel_sqlstate
    assert seen.after_cancel == 1


def check_cancelled(slow: Slow) -> None:
    """The slow query released nothing but is charged, and the audit says 57014 with the charge."""
    assert_cancel_charged(slow.target, slow.analyst)
    entries = json.loads(slow.target.admin.check("audit", "--analyst", slow.analyst.name, "--json").stdout)
    (entry,) = [entry for entry in entries if entry["statement"] == slow.target.query]
    assert (entry["decision"], entry["sqlstate"]) == ("failed", "57014"), entry
    assert entry["epsilon"] > 0 and entry["outcome"] == "cancelled", entry


@pytest.mark.parametrize("client", list(SCENARIOS))
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_client_scenario(
    client: str,
    transport: str,
    veil_server: RunningServer,
    tls_server: RunningServer,
    slow_target: SlowTarget,
    admin: Admin,
    demo: Demo,
) -> None:
    prefix = client.replace("+", "-")
    analyst = admin.add_analyst(5.0, prefix=prefix)
    slow = Slow(slow_target, slow_target.admin.add_analyst(1.0, prefix=f"{prefix}-slow"))
    target = target_for(transport, veil_server, tls_server, analyst)

    seen = SCENARIOS[client](target, slow)

    hidden = client in HIDES_CANCEL_ERROR
    check_seen(
        seen, tls=target.tls, truth=exact_count(demo, MIN_AGE), cancel_sqlstate=None if hidden else "57014"
    )
    # one DP count charged; SELECT 1, the catalog, the refusal and the repeated count cost nothing
    assert admin.balance(analyst)["spent_epsilon"] == pytest.approx(EPSILON)
    check_cancelled(slow)
