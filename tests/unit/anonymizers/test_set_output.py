"""A release of value sets written to every target (anonymizers/set_output.py) and read back as lists."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import psycopg
import pytest
from psycopg import sql
from sqlglot import exp

from anonymizers.output import OutputTarget
from anonymizers.set_output import set_column, write_sets
from anonymizers.source import TableSource
from tests.conftest import schema_in

DOMAIN = ("Sales", "Tech-support", 'say "hi", then, leave')  # a comma and quotes must survive
PUBLISHED = np.array([[2, 0], [1, 0], [0, 2], [0, 1]])  # rows in any order: the sets come out sorted
EXPECTED = [
    ["Sales", 'say "hi", then, leave'],
    ["Sales", "Tech-support"],
    ["Sales", 'say "hi", then, leave'],
    ["Sales", "Tech-support"],
]


@pytest.fixture
def source(tmp_path: Path) -> Iterator[TableSource]:
    database = tmp_path / "original.duckdb"
    with duckdb.connect(str(database)) as connection:
        connection.execute("CREATE TABLE people AS SELECT 1 AS id")
    with TableSource.duckdb_file(database, "people") as opened:
        yield opened


def test_a_column_encodes_each_distinct_set_once() -> None:
    column = set_column(PUBLISHED, DOMAIN)
    assert len(column.categories) == 2 and [json.loads(text) for text in column] == EXPECTED


def test_csv_holds_json_arrays(tmp_path: Path, source: TableSource) -> None:
    out = tmp_path / "released.csv"
    write_sets({"job": set_column(PUBLISHED, DOMAIN)}, OutputTarget.parse(str(out)), source=source)
    assert [json.loads(text) for text in pd.read_csv(out)["job"]] == EXPECTED


def test_parquet_and_duckdb_tables_hold_lists(tmp_path: Path, source: TableSource) -> None:
    out = tmp_path / "released.parquet"
    columns = {"job": set_column(PUBLISHED, DOMAIN)}
    write_sets(columns, OutputTarget.parse(str(out)), source=source)
    write_sets(columns, OutputTarget.parse("db:released"), source=source)
    from_parquet = duckdb.sql(f"SELECT job FROM read_parquet('{out}')").fetchall()
    from_table = source.rows(exp.select("job").from_(exp.to_table("released")))
    assert [list(row[0]) for row in from_parquet] == EXPECTED == [list(row[0]) for row in from_table]


@pytest.mark.postgres
def test_postgresql_tables_hold_text_arrays(postgres_dsn: str) -> None:
    with schema_in(postgres_dsn) as schema, psycopg.connect(postgres_dsn, autocommit=True) as connection:
        connection.execute(
            sql.SQL("CREATE TABLE {} AS SELECT 1 AS id").format(sql.Identifier(schema, "people"))
        )
        with TableSource.postgres(postgres_dsn, "people", schema=schema) as source:
            write_sets(
                {"job": set_column(PUBLISHED, DOMAIN)}, OutputTarget.parse("db:released"), source=source
            )
        query = sql.SQL("SELECT job, pg_typeof(job)::text FROM {}").format(sql.Identifier(schema, "released"))
        rows = connection.execute(query).fetchall()
    assert [row[0] for row in rows] == EXPECTED and {row[1] for row in rows} == {"text[]"}
