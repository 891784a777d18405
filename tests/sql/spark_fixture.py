"""The SQL tests' datasets on Spark: the same rows as their DuckDB file, written to Parquet by DuckDB
(``COPY … TO 'x.parquet'``), and the same policy with ``backend = "spark"`` and ``sources`` in place of
the DuckDB ``path``. A table the policy declares but the file lacks gets a source that is not Parquet,
so that, as on DuckDB, an engine query on it fails.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import tomli_w

from proxy.backends.spark import SparkBackend
from proxy.config import DatasetPolicy, parse_config

# Spark's queries take seconds on a loaded 2-core CI machine (tens of them under a parallel bench);
# the tests are about answers and prices, not speed: no statement of theirs may time out
TIMEOUT_MS = 600_000


def parquet_tables(duckdb_path: Path, directory: Path) -> dict[str, str]:
    """Every table of the DuckDB file as ``<directory>/<table>.parquet``; table → file name."""
    directory.mkdir(parents=True, exist_ok=True)
    files = {}
    with duckdb.connect(str(duckdb_path), read_only=True) as connection:
        names = connection.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall()
        for (name,) in names:
            target = directory / f"{name}.parquet"
            connection.execute(f"COPY {name} TO '{target}' (FORMAT parquet)")
            files[name] = target.name
    return files


def spark_policy(
    policy: str, location: str, *, name: str, duckdb_path: Path, directory: Path
) -> DatasetPolicy:
    """``policy`` (a DuckDB dataset ``name`` whose ``location`` line is its ``path``) on Spark."""
    sources = parquet_tables(duckdb_path, directory)
    dataset = parse_config(policy, path=directory / "veil.toml").dataset(name)
    assert dataset is not None
    for table in dataset.tables:
        if table not in sources:
            broken = directory / f"{table}.not-parquet"
            broken.write_text("not a Parquet file\n")
            sources[table] = broken.name
    text = policy.replace(location, f'backend = "spark"\nstatement_timeout_ms = {TIMEOUT_MS}\n', 1)
    text += "\n" + tomli_w.dumps({"datasets": {name: {"sources": sources}}})
    spark = parse_config(text, path=directory / "veil.toml").dataset(name)
    assert spark is not None and spark.backend == "spark"
    return spark


def open_spark(dataset: DatasetPolicy) -> SparkBackend:
    return SparkBackend(
        master=dataset.spark_master,
        remote=dataset.spark_remote,
        sources=dataset.sources,
        schema=dataset.schema,
        statement_timeout_ms=dataset.statement_timeout_ms,
    )
