"""A table with a column of every type, a timestamp included (people_fixture.py has none), for the tests
of how expressions are typed and translated."""

from __future__ import annotations

from pathlib import Path

from proxy.config import TablePolicy, parse_config

POLICY = """
[datasets.d]
path = "d.duckdb"

[datasets.d.tables.visits]
privacy_unit = "id"
max_contributions = 1

[datasets.d.tables.visits.columns]
id = { type = "integer" }
age = { type = "integer", lower = 0, upper = 100 }
cost = { type = "real", lower = 0, upper = 500 }
note = { type = "text" }
born = { type = "date" }
seen = { type = "timestamp" }
smoker = { type = "boolean" }
"""


def visits() -> TablePolicy:
    dataset = parse_config(POLICY, path=Path("/nonexistent/veil.toml")).dataset("d")
    table = dataset.table("visits") if dataset is not None else None
    assert table is not None
    return table
