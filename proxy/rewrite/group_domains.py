"""The query that derives the public key domain of a GROUP BY expression — from the policy only.

``FLOOR(age / 10) * 10`` over an integer column with bounds 0..100 has the keys the expression takes
on 0, 1, …, 100; over a public column, the keys it takes on the declared values. The query runs in
the dataset's own engine (so the expression means there what it will mean in the real query — integer
division differs between engines) but over a VALUES list, never over a table.

>>> domain_query(key, table=t, dialect="duckdb").sql("duckdb")
'SELECT DISTINCT TRY(FLOOR(age / 10) * 10) AS _dp_value FROM (VALUES (0), (1), …) AS _dp_domain(age)'
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from proxy.analysis.moment_domains import moment_days
from proxy.analysis.shape import GroupKey
from proxy.config import ColumnPolicy, TablePolicy
from proxy.rewrite.safe_predicates import error_free


def source_values(column: ColumnPolicy) -> list[Any]:
    """The values a key expression is evaluated over: the column's public values, every day between a
    date column's bounds (every midnight, for a timestamp column), or every integer between an integer
    column's."""
    if column.values is not None:
        return list(column.values)
    days = moment_days(column)
    if days:
        return list(days)
    assert column.lower is not None and column.upper is not None
    return list(range(int(column.lower), int(column.upper) + 1))  # type: ignore[arg-type]


def domain_query(
    key: GroupKey, *, table: TablePolicy, dialect: str, values: list[Any] | None = None
) -> exp.Select:
    """``values``: the source column's values when they come from elsewhere (a lookup table)."""
    source = values if values is not None else source_values(key.source)
    rows = [exp.Tuple(expressions=[exp.convert(value)]) for value in source]
    domain = exp.Values(
        expressions=rows,
        alias=exp.TableAlias(
            this=exp.to_identifier("_dp_domain"), columns=[exp.to_identifier(key.source.name)]
        ),
    )
    value = error_free(key.expression, table=table, dialect=dialect).as_("_dp_value")
    return exp.select(value, copy=False).distinct(copy=False).from_(domain, copy=False)


def lookup_values_query(table: str, column: str) -> exp.Select:
    """The distinct values of a public lookup table's column (public data: read as it is)."""
    return exp.select(exp.column(column)).distinct().from_(table)


def duplicate_keys_query(table: str, key: str) -> exp.Select:
    """How many rows of a lookup table repeat a key value; 0 when the key is unique."""
    duplicates = exp.Sub(
        this=exp.Count(this=exp.Star()),
        expression=exp.Count(this=exp.Distinct(expressions=[exp.column(key)])),
    )
    return exp.select(duplicates).from_(table)
