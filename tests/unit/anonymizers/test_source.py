"""TableSource: the same questions answered by a DuckDB file, a CSV file and a Parquet file."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pytest

from anonymizers.errors import AnonymizationError
from anonymizers.source import TableSource

FRAME = pd.DataFrame(
    {
        "age group": [39, 50, 39, 28],  # a space in the name: identifiers must be quoted
        'odd"name': ["a", "b", "a", "c"],  # and a double quote
        "income": [1.5, 2.0, None, 3.0],
    }
)


def duckdb_file(tmp_path: Path, frame: pd.DataFrame = FRAME, table: str = "people") -> Path:
    path = tmp_path / "data.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.register("frame", frame)
        connection.execute(f'CREATE TABLE "{table}" AS SELECT * FROM frame')
    return path


def test_duckdb_file_columns_rows_and_distinct_text_values(tmp_path: Path) -> None:
    with TableSource.duckdb_file(duckdb_file(tmp_path), "people") as source:
        assert source.column_names() == ["age group", 'odd"name', "income"]
        assert source.row_count() == 4
        assert source.distinct_values("age group") == ["28", "39", "50"]  # cast to text, sorted
        assert source.distinct_values('odd"name') == ["a", "b", "c"]
        assert source.distinct_values("income", as_text_values=False) == [1.5, 2.0, 3.0]  # no NULL


def test_distinct_values_come_with_the_engines_text_in_value_order(tmp_path: Path) -> None:
    with TableSource.duckdb_file(duckdb_file(tmp_path), "people") as source:
        assert source.distinct_with_text("income") == [(1.5, "1.5"), (2.0, "2.0"), (3.0, "3.0")]
        assert source.distinct_with_text("age group") == [(28, "28"), (39, "39"), (50, "50")]


def test_dataframe_returns_the_selected_columns(tmp_path: Path) -> None:
    with TableSource.duckdb_file(duckdb_file(tmp_path), "people") as source:
        frame = source.dataframe(['odd"name', "age group"])
    assert list(frame.columns) == ['odd"name', "age group"]
    assert frame["age group"].tolist() == [39, 50, 39, 28]


def test_csv_with_a_given_delimiter(tmp_path: Path) -> None:
    path = tmp_path / "adult.csv"
    path.write_text("sex;age\nMale;39\nFemale;50\nMale;39\n")
    with TableSource.csv(path, delimiter=";") as source:
        assert source.columns()[0] == ("sex", "VARCHAR")
        assert source.row_count() == 3
        assert source.distinct_values("age") == ["39", "50"]
        assert source.in_memory


def test_csv_without_header(tmp_path: Path) -> None:
    path = tmp_path / "adult.data"
    path.write_text("39, Male\n50, Female\n")
    with TableSource.csv(path, delimiter=", ", header=False) as source:
        assert source.row_count() == 2
        assert len(source.column_names()) == 2


def test_parquet_file(tmp_path: Path) -> None:
    path = tmp_path / "people.parquet"
    with duckdb.connect() as connection:
        connection.register("frame", FRAME)
        connection.table("frame").write_parquet(str(path))
    with TableSource.parquet(path) as source:
        assert source.row_count() == 4
        assert source.distinct_values('odd"name') == ["a", "b", "c"]


def test_missing_table_is_refused_with_the_name(tmp_path: Path) -> None:
    with pytest.raises(AnonymizationError, match=r"table .*nobody does not exist"):
        TableSource.duckdb_file(duckdb_file(tmp_path), "nobody")


def test_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AnonymizationError, match="does not exist"):
        TableSource.duckdb_file(tmp_path / "absent.duckdb", "people")


def test_unknown_column_names_the_known_ones(tmp_path: Path) -> None:
    with (
        TableSource.duckdb_file(duckdb_file(tmp_path), "people") as source,
        pytest.raises(AnonymizationError, match="column 'zip' is not in") as caught,
    ):
        source.dataframe(["zip"])
    assert caught.value.hint is not None and "income" in caught.value.hint


def test_table_exists(tmp_path: Path) -> None:
    with TableSource.duckdb_file(duckdb_file(tmp_path), "people") as source:
        assert source.table_exists("people")
        assert not source.table_exists("released")
