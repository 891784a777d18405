"""The Spark backend's parts that need no JVM: start-up failures reach the query as a message for the
administrator (never a hang), missing sources stop the dataset at once, and the data version follows the
files. (Queries on a real Spark session: tests/sql/test_spark_semantics.py, marked ``spark``.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from proxy.backends import spark
from proxy.backends.spark import SparkBackend
from proxy.config import SparkSource
from proxy.errors import BackendUnavailableError

UNREACHABLE = "sc://127.0.0.1:1"  # Spark Connect: no JVM in this process; the start fails at once


@pytest.fixture(autouse=True)
def own_sessions(monkeypatch: pytest.MonkeyPatch) -> None:
    """This module's failed Connect session is forgotten afterwards: a process runs either local or
    Connect sessions, and the SQL tests' local one may come later in the same test run."""
    monkeypatch.setattr(spark, "_ROOTS", {})


def test_a_spark_session_that_cannot_start_fails_the_query_with_a_reason(tmp_path: Path) -> None:
    (tmp_path / "t.parquet").write_bytes(b"PAR1")
    backend = SparkBackend(
        master=None, remote=UNREACHABLE, sources={"t": SparkSource(str(tmp_path / "t.parquet"), "parquet")}
    )
    with pytest.raises(
        BackendUnavailableError, match=r"cannot start Spark \(sc://127\.0\.0\.1:1\)"
    ) as raised:
        backend.execute("SELECT 1")
    assert raised.value.hint is not None and "veil-sql[spark]" in raised.value.hint
    backend.close()


def test_a_missing_source_stops_the_dataset_before_spark_starts(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailableError, match="the source of table t does not exist"):
        SparkBackend(
            master=None, remote=UNREACHABLE, sources={"t": SparkSource(str(tmp_path / "no"), "parquet")}
        )


def test_the_data_version_follows_every_file_of_a_source_directory(tmp_path: Path) -> None:
    directory = tmp_path / "t"
    directory.mkdir()
    (directory / "a.parquet").write_bytes(b"one")
    backend = SparkBackend(
        master=None, remote=UNREACHABLE, sources={"t": SparkSource(str(directory), "parquet")}
    )
    before = backend.data_version()
    assert backend.data_version() == before
    (directory / "b.parquet").write_bytes(b"two")
    added = backend.data_version()
    assert added != before
    os.utime(directory / "a.parquet", ns=(1, 1))
    assert backend.data_version() not in (before, added)
    backend.close()


def test_a_table_behind_a_url_is_never_the_same_version() -> None:
    backend = SparkBackend(
        master=None, remote=UNREACHABLE, sources={"t": SparkSource("s3a://bucket/t/", "parquet")}
    )
    assert backend.data_version() != backend.data_version()
    backend.close()


def test_a_failed_start_is_tried_again_by_the_next_dataset() -> None:
    first = spark.root_session(master=None, remote=UNREACHABLE)
    assert first.exception() is not None
    again = spark.root_session(master=None, remote=UNREACHABLE)
    assert again is not first and again.exception() is not None


def test_one_process_does_not_mix_local_and_connect_sessions() -> None:
    spark._ROOTS["remote:sc://elsewhere:15002"] = spark.Future()  # a Connect session starting
    with pytest.raises(BackendUnavailableError, match="either with a local session or over Spark Connect"):
        spark.root_session(master="local[*]", remote=None)
