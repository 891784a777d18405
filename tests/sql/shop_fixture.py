"""A purchases dataset for the top-k tests, the same rows in DuckDB and in PostgreSQL.

1,000 shoppers u (user_id = u), in the east when u is even, else in the west; m = u // 2. Twelve public
genres g01..g12: an east shopper buys genre g once when m < 40·(13 − g), a west shopper when m < 30·g
— so east ranks g01 > g02 > …, west ranks g12 > g11 > …, and overall g01 (510 people) > g02 (500) > … >
g12 (400), ten people apart. Each purchase row also names an item, ``item<g % 4>`` (a private column:
keys from the data). Shopper 99999 (east) buys g12 five times, of item 'secret' only they hold.
max_contributions = 20, so a shopper's at most 12 genres are all kept.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import tomli_w

from proxy.config import DatasetPolicy, parse_config

GENRES = [f"g{g:02d}" for g in range(1, 13)]
POLICY = f"""
[datasets.shop]
path = "shop.duckdb"
max_epsilon = 1000.0
answer_cache = true

[datasets.shop.tables.purchases]
privacy_unit = "user_id"
max_contributions = 20

[datasets.shop.tables.purchases.columns]
user_id = {{ type = "integer" }}
region = {{ type = "text", public = true, values = ["east", "west"] }}
genre = {{ type = "text", public = true, values = {GENRES!r} }}
item = {{ type = "text" }}
"""

_ROWS = """
SELECT u AS user_id, CASE WHEN u % 2 = 0 THEN 'east' ELSE 'west' END AS region,
       'g' || lpad(CAST(g AS TEXT), 2, '0') AS genre, 'item' || CAST(g % 4 AS TEXT) AS item
FROM {users} CROSS JOIN {genres}
WHERE (u % 2 = 0 AND u / 2 < 40 * (13 - g)) OR (u % 2 = 1 AND u / 2 < 30 * g)
"""
DUCKDB_SHOP = [
    "CREATE TABLE purchases AS "
    + _ROWS.format(users="range(1000) AS us(u)", genres="range(1, 13) AS gs(g)").replace("u / 2", "u // 2"),
    "INSERT INTO purchases SELECT 99999, 'east', 'g12', 'secret' FROM range(5)",
]
POSTGRES_SHOP = (
    "CREATE TABLE purchases AS "
    + _ROWS.format(users="generate_series(0, 999) AS us(u)", genres="generate_series(1, 12) AS gs(g)")
    + ";\nINSERT INTO purchases SELECT 99999, 'east', 'g12', 'secret' FROM generate_series(1, 5);"
)


def duckdb_shop(directory: Path) -> Path:
    path = directory / "shop.duckdb"
    with duckdb.connect(str(path)) as connection:
        for statement in DUCKDB_SHOP:
            connection.execute(statement)
    return path


def shop_policy(directory: Path) -> DatasetPolicy:
    dataset = parse_config(POLICY, path=directory / "veil.toml").dataset("shop")
    assert dataset is not None
    return dataset


def shop_postgres_policy(dsn: str, schema: str) -> DatasetPolicy:
    location = 'backend = "postgres"\n' + tomli_w.dumps({"dsn": dsn, "schema": schema})
    text = POLICY.replace('path = "shop.duckdb"\n', location)
    dataset = parse_config(text, path=Path("/nonexistent/veil.toml")).dataset("shop")
    assert dataset is not None and dataset.backend == "postgres"
    return dataset
