"""Mondrian on codes read from the engine (``mondrian_source``) and written by it (``write_release``): the
same release as the DataFrame path, in the table's row order, with one small integer per row and QI."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from anonymizers.errors import AnonymizationError, HierarchyError, InfeasibleError
from anonymizers.hierarchy import Hierarchy, load_arx_hierarchy
from anonymizers.mondrian import mondrian, mondrian_source, write_release
from anonymizers.output import OutputTarget
from anonymizers.source import TableSource

ARX_ADULT = Path(__file__).parent / "arx_adult"
CATEGORICAL = ["sex", "race", "marital-status", "education", "workclass", "occupation"]
QIS = ["age", *CATEGORICAL]


@pytest.fixture(scope="module")
def hierarchies() -> dict[str, Hierarchy]:
    return {q: load_arx_hierarchy(ARX_ADULT / f"adult_hierarchy_{q}.csv", q) for q in CATEGORICAL}


@pytest.fixture(scope="module")
def people(hierarchies: dict[str, Hierarchy]) -> pd.DataFrame:
    """3,000 rows on ARX's Adult hierarchies (values drawn from their leaves, skewed), an id and a text
    column that pass through, and age with many ties."""
    rng = np.random.default_rng(7)
    rows = 3_000
    columns: dict[str, object] = {"id": np.arange(rows), "age": rng.integers(17, 91, rows)}
    for q in CATEGORICAL:
        leaves = np.array(hierarchies[q].leaves, dtype=object)
        weights = rng.random(len(leaves)) ** 3
        columns[q] = rng.choice(leaves, rows, p=weights / weights.sum())
    columns["note"] = [f"n{i % 17}" for i in range(rows)]
    return pd.DataFrame(columns)


@pytest.fixture(params=["csv", "parquet", "duckdb"])
def source(request: pytest.FixtureRequest, people: pd.DataFrame, tmp_path: Path) -> TableSource:
    if request.param == "csv":
        people.to_csv(tmp_path / "people.csv", index=False)
        return TableSource.csv(tmp_path / "people.csv")
    if request.param == "parquet":
        _parquet(people, tmp_path / "people.parquet")
        return TableSource.parquet(tmp_path / "people.parquet")
    path = tmp_path / "people.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.register("frame", people)
        connection.execute("CREATE TABLE people AS SELECT * FROM frame")
    return TableSource.duckdb_file(path, "people")


def _parquet(frame: pd.DataFrame, path: Path) -> None:
    with duckdb.connect() as connection:
        connection.register("frame", frame)
        connection.table("frame").write_parquet(str(path))


@pytest.mark.parametrize(
    "options",
    [
        {"k": 5},
        {"k": 5, "relaxed": True},
        {"k": 3, "recoding": "range", "categorical": "set"},
        {"k": 10, "recoding": "median"},
    ],
    ids=["strict", "relaxed", "range-set", "median"],
)
def test_codes_from_the_engine_give_the_dataframe_paths_release(
    source: TableSource, people: pd.DataFrame, hierarchies: dict[str, Hierarchy], options: dict[str, object]
) -> None:
    with source:
        release = mondrian_source(source, QIS, hierarchies=hierarchies, **options)  # type: ignore[arg-type]
    result = mondrian(people, QIS, hierarchies=hierarchies, **options)  # type: ignore[arg-type]
    assert dataclasses.asdict(release.summary) == dataclasses.asdict(result.summary)
    assert release.box.tolist() == result.table["equivalence_class"].tolist()
    classes = np.empty(len(people), dtype=np.int64)
    for number, rows in enumerate(result.classes):
        classes[rows] = number
    assert release.row_classes().tolist() == classes.tolist()
    for column, labels in zip(QIS, release.labels, strict=True):
        assert list(labels.values[labels.index][release.box]) == result.table[column].tolist()


def test_engine_codes_are_one_byte_per_row_in_the_tables_order(
    source: TableSource, people: pd.DataFrame
) -> None:
    values = sorted(set(people["workclass"]))
    dictionary = pd.DataFrame({"value": values, "code": np.arange(len(values))})
    with source:
        codes = source.codes({"workclass": dictionary}, text=["workclass"])
    assert codes["workclass"].dtype == np.int8
    assert codes["workclass"].tolist() == [values.index(v) for v in people["workclass"]]


def test_a_release_keeps_labels_per_box_and_one_box_number_per_row(
    source: TableSource, hierarchies: dict[str, Hierarchy]
) -> None:
    with source:
        release = mondrian_source(source, QIS, hierarchies=hierarchies, k=5)
    assert release.box.dtype == np.int32 and len(release.box) == 3_000
    assert all(len(labels.index) == release.summary.boxes for labels in release.labels)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_the_engine_writes_the_dataframe_paths_table_in_row_order(
    source: TableSource, people: pd.DataFrame, hierarchies: dict[str, Hierarchy], tmp_path: Path, suffix: str
) -> None:
    out = tmp_path / f"released{suffix}"
    with source:
        release = mondrian_source(source, QIS, hierarchies=hierarchies, k=5, recoding="range")
        write_release(source, release, OutputTarget.parse(str(out)))
    expected = mondrian(people, QIS, hierarchies=hierarchies, k=5, recoding="range").table
    expected = expected.drop(columns=["equivalence_class"])
    with duckdb.connect() as connection:
        written = connection.sql(f"SELECT * FROM '{out}'").df()
    assert list(written.columns) == list(people.columns)
    for column in people.columns:
        assert written[column].astype(str).tolist() == expected[column].astype(str).tolist(), column


def test_the_engine_writes_a_table_with_text_labels_and_numeric_means(
    people: pd.DataFrame, hierarchies: dict[str, Hierarchy], tmp_path: Path
) -> None:
    path = tmp_path / "people.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.register("frame", people)
        connection.execute("CREATE TABLE people AS SELECT * FROM frame")
    with TableSource.duckdb_file(path, "people") as source:
        release = mondrian_source(source, QIS, hierarchies=hierarchies, k=5)
        write_release(source, release, OutputTarget.parse("db:released"))
    expected = mondrian(people, QIS, hierarchies=hierarchies, k=5).table
    with duckdb.connect(str(path)) as connection:
        types = dict(connection.execute("SELECT column_name, data_type FROM duckdb_columns() "
                                        "WHERE table_name = 'released'").fetchall())  # fmt: skip
        written = connection.execute("SELECT * FROM released").df()
    assert types["sex"] == "VARCHAR" and types["age"] == "DOUBLE"
    assert written["age"].tolist() == expected["age"].tolist()
    assert written["occupation"].tolist() == expected["occupation"].tolist()


def test_write_release_refuses_a_release_of_another_table(
    people: pd.DataFrame, hierarchies: dict[str, Hierarchy], tmp_path: Path
) -> None:
    people.to_csv(tmp_path / "all.csv", index=False)
    people.iloc[:100].to_csv(tmp_path / "some.csv", index=False)
    with TableSource.csv(tmp_path / "all.csv") as source:
        release = mondrian_source(source, QIS, hierarchies=hierarchies, k=5)
    with (
        TableSource.csv(tmp_path / "some.csv") as other,
        pytest.raises(AnonymizationError, match="release has 3000 rows, the table 100"),
    ):
        write_release(other, release, OutputTarget.parse(str(tmp_path / "out.csv")))


def frame_source(tmp_path: Path, frame: pd.DataFrame) -> TableSource:
    frame.to_csv(tmp_path / "t.csv", index=False)
    return TableSource.csv(tmp_path / "t.csv")


def test_refuses_a_null_in_a_quasi_identifier(tmp_path: Path) -> None:
    frame = pd.DataFrame({"a": [1, 2, None, 4], "b": [1, 2, 3, 4]})
    with (
        frame_source(tmp_path, frame) as source,
        pytest.raises(AnonymizationError, match="quasi-identifier a has missing values"),
    ):
        mondrian_source(source, ["b", "a"], k=2)


def test_refuses_a_value_missing_from_the_hierarchy(tmp_path: Path) -> None:
    gender = Hierarchy("gender", (("M", "F"), ("*", "*")))
    with (
        frame_source(tmp_path, pd.DataFrame({"gender": ["M", "X"]})) as source,
        pytest.raises(HierarchyError, match="value 'X' of gender is not in its hierarchy"),
    ):
        mondrian_source(source, ["gender"], k=1, hierarchies={"gender": gender})


def test_refuses_a_text_quasi_identifier_without_a_hierarchy(tmp_path: Path) -> None:
    with (
        frame_source(tmp_path, pd.DataFrame({"gender": ["M", "F"]})) as source,
        pytest.raises(AnonymizationError, match="quasi-identifier gender is not numeric"),
    ):
        mondrian_source(source, ["gender"], k=1)


def test_refuses_fewer_rows_than_k(tmp_path: Path) -> None:
    with (
        frame_source(tmp_path, pd.DataFrame({"a": [1, 2, 3]})) as source,
        pytest.raises(InfeasibleError, match="3 rows, fewer than k = 4"),
    ):
        mondrian_source(source, ["a"], k=4)
