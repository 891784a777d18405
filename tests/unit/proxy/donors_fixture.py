"""A blood-donor dataset for the MODE tests, the same rows in DuckDB and in PostgreSQL.

2,000 donors p with 2 visits i each (p = i // 2; max_contributions = 2), in the north when p is even.
Blood type is per donor: O for 60% (p % 5 < 3), A and B for 20% each, in both regions. Doses are per
visit: 0.5 when i % 3 = 0 (a third of each region's visits), else 1.5. Stars are per donor: 5 when
p % 3 = 0, else 3. One heavy donor (99999) has 50 visits of blood B, dose 2.5 and 1 star in the north:
bounded to 2 rows' weight. Two rows hold values outside the public domains (blood 'AB', dose 9.5,
stars 9) or NULLs: they count for no value. Only the heavy donor has the note 'secret'.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import tomli_w

from proxy.config import DatasetPolicy, parse_config

POLICY = """
[datasets.bank]
path = "bank.duckdb"

[datasets.bank.tables.donors]
privacy_unit = "donor_id"
max_contributions = 2

[datasets.bank.tables.donors.columns]
donor_id = { type = "integer" }
region = { type = "text", public = true, values = ["north", "south"] }
blood = { type = "text", public = true, values = ["A", "B", "O"] }
dose = { type = "real", public = true, range = [0.5, 2.5, 1.0] }
stars = { type = "integer", public = true, range = [1, 5, 1] }
age = { type = "integer", lower = 18, upper = 80 }
note = { type = "text" }
"""

DONORS = 2000
DUCKDB_DONORS = [
    "CREATE TABLE donors AS SELECT i // 2 AS donor_id,"
    " CASE WHEN (i // 2) % 2 = 0 THEN 'north' ELSE 'south' END AS region,"
    " CASE WHEN (i // 2) % 5 < 3 THEN 'O' WHEN (i // 2) % 5 = 3 THEN 'A' ELSE 'B' END AS blood,"
    " CASE WHEN i % 3 = 0 THEN 0.5 ELSE 1.5 END AS dose,"
    " CASE WHEN (i // 2) % 3 = 0 THEN 5 ELSE 3 END AS stars,"
    " 18 + (i // 2) % 60 AS age, 'x' AS note FROM range(4000) t(i)",
    "INSERT INTO donors SELECT 99999, 'north', 'B', 2.5, 1, 30, 'secret' FROM range(50)",
    "INSERT INTO donors VALUES (99998, 'south', 'AB', 9.5, 9, 30, 'x'), (99997, 'south', NULL, NULL, NULL, 30, 'x')",
]
POSTGRES_DONORS = """
CREATE TABLE donors (
    donor_id bigint, region text, blood text, dose numeric(2, 1), stars bigint, age bigint, note text
);
INSERT INTO donors
SELECT i / 2,
       CASE WHEN (i / 2) % 2 = 0 THEN 'north' ELSE 'south' END,
       CASE WHEN (i / 2) % 5 < 3 THEN 'O' WHEN (i / 2) % 5 = 3 THEN 'A' ELSE 'B' END,
       CASE WHEN i % 3 = 0 THEN 0.5 ELSE 1.5 END,
       CASE WHEN (i / 2) % 3 = 0 THEN 5 ELSE 3 END,
       18 + (i / 2) % 60, 'x'
FROM generate_series(0::bigint, 3999) AS t(i);
INSERT INTO donors SELECT 99999, 'north', 'B', 2.5, 1, 30, 'secret' FROM generate_series(1, 50);
INSERT INTO donors VALUES (99998, 'south', 'AB', 9.5, 9, 30, 'x'), (99997, 'south', NULL, NULL, NULL, 30, 'x');
"""


def donors_policy(directory: Path) -> DatasetPolicy:
    dataset = parse_config(POLICY, path=directory / "veil.toml").dataset("bank")
    assert dataset is not None
    return dataset


def donors_postgres_policy(dsn: str, schema: str) -> DatasetPolicy:
    """The same table on PostgreSQL: ``backend``, ``dsn`` and ``schema`` in place of the DuckDB ``path``."""
    location = 'backend = "postgres"\n' + tomli_w.dumps({"dsn": dsn, "schema": schema})
    text = POLICY.replace('path = "bank.duckdb"\n', location)
    dataset = parse_config(text, path=Path("/nonexistent/veil.toml")).dataset("bank")
    assert dataset is not None and dataset.backend == "postgres"
    return dataset


def duckdb_donors(directory: Path) -> Path:
    path = directory / "bank.duckdb"
    with duckdb.connect(str(path)) as connection:
        for statement in DUCKDB_DONORS:
            connection.execute(statement)
    return path
