"""Helpers of the tests that serve a demo over one ledger, SQLite or PostgreSQL, and then look at
that ledger directly: tests/integration/test_crash_recovery.py and test_wire_concurrency.py.

Each test builds its own demo, since it spends, kills servers and reads the ledger afterwards. With
``"postgres"`` the demo's ``[ledger]`` is pointed at a fresh schema of the test server
(``postgres_dsn``: skips without one unless ``VEIL_REQUIRE_POSTGRES=1``).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from budget.ledger import Ledger
from tests.conftest import DATASET, Admin, Analyst, Demo, build_demo, schema_in

LEDGER_KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
_DEMO_LEDGER = '[ledger]\npath = "ledger.sqlite"\n'
_queries = itertools.count()


@dataclass(frozen=True)
class ServedDemo:
    demo: Demo
    location: str
    schema: str | None  # None: an SQLite file

    @property
    def config(self) -> Path:
        return self.demo.config

    def open_ledger(self) -> Ledger:
        return Ledger.open(self.location, schema=self.schema)

    def spending_analyst(self, epsilon: float, prefix: str) -> Analyst:
        return Admin(self.config).add_analyst(epsilon, prefix=prefix)


@contextlib.contextmanager
def served_demo(kind: str, directory: Path, request: pytest.FixtureRequest) -> Iterator[ServedDemo]:
    """A fresh demo whose ledger is an SQLite file (``kind="sqlite"``) or a PostgreSQL schema."""
    demo = build_demo(directory)
    if kind == "sqlite":
        yield ServedDemo(demo, str(demo.ledger), None)
        return
    dsn: str = request.getfixturevalue("postgres_dsn")
    with schema_in(dsn) as schema:
        text = demo.config.read_text()
        assert _DEMO_LEDGER in text, "veil init-demo changed how it names the ledger"
        demo.config.write_text(text.replace(_DEMO_LEDGER, f'[ledger]\ndsn = "{dsn}"\nschema = "{schema}"\n'))
        yield ServedDemo(demo, dsn, schema)


def distinct_count_query() -> str:
    """A DP COUNT that no earlier query in this process asked, so no answer cache can serve it."""
    return f"SELECT COUNT(*) FROM patients WHERE income >= {next(_queries)}"


__all__ = ["DATASET", "LEDGER_KINDS", "ServedDemo", "distinct_count_query", "served_demo"]
