"""``veil materialize factorize`` on a PostgreSQL event table: the windows are built by PostgreSQL's
GROUP BY, the release goes back into the dataset's schema, and the same seed gives the same release and
risks as the same events in DuckDB."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest
import tomli_w
from psycopg import sql

from tests.conftest import schema_in
from tests.event_log import event_log
from tests.integration.test_factorize_cli import FAST, WINDOWING, veil

pytestmark = pytest.mark.postgres


@pytest.fixture
def datasets(postgres_dsn: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The generated log as ``events`` in a fresh PostgreSQL schema (dataset ``pg``) and in a DuckDB file
    (dataset ``dk``)."""
    frame = event_log()
    database = tmp_path / "events.duckdb"
    with duckdb.connect(str(database)) as connection:
        connection.register("frame", frame)
        connection.execute("CREATE TABLE events AS SELECT * FROM frame")
    with schema_in(postgres_dsn) as schema, psycopg.connect(postgres_dsn, autocommit=True) as connection:
        table = sql.Identifier(schema, "events")
        connection.execute(sql.SQL("CREATE TABLE {} (uid text, item text, ts timestamp)").format(table))
        with connection.cursor() as cursor:
            rows = [(u, i, t.to_pydatetime()) for u, i, t in frame.itertuples(index=False)]
            cursor.executemany(sql.SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(table), rows)
        config = tmp_path / "veil.toml"
        policy = {
            "datasets": {
                "pg": {"backend": "postgres", "dsn": postgres_dsn, "schema": schema},
                "dk": {"backend": "duckdb", "path": str(database)},
            }
        }
        config.write_text(tomli_w.dumps(policy))
        yield {"config": config, "schema": schema, "connection": connection, "dir": tmp_path}


def test_postgres_windows_release_into_the_schema_and_match_duckdb(datasets: dict[str, Any]) -> None:
    reports = {}
    for name in ("pg", "dk"):
        report_path = datasets["dir"] / f"{name}.json"
        source = ["--config", datasets["config"], "--dataset", name, "--table", "events"]
        veil("materialize", "factorize", *source, *WINDOWING, "--k", 2, *FAST,
             "--out", "db:events_mf", "--report", report_path, "--json")  # fmt: skip
        reports[name] = json.loads(report_path.read_text())
    assert reports["pg"]["risk"] == reports["dk"]["risk"]
    assert reports["pg"]["mapping"] == reports["dk"]["mapping"]  # same seed, same windows, same pseudonyms
    assert reports["pg"]["events"] == reports["dk"]["events"] == len(event_log())
    count = (
        datasets["connection"]
        .execute(
            sql.SQL("SELECT COUNT(*), COUNT(DISTINCT pseudonym) FROM {}").format(
                sql.Identifier(datasets["schema"], "events_mf")
            )
        )
        .fetchone()
    )
    assert count == (2 * 40 * 30, 80)
    rescored = json.loads(
        veil(
            "risk",
            "factorized",
            "--report",
            datasets["dir"] / "pg.json",
            "--released",
            "db:events_mf",
            "--utility-columns",
            0,
            "--json",
        )
    )
    assert rescored["risk"] == reports["pg"]["risk"]
