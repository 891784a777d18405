"""COPY TO STDOUT through Veil is byte for byte PostgreSQL's own COPY: the same tricky values in a public table
of a DuckDB dataset and of a PostgreSQL dataset (one ``veil serve`` holding both), and in PostgreSQL itself;
every CopyData message compared, in the text and CSV formats, with and without HEADER and DELIMITER.

The values are those where a format can go wrong: NULL next to the empty string and the texts ``NULL``,
``\\N`` and ``\\.``; tabs, newlines, carriage returns, backspace, form feed, vertical tab, backslashes,
quotes, delimiters; non-ASCII and a value longer than 4,096 bytes; floats PostgreSQL prints its own way
(``-0``, ``1e+15``, ``1e-05``, ``NaN``, ``Infinity``), integers at the ends of bigint, booleans, dates.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterator
from typing import Any

import duckdb
import psycopg
import pytest
import tomli_w
from psycopg import sql

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy.wire.scram import make_scram_verifier
from tests.conftest import RunningServer, running_server, schema_in

pytestmark = pytest.mark.postgres

DATE = datetime.date
ROWS: list[tuple[Any, ...]] = [
    (1, "plain", 0.1, True, 0, DATE(2024, 2, 29)),
    (2, "", -0.0, False, -1, DATE(1, 1, 1)),
    (3, None, None, None, None, None),
    (4, "tab\there", 1e15, True, 2**63 - 1, DATE(9999, 12, 31)),
    (5, "new\nline and carriage\rreturn", 1e-5, False, -(2**63), DATE(2000, 1, 1)),
    (6, "back\\slash, \\N and \\.", 123456789.125, True, 2**53 + 1, DATE(1970, 1, 1)),
    (7, 'a "quote", a comma; a semicolon | a pipe', math.nan, False, 42, None),
    (8, "é ü 日本 😀", math.inf, None, 7, DATE(2024, 12, 31)),
    (9, "\b\f\v controls", -math.inf, True, None, DATE(1999, 12, 31)),
    (10, "\\.", 1e300, False, -42, DATE(2024, 1, 1)),
    (11, "NULL", 0.30000000000000004, True, 1, DATE(2024, 6, 30)),
    (12, " padded ", 100.0, False, 100, DATE(2024, 7, 1)),
    (13, "\\N", -2.5e-300, True, 10**15, DATE(2024, 7, 2)),
    (14, "long é " * 800, 1.5, False, 3, DATE(2024, 7, 3)),
    (15, "x", 1e16, True, 4, DATE(2024, 7, 4)),
    (16, "y", 0.0001, False, 5, DATE(2024, 7, 5)),
]
COLUMNS = {"id": "integer", "t": "text", "f": "real", "b": "boolean", "n": "integer", "d": "date"}
DUCKDB_TABLE = "CREATE TABLE tricky (id INTEGER, t VARCHAR, f DOUBLE, b BOOLEAN, n BIGINT, d DATE)"
POSTGRES_TABLE = "CREATE TABLE tricky (id integer, t text, f double precision, b boolean, n bigint, d date)"
FAST = "SELECT id, t, f, b, n FROM tricky ORDER BY id"  # the types DuckDB hands over as NumPy arrays
COPIES = [
    (FAST, ""),
    (FAST, "(FORMAT text, HEADER)"),
    (FAST, "(DELIMITER '|')"),
    (FAST, "(FORMAT csv)"),
    (FAST, "(FORMAT csv, HEADER)"),
    (FAST, "(FORMAT csv, DELIMITER ';')"),
    (FAST, "(DELIMITER '\"')"),  # a quote: nothing special in the text format
    (FAST, "(FORMAT csv, DELIMITER '\\')"),  # a backslash: nothing special in CSV
    ("SELECT id, d, t FROM tricky ORDER BY id", ""),  # a date: fetched row by row
    ("SELECT id, d, t FROM tricky ORDER BY id", "(FORMAT csv, HEADER)"),
    ("SELECT t FROM tricky ORDER BY id", "(FORMAT csv)"),  # one column: a lone \. is quoted
    ("SELECT t FROM tricky ORDER BY id", "(FORMAT csv, HEADER)"),
    ('SELECT t AS "a,b", f AS "tab\there" FROM tricky WHERE id < 3 ORDER BY id', "(FORMAT csv, HEADER)"),
    ("SELECT id FROM tricky WHERE id > 100", "(FORMAT csv, HEADER)"),  # no rows
]


def policy(schema: str, dsn: str) -> str:
    tables = {
        "tricky": {"public": True, "key": "id", "columns": {n: {"type": t} for n, t in COLUMNS.items()}}
    }
    postgres = {"backend": "postgres", "dsn": dsn, "schema": schema, "tables": tables}
    return tomli_w.dumps({"datasets": {"duck": {"path": "tricky.duckdb", "tables": tables}, "pg": postgres}})


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory, postgres_dsn: str
) -> Iterator[tuple[RunningServer, str]]:
    """Veil serving the rows from DuckDB (dataset ``duck``) and PostgreSQL (``pg``), and the schema holding
    PostgreSQL's own copy of them."""
    directory = tmp_path_factory.mktemp("copy-format")
    with duckdb.connect(str(directory / "tricky.duckdb")) as connection:
        connection.execute(DUCKDB_TABLE)
        connection.executemany("INSERT INTO tricky VALUES (?, ?, ?, ?, ?, ?)", ROWS)
    with schema_in(postgres_dsn) as schema:
        with psycopg.connect(postgres_dsn, autocommit=True) as connection:
            connection.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
            connection.execute(POSTGRES_TABLE)
            with connection.cursor() as cursor:
                cursor.executemany("INSERT INTO tricky VALUES (%s, %s, %s, %s, %s, %s)", ROWS)
        (directory / "veil.toml").write_text(policy(schema, postgres_dsn), encoding="utf-8")
        ledger = Ledger.create(directory / "ledger.sqlite")
        ledger.add_analyst("copier", make_scram_verifier("copier"))
        for dataset in ("duck", "pg"):
            ledger.grant("copier", dataset, PrivacyLoss(1.0))
        ledger.close()
        with running_server(directory / "veil.toml", directory / "serve.log") as server:
            yield server, schema


def copied(dsn: str, statement: str, schema: str | None = None) -> list[bytes]:
    """Every CopyData payload of one COPY, in order."""
    with psycopg.connect(dsn, autocommit=True) as connection:
        if schema is not None:
            connection.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        with connection.cursor().copy(statement) as copy:  # type: ignore[arg-type]
            return [bytes(block) for block in copy]


@pytest.mark.parametrize("dataset", ["duck", "pg"])
@pytest.mark.parametrize(("query", "options"), COPIES)
def test_copy_is_postgresqls_byte_for_byte(
    servers: tuple[RunningServer, str], postgres_dsn: str, dataset: str, query: str, options: str
) -> None:
    server, schema = servers
    statement = f"COPY ({query}) TO STDOUT {options}"
    expected = copied(postgres_dsn, statement, schema)
    veil = f"postgresql://copier:copier@{server.host}:{server.port}/{dataset}"
    assert copied(veil, statement) == expected


@pytest.mark.parametrize("dataset", ["duck", "pg"])
def test_copy_of_a_public_table_is_postgresqls(
    servers: tuple[RunningServer, str], postgres_dsn: str, dataset: str
) -> None:
    server, schema = servers
    expected = copied(postgres_dsn, "COPY tricky TO STDOUT (FORMAT csv, HEADER)", schema)
    veil = f"postgresql://copier:copier@{server.host}:{server.port}/{dataset}"
    assert sorted(copied(veil, "COPY tricky TO STDOUT (FORMAT csv, HEADER)")) == sorted(expected)
