"""The per-person subquery: ``FROM (SELECT unit, COUNT(*) AS n, SUM(x) AS s FROM t GROUP BY unit) p``.

Grouped by the privacy unit, the subquery has exactly one row per person, so it is itself a private
table whose rows are people (``privacy_unit = "row"``): the outer query is answered like any other,
and adding or removing a person adds or removes one row. The subquery's columns carry no declared
bounds — the outer aggregate clamps them explicitly (``AVG(veil_clamp(n, 0, 50))``) — because a
per-person total has no bound the policy could know.

Only what keeps "one row per person" true is allowed inside: one private table, an optional WHERE,
GROUP BY exactly the privacy unit, and plain aggregates of its columns.
"""

from __future__ import annotations

from types import MappingProxyType

from sqlglot import exp

from proxy.analysis.checks import check_predicate
from proxy.analysis.derived import DerivedSource
from proxy.config import ColumnPolicy, ColumnType, DatasetPolicy, TablePolicy
from proxy.errors import PolicyViolationError, UnknownColumnError, UnknownTableError

_INNER_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)
PATTERN = "SELECT unit, COUNT(*) AS n, SUM(col) AS s FROM table [WHERE …] GROUP BY unit"


def refuse(message: str) -> PolicyViolationError:
    return PolicyViolationError(message, hint=f"a subquery over private data must be per person: {PATTERN}")


def per_person_table(subquery: exp.Subquery, dataset: DatasetPolicy) -> tuple[TablePolicy, DerivedSource]:
    inner = subquery.this
    if not isinstance(inner, exp.Select):
        raise refuse("only a SELECT can be used as a subquery over private data")
    table = _inner_table(inner, dataset)
    if table.privacy_unit is None:
        raise refuse(f'table "{table.name}" has one person per row: query it directly')
    _check_grouped_by_unit(inner, table)
    for clause in ("having", "order", "limit", "offset", "distinct", "joins", "with", "with_", "qualify"):
        if inner.args.get(clause):
            raise refuse(f"{clause.upper()} is not allowed in a per-person subquery")
    columns, select = _columns(inner, table)
    name = subquery.alias_or_name or "_dp_per_person"
    derived = TablePolicy(name.lower(), None, 1, MappingProxyType(columns))
    return derived, DerivedSource(select, table)


def _inner_table(inner: exp.Select, dataset: DatasetPolicy) -> TablePolicy:
    source = inner.args.get("from_") or inner.args.get("from")
    if (
        source is None
        or not isinstance(source.this, exp.Table)
        or not isinstance(source.this.this, exp.Identifier)
    ):
        raise refuse("a per-person subquery reads one table")
    policy = dataset.table(source.this.name)
    if policy is None:
        raise UnknownTableError(f'relation "{source.this.name}" does not exist')
    return policy


def _check_grouped_by_unit(inner: exp.Select, table: TablePolicy) -> None:
    group = inner.args.get("group")
    items = list(group.expressions) if group is not None else []
    if len(items) != 1 or not isinstance(items[0], exp.Column) or items[0].name.lower() != table.privacy_unit:
        raise refuse(
            f'a subquery over "{table.name}" must GROUP BY its privacy unit "{table.privacy_unit}" alone'
        )


def _column(node: exp.Expression, table: TablePolicy) -> ColumnPolicy:
    if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
        raise refuse("aggregates in a per-person subquery take one column")
    column = table.column(node.name)
    if column is None:
        raise UnknownColumnError(f'column "{node.name}" does not exist')
    return column


def _columns(inner: exp.Select, table: TablePolicy) -> tuple[dict[str, ColumnPolicy], exp.Select]:
    """The subquery's output columns (all private, no bounds) and the subquery, unqualified."""
    columns: dict[str, ColumnPolicy] = {}
    items: list[exp.Expression] = []
    for item in inner.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Column):
            column = _column(node, table)
            if column.name != table.privacy_unit:
                raise refuse(f'column "{column.name}" must be aggregated in a per-person subquery')
            columns[column.name] = ColumnPolicy(column.name, column.type)
            items.append(exp.column(column.name))
            continue
        if not isinstance(node, _INNER_AGGREGATES) or not isinstance(item, exp.Alias):
            raise refuse("each aggregate of a per-person subquery needs an alias: COUNT(*) AS n")
        argument = node.this
        distinct = isinstance(argument, exp.Distinct)
        if distinct:
            argument = argument.expressions[0] if len(argument.expressions) == 1 else None
        if isinstance(node, exp.Count) and isinstance(argument, exp.Star):
            aggregate: exp.Expression = exp.Count(this=exp.Star())
            kind = ColumnType.INTEGER
        else:
            column = _column(argument, table) if argument is not None else _column(exp.Star(), table)
            inner_argument = exp.column(column.name)
            if distinct:
                inner_argument = exp.Distinct(expressions=[inner_argument])
            aggregate = node.__class__(this=inner_argument)
            kind = _output_type(node, column)
        alias = item.alias.lower()
        columns[alias] = ColumnPolicy(alias, kind)
        items.append(aggregate.as_(alias))
    where = inner.args.get("where")
    select = exp.select(*items).from_(exp.to_table(table.name)).group_by(exp.column(table.privacy_unit or ""))
    if where is not None:
        condition = _unqualified(where.this, table)
        check_predicate(condition, clause="WHERE")
        select = select.where(condition)
    return columns, select


def _output_type(node: exp.Expression, column: ColumnPolicy) -> ColumnType:
    if isinstance(node, exp.Count):
        return ColumnType.INTEGER
    if isinstance(node, exp.Avg):
        return ColumnType.REAL
    if isinstance(node, exp.Sum) and not column.type.is_numeric:
        raise refuse(f'SUM("{column.name}") needs a numeric column')
    return column.type


def _unqualified(expression: exp.Expression, table: TablePolicy) -> exp.Expression:
    def strip(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column):
            return exp.column(_column(node, table).name)
        return node

    return expression.copy().transform(strip)
