"""The privacy annotations that analysts read in their tools (``\\d+ visits``, DBeaver, SQLAlchemy).

The shadow database stores them as ``COMMENT ON TABLE`` / ``COMMENT ON COLUMN``, so every client that
shows PostgreSQL comments shows what the policy says: who a row belongs to, how many rows per person
count, which columns can be grouped by (with their public values) and the bounds of the others. Only the
policy is read here — never the data.
"""

from __future__ import annotations

from proxy.config import ColumnPolicy, ColumnType, TablePolicy

MAX_LISTED_VALUES = 20  # a longer public domain is summarized, so a comment stays one readable line


def table_comment(table: TablePolicy) -> str:
    """What a table answers, and the privacy unit and max_contributions of a private one."""
    if table.public:
        key = f"; key: {table.key}" if table.key else ""
        return f"public lookup table: its rows are public and are read exactly{key}"
    if table.privacy_unit is None:
        unit = "privacy unit: row (each row is a different person)"
    else:
        unit = f"privacy unit: {table.privacy_unit}; {_contributions(table)}"
    return f"private table: answers differentially private aggregates only; {unit}"


def _contributions(table: TablePolicy) -> str:
    if table.auto_contributions:
        hint = f", hint {table.contribution_hint}" if table.contribution_hint else ""
        return f"max_contributions: auto (each query chooses it with DP, at most {table.max_contributions}{hint})"
    plural = "row" if table.max_contributions == 1 else "rows"
    return f"max_contributions: {table.max_contributions} {plural} per person"


def column_comment(table: TablePolicy, column: ColumnPolicy) -> str:
    """Whether a column may be grouped by (its public values) or only aggregated (its bounds)."""
    if table.public:
        return "public lookup column: the join key" if column.name == table.key else "public lookup column"
    if column.public:
        return f"public: may be grouped by; values: {_values(column)}"
    if column.name == table.privacy_unit:
        return (
            "privacy unit: identifies the person; private: aggregate only (COUNT(DISTINCT …) counts people)"
        )
    if column.has_bounds and column.type is ColumnType.DATE:
        return (
            f"private: aggregate only (COUNT, MIN, MAX, percentiles); dates are clamped to "
            f"[{column.lower}, {column.upper}]; may be grouped by, as each day of that range"
        )
    if column.has_bounds and column.type is ColumnType.TIMESTAMP:
        return (
            f"private: aggregate only (COUNT, MIN, MAX, percentiles); timestamps are clamped to "
            f"[{column.lower}, {column.upper}]; may be grouped by its day, month or year (date_trunc, "
            "EXTRACT, CAST AS DATE) over that range"
        )
    if column.has_bounds:
        return f"private: aggregate only; values are clamped to [{column.lower:g}, {column.upper:g}]"
    if column.type.is_numeric:
        return "private: aggregate only; no lower/upper bounds, so COUNT only"
    return "private: aggregate only (COUNT) or filter on it in WHERE"


def _values(column: ColumnPolicy) -> str:
    values = column.values or ()
    listed = ", ".join(str(value) for value in values[:MAX_LISTED_VALUES])
    return listed if len(values) <= MAX_LISTED_VALUES else f"{listed}, … ({len(values)} values)"
