"""What ``veil policy validate`` and ``veil policy show`` report.

:func:`check_policy`: is everything the policy file names there? The file itself is validated by
``load_config``; this opens what it points to, the way ``veil serve`` would, and reports one result
per dataset and one for the ledger instead of stopping at the first problem: the dataset's engine
(the DuckDB file, or the PostgreSQL server and schema, with a short connect timeout), every declared
table and column in it, and the ledger.

:func:`effective_policy`: the policy with every default filled in, as plain data — and without a
secret: connection strings lose any password, ``dsn_env`` stays the variable's name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from budget.errors import BudgetError
from proxy.backends.base import Backend
from proxy.config import POSTGRES, SPARK, DatasetPolicy, TablePolicy, VeilConfig
from proxy.errors import BackendUnavailableError, ProxyError
from proxy.ledger_access import describe_ledger, mask_dsn, open_ledger

CONNECT_TIMEOUT_SECONDS = 5
_COLUMNS_QUERY = (
    "SELECT lower(table_name), lower(column_name) FROM information_schema.columns"
    " WHERE table_schema = current_schema() AND table_catalog = current_database()"
)


@dataclass(frozen=True)
class Check:
    """One line of the report: ``subject`` ("dataset demo", "ledger") is fine or has a problem."""

    subject: str
    ok: bool
    detail: str
    hint: str | None = None


def check_policy(config: VeilConfig, environ: Mapping[str, str]) -> list[Check]:
    """Every dataset of the policy, then its ledger; never raises for a problem it can report."""
    return [
        *(check_dataset(dataset, environ) for dataset in config.datasets.values()),
        check_ledger(config, environ),
    ]


def check_dataset(dataset: DatasetPolicy, environ: Mapping[str, str]) -> Check:
    subject = f"dataset {dataset.name}"
    if dataset.backend == SPARK:
        return _check_spark_sources(dataset)
    if dataset.backend != POSTGRES and (dataset.path is None or not dataset.path.is_file()):
        return Check(
            subject,
            False,
            f"the DuckDB file {dataset.path} does not exist",
            hint="fix the dataset's path, or create the file with `veil import`",
        )
    try:
        backend, where = _open(dataset, environ)
    except (ProxyError, BudgetError) as error:
        return Check(subject, False, _reason(error), hint=error.hint)
    try:
        _, rows = backend.execute(_COLUMNS_QUERY)
    except ProxyError as error:
        return Check(subject, False, _reason(error), hint=error.hint)
    finally:
        backend.close()
    present: dict[str, set[str]] = {}
    for table, column in rows:
        present.setdefault(str(table), set()).add(str(column))
    missing_tables = [name for name in dataset.tables if name not in present]
    missing_columns = [
        f"{name}.{column}"
        for name, table in dataset.tables.items()
        if name in present
        for column in table.columns
        if column not in present[name]
    ]
    if missing_tables or missing_columns:
        problems = []
        if missing_tables:
            problems.append(f"tables not found: {', '.join(missing_tables)}")
        if missing_columns:
            problems.append(f"columns not found: {', '.join(missing_columns)}")
        return Check(
            subject,
            False,
            f"{where}: {'; '.join(problems)}",
            hint="import the data (veil import), or fix the names in the policy file",
        )
    columns = sum(len(table.columns) for table in dataset.tables.values())
    return Check(
        subject, True, f"{where}: {_count(len(dataset.tables), 'table')}, {_count(columns, 'column')}"
    )


def _check_spark_sources(dataset: DatasetPolicy) -> Check:
    """Without starting a JVM (seconds): every local source exists; URLs and catalog tables are Spark's
    to find when `veil serve` starts."""
    subject = f"dataset {dataset.name}"
    local = {
        name: source.location for name, source in dataset.sources.items() if "://" not in source.location
    }
    missing = [f"{name} ({location})" for name, location in local.items() if not Path(location).exists()]
    if missing:
        return Check(
            subject,
            False,
            f"spark: sources not found: {', '.join(missing)}",
            hint="fix the paths in the dataset's sources, or write the files (veil import registers them)",
        )
    unchecked = len(dataset.tables) - len([name for name in dataset.tables if name in local])
    where = f"spark {dataset.spark_remote or dataset.spark_master}"
    note = f", {_count(unchecked, 'table')} left for Spark to find" if unchecked else ""
    return Check(subject, True, f"{where}: {_count(len(local), 'local source')} present{note}")


def check_ledger(config: VeilConfig, environ: Mapping[str, str]) -> Check:
    where = describe_ledger(config.ledger)
    try:
        ledger = open_ledger(config, environ)
    except (ProxyError, BudgetError) as error:
        return Check("ledger", False, _reason(error), hint=error.hint)
    try:
        analysts = len(ledger.list_analysts())
        inconsistencies = ledger.verify()
    except BudgetError as error:
        return Check("ledger", False, _reason(error), hint=error.hint)
    finally:
        ledger.close()
    if inconsistencies:
        return Check(
            "ledger",
            False,
            f"{where}: {_count(len(inconsistencies), 'running total')} disagree with the spends",
            hint="; ".join(inconsistencies[:3]),
        )
    return Check("ledger", True, f"{where}: {_count(analysts, 'analyst')}, running totals consistent")


def _open(dataset: DatasetPolicy, environ: Mapping[str, str]) -> tuple[Backend, str]:
    """The dataset's engine, as ``veil serve`` opens it (but one connection, and a short timeout),
    and where it is, for the report (never a password)."""
    if dataset.backend == POSTGRES:
        import psycopg
        from psycopg.conninfo import make_conninfo

        from proxy.backends.postgres import PostgresBackend

        try:
            dsn = make_conninfo(dataset.resolve_dsn(environ), connect_timeout=CONNECT_TIMEOUT_SECONDS)
        except psycopg.Error:
            raise BackendUnavailableError(
                f"the connection string in {dataset.dsn_env} is not valid",
                hint="use a libpq string (host=… dbname=…) or a postgresql:// URL",
            ) from None
        backend = PostgresBackend(dsn, schema=dataset.schema, pool_size=1)
        return backend, f"postgres {backend.where}, schema {dataset.schema}"
    from proxy.backends.duckdb import DuckDBBackend

    assert dataset.path is not None
    return DuckDBBackend(dataset.path), f"duckdb {dataset.path}"


def _reason(error: ProxyError | BudgetError) -> str:
    detail = getattr(error, "detail", None)
    text = (
        f"{error.message}: {detail}"
        if detail and isinstance(error, BackendUnavailableError)
        else error.message
    )
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


# --- veil policy show ---------------------------------------------------------------------------------


def effective_policy(config: VeilConfig) -> dict[str, Any]:
    ledger = config.ledger
    return {
        "path": config.path,
        "server": dataclasses.asdict(config.server),
        "ledger": {
            "store": "postgres" if ledger.shared else "sqlite",
            "path": ledger.path,
            "dsn": None if ledger.dsn is None else mask_dsn(ledger.dsn),
            "dsn_env": ledger.dsn_env,
            "schema": ledger.schema if ledger.shared else None,
        },
        "datasets": {name: _dataset_record(dataset) for name, dataset in config.datasets.items()},
    }


def _dataset_record(dataset: DatasetPolicy) -> dict[str, Any]:
    postgres = dataset.backend == POSTGRES
    return {
        "backend": dataset.backend,
        "path": dataset.path,
        "dsn": None if dataset.dsn is None else mask_dsn(dataset.dsn),
        "dsn_env": dataset.dsn_env,
        "schema": dataset.schema if postgres or dataset.backend == SPARK else None,
        "spark_master": dataset.spark_master,
        "spark_remote": dataset.spark_remote,
        "sources": {name: source.location for name, source in dataset.sources.items()} or None,
        "pool_size": dataset.pool_size if postgres else None,
        "statement_timeout_ms": dataset.statement_timeout_ms,
        "default_epsilon": dataset.default_epsilon,
        "max_epsilon": dataset.max_epsilon,
        "min_epsilon": dataset.min_epsilon,
        "response_deadline_ms": dataset.response_deadline_ms,
        "cap_visibility": dataset.cap_visibility,
        "limits": dataclasses.asdict(dataset.limits),
        "accountant": dataset.accountant,
        "answer_cache": dataset.answer_cache,
        "remember_bounds": dataset.remember_bounds,
        "tables": {name: _table_record(table) for name, table in dataset.tables.items()},
    }


def _table_record(table: TablePolicy) -> dict[str, Any]:
    columns = {
        name: {
            "type": column.type.value,
            "public": column.public,
            "lower": column.lower,
            "upper": column.upper,
            "values": None if column.values is None else list(column.values),
        }
        for name, column in table.columns.items()
    }
    if table.public:
        return {"public": True, "key": table.key, "columns": columns}
    return {
        "public": False,
        "privacy_unit": table.privacy_unit or "row",
        "max_contributions": "auto" if table.auto_contributions else table.max_contributions,
        "contribution_cap": table.max_contributions if table.auto_contributions else None,
        "contribution_hint": table.contribution_hint,
        "columns": columns,
    }
