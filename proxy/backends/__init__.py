"""Database engines behind one small interface (``base.Backend``): a dialect, ``execute``, ``close``;
``interrupts.py`` lets a CancelRequest or the statement timeout stop a running ``execute``.

``open_backend`` picks the engine a dataset's policy names. The environment is passed in (for a
postgres dataset's ``dsn_env``) rather than read here, so this code never touches ``os.environ``.
"""

from __future__ import annotations

from collections.abc import Mapping

from proxy.backends.base import Backend
from proxy.config import DUCKDB, POSTGRES, SPARK, DatasetPolicy

DIALECTS = {DUCKDB: "duckdb", POSTGRES: "postgres", SPARK: "spark"}


def dialect_of(dataset: DatasetPolicy) -> str:
    """The sqlglot dialect to generate for a dataset, without opening its engine (``veil explain``)."""
    return DIALECTS[dataset.backend]


def open_backend(dataset: DatasetPolicy, *, environ: Mapping[str, str]) -> Backend:
    """The dataset's engine, opened: DuckDB on ``path``, a PostgreSQL pool on ``dsn``/``dsn_env``, or
    a Spark session (started in the background, once per process) over the tables' ``sources``,
    each stopping engine queries that outlive the dataset's ``statement_timeout_ms``.

    Raises ``BackendUnavailableError`` (or ``ConfigError``
    for an unset ``dsn_env``) with a message for the administrator when the engine cannot be reached
    at start-up."""
    if dataset.backend == POSTGRES:
        from proxy.backends.postgres import PostgresBackend

        return PostgresBackend(
            dataset.resolve_dsn(environ),
            schema=dataset.schema,
            pool_size=dataset.pool_size,
            statement_timeout_ms=dataset.statement_timeout_ms,
        )
    if dataset.backend == SPARK:
        from proxy.backends.spark import SparkBackend

        return SparkBackend(
            master=dataset.spark_master,
            remote=dataset.spark_remote,
            sources=dataset.sources,
            catalog_tables=tuple(name for name in dataset.tables if name not in dataset.sources),
            schema=dataset.schema,
            statement_timeout_ms=dataset.statement_timeout_ms,
        )
    from proxy.backends.duckdb import DuckDBBackend

    assert dataset.path is not None  # parse_config requires a path for every duckdb dataset
    return DuckDBBackend(dataset.path, statement_timeout_ms=dataset.statement_timeout_ms)
