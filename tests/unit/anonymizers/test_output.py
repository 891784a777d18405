"""Writing results: recoded in the engine to CSV, Parquet or a table; DataFrames likewise; never half,
never over an existing file or table unless asked."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pytest

from anonymizers.errors import AnonymizationError
from anonymizers.global_recoding import GlobalRecodingResult, PrivacyModel, anonymize
from anonymizers.hierarchy import Hierarchy, interval_hierarchy, suppression_hierarchy
from anonymizers.output import (
    TEMPORARY_SUFFIX,
    OutputTarget,
    ensure_writable,
    write_frame,
    write_recoded,
    write_relation,
)
from anonymizers.source import TableSource

FRAME = pd.DataFrame(
    {
        "id": [1, 2, 3, 4, 5, 6, 7, 8, 9],
        "age": [21, 22, 23, 24, 30, 31, 32, 33, 90],
        "sex": ["F", "M", "F", "M", "F", "M", "F", "M", "F"],
        "income": [10, 20, 30, 40, 50, 60, 70, 80, 90],
    }
)


def hierarchies() -> list[Hierarchy]:
    return [
        interval_hierarchy("age", FRAME["age"].tolist(), [10]),
        suppression_hierarchy("sex", FRAME["sex"]),
    ]


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "data.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.register("frame", FRAME)
        connection.execute("CREATE TABLE people AS SELECT * FROM frame")
    return path


def recoded(source: TableSource) -> GlobalRecodingResult:
    """k=2 with one suppressed record allowed: ages to decades, sex kept, the 90-year-old dropped."""
    return anonymize(source, ["age", "sex"], hierarchies(), PrivacyModel(k=2), suppression_limit=0.12)


EXPECTED_AGES = ["20-29"] * 4 + ["30-39"] * 4


def test_csv_output_is_recoded_in_the_engine_without_suppressed_rows(database: Path, tmp_path: Path) -> None:
    target = tmp_path / "released.csv"
    with TableSource.duckdb_file(database, "people") as source:
        result = recoded(source)
        assert result.level_map == {"age": 1, "sex": 0}
        write_recoded(source, result, hierarchies(), OutputTarget.parse(str(target)))
    released = pd.read_csv(target, dtype=str).sort_values("id", key=lambda s: s.astype(int))
    assert list(released.columns) == ["id", "age", "sex", "income"]
    assert released["age"].tolist() == EXPECTED_AGES
    assert released["sex"].tolist() == FRAME["sex"].tolist()[:8]
    assert "9" not in released["id"].tolist()
    assert not list(tmp_path.glob(f"*{TEMPORARY_SUFFIX}"))


def test_parquet_output_with_chosen_columns(database: Path, tmp_path: Path) -> None:
    target = tmp_path / "released.parquet"
    with TableSource.duckdb_file(database, "people") as source:
        write_recoded(
            source, recoded(source), hierarchies(), OutputTarget.parse(str(target)), columns=["age", "income"]
        )
    with duckdb.connect() as connection:
        released = connection.read_parquet(str(target)).df().sort_values("income")
    assert list(released.columns) == ["age", "income"]
    assert released["age"].tolist() == EXPECTED_AGES
    assert released["income"].tolist() == [10, 20, 30, 40, 50, 60, 70, 80]  # types kept


def test_table_output_in_the_duckdb_file(database: Path) -> None:
    with TableSource.duckdb_file(database, "people") as source:
        write_recoded(source, recoded(source), hierarchies(), OutputTarget.parse("db:released"))
        assert not source.table_exists("released" + TEMPORARY_SUFFIX)
    with duckdb.connect(str(database)) as connection:
        rows = connection.execute("SELECT age, count(*) FROM released GROUP BY age ORDER BY age").fetchall()
    assert rows == [("20-29", 4), ("30-39", 4)]


def test_existing_table_is_refused_unless_replace(database: Path) -> None:
    with TableSource.duckdb_file(database, "people") as source:
        result = recoded(source)
        with pytest.raises(AnonymizationError, match="table people already exists") as caught:
            write_recoded(source, result, hierarchies(), OutputTarget.parse("db:people"))
        assert caught.value.hint is not None and "--replace" in caught.value.hint
        assert source.row_count() == 9  # untouched
        write_recoded(source, result, hierarchies(), OutputTarget.parse("db:released"))
        write_recoded(source, result, hierarchies(), OutputTarget.parse("db:released"), replace=True)
    with duckdb.connect(str(database)) as connection:
        assert connection.execute("SELECT count(*) FROM released").fetchone() == (8,)


def test_existing_file_is_refused_unless_replace(database: Path, tmp_path: Path) -> None:
    target = tmp_path / "released.csv"
    target.write_text("keep me\n")
    with TableSource.duckdb_file(database, "people") as source:
        result = recoded(source)
        with pytest.raises(AnonymizationError, match="already exists"):
            write_recoded(source, result, hierarchies(), OutputTarget.parse(str(target)))
        assert target.read_text() == "keep me\n"
        write_recoded(source, result, hierarchies(), OutputTarget.parse(str(target)), replace=True)
    assert target.read_text().startswith("id,age,sex,income")


def test_failed_write_leaves_no_file(tmp_path: Path) -> None:
    """A real failure half-way through: the query fails on row 100,000, after DuckDB has written the
    first chunks to the partial file."""
    target = tmp_path / "released.csv"
    with duckdb.connect() as local:
        failing = local.sql(
            "SELECT CASE WHEN i < 100000 THEN i ELSE CAST('x' || i AS INTEGER) END AS n FROM range(200000) t(i)"
        )
        with pytest.raises(duckdb.ConversionException):
            write_relation(failing, OutputTarget.parse(str(target)), replace=False)
    assert not list(tmp_path.iterdir())  # neither the target nor the partial file


def test_frame_to_csv_parquet_and_table(database: Path, tmp_path: Path) -> None:
    frame = pd.DataFrame({"age": [48, 48, 48], "income": [500.0, 500.0, 500.0]})
    write_frame(frame, OutputTarget.parse(str(tmp_path / "m.csv")))
    write_frame(frame, OutputTarget.parse(str(tmp_path / "m.parquet")))
    assert pd.read_csv(tmp_path / "m.csv").equals(frame)
    with duckdb.connect() as connection:
        assert connection.read_parquet(str(tmp_path / "m.parquet")).df().equals(frame)
    with TableSource.duckdb_file(database, "people") as source:
        write_frame(frame, OutputTarget.parse("db:mondrian"), source=source)
    with duckdb.connect(str(database)) as connection:
        assert connection.execute("SELECT sum(age) FROM mondrian").fetchone() == (144,)


def test_table_output_from_a_csv_input_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    FRAME.to_csv(path, index=False)
    with TableSource.csv(path) as source, pytest.raises(AnonymizationError, match="no database"):
        write_recoded(source, recoded(source), hierarchies(), OutputTarget.parse("db:released"))


@pytest.mark.parametrize("text", ["released.txt", "db:"])
def test_unknown_targets_are_refused(text: str) -> None:
    with pytest.raises(AnonymizationError):
        OutputTarget.parse(text)


@pytest.mark.parametrize(
    ("out", "message"),
    [("db:people", "table people already exists"), ("{dir}/taken.csv", "already exists"),
     ("{dir}/missing/x.csv", "does not exist")],
)  # fmt: skip
def test_an_output_that_cannot_be_written_is_refused_before_any_work(
    database: Path, tmp_path: Path, out: str, message: str
) -> None:
    (tmp_path / "taken.csv").write_text("keep me\n")
    target = OutputTarget.parse(out.format(dir=tmp_path))
    with TableSource.duckdb_file(database, "people") as source:
        with pytest.raises(AnonymizationError, match=message):
            ensure_writable(target, source, replace=False)
        if "missing" not in out:
            ensure_writable(target, source, replace=True)
    assert (tmp_path / "taken.csv").read_text() == "keep me\n"
