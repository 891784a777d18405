"""Tables whose columns are named with reserved words (``user``, ``order``, ``end``, ``offset``,
``window``) are answered on both engines: the SQL Veil writes quotes them (proxy/rewrite/reserved_words.py).

Before, PostgreSQL received them bare: ``order`` and ``end`` were syntax errors (charged, as every engine
failure is), and a privacy unit named ``user`` read ``current_user`` — every row one person, so
``COUNT(*)`` answered about 3 (the contribution bound) instead of 600. Every answer here is checked
against the truth at ε = 10 per statement.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import psycopg
import pytest
import tomli_w

from budget.loss import PrivacyLoss
from proxy.backends.base import Backend
from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.postgres import PostgresBackend
from proxy.config import parse_config
from proxy.query.service import Principal, QueryService
from proxy.settings import SessionSettings
from tests.postgres.conftest import in_schema
from tests.service_fixture import granted_ledger, serving

POLICY = """
[datasets.shop]
LOCATION
max_epsilon = 10

[datasets.shop.tables.orders]
privacy_unit = "user"
max_contributions = 3

[datasets.shop.tables.orders.columns]
user = { type = "integer" }
order = { type = "text", public = true, values = ["a", "b"] }
end = { type = "real", lower = 0, upper = 10 }
offset = { type = "integer", lower = 0, upper = 5 }
window = { type = "text" }

[datasets.shop.tables.limits]
public = true
key = "window"

[datasets.shop.tables.limits.columns]
window = { type = "text" }
end = { type = "text" }
"""
TABLES = """
CREATE TABLE orders ("user" BIGINT, "order" TEXT, "end" DOUBLE PRECISION, "offset" BIGINT, "window" TEXT);
CREATE TABLE limits ("window" TEXT, "end" TEXT);
INSERT INTO limits VALUES ('w0', 'E0'), ('w1', 'E1');
"""
# 200 people with 3 orders each: order 'a'/'b' alternating, end 0–9, offset 0–5, window w0/w1
ROWS = [(i // 3, "ab"[i % 2], float(i % 10), i % 6, f"w{i % 2}") for i in range(600)]
INSERT = "INSERT INTO orders VALUES (?, ?, ?, ?, ?)"

# (query, exact answer rows, tolerance): Laplace noise at ε = 10 (or its share) stays within the
# tolerance except with probability below e^-10 per value (scales: count 0.3–0.6, sums ≤ 6).
QUERIES = [
    ("SELECT COUNT(*) FROM orders", [(600,)], 6),
    ('SELECT COUNT(DISTINCT "user") FROM orders', [(200,)], 2),
    ('SELECT "order", COUNT(*) FROM orders GROUP BY "order" ORDER BY 1', [("a", 300), ("b", 300)], 6),
    ('SELECT SUM("end") FROM orders', [(2700.0,)], 60),
    (
        'SELECT "offset" / 2 AS half, COUNT(*) FROM orders GROUP BY 1 ORDER BY 1',
        [(k, 200) for k in range(3)],
        6,
    ),
    ('SELECT COUNT(*) FILTER (WHERE "end" > 4) FROM orders', [(300,)], 6),
    ("SELECT COUNT(*) FROM orders WHERE \"order\" = 'a' AND \"window\" = 'w0'", [(300,)], 6),
    (
        'SELECT l."end", COUNT(*) FROM orders o JOIN limits l ON o."window" = l."window" GROUP BY 1 ORDER BY 1',
        [("E0", 300), ("E1", 300)],
        6,
    ),
    ('SELECT AVG(n) FROM (SELECT "user", COUNT(*) AS n FROM orders GROUP BY "user") p', [(3.0,)], 0.5),
]


def duckdb_shop(directory: Path) -> str:
    with duckdb.connect(str(directory / "shop.duckdb")) as connection:
        connection.execute(TABLES.replace("DOUBLE PRECISION", "DOUBLE"))
        connection.executemany(INSERT, ROWS)
    return 'path = "shop.duckdb"'


def postgres_shop(dsn: str, schema: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as connection:
        in_schema(connection, schema, TABLES)
        with connection.cursor() as cursor:
            cursor.executemany(INSERT.replace("?", "%s"), ROWS)
    return 'backend = "postgres"\n' + tomli_w.dumps({"dsn": dsn, "schema": schema})


@pytest.fixture(params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[QueryService]:
    backend: Backend
    if request.param == "duckdb":
        location = duckdb_shop(tmp_path)
        backend = DuckDBBackend(tmp_path / "shop.duckdb")
    else:
        dsn = request.getfixturevalue("postgres_dsn")
        schema = request.getfixturevalue("fresh_schema")
        location = postgres_shop(dsn, schema)
        backend = PostgresBackend(dsn, schema=schema)
    dataset = parse_config(POLICY.replace("LOCATION", location), path=tmp_path / "veil.toml").dataset("shop")
    assert dataset is not None
    ledger = granted_ledger(tmp_path / "ledger.sqlite", "shop", PrivacyLoss(1000.0, 0.0))
    with serving(dataset, backend, ledger, seed=3) as service:
        yield service


@pytest.mark.parametrize(("sql", "exact", "tolerance"), QUERIES, ids=[q[0] for q in QUERIES])
def test_reserved_words_are_quoted_in_the_engines_sql(
    service: QueryService, sql: str, exact: list[tuple[object, ...]], tolerance: float
) -> None:
    (tree,) = service.parse(sql)
    outcome = service.run(
        tree, principal=Principal("alice"), settings=SessionSettings({"veil.epsilon": "10"})
    )
    assert outcome.table is not None
    rows = outcome.table.rows
    assert [row[:-1] for row in rows] == [row[:-1] for row in exact]
    assert all(abs(row[-1] - want[-1]) <= tolerance for row, want in zip(rows, exact, strict=True)), rows
