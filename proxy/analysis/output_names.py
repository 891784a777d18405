"""The column names PostgreSQL gives select items, so clients see the names they would from a server."""

from __future__ import annotations

from sqlglot import exp

_NAMED: dict[type[exp.Expression], str] = {
    exp.CurrentVersion: "version",
    exp.CurrentUser: "current_user",
    exp.CurrentDatabase: "current_database",
    exp.CurrentSchema: "current_schema",
    exp.VariancePop: "var_pop",
    exp.Variance: "variance",
    exp.StddevPop: "stddev_pop",
    exp.Stddev: "stddev",
    exp.StddevSamp: "stddev_samp",
}


def output_name(item: exp.Expression) -> str:
    """``count`` for COUNT(*), the column for a column, the type for a cast, ``?column?`` otherwise."""
    if isinstance(item, exp.Alias):
        return item.alias
    if isinstance(item, exp.Column):
        return item.name
    if type(item) in _NAMED:
        return _NAMED[type(item)]
    if isinstance(item, exp.WithinGroup):
        return item.this.sql_name().lower()
    if isinstance(item, exp.Cast):
        return item.to.sql(dialect="postgres").lower()
    if isinstance(item, exp.Func):
        return item.sql_name().lower()
    return "?column?"
