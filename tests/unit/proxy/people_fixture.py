"""A table of people with a number, a real, a text and a date column, for the tests of how expressions
are typed and made error-free (the clinic policy has no date column)."""

from __future__ import annotations

from pathlib import Path

from proxy.config import TablePolicy, parse_config

POLICY = """
[datasets.d]
path = "d.duckdb"

[datasets.d.tables.people]
privacy_unit = "id"
max_contributions = 1

[datasets.d.tables.people.columns]
id = { type = "integer" }
age = { type = "integer", lower = 0, upper = 100 }
cost = { type = "real", lower = 0, upper = 500 }
note = { type = "text" }
born = { type = "date" }
smoker = { type = "boolean" }
"""


def people() -> TablePolicy:
    dataset = parse_config(POLICY, path=Path("/nonexistent/veil.toml")).dataset("d")
    table = dataset.table("people") if dataset is not None else None
    assert table is not None
    return table
