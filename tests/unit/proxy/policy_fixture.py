"""A small policy shared by the analysis, rewrite and release tests (built fresh per call)."""

from __future__ import annotations

from pathlib import Path

import tomli_w

from proxy.config import DatasetPolicy, FederationPolicy, parse_config

POLICY = """
[datasets.clinic]
path = "clinic.duckdb"

[datasets.clinic.tables.visits]
privacy_unit = "patient_id"
max_contributions = 3

[datasets.clinic.tables.visits.columns]
patient_id = { type = "integer" }
age = { type = "integer", lower = 0, upper = 100 }
cost = { type = "real", lower = -50, upper = 500.5 }
note = { type = "text" }
region = { type = "text", public = true, values = ["north", "south"] }
sex = { type = "text", public = true, values = ["female", "male"] }

[datasets.clinic.tables.patients]
privacy_unit = "patient_id"
max_contributions = 1

[datasets.clinic.tables.patients.columns]
patient_id = { type = "integer" }
age = { type = "integer", lower = 0, upper = 100 }
sex = { type = "text", public = true, values = ["female", "male"] }

[datasets.clinic.tables.zones]
public = true
key = "code"

[datasets.clinic.tables.zones.columns]
code = { type = "text" }
zone = { type = "text" }

[datasets.clinic.tables.ratings]
privacy_unit = "user_id"
max_contributions = "auto"
contribution_cap = 100

[datasets.clinic.tables.ratings.columns]
user_id = { type = "integer" }
stars = { type = "integer", lower = 1, upper = 5 }

[datasets.clinic.tables.people]
privacy_unit = "row"

[datasets.clinic.tables.people.columns]
income = { type = "real" }
smoker = { type = "boolean", public = true, values = [true, false] }
"""


def clinic_policy(directory: Path = Path("/nonexistent")) -> DatasetPolicy:
    config = parse_config(POLICY, path=directory / "veil.toml")
    dataset = config.dataset("clinic")
    assert dataset is not None
    return dataset


def clinic_postgres_policy(dsn: str, schema: str) -> DatasetPolicy:
    """The same tables on PostgreSQL: ``backend = "postgres"``, ``dsn`` (no password) and ``schema``
    in place of the DuckDB ``path``."""
    duckdb_location = 'path = "clinic.duckdb"\n'
    assert POLICY.count(duckdb_location) == 1
    postgres_location = 'backend = "postgres"\n' + tomli_w.dumps({"dsn": dsn, "schema": schema})
    config = parse_config(
        POLICY.replace(duckdb_location, postgres_location), path=Path("/nonexistent/veil.toml")
    )
    dataset = config.dataset("clinic")
    assert dataset is not None and dataset.backend == "postgres"
    return dataset


HOSPITALS = FederationPolicy(
    name="hospitals",
    dataset="clinic",
    table="visits",
    group_by=("region",),
    threshold=20,
    secret_env="HOSPITALS_SECRET",
    peer=("127.0.0.1", 1),
    peer_analyst="alice",
    epsilon=0.5,
)
"""The clinic's visits as a federation with one peer site (analysis/federated.py, the federated count)."""
