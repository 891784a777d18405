"""QueryShape: the one form of query on private data that Veil answers in this version.

``SELECT [group columns,] COUNT(*) | COUNT(col) | SUM(col) | AVG(col) … FROM t [WHERE …]
[GROUP BY public columns]``. Everything else that touches a private table is refused with a
message saying what is allowed — the shape is an allow-list, not a deny-list.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sqlglot import exp

from proxy.analysis.checks import check_predicate
from proxy.config import ColumnPolicy, DatasetPolicy, TablePolicy
from proxy.errors import PolicyViolationError, UnknownColumnError, UnknownTableError

ALLOWED_SHAPE = (
    "queries on private tables must have the form SELECT [public group columns,] "
    "COUNT(*) | COUNT(col) | SUM(col) | AVG(col) FROM table [WHERE …] [GROUP BY public columns]"
)


class AggregateKind(StrEnum):
    COUNT_ROWS = "count_rows"
    COUNT = "count"
    SUM = "sum"
    AVG = "avg"


@dataclass(frozen=True)
class Aggregate:
    kind: AggregateKind
    column: ColumnPolicy | None  # None only for COUNT(*)

    @property
    def label(self) -> str:
        if self.column is None:
            return "count(*)"
        return f"{self.kind.value}({self.column.name})"


@dataclass(frozen=True)
class OutputColumn:
    """One column of the answer: either a group key or an aggregate, by index."""

    name: str
    group_index: int | None = None
    aggregate_index: int | None = None


@dataclass(frozen=True)
class QueryShape:
    table: TablePolicy
    group_keys: tuple[ColumnPolicy, ...]
    aggregates: tuple[Aggregate, ...]
    outputs: tuple[OutputColumn, ...]
    where: exp.Expression | None  # columns unqualified, checked against the allow-list


def referenced_tables(tree: exp.Expression) -> list[exp.Table]:
    return list(tree.find_all(exp.Table))


def refuse(message: str, *, hint: str = ALLOWED_SHAPE) -> PolicyViolationError:
    return PolicyViolationError(message, hint=hint)


def query_shape(tree: exp.Expression, dataset: DatasetPolicy) -> QueryShape:
    """Check a statement that references tables and describe it, or refuse it."""
    for table in referenced_tables(tree):
        _table_policy(table, dataset)
    if not isinstance(tree, exp.Select):
        raise refuse("only SELECT statements may read private tables")
    table, names = _single_table(tree, dataset)
    _refuse_unsupported_clauses(tree)
    group_keys = tuple(_group_key(item, table, names) for item in _group_items(tree))
    aggregates: list[Aggregate] = []
    outputs = tuple(_output(item, table, names, group_keys, aggregates) for item in tree.expressions)
    if not aggregates:
        raise refuse("a query on private data must aggregate", hint=ALLOWED_SHAPE)
    where = tree.args.get("where")
    condition = _unqualified(where.this, table, names) if where is not None else None
    if condition is not None:
        check_predicate(condition, clause="WHERE")
    return QueryShape(table, group_keys, tuple(aggregates), outputs, condition)


def _table_policy(table: exp.Table, dataset: DatasetPolicy) -> TablePolicy:
    if not isinstance(table.this, exp.Identifier):
        name = table.this.sql_name().lower() if isinstance(table.this, exp.Func) else table.this.key
        raise refuse(f"table function {name}() is not allowed", hint="query the dataset's tables by name")
    if table.args.get("db") and table.db.lower() not in ("public", dataset.name):
        raise UnknownTableError(f'relation "{table.sql()}" does not exist')
    policy = dataset.table(table.name)
    if policy is None:
        raise UnknownTableError(
            f'relation "{table.name}" does not exist',
            hint=f"tables of dataset {dataset.name}: {', '.join(sorted(dataset.tables)) or '(none)'}",
        )
    return policy


def _single_table(select: exp.Select, dataset: DatasetPolicy) -> tuple[TablePolicy, set[str]]:
    from_clause = select.args.get("from_") or select.args.get("from")
    if from_clause is None or not isinstance(from_clause.this, exp.Table) or select.args.get("joins"):
        raise refuse("joins, subqueries and table functions over private tables are not supported yet")
    if select.args.get("with") or select.args.get("with_"):
        raise refuse("WITH clauses over private tables are not supported yet")
    table = from_clause.this
    policy = _table_policy(table, dataset)
    return policy, {table.name.lower(), table.alias_or_name.lower()}


def _refuse_unsupported_clauses(select: exp.Select) -> None:
    for clause in ("having", "order", "limit", "offset", "distinct", "qualify", "windows"):
        if select.args.get(clause):
            raise refuse(f"{clause.upper()} is not supported yet on private data")
    if any(isinstance(node, exp.Window) for node in select.walk()):
        raise refuse("window functions are not allowed on private data")


def _group_items(select: exp.Select) -> list[exp.Expression]:
    group = select.args.get("group")
    return list(group.expressions) if group is not None else []


def _column(node: exp.Column, table: TablePolicy, names: set[str]) -> ColumnPolicy:
    if node.table and node.table.lower() not in names:
        raise UnknownColumnError(f'missing FROM-clause entry for table "{node.table}"')
    policy = table.column(node.name)
    if policy is None:
        raise UnknownColumnError(
            f'column "{node.name}" does not exist',
            hint=f"columns of {table.name}: {', '.join(table.columns)}",
        )
    return policy


def _unqualified(expression: exp.Expression, table: TablePolicy, names: set[str]) -> exp.Expression:
    """A copy with every column checked and stripped of its table qualifier."""

    def strip(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                raise refuse("* is only allowed in COUNT(*)")
            return exp.column(_column(node, table, names).name)
        return node

    return expression.copy().transform(strip)


def _group_key(item: exp.Expression, table: TablePolicy, names: set[str]) -> ColumnPolicy:
    if not isinstance(item, exp.Column):
        raise refuse(
            f"GROUP BY {item.sql(dialect='postgres')} is not supported yet",
            hint="group by public columns only (declared with public = true and values in the policy)",
        )
    column = _column(item, table, names)
    if not column.public:
        raise refuse(
            f'column "{column.name}" is private and cannot be used in GROUP BY',
            hint="group keys must have a public value list in the policy (public = true, values = [...])",
        )
    return column


def _output(
    item: exp.Expression,
    table: TablePolicy,
    names: set[str],
    group_keys: tuple[ColumnPolicy, ...],
    aggregates: list[Aggregate],
) -> OutputColumn:
    alias = item.alias if isinstance(item, exp.Alias) else None
    node = item.this if isinstance(item, exp.Alias) else item
    if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
        column = _column(node, table, names)
        if column not in group_keys and column.public:
            raise refuse(
                f'column "{column.name}" must appear in the GROUP BY clause or be used in an aggregate',
                hint=f"add GROUP BY {column.name} and an aggregate such as COUNT(*)",
            )
        if column not in group_keys:
            raise refuse(
                f'column "{column.name}" is private',
                hint="use it inside SUM, AVG or COUNT, or add a public column to GROUP BY",
            )
        return OutputColumn(alias or column.name, group_index=group_keys.index(column))
    if isinstance(node, exp.Star) or (isinstance(node, exp.Column) and isinstance(node.this, exp.Star)):
        raise refuse("SELECT * would reveal private rows")
    aggregate = _aggregate(node, table, names)
    if aggregate not in aggregates:
        aggregates.append(aggregate)
    return OutputColumn(
        alias or aggregate.kind.value.replace("count_rows", "count"),
        aggregate_index=aggregates.index(aggregate),
    )


_AGGREGATES: dict[type[exp.Expression], AggregateKind] = {
    exp.Count: AggregateKind.COUNT,
    exp.Sum: AggregateKind.SUM,
    exp.Avg: AggregateKind.AVG,
}


def _aggregate(node: exp.Expression, table: TablePolicy, names: set[str]) -> Aggregate:
    kind = _AGGREGATES.get(type(node))
    if kind is None:
        raise refuse(
            f"{node.sql(dialect='postgres')} is not allowed in the select list of a query on private data"
        )
    argument = node.this
    if isinstance(argument, exp.Distinct):
        raise refuse("DISTINCT aggregates are not supported yet")
    if kind is AggregateKind.COUNT and isinstance(argument, exp.Star):
        return Aggregate(AggregateKind.COUNT_ROWS, None)
    if not isinstance(argument, exp.Column) or isinstance(argument.this, exp.Star):
        raise refuse(
            f"{node.sql(dialect='postgres')}: aggregates take a single column in this version",
            hint="aggregate a column directly, e.g. SUM(income)",
        )
    column = _column(argument, table, names)
    if kind in (AggregateKind.SUM, AggregateKind.AVG):
        _require_bounds(column, kind)
    return Aggregate(kind, column)


def _require_bounds(column: ColumnPolicy, kind: AggregateKind) -> None:
    if not column.type.is_numeric:
        raise refuse(
            f'{kind.value.upper()}("{column.name}") needs a numeric column', hint="use COUNT instead"
        )
    if not column.has_bounds:
        raise refuse(
            f'{kind.value.upper()}("{column.name}") needs declared bounds',
            hint=f"declare lower and upper for column {column.name} in the policy (veil.toml)",
        )
