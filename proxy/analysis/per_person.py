"""The per-person subquery: ``FROM (SELECT unit, COUNT(*) AS n, SUM(x) AS s FROM t GROUP BY unit) p``.

Grouped by the privacy unit, the subquery has exactly one row per person, so it is itself a private
table whose rows are people (``privacy_unit = "row"``): the outer query is answered like any other,
and adding or removing a person adds or removes one row. A ``WITH`` query read in FROM is such a
subquery too (analysis/with_clauses.py), and ``SELECT DISTINCT unit FROM t`` is ``GROUP BY unit``.

What bounds each per-person value has:

* ``AVG``, ``MIN``, ``MAX`` of a bounded column or expression stay within its bounds: those.
* ``COUNT`` and ``SUM`` (of a bounded expression) are totals no policy could bound. An explicit
  ``veil_clamp(n, lower, upper)`` in the outer query bounds them; where the outer query gives none, the
  bound is chosen with DP when the query runs (:class:`~proxy.analysis.derived.ValueBound`).

Only what keeps "one row per person" true is allowed inside: one private table, an optional WHERE,
GROUP BY exactly the privacy unit, and plain aggregates of its columns or of expressions of them.
"""

from __future__ import annotations

import math
from types import MappingProxyType

from sqlglot import exp

from proxy.analysis.checks import check_predicate
from proxy.analysis.derived import DerivedSource, ValueBound
from proxy.analysis.filter_clauses import as_written
from proxy.analysis.intervals import interval, is_integer
from proxy.analysis.refusals import CLAUSE_NAMES, refuse_construct
from proxy.analysis.set_operations import union_parts
from proxy.config import DEFAULT_CONTRIBUTION_CAP, ColumnPolicy, ColumnType, DatasetPolicy, TablePolicy
from proxy.errors import PolicyViolationError, UnknownColumnError

_INNER_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)
PATTERN = "SELECT unit, COUNT(*) AS n, SUM(col) AS s FROM table [WHERE …] GROUP BY unit"


def refuse(message: str, *, hint: str | None = None) -> PolicyViolationError:
    return PolicyViolationError(
        message, hint=hint or f"a subquery over private data must be per person: {PATTERN}"
    )


def per_person_table(subquery: exp.Subquery, dataset: DatasetPolicy) -> tuple[TablePolicy, DerivedSource]:
    inner = subquery.this
    if isinstance(inner, exp.SetOperation):
        union_parts(inner)  # INTERSECT, EXCEPT and UNION without ALL have messages of their own
        raise refuse_construct("nested UNION ALL")
    if not isinstance(inner, exp.Select):
        raise refuse("only a SELECT can be used as a subquery over private data")
    table = _inner_table(inner, dataset)
    if table.privacy_unit is None:
        raise refuse(f'table "{table.name}" has one person per row: query it directly')
    inner = _distinct_as_group(inner)
    _check_grouped_by_unit(inner, table)
    for clause in ("having", "order", "limit", "offset", "distinct", "joins", "qualify", "windows"):
        if inner.args.get(clause):
            raise refuse(f"{CLAUSE_NAMES[clause]} is not allowed in a per-person subquery")
    columns, select, bounds = _columns(inner, table)
    name = subquery.alias_or_name or "_dp_per_person"
    derived = TablePolicy(name.lower(), None, 1, MappingProxyType(columns))
    return derived, DerivedSource(select, table, value_bounds=bounds)


def _inner_table(inner: exp.Select, dataset: DatasetPolicy) -> TablePolicy:
    source = inner.args.get("from_")
    if source is not None and isinstance(source.this, exp.Subquery):
        raise refuse(
            "a per-person subquery must read a table, not another grouped subquery",
            hint="compute each person's values in one subquery: SELECT unit, COUNT(*) AS n, SUM(x) AS s "
            "FROM table GROUP BY unit; only one level of per-person aggregation is answered",
        )
    if (
        source is None
        or not isinstance(source.this, exp.Table)
        or not isinstance(source.this.this, exp.Identifier)
    ):
        raise refuse("a per-person subquery reads one table")
    policy = dataset.table(source.this.name)
    assert policy is not None  # query_shape has already refused every table the dataset does not have
    return policy


def _distinct_as_group(inner: exp.Select) -> exp.Select:
    """``SELECT DISTINCT unit FROM t`` is ``SELECT unit FROM t GROUP BY unit``: one row per person."""
    distinct = inner.args.get("distinct")
    if distinct is None or distinct.args.get("on") or inner.args.get("group"):
        return inner
    if not all(isinstance(item, exp.Column) and not item.is_star for item in inner.expressions):
        return inner
    grouped = inner.copy()
    grouped.set("distinct", None)
    return grouped.group_by(*(item.copy() for item in inner.expressions), copy=False)


def _check_grouped_by_unit(inner: exp.Select, table: TablePolicy) -> None:
    group = inner.args.get("group")
    items = list(group.expressions) if group is not None else []
    if len(items) != 1 or not isinstance(items[0], exp.Column) or items[0].name.lower() != table.privacy_unit:
        raise refuse(
            f'a subquery over "{table.name}" must GROUP BY its privacy unit "{table.privacy_unit}" alone'
        )


def _column(node: exp.Expression, table: TablePolicy) -> ColumnPolicy:
    if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
        raise refuse("aggregates in a per-person subquery take a column or an expression of columns")
    column = table.column(node.name)
    if column is None:
        raise UnknownColumnError(f'column "{node.name}" does not exist')
    return column


def _columns(
    inner: exp.Select, table: TablePolicy
) -> tuple[dict[str, ColumnPolicy], exp.Select, tuple[ValueBound, ...]]:
    """The subquery's output columns (all private), the subquery unqualified, and how the values whose
    bounds no policy knows get bounds chosen with DP."""
    columns: dict[str, ColumnPolicy] = {}
    bounds: list[ValueBound] = []
    items: list[exp.Expression] = []
    for item in inner.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Column):
            column = _column(node, table)
            if column.name != table.privacy_unit:
                raise refuse(f'column "{column.name}" must be aggregated in a per-person subquery')
            alias = item.alias.lower() if isinstance(item, exp.Alias) else column.name
            columns[alias] = ColumnPolicy(alias, column.type)
            items.append(exp.column(column.name).as_(alias) if alias != column.name else exp.column(alias))
            continue
        if not isinstance(node, _INNER_AGGREGATES) or not isinstance(item, exp.Alias):
            raise refuse("each aggregate of a per-person subquery needs an alias: COUNT(*) AS n")
        alias = item.alias.lower()
        aggregate, policy, bound = _aggregate(node, alias, table)
        columns[alias] = policy
        bounds += [bound] if bound is not None else []
        items.append(aggregate.as_(alias))
    where = inner.args.get("where")
    select = exp.select(*items).from_(exp.to_table(table.name)).group_by(exp.column(table.privacy_unit or ""))
    if where is not None:
        condition = _unqualified(where.this, table)
        check_predicate(condition, clause="WHERE")
        select = select.where(condition)
    return columns, select, tuple(bounds)


def _aggregate(
    node: exp.Expression, alias: str, table: TablePolicy
) -> tuple[exp.Expression, ColumnPolicy, ValueBound | None]:
    """One aggregate of the subquery, unqualified and checked; its output column's policy; and, for a
    total without bounds, how to choose them."""
    argument = node.this
    distinct = isinstance(argument, exp.Distinct)
    if distinct:
        if not isinstance(node, exp.Count) or len(argument.expressions) != 1:
            raise refuse("DISTINCT is only allowed as COUNT(DISTINCT expression) in a per-person subquery")
        argument = argument.expressions[0]
    if isinstance(node, exp.Count) and isinstance(argument, exp.Star):
        return exp.Count(this=exp.Star()), _count_column(alias), _count_bound(alias, table)
    expression = _argument(argument, table)
    inner: exp.Expression = exp.Distinct(expressions=[expression]) if distinct else expression
    aggregate = node.__class__(this=inner)
    if isinstance(node, exp.Count):
        return aggregate, _count_column(alias), _count_bound(alias, table)
    kind = _value_type(node, expression, table)
    low, high = interval(expression, table=table) if kind.is_numeric else (-math.inf, math.inf)
    finite = math.isfinite(low) and math.isfinite(high)
    if isinstance(node, exp.Sum):
        unit = max(abs(low), abs(high)) if finite else 0.0
        sign = 1 if low >= 0 else -1 if high <= 0 else 0
        bound = ValueBound(alias, unit, _cap(table), sign) if unit > 0 else None
        return aggregate, ColumnPolicy(alias, kind), bound
    if finite and low < high:  # AVG, MIN, MAX stay within the values' own range
        return aggregate, ColumnPolicy(alias, kind, low, high), None
    return aggregate, ColumnPolicy(alias, kind), None


def _argument(argument: exp.Expression, table: TablePolicy) -> exp.Expression:
    if isinstance(argument, exp.Star) or (isinstance(argument, exp.Column) and argument.is_star):
        raise refuse("aggregates in a per-person subquery take a column or an expression of columns")
    if isinstance(argument, exp.Column):
        return exp.column(_column(argument, table).name)
    expression = _unqualified(argument, table)
    check_predicate(expression, clause="an aggregate")
    return expression


def _count_column(alias: str) -> ColumnPolicy:
    return ColumnPolicy(alias, ColumnType.INTEGER, 0.0, None)


def _count_bound(alias: str, table: TablePolicy) -> ValueBound:
    return ValueBound(alias, 1.0, _cap(table), 1)


def _cap(table: TablePolicy) -> int:
    """The largest multiple of the unit a DP-chosen bound may be: the table's ``contribution_cap`` when
    its ``max_contributions`` is "auto" (the most rows one person may count for), else the larger of
    its ``max_contributions`` and the default cap, 1,000."""
    if table.auto_contributions:
        return table.max_contributions
    return max(table.max_contributions, DEFAULT_CONTRIBUTION_CAP)


def _value_type(node: exp.Expression, expression: exp.Expression, table: TablePolicy) -> ColumnType:
    if isinstance(node, exp.Avg):
        return ColumnType.REAL
    if isinstance(expression, exp.Column):
        column = _column(expression, table)
        if isinstance(node, exp.Sum) and not column.type.is_numeric:
            raise refuse(f'{as_written(node)}: column "{column.name}" is not numeric')
        return column.type
    return ColumnType.INTEGER if is_integer(expression, table) else ColumnType.REAL


def _unqualified(expression: exp.Expression, table: TablePolicy) -> exp.Expression:
    def strip(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column):
            return exp.column(_column(node, table).name)
        return node

    return expression.copy().transform(strip)
