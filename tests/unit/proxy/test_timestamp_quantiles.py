"""Quantiles of a timestamp column in process (the fresh mutation sample of seed 1129 found that only
tests/sql reached them): answered as timestamps in whole seconds, near the true rank at a large ε."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from budget.loss import PrivacyLoss
from proxy.backends.duckdb import DuckDBBackend
from proxy.config import parse_config
from proxy.query.service import Principal, QueryService
from proxy.settings import SessionSettings
from tests.service_fixture import granted_ledger, serving

POLICY = """
[datasets.log]
path = "log.duckdb"
max_epsilon = 10

[datasets.log.tables.events]
privacy_unit = "pid"
max_contributions = 1

[datasets.log.tables.events.columns]
pid = { type = "integer" }
ts = { type = "timestamp", lower = 2024-01-01T00:00:00, upper = 2024-01-31T00:00:00 }
"""
START = datetime.datetime(2024, 1, 1)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[QueryService]:
    """300 people, one event each, an hour apart from midnight on 1 January 2024 (half past each hour)."""
    with duckdb.connect(str(tmp_path / "log.duckdb")) as connection:
        connection.execute(
            "CREATE TABLE events AS SELECT i AS pid,"
            " TIMESTAMP '2024-01-01 00:30:00' + i * INTERVAL 1 HOUR AS ts FROM range(300) t(i)"
        )
    dataset = parse_config(POLICY, path=tmp_path / "veil.toml").dataset("log")
    assert dataset is not None
    ledger = granted_ledger(tmp_path / "ledger.sqlite", "log", PrivacyLoss(100.0, 0.0))
    with serving(dataset, DuckDBBackend(tmp_path / "log.duckdb"), ledger, seed=11) as service:
        yield service


def test_a_timestamp_median_is_a_whole_second_near_the_true_one(service: QueryService) -> None:
    """The true median lies between the 150th and 151st events (149.5 h after the first). Each of the three
    quantiles gets ε = 10/3; the grid quantile (1,001 points, 43.2 minutes apart) misses the target rank
    by r or more with probability at most 1,001·exp(−(10/3)·r/2), below 10⁻⁶ from r = 13 (spec §4) — so
    14 hours: 13 ranks of an hour plus the grid step."""
    (tree,) = service.parse("SELECT MEDIAN(ts), MIN(ts), MAX(ts) FROM events")
    outcome = service.run(
        tree, principal=Principal("alice"), settings=SessionSettings({"veil.epsilon": "10"})
    )
    assert outcome.table is not None
    ((median, smallest, largest),) = outcome.table.rows
    assert all(isinstance(value, datetime.datetime) for value in (median, smallest, largest))
    assert all(value.microsecond == 0 for value in (median, smallest, largest)), "whole seconds"
    truth = START + datetime.timedelta(hours=150)
    assert abs(median - truth) <= datetime.timedelta(hours=14)
    assert START <= smallest <= median <= largest <= datetime.datetime(2024, 1, 31)
