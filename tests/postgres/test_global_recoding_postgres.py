"""Optimal global recoding of a PostgreSQL table: the same answer as on DuckDB, and the released table
written back into PostgreSQL (or to CSV) by the engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import psycopg
import pytest
from psycopg import sql

from anonymizers.diversity import DiversityModel
from anonymizers.errors import AnonymizationError
from anonymizers.global_recoding import GlobalRecodingResult, PrivacyModel, anonymize
from anonymizers.hierarchy import Hierarchy, interval_hierarchy, suppression_hierarchy
from anonymizers.output import OutputTarget, write_recoded
from anonymizers.source import TableSource

pytestmark = pytest.mark.postgres

QI = ["age", "sex", "zip"]


def people() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    rows = 500
    return pd.DataFrame(
        {
            "age": rng.integers(18, 70, rows),
            "sex": rng.choice(["F", "M"], rows),
            "zip": rng.choice([f"{z:03d}" for z in range(9)], rows),
            "disease": rng.choice(["flu", "cancer", "cold"], rows, p=[0.6, 0.3, 0.1]),
        }
    )


def hierarchies(frame: pd.DataFrame) -> list[Hierarchy]:
    zips = tuple(sorted(set(frame["zip"])))
    return [
        interval_hierarchy("age", frame["age"].tolist(), [5, 10, 20]),
        suppression_hierarchy("sex", frame["sex"]),
        Hierarchy("zip", (zips, tuple(z[:2] for z in zips), ("*",) * len(zips))),
    ]


def load(pg: psycopg.Connection[Any], schema: str, frame: pd.DataFrame) -> None:
    table = sql.Identifier(schema, "people")
    pg.execute(sql.SQL("CREATE TABLE {} (age integer, sex text, zip text, disease text)").format(table))
    with pg.cursor().copy(sql.SQL("COPY {} FROM STDIN").format(table)) as copy:
        for row in frame.itertuples(index=False):
            copy.write_row((int(row.age), row.sex, row.zip, row.disease))


def duckdb_result(tmp_path: Path, frame: pd.DataFrame, **options: Any) -> GlobalRecodingResult:
    path = tmp_path / "people.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.register("frame", frame)
        connection.execute("CREATE OR REPLACE TABLE people AS SELECT * FROM frame")
    with TableSource.duckdb_file(path, "people") as source:
        return anonymize(source, QI, hierarchies(frame), **options)


CONFIGURATIONS = [
    {"model": PrivacyModel(k=5), "suppression_limit": 0.05},
    {
        "model": PrivacyModel(k=2, diversity=DiversityModel(l=2)),
        "sensitive": "disease",
        "suppression_limit": 0.05,
    },
]


@pytest.mark.parametrize("options", CONFIGURATIONS)
def test_postgres_and_duckdb_choose_the_same_node(
    postgres_dsn: str, fresh_schema: str, pg: psycopg.Connection[Any], tmp_path: Path, options: dict[str, Any]
) -> None:
    frame = people()
    load(pg, fresh_schema, frame)
    with TableSource.postgres(postgres_dsn, "people", schema=fresh_schema) as source:
        on_postgres = anonymize(source, QI, hierarchies(frame), **options)
    on_duckdb = duckdb_result(tmp_path, frame, **options)
    assert on_postgres.levels == on_duckdb.levels
    assert on_postgres.suppressed_records == on_duckdb.suppressed_records
    assert on_postgres.class_sizes == on_duckdb.class_sizes
    assert on_postgres.metrics == pytest.approx(on_duckdb.metrics)


def test_released_table_is_written_into_postgres(
    postgres_dsn: str, fresh_schema: str, pg: psycopg.Connection[Any], tmp_path: Path
) -> None:
    frame = people()
    load(pg, fresh_schema, frame)
    with TableSource.postgres(postgres_dsn, "people", schema=fresh_schema) as source:
        result = anonymize(source, QI, hierarchies(frame), PrivacyModel(k=5), suppression_limit=0.05)
        write_recoded(source, result, hierarchies(frame), OutputTarget.parse("db:released"))
        write_recoded(source, result, hierarchies(frame), OutputTarget.parse(str(tmp_path / "released.csv")))
        write_recoded(
            source, result, hierarchies(frame), OutputTarget.parse(str(tmp_path / "released.parquet"))
        )
        with pytest.raises(AnonymizationError, match="already exists"):
            write_recoded(source, result, hierarchies(frame), OutputTarget.parse("db:released"))
    released = pg.execute(
        sql.SQL("SELECT age, sex, zip, count(*) FROM {} GROUP BY 1, 2, 3").format(
            sql.Identifier(fresh_schema, "released")
        )
    ).fetchall()
    assert sum(row[3] for row in released) == len(frame) - result.suppressed_records
    assert min(row[3] for row in released) >= 5
    assert sorted(row[3] for row in released) == sorted(
        size for size, count in result.class_sizes.items() for _ in range(count)
    )
    exported = pd.read_csv(tmp_path / "released.csv", dtype=str)
    assert len(exported) == len(frame) - result.suppressed_records
    with duckdb.connect() as connection:
        parquet = connection.read_parquet(str(tmp_path / "released.parquet")).df().astype(str)
    assert (
        parquet.sort_values(list(parquet.columns))
        .reset_index(drop=True)
        .equals(exported.sort_values(list(exported.columns)).reset_index(drop=True))
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == ["released.csv", "released.parquet"]
