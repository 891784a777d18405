"""The client suites run twice: against ``veil serve`` over DuckDB and over PostgreSQL, holding the same rows.

Every test here that uses ``veil_server``, ``admin`` or ``connect`` is parametrized by ``backend``:

* ``[duckdb]``   — ``veil init-demo --people 3000`` plus a public lookup table ``zones``, served from
  its DuckDB file;
* ``[postgres]`` — the same rows in a fresh schema of the test PostgreSQL server (``postgres_dsn``):
  ``patients`` and ``visits`` go in through ``veil import`` (from Parquet exports of the DuckDB demo),
  ``zones`` through SQL; the policy is a ``backend = "postgres"`` dataset named ``demo`` too. Marked
  ``postgres``, so it skips with the reason when no server is reachable, unless
  ``VEIL_REQUIRE_POSTGRES=1``.

Because the rows are the same, the exact answers that tests compare noisy ones against are read once
from the DuckDB file (``demo``) and hold for both. Each server starts once for this package (not per
session, so that a server's failure at shutdown is reported on a test here); pytest orders the tests so
that all ``[duckdb]`` ones run first, then all ``[postgres]`` ones.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from proxy.cli.main import main as veil_main
from proxy.config import load_config, read_document, write_document
from tests.conftest import (
    ALICE,
    DATASET,
    Admin,
    Demo,
    RunningServer,
    build_demo,
    running_server,
    schema_in,
)

BACKENDS = ["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)]
DSN_VARIABLE = "VEIL_CLIENTS_DEMO_DSN"  # set for the PostgreSQL-backed server process only
ALICE_EPSILON = 10.0  # what `veil init-demo` grants alice

# A public lookup table: each region's zone, and one code no patient has (its zone is an empty group).
ZONES = [
    ("capital", "centre"),
    ("north", "mainland"),
    ("south", "mainland"),
    ("east", "mainland"),
    ("west", "mainland"),
    ("coast", "shore"),
    ("islands", "shore"),
    ("overseas", "overseas"),
]
ZONES_POLICY = {
    "public": True,
    "key": "code",
    "columns": {"code": {"type": "text"}, "zone": {"type": "text"}},
}


@dataclass(frozen=True)
class Served:
    """One running ``veil serve`` of the ``demo`` dataset, and the ``veil`` CLI on its policy."""

    backend: str
    server: RunningServer
    admin: Admin


@pytest.fixture(scope="package")
def client_demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    """The DuckDB demo with ``zones`` added, and Parquet copies of its private tables for ``veil import``.

    The copies are written here, before any server holds the file.
    """
    demo = build_demo(tmp_path_factory.mktemp("clients") / "duckdb")
    with duckdb.connect(str(demo.database)) as database:
        database.execute("CREATE TABLE zones (code VARCHAR, zone VARCHAR)")
        database.executemany("INSERT INTO zones VALUES (?, ?)", ZONES)
        for table in private_tables(read_document(demo.config)):
            target = demo.directory / f"{table}.parquet"
            database.execute(f"COPY {table} TO '{target}' (FORMAT parquet)")
    document = read_document(demo.config)
    document["datasets"][DATASET]["tables"]["zones"] = ZONES_POLICY
    write_document(demo.config, document)
    return demo


def private_tables(document: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    tables = document["datasets"][DATASET]["tables"]
    return {name: table for name, table in tables.items() if not table.get("public")}


def import_arguments(table: str, policy: Mapping[str, Any], source: Path) -> list[str]:
    """``veil import`` arguments that declare ``table`` as ``policy`` does (units, public values, bounds)."""
    arguments = [str(source), "--dataset", DATASET, "--table", table]
    arguments += ["--privacy-unit", policy["privacy_unit"]]
    arguments += ["--max-contributions", str(policy["max_contributions"])]
    for column, declared in policy["columns"].items():
        if declared.get("public"):
            arguments += ["--public", f"{column}={','.join(map(str, declared['values']))}"]
        if "lower" in declared:
            arguments += ["--bounds", f"{column}={declared['lower']}:{declared['upper']}"]
    return arguments


def veil(
    config: Path, *arguments: str, input: str | None = None, env: Mapping[str, str] | None = None
) -> str:
    result = CliRunner().invoke(veil_main, [*arguments, "--config", str(config)], input=input, env=env)
    assert result.exit_code == 0, f"veil {' '.join(arguments)} failed:\n{result.output}"
    return result.stdout


def build_postgres_demo(source: Demo, directory: Path, dsn: str, schema: str) -> Path:
    """The rows and policy of ``source`` as a PostgreSQL dataset ``demo`` in ``schema``; returns its policy.

    Fails if ``veil import`` declares the tables differently from the DuckDB demo's policy, since the
    tests compare both backends against one truth.
    """
    duck = read_document(source.config)["datasets"][DATASET]
    config = directory / "veil.toml"
    dataset = {
        "backend": "postgres",
        "dsn_env": DSN_VARIABLE,
        "schema": schema,
        "default_epsilon": duck["default_epsilon"],
        "max_epsilon": duck["max_epsilon"],
    }
    write_document(config, {"ledger": {"path": "ledger.sqlite"}, "datasets": {DATASET: dataset}})
    for table, policy in private_tables({"datasets": {DATASET: duck}}).items():
        source_file = source.directory / f"{table}.parquet"
        veil(config, "import", *import_arguments(table, policy, source_file), env={DSN_VARIABLE: dsn})
    with psycopg.connect(dsn, autocommit=True) as connection:
        zones = sql.Identifier(schema, "zones")
        connection.execute(sql.SQL("CREATE TABLE {} (code text, zone text)").format(zones))
        with connection.cursor() as cursor:
            cursor.executemany(sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(zones), ZONES)
    document = read_document(config)
    document["datasets"][DATASET]["tables"]["zones"] = ZONES_POLICY
    write_document(config, document)

    imported = load_config(config).datasets[DATASET].tables
    assert imported == load_config(source.config).datasets[DATASET].tables, "veil import changed the policy"
    veil(config, "analyst", "add", ALICE.name, "--password-stdin", input=ALICE.password + "\n")
    veil(config, "budget", "grant", ALICE.name, DATASET, repr(ALICE_EPSILON))
    return config


@pytest.fixture(scope="package", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The engine behind the served ``demo`` dataset: ``"duckdb"`` or ``"postgres"``."""
    return str(request.param)


@pytest.fixture(scope="package")
def served(
    backend: str, client_demo: Demo, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    if backend == "duckdb":
        with running_server(client_demo.config, client_demo.directory / "serve.log") as server:
            yield Served(backend, server, Admin(client_demo.config))
        return
    dsn = request.getfixturevalue("postgres_dsn")  # skips (or fails) here without a server
    directory = tmp_path_factory.mktemp("clients_postgres")
    with schema_in(dsn) as schema, contextlib.ExitStack() as stack:
        config = build_postgres_demo(client_demo, directory, dsn, schema)
        with pytest.MonkeyPatch.context() as environment:  # only the server process sees the DSN
            environment.setenv(DSN_VARIABLE, dsn)
            server = stack.enter_context(running_server(config, directory / "serve.log"))
        yield Served(backend, server, Admin(config))


@pytest.fixture(scope="package")
def demo(client_demo: Demo) -> Demo:
    """The DuckDB file whose rows both backends serve: the source of the exact answers."""
    return client_demo


@pytest.fixture(scope="package")
def veil_server(served: Served) -> RunningServer:
    return served.server


@pytest.fixture(scope="package")
def admin(served: Served) -> Admin:
    return served.admin
