"""``veil serve`` with a Spark dataset, end to end through psycopg: the demo's rows as Parquet files
(written by DuckDB), the demo policy with ``backend = "spark"`` and ``sources``. A DP count and a GROUP BY
answer close to the exact ones and are charged; a failing engine query says nothing of Spark's text.

Marked ``spark``: skipped without pyspark and Java unless VEIL_REQUIRE_SPARK=1. The server starts its
own JVM in the background, so it listens at once and the first query waits for Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb
import psycopg
import pytest

from tests.conftest import ALICE, DATASET, Admin, RunningServer, build_demo
from tests.sql.spark_fixture import parquet_tables

pytestmark = pytest.mark.spark
EPSILON = 2.0  # of alice's 10, in two answers of the demo's max_epsilon 1: noise of scale ≈ 1 person


def spark_demo(directory: Path, *, remote: str | None = None) -> Path:
    """The demo's policy on Spark: its tables as Parquet files, a local session or ``remote``."""
    demo = build_demo(directory, people=1000)
    sources = parquet_tables(demo.database, directory / "parquet")
    text = demo.config.read_text()
    location = 'backend = "duckdb"\npath = "demo.duckdb"\n'
    assert location in text
    # the server's JVM runs ten nice levels below the wire (as DuckDB's threads do): on a loaded CI
    # machine its first queries can take long; this test is about the path, not the speed
    session = "" if remote is None else f'spark_remote = "{remote}"\n'
    text = text.replace(location, f'backend = "spark"\n{session}statement_timeout_ms = 600000\n', 1)
    text += f"\n[datasets.{DATASET}.sources]\n"
    text += "".join(f'{table} = "parquet/{name}"\n' for table, name in sources.items())
    demo.config.write_text(text)
    return demo.config


def test_psycopg_gets_dp_answers_from_a_spark_dataset(
    spark_ready: None, tmp_path: Path, serve: Callable[[Path], RunningServer]
) -> None:
    config = spark_demo(tmp_path / "demo")
    with duckdb.connect(str(tmp_path / "demo" / "demo.duckdb"), read_only=True) as connection:
        (patients,) = connection.execute("SELECT COUNT(*) FROM patients").fetchone() or (0,)
        by_region = dict(
            connection.execute("SELECT region, COUNT(*) FROM patients GROUP BY region").fetchall()
        )
    server = serve(config)
    before = Admin(config).balance(ALICE)
    with psycopg.connect(server.conninfo(), autocommit=True, prepare_threshold=None) as connection:
        connection.execute(f"SET veil.epsilon = {EPSILON / 2}")
        (count,) = connection.execute("SELECT COUNT(*) FROM patients").fetchone() or (None,)
        assert isinstance(count, int) and abs(count - patients) <= 20 * 1 / (EPSILON / 2), (count, patients)
        rows = connection.execute(
            "SELECT region, COUNT(*) FROM patients GROUP BY region ORDER BY region"
        ).fetchall()
        assert {region for region, _ in rows} <= set(by_region) | {None}
        for region, noisy in rows:
            assert abs(noisy - by_region.get(region, 0)) <= 20 / (EPSILON / 2), (region, noisy)
        with pytest.raises(psycopg.Error) as raised:
            connection.execute("SELECT AVG(no_such_column) FROM patients")
        assert "no_such_column" in str(raised.value)  # refused by Veil (42703) before Spark runs anything
    after = Admin(config).balance(ALICE)
    assert after["spent_epsilon"] - before["spent_epsilon"] == pytest.approx(EPSILON), "both answers charged"
