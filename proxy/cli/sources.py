"""What ``veil materialize`` and ``veil risk`` share: where the original table is read from (a dataset's
table or a CSV/Parquet file), engine failures as one line, the progress bar, and the simulated attack
with the commands' attack options."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
import duckdb
import numpy as np
import pandas as pd
import psycopg

from anonymizers.errors import AnonymizationError
from anonymizers.hierarchy import Hierarchy, hierarchy_from_spec
from anonymizers.risk.attack import AttackResult, simulate_attack
from anonymizers.risk.pipeline import Pipeline
from anonymizers.source import SparkEngineError, TableSource
from proxy.cli.anonymize_options import hierarchy_specs, pipeline_from_steps
from proxy.cli.support import config_option, declared_dataset
from proxy.config import POSTGRES, SPARK, DatasetPolicy, load_config

ROW_ID = "_veil_row_id"  # the hidden link of a released row to its original (never written out)


def engine_errors(function: Callable[..., Any]) -> Callable[..., Any]:
    """A failure inside DuckDB, PostgreSQL or Spark (a type the engine cannot cast, a lost connection) becomes
    one line with the engine's first line: these commands run on the data holder's side, where the
    engine's words about their own data are theirs to read."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except (duckdb.Error, psycopg.Error, SparkEngineError) as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise AnonymizationError(
                f"the database engine failed: {first}",
                hint="check the table, its column types and the connection",
            ) from None

    wrapper.__name__ = function.__name__
    wrapper.__doc__ = function.__doc__
    return wrapper


def source_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """Where the original table is: a dataset's table in the policy, or a CSV/Parquet file."""
    options = [
        config_option,
        click.option("--dataset", help="Dataset of the policy that holds --table."),
        click.option(
            "--table",
            help="Table to read (in the dataset's DuckDB file or PostgreSQL schema, or a Spark table).",
        ),
        click.option(
            "--input",
            "input_path",
            type=click.Path(path_type=Path, dir_okay=False, exists=True),
            help="Read a CSV or Parquet file instead of a dataset's table.",
        ),
        click.option("--delimiter", help="CSV field separator (default: guessed; ARX files use ';')."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


@contextmanager
def open_source(
    config_path: Path, dataset: str | None, table: str | None, input_path: Path | None, delimiter: str | None
) -> Iterator[TableSource]:
    """The original table, closed when the command ends."""
    if input_path is not None:
        if dataset or table:
            raise AnonymizationError("give either --input or --dataset/--table, not both")
        opened = (
            TableSource.parquet(input_path)
            if input_path.suffix.lower() == ".parquet"
            else TableSource.csv(input_path, delimiter=unescape(delimiter))
        )
    else:
        opened = dataset_table(config_path, dataset, table)
    with opened as source:
        yield source


def dataset_table(config_path: Path, dataset: str | None, table: str | None) -> TableSource:
    if not dataset or not table:
        raise AnonymizationError(
            "name the original table with --dataset and --table, or a file with --input",
            hint="e.g. --dataset demo --table patients, or --input adult.csv --delimiter ';'",
        )
    policy = declared_dataset(load_config(config_path), dataset)
    if policy.backend == POSTGRES:
        return TableSource.postgres(policy.resolve_dsn(os.environ), table, schema=policy.schema)
    if policy.backend == SPARK:
        return spark_table_source(policy, table)
    assert policy.path is not None
    return TableSource.duckdb_file(policy.path, table)


def spark_table_source(policy: DatasetPolicy, table: str) -> TableSource:
    """A Spark dataset's table as a view in a Spark session with the dataset's settings — local
    (``spark_master``) or Spark Connect (``spark_remote``) — over its ``sources`` files, or from the
    catalog's ``schema`` when it has none: the frequency queries run in Spark, where the data are."""
    from proxy.backends.spark import table_session  # pyspark is imported only for a Spark dataset

    name = table.lower()
    session = table_session(
        master=policy.spark_master,
        remote=policy.spark_remote,
        table=name,
        source=policy.sources.get(name),
        schema=policy.schema,
    )
    return TableSource.spark(session, name, description=f"{policy.name}.{name} (Spark)")


def read_released(text: str, config_path: Path, dataset: str | None, delimiter: str | None) -> pd.DataFrame:
    """A released table read whole: ``PATH.csv``, ``PATH.parquet``, or ``db:TABLE`` in ``dataset``."""
    if text.startswith("db:"):
        with dataset_table(config_path, dataset, text[3:]) as released:
            return released.dataframe(released.column_names())
    path = Path(text)
    if not path.exists():
        raise AnonymizationError(f"released table {path} does not exist")
    opened = (
        TableSource.parquet(path)
        if path.suffix.lower() == ".parquet"
        else TableSource.csv(path, delimiter=unescape(delimiter))
    )
    with opened as released:
        return released.dataframe(released.column_names())


def unescape(delimiter: str | None) -> str | None:
    """``--delimiter '\\t'`` means a tab, as users type it in a shell."""
    return None if delimiter is None else delimiter.encode().decode("unicode_escape")


def progress_callback(
    label: str, *, quiet: bool, unit: str | None = None
) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    """A progress bar on stderr fed by ``(done, total)`` calls (with the rate in ``unit``/s), and a
    function that closes it. Quiet under --json and when stderr is not a terminal: scripts and CI logs
    get the result, not a stream of bar redraws."""
    state: dict[str, Any] = {"start": time.monotonic()}
    if quiet or not sys.stderr.isatty():
        return (lambda done, total: None), (lambda: None)

    def update(done: int, total: int) -> None:
        bar = state.get("bar")
        if bar is None:
            bar = click.progressbar(
                length=total, label=label, file=sys.stderr, show_pos=True, item_show_func=lambda rate: rate
            )
            bar.__enter__()
            state["bar"] = bar
        rate = done / max(time.monotonic() - state["start"], 1e-9)
        bar.update(
            done - bar.pos, current_item=f"{rate:,.{0 if rate >= 100 else 2}f} {unit}/s" if unit else None
        )

    def close() -> None:
        if "bar" in state:
            state["bar"].__exit__(None, None, None)

    return update, close


@contextmanager
def progress_bar(label: str, *, quiet: bool, unit: str | None = None) -> Iterator[Callable[[int, int], None]]:
    """:func:`progress_callback` as a ``with`` block: the bar closes however the work ends."""
    update, close = progress_callback(label, quiet=quiet, unit=unit)
    try:
        yield update
    finally:
        close()


def source_arguments(options: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(options[k] for k in ("config_path", "dataset", "table", "input_path", "delimiter"))


def attack_pipeline(frame: pd.DataFrame, qis: list[str], options: dict[str, Any]) -> Pipeline:
    specs = hierarchy_specs(options["hierarchies"], qis)
    cache: dict[tuple[str, bool], Hierarchy] = {}

    def hierarchy_for(column: str, grid: Sequence[object] | None) -> Hierarchy:
        key = (column, grid is None)
        if key not in cache:
            values = grid if grid is not None else sorted(frame[column].dropna().unique().tolist())
            cache[key] = hierarchy_from_spec(column, specs.get(column), list(values))
        return cache[key]

    steps = list(options["steps"])
    stepped = {text.partition("=")[0].strip() for text in steps}
    steps += [f"{column}=generalize:0" for column in qis if column not in stepped]  # match by ancestry
    return pipeline_from_steps(steps, qis, hierarchy_for, sample_rate=options.get("sample_rate"))


def run_attack(
    original: pd.DataFrame,
    released: pd.DataFrame,
    row_ids: np.ndarray,
    pipeline: Pipeline,
    options: dict[str, Any],
    *,
    show_progress: bool = True,
) -> AttackResult:
    """Algorithm 2 with the command's attack options; a bar of records scored unless a search's bar of
    candidates is showing."""
    with progress_bar(
        "simulated attack", quiet=options["as_json"] or not show_progress, unit="records"
    ) as update:
        return simulate_attack(
            original,
            released.assign(**{ROW_ID: row_ids}),
            pipeline,
            row_id=ROW_ID,
            sensitive=options["sensitive"],
            threshold=options["threshold"],
            low_threshold=options["low_threshold"],
            outlier_k=options["outlier_k"],
            progress=update,
        )
