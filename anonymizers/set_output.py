"""Writing a release whose cells are *sets* of values (``veil materialize diversity``), so that it stays
queryable: a list column where the format has one, JSON arrays where it has not.

| target | a cell holds |
|---|---|
| CSV | a JSON array as text: ``["Sales","Tech-support"]`` |
| Parquet, a DuckDB table | ``VARCHAR[]`` |
| a PostgreSQL table | ``text[]`` |

Why JSON text first: a release has millions of rows but few distinct sets per attribute, so each column
is built as a pandas categorical of JSON strings (one string per distinct set, one small code per row);
the engine turns the JSON into its list type while it writes, so no per-row Python list is ever made.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import duckdb
import numpy as np
import pandas as pd
from sqlglot import exp

from anonymizers.output import OutputTarget, write_query, write_relation
from anonymizers.source import TableSource, quoted_column, quoted_table

_SETS = "veil_published_sets"


def set_column(published: np.ndarray, domain: Sequence[str]) -> pd.Categorical:
    """Rows of value codes (N × η, each row one record's published set) → one JSON array per row, as a
    categorical: the distinct sets are encoded once."""
    distinct, index = np.unique(np.sort(published, axis=1), axis=0, return_inverse=True)
    texts = [json.dumps([domain[code] for code in row], ensure_ascii=False) for row in distinct]
    return pd.Categorical.from_codes(np.asarray(index).reshape(-1), categories=pd.Index(texts, dtype=object))


def write_sets(
    columns: Mapping[str, pd.Categorical],
    target: OutputTarget,
    *,
    source: TableSource,
    replace: bool = False,
) -> None:
    """Write the release: every column a set column, in the order given."""
    frame = pd.DataFrame(dict(columns))
    if target.kind == "table":
        source.register(_SETS, frame)
        try:
            write_query(source, _as_lists(list(columns), source.dialect), target, replace=replace)
        finally:
            source.unregister(_SETS)
        return
    with duckdb.connect() as local:  # files are written by a local DuckDB, as every frame is
        local.register(_SETS, frame)
        relation = local.table(_SETS)
        if target.kind == "parquet":
            relation = local.sql(_as_lists(list(columns), "duckdb").sql(dialect="duckdb"))
        write_relation(relation, target, replace=replace)


def _as_lists(names: list[str], dialect: str) -> exp.Select:
    """``SELECT <each JSON column as the engine's list type> FROM the registered frame``."""
    items = []
    for name in names:
        # via text: a categorical arrives in DuckDB as an ENUM, which CAST(… AS JSON) would quote, not parse
        json_value = exp.cast(exp.cast(quoted_column(name), "TEXT"), "JSON")
        if dialect == "postgres":
            elements = exp.select(exp.func("json_array_elements_text", json_value))
            value: exp.Expression = exp.Array(expressions=[elements])
        else:
            value = exp.cast(json_value, exp.DataType.build("ARRAY<VARCHAR>", dialect="duckdb"))
        items.append(value.as_(name, quoted=True))
    return exp.select(*items).from_(quoted_table(_SETS))
