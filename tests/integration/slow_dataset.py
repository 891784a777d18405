"""A dataset made to be slow on purpose, for the tests of cancel, statement timeout and misbehaving
clients (tests/integration/test_cancel.py, test_wire_robustness.py).

Table ``events`` has 1,000,000 rows of 100 people; a join on the privacy unit with a condition on
both sides (``SLOW_QUERY``) makes the engine compare 10¹⁰ pairs — about a minute of DuckDB work — so
a test can cancel it at leisure. ``medium`` has the same shape with 100,000 rows (``MEDIUM_QUERY``:
a fraction of a second). ``numbers`` is a public lookup table of ``NUMBERS`` rows, for large exact
results. The dataset is named ``demo`` so that ``tests.conftest.Admin`` can grant budgets on it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import tomli_w

from budget.ledger import Ledger
from tests.conftest import DATASET, Analyst, RunningServer

PEOPLE = 100
NUMBERS = 200_000
SLOW_QUERY = "SELECT COUNT(*) FROM events AS a JOIN events AS b ON a.person = b.person WHERE a.v < b.v"
MEDIUM_QUERY = "SELECT COUNT(*) FROM medium AS a JOIN medium AS b ON a.person = b.person WHERE a.v < b.v"
BIG_PUBLIC_QUERY = "SELECT n FROM numbers"


def _private_table() -> dict[str, Any]:
    return {
        "privacy_unit": "person",
        "max_contributions": 10,
        "columns": {"person": {"type": "integer"}, "v": {"type": "integer", "lower": 0, "upper": 100}},
    }


def build_slow_dataset(directory: Path, **server: Any) -> Path:
    """Write the data, a policy (with ``server`` as its ``[server]`` keys) and an empty ledger; → the policy."""
    directory.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(directory / "slow.duckdb")) as connection:
        for table, rows in (("events", 1_000_000), ("medium", 100_000)):
            connection.execute(
                f"CREATE TABLE {table} AS SELECT (i % {PEOPLE})::INTEGER AS person, (i % 97)::INTEGER AS v"
                f" FROM range({rows}) AS t(i)"
            )
        connection.execute(f"CREATE TABLE numbers AS SELECT i::INTEGER AS n FROM range({NUMBERS}) AS t(i)")
    policy = {
        "ledger": {"path": "ledger.sqlite"},
        "server": server,
        "datasets": {
            DATASET: {
                "backend": "duckdb",
                "path": "slow.duckdb",
                "tables": {
                    "events": _private_table(),
                    "medium": _private_table(),
                    "numbers": {"public": True, "key": "n", "columns": {"n": {"type": "integer"}}},
                },
            }
        },
    }
    config = directory / "veil.toml"
    config.write_text(tomli_w.dumps(policy), encoding="utf-8")
    Ledger.create(directory / "ledger.sqlite").close()
    return config


def with_server_settings(config: Path, name: str, **server: Any) -> Path:
    """A copy of a policy, next to it (so its relative paths still hold), with other ``[server]`` keys."""
    document = tomllib.loads(config.read_text(encoding="utf-8"))
    document["server"] = server
    copy = config.with_name(name)
    copy.write_text(tomli_w.dumps(document), encoding="utf-8")
    return copy


def connect(server: RunningServer, analyst: Analyst) -> psycopg.Connection[Any]:
    """A psycopg connection whose parameterless queries use the simple protocol, as psql's do."""
    return psycopg.connect(server.conninfo(analyst), prepare_threshold=None, autocommit=True)
