"""Writing an anonymized table: CSV, Parquet, or a table in the backend (DuckDB file or PostgreSQL; a
Spark dataset's tables are files the policy names, so a Spark source writes files only).

Why two entry points: a global recoding is a pure function of each row's QI values, so the engine can
apply it itself — join the table with registered hierarchy mapping tables (leaf → label), drop the
suppressed classes with an anti-join — and the rows never pass through Python
(:func:`write_recoded`); Mondrian and the combined de-identification produce rows in Python, which
:func:`write_frame` writes.

Never written half: files are written to a temporary name in the same directory and renamed
(``os.replace``, atomic on one filesystem); tables are created under a temporary name and renamed in the
same transaction. An existing file or table is refused unless ``replace=True``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import duckdb
import numpy as np
import pandas as pd
from sqlglot import exp

from anonymizers.errors import AnonymizationError
from anonymizers.global_recoding import GlobalRecodingResult
from anonymizers.hierarchy import Hierarchy
from anonymizers.source import TableSource, as_text, quoted_column, quoted_table

TEMPORARY_SUFFIX = "__veil_partial"
_ROW_ALIAS = "veil_t"
_SUPPRESSED = "veil_suppressed"
_FRAME = "veil_frame"


@dataclass(frozen=True)
class OutputTarget:
    """Where a result goes: a ``.csv``/``.parquet`` file, or ``db:[schema.]table`` in the source's
    database."""

    kind: Literal["csv", "parquet", "table"]
    path: Path | None = None
    table: str | None = None
    schema: str | None = None

    @classmethod
    def parse(cls, text: str) -> OutputTarget:
        if text.startswith("db:"):
            name = text.removeprefix("db:")
            schema, _, table = name.rpartition(".")
            if not table:
                raise AnonymizationError(
                    f"no table name in {text!r}", hint="write db:table or db:schema.table"
                )
            return cls("table", table=table, schema=schema or None)
        path = Path(text)
        suffix = path.suffix.lower()
        if suffix == ".csv":
            return cls("csv", path=path)
        if suffix == ".parquet":
            return cls("parquet", path=path)
        raise AnonymizationError(
            f"cannot tell the output format of {text!r}",
            hint="end the path with .csv or .parquet, or write db:table for a table in the database",
        )


def recoding_frames(
    result: GlobalRecodingResult, hierarchies: Sequence[Hierarchy]
) -> dict[str, pd.DataFrame]:
    """The lookup tables of a recoding: per QI leaf → (label, label code) at the chosen level, and the
    label codes of the suppressed classes."""
    frames = {
        f"veil_map_{d}": pd.DataFrame(
            {
                "leaf": list(h.leaves),
                "label": [h.label_names[level][c] for c in h.codes[level]],
                "code": h.codes[level].astype(np.int64),
            }
        )
        for d, (h, level) in enumerate(zip(hierarchies, result.levels, strict=True))
    }
    suppressed = result.classes.labels[result.suppressed]
    frames[_SUPPRESSED] = pd.DataFrame(
        {f"c{d}": suppressed[:, d].astype(np.int64) for d in range(len(hierarchies))}
    )
    return frames


def recoding_query(source: TableSource, result: GlobalRecodingResult, columns: Sequence[str]) -> exp.Select:
    """``SELECT`` the ``columns`` with each QI replaced by its label, suppressed classes removed."""
    query = exp.select().from_(exp.alias_(source.table, _ROW_ALIAS, table=True))
    for d, qi in enumerate(result.qi):
        mapping = f"veil_map_{d}"
        on = exp.EQ(
            this=as_text(quoted_column(qi, _ROW_ALIAS)),
            expression=exp.column("leaf", table=mapping, quoted=True),
        )
        query = query.join(exp.table_(mapping, quoted=True), on=on, join_type="inner")
    if result.suppressed.any():
        matches = [
            exp.EQ(
                this=exp.column(f"c{d}", table=_SUPPRESSED, quoted=True),
                expression=exp.column("code", table=f"veil_map_{d}", quoted=True),
            )
            for d in range(len(result.qi))
        ]
        query = query.join(exp.table_(_SUPPRESSED, quoted=True), on=exp.and_(*matches), join_type="left")
        query = query.where(
            exp.Is(this=exp.column("c0", table=_SUPPRESSED, quoted=True), expression=exp.Null())
        )
    selected = []
    for column in columns:
        if column in result.qi:
            mapping = f"veil_map_{result.qi.index(column)}"
            selected.append(exp.column("label", table=mapping, quoted=True).as_(column, quoted=True))
        else:
            selected.append(quoted_column(column, _ROW_ALIAS).as_(column, quoted=True))
    return query.select(*selected)


def write_recoded(
    source: TableSource,
    result: GlobalRecodingResult,
    hierarchies: Sequence[Hierarchy],
    target: OutputTarget,
    *,
    columns: Sequence[str] | None = None,
    replace: bool = False,
) -> None:
    """Apply a global recoding in the engine and write the released table (``columns`` default to all
    of the source's, in order; QIs replaced by their labels; suppressed records left out)."""
    chosen = list(columns) if columns is not None else source.column_names()
    source.require_columns(chosen)
    frames = recoding_frames(result, hierarchies)
    for name, frame in frames.items():
        source.register(name, frame)
    try:
        write_query(source, recoding_query(source, result, chosen), target, replace=replace)
    finally:
        for name in frames:
            source.unregister(name)


def write_frame(
    frame: pd.DataFrame,
    target: OutputTarget,
    *,
    source: TableSource | None = None,
    replace: bool = False,
) -> None:
    """Write rows made in Python; a ``table`` target goes into ``source``'s database."""
    if target.kind == "table":
        if source is None:
            raise AnonymizationError("writing a table needs the database of the source table")
        source.register(_FRAME, frame)
        try:
            write_query(source, exp.select(exp.Star()).from_(quoted_table(_FRAME)), target, replace=replace)
        finally:
            source.unregister(_FRAME)
        return
    with duckdb.connect() as local:
        local.register(_FRAME, frame)
        write_relation(local.table(_FRAME), target, replace=replace)


def write_relation(relation: duckdb.DuckDBPyRelation, target: OutputTarget, *, replace: bool) -> None:
    """A relation of a local DuckDB connection to a CSV or Parquet file, atomically."""
    assert target.path is not None

    def write(path: Path) -> None:
        if target.kind == "csv":
            relation.write_csv(str(path), header=True)
        else:
            relation.write_parquet(str(path))

    _write_file(target.path, replace, write)


def write_query(source: TableSource, query: exp.Select, target: OutputTarget, *, replace: bool) -> None:
    """Write a query's result over ``source`` to ``target`` from the engine (rows never reach Python):
    a file through the engine's COPY, a table through CREATE TABLE … AS; nothing is left half-written."""
    if target.kind == "table":
        _write_table(source, query, target, replace=replace)
        return
    assert target.path is not None
    kind = target.kind
    _write_file(target.path, replace, lambda path: source.write_file(query, path, kind))


def ensure_writable(target: OutputTarget, source: TableSource, *, replace: bool) -> None:
    """Refuse an output that exists (without ``replace``) or cannot be made, before the long work that
    would produce it rather than after."""
    if target.kind == "table":
        _check_table(source, target, replace)
    else:
        assert target.path is not None
        _check_file(target.path, replace)


def _check_file(path: Path, replace: bool) -> None:
    if path.exists() and not replace:
        raise AnonymizationError(f"{path} already exists", hint="choose another path, or pass --replace")
    if not path.parent.is_dir():
        raise AnonymizationError(f"directory {path.parent} does not exist")


def _check_table(source: TableSource, target: OutputTarget, replace: bool) -> None:
    if source.in_memory:
        raise AnonymizationError(
            "a CSV or Parquet input has no database to write a table into",
            hint="write to a .csv or .parquet path instead",
        )
    if source.dialect == "spark":
        raise AnonymizationError(
            "Veil writes no tables into a Spark dataset (its tables are files the policy names)",
            hint="write --out PATH.parquet, and add it to the dataset's sources to query it",
        )
    assert target.table is not None
    if not replace and source.table_exists(target.table, _schema(source, target)):
        raise AnonymizationError(
            f"table {target.table} already exists", hint="choose another name, or pass --replace"
        )


def _schema(source: TableSource, target: OutputTarget) -> str | None:
    return target.schema or source.table.db or None


def _write_file(path: Path, replace: bool, write: Callable[[Path], None]) -> None:
    """Write through ``write(temporary_path)``, then rename over ``path``."""
    _check_file(path, replace)
    partial = path.with_name(f".{path.name}{TEMPORARY_SUFFIX}")
    try:
        write(partial)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def _write_table(source: TableSource, query: exp.Select, target: OutputTarget, *, replace: bool) -> None:
    _check_table(source, target, replace)
    assert target.table is not None
    schema = _schema(source, target)
    final = quoted_table(target.table, schema)
    partial = target.table + TEMPORARY_SUFFIX
    statements: list[exp.Expression] = [
        exp.Drop(tables=[quoted_table(partial, schema)], kind="TABLE", exists=True),
        exp.Create(this=quoted_table(partial, schema), kind="TABLE", expression=query),
        exp.Drop(tables=[final], kind="TABLE", exists=True),
        exp.Alter(
            this=quoted_table(partial, schema),
            kind="TABLE",
            actions=[exp.AlterRename(this=quoted_table(target.table))],
        ),
    ]
    source.run(statements)
