"""Fixtures of the end-to-end tests: one synthetic demo and one ``veil serve`` for the whole session.

Unit tests use none of these, and nothing here runs unless a test asks for it.

* ``demo``       — ``veil init-demo --people 3000`` in a temporary directory (alice, ε = 10).
* ``veil_server`` — ``veil serve --port 0`` on that demo; the port is read from its ready line.
* ``admin``      — the ``veil`` CLI (in process) on the same policy: add analysts, read balances.
* ``connect``    — opens psycopg connections to the server (simple query protocol, autocommit).
* ``serve``      — starts further servers on other policies (stopped after the test).
* ``postgres_dsn`` — the PostgreSQL server named by ``VEIL_TEST_POSTGRES_DSN`` (default: the local test
  server, ``host=127.0.0.1 port=5432 user=postgres dbname=test``). If it cannot be reached, every test
  that asks for it is skipped, saying why — unless ``VEIL_REQUIRE_POSTGRES=1``: then they fail, so that a
  CI job meant to exercise PostgreSQL cannot pass by skipping. It lives here, not in
  ``tests/postgres/conftest.py``, because the client suites run against PostgreSQL too.

Tests that spend much budget make their own analyst with ``admin.add_analyst(epsilon)``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result
from hypothesis import settings
from psycopg import sql

from proxy.cli.main import main as veil_main

DEMO_PEOPLE = 3000
DATASET = "demo"
READY_LINE = re.compile(r"^veil \S+ listening on (?P<host>\S+):(?P<port>\d+)$", re.MULTILINE)
# how long a test waits for `veil serve`'s ready line; `make mutants` raises it (tests/mutation/run.py),
# since a server started by a stats run beside other work can take longer than 30 s
SERVER_START_TIMEOUT = float(os.environ.get("VEIL_TEST_SERVER_START_TIMEOUT", "30"))
DEFAULT_POSTGRES_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test"
REQUIRE_POSTGRES_VARIABLE = "VEIL_REQUIRE_POSTGRES"
POSTGRES_DSN_VARIABLE = "VEIL_TEST_POSTGRES_DSN"


REQUIRE_CLIENTS_VARIABLE = "VEIL_REQUIRE_CLIENTS"
REQUIRE_SPARK_VARIABLE = "VEIL_REQUIRE_SPARK"

# In CI (CI=true) property tests draw the same examples every run, and a failure prints the blob that
# replays it (@reproduce_failure): a red CI is then reproducible, not a flake. Locally they explore.
settings.register_profile("ci", derandomize=True, print_blob=True)
# `make mutants` (docs/testing.md): the same examples for every mutant, and no deadline — the mutants'
# trampolines and a loaded machine make timings meaningless there
settings.register_profile("mutants", derandomize=True, deadline=None)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")


def missing(reason: str) -> None:
    """Skip because a tool the test drives (a client, psql, openssl…) is missing — or fail, when
    ``VEIL_REQUIRE_CLIENTS=1`` (CI sets it), so that CI cannot pass by skipping."""
    if os.environ.get(REQUIRE_CLIENTS_VARIABLE) == "1":
        pytest.fail(f"{REQUIRE_CLIENTS_VARIABLE}=1 but {reason}", pytrace=False)
    pytest.skip(f"{reason}; set {REQUIRE_CLIENTS_VARIABLE}=1 to make this an error")


def veil_command() -> list[str]:
    """The installed console script next to this interpreter (the venv's ``veil``)."""
    script = Path(sys.executable).with_name("veil")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from proxy.cli.main import main; main()"]


@dataclass(frozen=True)
class Analyst:
    name: str
    password: str


ALICE = Analyst("alice", "veil-demo")


@dataclass(frozen=True)
class Demo:
    directory: Path

    @property
    def config(self) -> Path:
        return self.directory / "veil.toml"

    @property
    def database(self) -> Path:
        return self.directory / "demo.duckdb"

    @property
    def ledger(self) -> Path:
        return self.directory / "ledger.sqlite"


@dataclass(frozen=True)
class RunningServer:
    host: str
    port: int
    log: Path
    process: subprocess.Popen[bytes]

    def conninfo(self, analyst: Analyst = ALICE, dbname: str = DATASET) -> str:
        return psycopg.conninfo.make_conninfo(
            host=self.host,
            port=self.port,
            user=analyst.name,
            password=analyst.password,
            dbname=dbname,
            connect_timeout=10,
        )

    def url(self, user: str = "alice", dbname: str = DATASET) -> str:
        return f"postgresql://{user}@{self.host}:{self.port}/{dbname}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")


class Admin:
    """The ``veil`` command line on one policy file, run in process with click's CliRunner."""

    _numbers = itertools.count(1)

    def __init__(self, config: Path) -> None:
        self.config = config

    def run(self, *args: str, input: str | None = None) -> Result:
        return CliRunner().invoke(veil_main, [*args, "--config", str(self.config)], input=input)

    def check(self, *args: str, input: str | None = None) -> Result:
        result = self.run(*args, input=input)
        assert result.exit_code == 0, f"veil {' '.join(args)} failed:\n{result.output}"
        return result

    def add_analyst(self, epsilon: float, *, prefix: str = "analyst") -> Analyst:
        """A fresh analyst with one grant of ``epsilon`` on the demo dataset."""
        analyst = Analyst(f"{prefix}{next(self._numbers)}", f"pw-{prefix}")
        self.check("analyst", "add", analyst.name, "--password-stdin", input=analyst.password + "\n")
        self.check("budget", "grant", analyst.name, DATASET, repr(epsilon))
        return analyst

    def balance(self, analyst: Analyst) -> dict[str, Any]:
        """The analyst's balance on the demo dataset, from ``veil budget show NAME --json``."""
        rows = json.loads(self.check("budget", "show", analyst.name, "--json").stdout)
        (row,) = [row for row in rows if row["dataset"] == DATASET]
        return row

    def history(self, analyst: Analyst) -> list[dict[str, Any]]:
        return json.loads(self.check("budget", "history", analyst.name, "--json").stdout)


def build_demo(directory: Path, *, people: int = DEMO_PEOPLE) -> Demo:
    result = CliRunner().invoke(veil_main, ["init-demo", str(directory), "--people", str(people)])
    assert result.exit_code == 0, result.output
    return Demo(directory)


def start_server(
    config: Path, log: Path, *, workers: int = 1, log_level: str = "warning"
) -> subprocess.Popen[bytes]:
    """``veil serve --port 0 --workers N`` on ``config``, its output in ``log``; see ``wait_until_ready``.
    One worker unless asked: tests that count per-process limits expect one process."""
    with log.open("wb") as sink:
        return subprocess.Popen(
            [
                *veil_command(),
                "serve",
                "--config",
                str(config),
                "--port",
                "0",
                "--log-level",
                log_level,
                "--workers",
                str(workers),
            ],
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )


@contextlib.contextmanager
def running_server(
    config: Path, log: Path, *, workers: int = 1, log_level: str = "warning"
) -> Iterator[RunningServer]:
    """``veil serve --port 0`` on ``config``; fails the test with the server's output if it dies."""
    process = start_server(config, log, workers=workers, log_level=log_level)
    try:
        server = wait_until_ready(process, log)
        yield server
        if process.poll() is not None:
            pytest.fail(f"veil serve died during the tests (exit {process.returncode}):\n{server.output()}")
        if "Traceback" in server.output():
            pytest.fail(f"veil serve logged a traceback:\n{server.output()}")
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_until_ready(process: subprocess.Popen[bytes], log: Path) -> RunningServer:
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if match := READY_LINE.search(text):
            return RunningServer(match["host"], int(match["port"]), log, process)
        if process.poll() is not None:
            pytest.fail(f"veil serve exited with status {process.returncode} before it was ready:\n{text}")
        time.sleep(0.05)
    pytest.fail(f"veil serve printed no ready line within {SERVER_START_TIMEOUT:g} s:\n{log.read_text()}")


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    return build_demo(tmp_path_factory.mktemp("served") / "demo")


@pytest.fixture(scope="session")
def veil_server(demo: Demo) -> Iterator[RunningServer]:
    with running_server(demo.config, demo.directory / "serve.log") as server:
        yield server


@pytest.fixture(scope="session")
def admin(demo: Demo) -> Admin:
    return Admin(demo.config)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[Path], RunningServer]]:
    """Start another ``veil serve`` on a policy file; it is stopped (and checked) after the test."""
    with contextlib.ExitStack() as stack:
        numbers = itertools.count()

        def start(config: Path) -> RunningServer:
            return stack.enter_context(running_server(config, tmp_path / f"serve-{next(numbers)}.log"))

        yield start


@pytest.fixture
def connect(veil_server: RunningServer) -> Iterator[Callable[..., psycopg.Connection[Any]]]:
    """``connect(analyst=ALICE, dbname="demo", autocommit=True)`` → a psycopg connection, closed after."""
    opened: list[psycopg.Connection[Any]] = []

    def _connect(
        analyst: Analyst = ALICE, *, dbname: str = DATASET, autocommit: bool = True
    ) -> psycopg.Connection[Any]:
        connection = psycopg.connect(
            veil_server.conninfo(analyst, dbname), prepare_threshold=None, autocommit=autocommit
        )
        opened.append(connection)
        return connection

    yield _connect
    for connection in opened:
        connection.close()


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    """The test PostgreSQL server's DSN; skips (or, with VEIL_REQUIRE_POSTGRES=1, fails) without one."""
    dsn = os.environ.get(POSTGRES_DSN_VARIABLE) or DEFAULT_POSTGRES_DSN
    try:
        with psycopg.connect(dsn, connect_timeout=3, autocommit=True) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as error:
        reason = f"PostgreSQL is not reachable at {dsn!r} ({type(error).__name__}: {str(error).strip()})"
        if os.environ.get(REQUIRE_POSTGRES_VARIABLE) == "1":
            pytest.fail(f"{REQUIRE_POSTGRES_VARIABLE}=1 but {reason}", pytrace=False)
        pytest.skip(
            f"{reason}; set {POSTGRES_DSN_VARIABLE}, or {REQUIRE_POSTGRES_VARIABLE}=1 to make this an error"
        )
    return dsn


@pytest.fixture(scope="session")
def spark_ready() -> None:
    """The process's local Spark session, started once for the whole test session (5–15 s); skips (or,
    with VEIL_REQUIRE_SPARK=1, fails) when pyspark or Java is missing. Every spark dataset of the tests
    uses the default master, local[*], so they all share it."""
    from proxy.backends.spark import root_session
    from proxy.config import DEFAULT_SPARK_MASTER
    from proxy.errors import ProxyError

    try:
        import pyspark  # noqa: F401

        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise RuntimeError("Java is not installed (no java on the PATH, no JAVA_HOME)")
        root_session(master=DEFAULT_SPARK_MASTER, remote=None).result()
    except (ImportError, RuntimeError, ProxyError) as error:
        reason = f"Spark is not available ({type(error).__name__}: {error})"
        if os.environ.get(REQUIRE_SPARK_VARIABLE) == "1":
            pytest.fail(f"{REQUIRE_SPARK_VARIABLE}=1 but {reason}", pytrace=False)
        pytest.skip(
            f"{reason}; pip install 'veil-sql[spark]', or {REQUIRE_SPARK_VARIABLE}=1 to make this an error"
        )


@pytest.fixture(scope="session")
def spark_connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``sc://127.0.0.1:PORT`` of a real Spark Connect server (tests/spark_connect_server.py), started
    once for the session; skips (or, with VEIL_REQUIRE_SPARK=1, fails) when pyspark's launcher, its
    jar or Java is missing. Talk to it from subprocesses only: this process keeps its local session."""
    from tests.spark_connect_server import ConnectUnavailable, connect_server

    try:
        with connect_server(tmp_path_factory.mktemp("spark-connect")) as url:
            yield url
            return
    except ConnectUnavailable as error:
        reason = f"no Spark Connect server ({error})"
    if os.environ.get(REQUIRE_SPARK_VARIABLE) == "1":
        pytest.fail(f"{REQUIRE_SPARK_VARIABLE}=1 but {reason}", pytrace=False)
    pytest.skip(
        f"{reason}; pip install 'veil-sql[spark]', or {REQUIRE_SPARK_VARIABLE}=1 to make this an error"
    )


@contextlib.contextmanager
def schema_in(dsn: str) -> Iterator[str]:
    """A new, uniquely named schema (``veil_test_…``), dropped (CASCADE) when the block ends.

    Tests never touch ``public``, so runs against a shared server cannot disturb each other.
    """
    name = f"veil_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
