"""The public key domain of a GROUP BY over a timestamp column (analysis/moment_domains.py): only an
expression that reads the timestamp by whole days or coarser groups without τ-thresholding."""

from __future__ import annotations

import datetime
from pathlib import Path

import duckdb
import pytest
import sqlglot

from proxy.analysis.moment_domains import by_whole_days, moment_days
from proxy.analysis.statements import PrivateQuery, classify
from proxy.config import ColumnType, DatasetPolicy, parse_config
from proxy.query.planning import resolve_group_domains

POLICY = """
[datasets.lab]
path = "lab.duckdb"

[datasets.lab.tables.events]
privacy_unit = "pid"
max_contributions = 2

[datasets.lab.tables.events.columns]
pid = { type = "integer" }
ts = { type = "timestamp", lower = 2024-01-01T06:00:00, upper = 2024-01-03T12:00:00 }
other = { type = "timestamp", lower = 2024-01-01T00:00:00, upper = 2024-01-02T00:00:00 }
"""


def lab() -> DatasetPolicy:
    dataset = parse_config(POLICY, path=Path("/nonexistent/veil.toml")).dataset("lab")
    assert dataset is not None
    return dataset


@pytest.mark.parametrize(
    ("expression", "whole_days"),
    [
        ("date_trunc('month', ts)", True),
        ("date_trunc('day', ts)", True),
        ("EXTRACT(year FROM ts)", True),
        ("CAST(ts AS DATE)", True),
        ("(date_trunc('week', (ts)))", True),
        ("EXTRACT(year FROM ts) * 100 + EXTRACT(month FROM ts)", True),
        ("ts", False),
        ("date_trunc('hour', ts)", False),
        ("EXTRACT(hour FROM ts)", False),
        ("EXTRACT(epoch FROM ts)", False),
        ("CAST(ts AS TEXT)", False),
        ("EXTRACT(year FROM ts) + EXTRACT(minute FROM ts)", False),
        ("EXTRACT(year FROM other)", False),  # a reference to another column is not this one's day
    ],
)
def test_whole_days_or_coarser(expression: str, whole_days: bool) -> None:
    assert by_whole_days(sqlglot.parse_one(expression, read="postgres"), "ts") is whole_days


def test_a_timestamp_range_is_every_midnight_from_the_one_before_its_lower_bound() -> None:
    column = lab().table("events").column("ts")  # type: ignore[union-attr]
    assert column is not None
    assert moment_days(column) == tuple(datetime.datetime(2024, 1, day) for day in (1, 2, 3))


@pytest.mark.parametrize(
    ("key", "thresholded"),
    [("date_trunc('month', ts)", False), ("EXTRACT(day FROM ts)", False), ("date_trunc('hour', ts)", True)],
)
def test_only_keys_read_by_whole_days_group_without_a_threshold(key: str, thresholded: bool) -> None:
    tree = sqlglot.parse_one(f"SELECT {key}, COUNT(*) FROM events GROUP BY 1", read="postgres")
    statement = classify(tree, lab())
    assert isinstance(statement, PrivateQuery)
    (group_key,) = statement.shape.group_keys
    assert group_key.thresholded is thresholded


@pytest.mark.parametrize(
    ("key", "key_type", "values"),
    [
        ("date_trunc('month', ts)", ColumnType.TIMESTAMP, (datetime.datetime(2024, 1, 1),)),
        ("CAST(ts AS DATE)", ColumnType.DATE, tuple(datetime.date(2024, 1, day) for day in (1, 2, 3))),
    ],
)
def test_a_timestamp_key_keeps_the_type_its_expression_has(
    key: str, key_type: ColumnType, values: tuple[datetime.date, ...]
) -> None:
    """The domain is the expression evaluated at every midnight of the range, in the engine: date_trunc of
    a timestamp is a timestamp (as in PostgreSQL), a cast to DATE a date."""
    tree = sqlglot.parse_one(f"SELECT {key}, COUNT(*) FROM events GROUP BY 1", read="postgres")
    statement = classify(tree, lab())
    assert isinstance(statement, PrivateQuery)
    with duckdb.connect() as connection:
        shape = resolve_group_domains(
            statement.shape,
            execute=lambda sql: ([], connection.execute(sql).fetchall()),
            dialect="duckdb",
        )
    (group_key,) = shape.group_keys
    assert (group_key.type, group_key.values) == (key_type, values)
