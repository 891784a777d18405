"""One small dataset for the SQL shape tests, built the same in a DuckDB file and in a PostgreSQL schema.

* ``ratings`` (privacy unit ``user_id``, L = 40): users 0..999 have 1 + user % 20 ratings each, so per-user
  counts are spread from 1 to 20; user 5000 has 30 ratings (a heavy user, clamped by a chosen bound).
* ``visits`` (privacy unit ``patient_id``, L = 3): 1,000 patients with 3 visits each; every tenth cost is
  NULL, the others lie within the declared bounds, so sums are exact up to the noise.
* ``missing``: declared in the policy, absent from both engines — an engine query on it fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import psycopg
import tomli_w
from psycopg import sql as pgsql

from proxy.config import DatasetPolicy, parse_config

HEAVY_USER = 5000

POLICY = """
[datasets.shapes]
path = "shapes.duckdb"
default_epsilon = 1
max_epsilon = 1000

[datasets.shapes.tables.ratings]
privacy_unit = "user_id"
max_contributions = 40

[datasets.shapes.tables.ratings.columns]
user_id = { type = "integer" }
movie = { type = "integer" }
stars = { type = "integer", lower = 1, upper = 5 }

[datasets.shapes.tables.visits]
privacy_unit = "patient_id"
max_contributions = 3

[datasets.shapes.tables.visits.columns]
patient_id = { type = "integer" }
age = { type = "integer", lower = 0, upper = 120 }
cost = { type = "real", lower = 0, upper = 500 }
region = { type = "text", public = true, values = ["north", "south"] }

[datasets.shapes.tables.missing]
privacy_unit = "row"

[datasets.shapes.tables.missing.columns]
x = { type = "integer", lower = 0, upper = 1 }
"""


def ratings_rows(*, heavy: int = 30) -> list[tuple[int, int, int]]:
    rows = [
        (user, (user * 7 + k) % 50, 1 + (user + k) % 5) for user in range(1000) for k in range(1 + user % 20)
    ]
    return rows + [(HEAVY_USER, k % 50, 3) for k in range(heavy)]


def visits_rows() -> list[tuple[int, int, float | None, str]]:
    return [
        (
            i // 3,
            20 + (i * 7) % 70,
            None if i % 10 == 0 else float(10 + (i * 13) % 480),
            ("north", "south")[i % 2],
        )
        for i in range(3000)
    ]


def frames(*, heavy: int = 30) -> dict[str, pd.DataFrame]:
    return {
        "ratings": pd.DataFrame(ratings_rows(heavy=heavy), columns=["user_id", "movie", "stars"]),
        "visits": pd.DataFrame(visits_rows(), columns=["patient_id", "age", "cost", "region"]),
    }


def load_duckdb(connection: duckdb.DuckDBPyConnection, tables: dict[str, pd.DataFrame]) -> None:
    for name, frame in tables.items():
        connection.register("_frame", frame)
        connection.execute(f"CREATE TABLE {name} AS SELECT * FROM _frame")
        connection.unregister("_frame")


def duckdb_file(directory: Path, *, heavy: int = 30) -> Path:
    path = directory / "shapes.duckdb"
    with duckdb.connect(str(path)) as connection:
        load_duckdb(connection, frames(heavy=heavy))
    return path


_POSTGRES_TABLES = {
    "ratings": "user_id bigint, movie bigint, stars bigint",
    "visits": "patient_id bigint, age bigint, cost double precision, region text",
}


def load_postgres(dsn: str, schema: str, *, heavy: int = 30) -> None:
    rows: dict[str, list[tuple[Any, ...]]] = {"ratings": ratings_rows(heavy=heavy), "visits": visits_rows()}
    with psycopg.connect(dsn, autocommit=True) as connection:
        for name, columns in _POSTGRES_TABLES.items():
            table = pgsql.Identifier(schema, name)
            connection.execute(pgsql.SQL("CREATE TABLE {} ({})").format(table, pgsql.SQL(columns)))
            with connection.cursor().copy(pgsql.SQL("COPY {} FROM STDIN").format(table)) as copy:
                for row in rows[name]:
                    copy.write_row(row)


def shapes_policy(directory: Path) -> DatasetPolicy:
    dataset = parse_config(POLICY, path=directory / "veil.toml").dataset("shapes")
    assert dataset is not None
    return dataset


def shapes_postgres_policy(dsn: str, schema: str) -> DatasetPolicy:
    location = 'path = "shapes.duckdb"\n'
    postgres = 'backend = "postgres"\n' + tomli_w.dumps({"dsn": dsn, "schema": schema})
    dataset = parse_config(POLICY.replace(location, postgres), path=Path("/nonexistent/veil.toml")).dataset(
        "shapes"
    )
    assert dataset is not None and dataset.backend == "postgres"
    return dataset
