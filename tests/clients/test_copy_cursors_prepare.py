"""COPY TO STDOUT, SQL cursors and SQL PREPARE through the real clients, on both backends (issue 19):
psql's ``\\copy`` and ``FETCH_COUNT``, psycopg's named cursors (with and without HOLD), SQLAlchemy's
``stream_results``, asyncpg's ``cursor()`` — each DP query charged exactly once, refusals free."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import psycopg
import pytest
import sqlalchemy as sa

from tests.clients.test_psql import psql
from tests.conftest import Admin, Analyst, RunningServer

pytestmark = pytest.mark.client

GROUPED = "SELECT region, COUNT(*) AS n FROM patients GROUP BY region"
REGIONS = 7  # the demo's public region domain
EPSILON = 0.1  # the demo's default ε per query


def spent(admin: Admin, analyst: Analyst) -> float:
    return float(admin.balance(analyst)["spent_epsilon"])


def connect(server: RunningServer, analyst: Analyst, **options: object) -> psycopg.Connection:
    return psycopg.connect(server.conninfo(analyst), **options)  # type: ignore[arg-type]


def test_psql_copy_to_a_csv_file_is_one_charged_answer(
    veil_server: RunningServer, admin: Admin, tmp_path: Path
) -> None:
    analyst = admin.add_analyst(1.0, prefix="copycsv")
    target = tmp_path / "regions.csv"
    result = psql(veil_server, "-c", f"\\copy ({GROUPED}) TO '{target}' CSV HEADER", analyst=analyst)
    assert result.returncode == 0, result.stderr
    lines = target.read_text().splitlines()
    assert lines[0] == "region,n" and len(lines) == 1 + REGIONS
    assert all(line.split(",")[1].lstrip("-").isdigit() for line in lines[1:])
    assert "spent ε=0.1" in result.stderr
    assert spent(admin, analyst) == pytest.approx(EPSILON)


def test_copy_text_format_of_a_public_table_and_refusals_that_cost_nothing(
    veil_server: RunningServer, admin: Admin
) -> None:
    analyst = admin.add_analyst(1.0, prefix="copyrefuse")
    with connect(veil_server, analyst, autocommit=True) as connection, connection.cursor() as cursor:
        with cursor.copy("COPY zones TO STDOUT") as copy:
            public = b"".join(bytes(block) for block in copy).decode()
        assert public.count("\n") >= 1 and "\t" in public  # text format, tab-separated
        for statement, sqlstate in [
            ("COPY patients TO STDOUT", "42501"),
            ("COPY (SELECT age FROM patients) TO STDOUT", "42501"),
            ("COPY zones FROM STDIN", "0A000"),
            ("COPY (SELECT 1) TO '/tmp/veil-copy-out'", "0A000"),
        ]:
            with pytest.raises(psycopg.Error) as raised:
                cursor.execute(statement)
            assert raised.value.sqlstate == sqlstate, statement
    assert spent(admin, analyst) == 0


def test_psql_with_fetch_count_pages_through_one_charged_answer(
    veil_server: RunningServer, admin: Admin
) -> None:
    analyst = admin.add_analyst(1.0, prefix="fetchcount")
    result = psql(veil_server, "-v", "FETCH_COUNT=2", "-A", "-t", "-c", GROUPED, analyst=analyst)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.strip().splitlines()) == REGIONS
    assert spent(admin, analyst) == pytest.approx(EPSILON)


def test_psycopg_named_cursors_fetch_in_pages_and_hold_survives_commit(
    veil_server: RunningServer, admin: Admin
) -> None:
    analyst = admin.add_analyst(1.0, prefix="named")
    with connect(veil_server, analyst) as connection:
        with connection.cursor(name="pages") as cursor:
            cursor.itersize = 2
            cursor.execute(GROUPED)
            assert len(list(cursor)) == REGIONS
        connection.commit()
        with connection.cursor(name="kept", withhold=True) as cursor:
            cursor.execute(GROUPED.replace("region", "sex"))
            connection.commit()  # WITH HOLD: still open after the transaction that declared it
            assert len(cursor.fetchall()) == 2
    assert spent(admin, analyst) == pytest.approx(2 * EPSILON)


def test_cursor_rules_follow_postgresql(veil_server: RunningServer, admin: Admin) -> None:
    analyst = admin.add_analyst(1.0, prefix="rules")
    with connect(veil_server, analyst, autocommit=True) as connection:
        with pytest.raises(psycopg.errors.NoActiveSqlTransaction):
            connection.execute(f"DECLARE outside CURSOR FOR {GROUPED}")  # refused before it runs: free
        assert spent(admin, analyst) == 0
        connection.execute("BEGIN")
        connection.execute(f"DECLARE c NO SCROLL CURSOR FOR {GROUPED}")
        assert len(connection.execute("FETCH FORWARD 3 FROM c").fetchall()) == 3
        assert connection.execute("MOVE FORWARD 2 IN c").statusmessage == "MOVE 2"
        assert len(connection.execute("FETCH ALL FROM c").fetchall()) == REGIONS - 5
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            connection.execute("FETCH BACKWARD 1 FROM c")
        connection.execute("ROLLBACK")
        connection.execute("BEGIN")
        connection.execute(f"DECLARE h CURSOR WITH HOLD FOR {GROUPED.replace('region', 'sex')}")
        connection.execute("ROLLBACK")  # a held cursor does not outlive the rollback of its transaction
        with pytest.raises(psycopg.errors.InvalidCursorName):
            connection.execute("FETCH 1 FROM h")
    assert spent(admin, analyst) == pytest.approx(2 * EPSILON)  # c and h, once each


def test_sqlalchemy_stream_results_and_asyncpg_cursors(veil_server: RunningServer, admin: Admin) -> None:
    analyst = admin.add_analyst(1.0, prefix="stream")
    url = f"postgresql+psycopg://{analyst.name}:{analyst.password}@{veil_server.host}:{veil_server.port}/demo"
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        streamed = connection.execution_options(stream_results=True, max_row_buffer=2).execute(
            sa.text(GROUPED)
        )
        assert len(list(streamed)) == REGIONS
    engine.dispose()

    async def through_asyncpg() -> int:
        connection = await asyncpg.connect(
            host=veil_server.host, port=veil_server.port, user=analyst.name, password=analyst.password,
            database="demo",
        )  # fmt: skip
        try:
            async with connection.transaction():
                return len(
                    [
                        record
                        async for record in connection.cursor(GROUPED.replace("region", "sex"), prefetch=1)
                    ]
                )
        finally:
            await connection.close()

    assert asyncio.run(asyncio.wait_for(through_asyncpg(), timeout=30)) == 2
    assert spent(admin, analyst) == pytest.approx(2 * EPSILON)


def test_sql_prepare_execute_deallocate(veil_server: RunningServer, admin: Admin) -> None:
    analyst = admin.add_analyst(1.0, prefix="prepare")
    script = (
        "PREPARE by_region (text) AS SELECT COUNT(*) FROM patients WHERE region = $1;\n"
        "EXECUTE by_region('north');\n"
        "EXECUTE by_region('south');\n"
        "DEALLOCATE by_region;\n"
    )
    result = psql(veil_server, "-A", "-t", analyst=analyst, script=script)
    assert result.returncode == 0, result.stderr
    counts = [line for line in result.stdout.splitlines() if line.lstrip("-").isdigit()]
    assert len(counts) == 2 and "DEALLOCATE" in result.stdout
    assert spent(admin, analyst) == pytest.approx(2 * EPSILON)  # each EXECUTE is one answer
    with connect(veil_server, analyst, autocommit=True) as connection:
        with pytest.raises(psycopg.errors.InvalidSqlStatementName):
            connection.execute("EXECUTE by_region('north')")
        connection.execute("PREPARE two (int) AS SELECT $1 + 1")
        with pytest.raises(psycopg.errors.ProtocolViolation):
            connection.execute("EXECUTE two(1, 2)")
        assert connection.execute("EXECUTE two(41)").fetchone() == (42,)


def test_answers_named_and_tagged_as_postgresql_names_and_tags_them(
    veil_server: RunningServer, admin: Admin
) -> None:
    first, second = admin.add_analyst(1.0, prefix="pgnames"), admin.add_analyst(1.0, prefix="pgnames")
    with connect(veil_server, first, autocommit=True) as connection:
        cursor = connection.execute("SELECT COUNT(*), MAX(code) FROM zones")
        assert [column.name for column in cursor.description or []] == ["count", "max"]
        connection.execute("BEGIN")
        with pytest.raises(psycopg.Error):
            connection.execute("SELECT no_such_column FROM zones")
        assert connection.execute("COMMIT").statusmessage == "ROLLBACK"  # COMMIT of a failed block
        keywords = connection.execute("SELECT COUNT(*) FROM pg_get_keywords() WHERE catcode = 'R'").fetchone()
        assert keywords is not None and keywords[0] > 50
    roles = psql(veil_server, "-A", "-t", "-c", "\\du", analyst=first).stdout
    assert first.name in roles and second.name not in roles  # an analyst sees themselves, not the others
    databases = psql(veil_server, "-A", "-t", "-c", "\\l", analyst=first).stdout
    assert databases.startswith("demo|")
