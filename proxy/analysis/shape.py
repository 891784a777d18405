"""QueryShape: what Veil measures for a query on private data, and how the answer is post-processed.

A query on a private table is split in two. The **measurement** — group keys (public columns) and
aggregates of columns — is computed in the engine with bounded contributions and released with
noise. Everything else in the SELECT — arithmetic on aggregates, HAVING, ORDER BY, LIMIT/OFFSET,
DISTINCT — becomes a **post-processing query** over the noisy table ``_dp_noisy`` (columns
``_dp_key_<i>`` and ``_dp_agg_<i>``), which runs in an empty sandbox engine and costs no privacy.
Anything that would need a private value outside an aggregate is refused (42501).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from proxy.analysis.aggregates import Aggregate, AggregateKind, parse_aggregate
from proxy.analysis.canonical_order import canonical_order
from proxy.analysis.checks import SCALAR_NODES, check_predicate
from proxy.analysis.complexity import check_complexity
from proxy.analysis.derived import DerivedSource, ValueBound
from proxy.analysis.filter_clauses import filters_as_case
from proxy.analysis.key_types import expression_type
from proxy.analysis.lookup_join import lookup_join
from proxy.analysis.moment_domains import MAX_DAYS, by_whole_days, moment_days
from proxy.analysis.output_names import output_name
from proxy.analysis.partitions import PartitionPin, partition_pin
from proxy.analysis.per_person import per_person_table
from proxy.analysis.refusals import refuse, refuse_construct
from proxy.analysis.row_subqueries import fold_row_subqueries
from proxy.analysis.unit_join import joined_name, unit_join
from proxy.analysis.with_clauses import inline_with
from proxy.config import ColumnPolicy, ColumnType, DatasetPolicy, TablePolicy
from proxy.errors import AmbiguousColumnError, PolicyViolationError, UnknownColumnError, UnknownTableError

if TYPE_CHECKING:
    from proxy.analysis.top_k import TopK

NOISY_TABLE = "_dp_noisy"


@dataclass(frozen=True)
class GroupKey:
    """A GROUP BY item: a public column, a date column with declared bounds (every day between them),
    or an expression of one column whose value domain is public — the column's own value list, or the
    expression evaluated over every integer (or day) between the column's bounds (``FLOOR(age / 10) *
    10``, ``date_trunc('month', d)``). ``values`` is None until that is computed.

    A key with no public domain is ``thresholded``: its keys come from the data, and only those that
    enough people share pass a noisy threshold calibrated to (ε, δ) (τ-thresholding)."""

    expression: exp.Expression  # over the table's own columns, unqualified
    source: ColumnPolicy
    values: tuple[Any, ...] | None
    type: ColumnType
    thresholded: bool = False
    lookup: tuple[str, str] | None = None  # (public table, column): the domain is that column's values

    @property
    def label(self) -> str:
        return self.expression.sql(dialect="postgres")

    @property
    def is_column(self) -> bool:
        return isinstance(self.expression, exp.Column)

    def with_domain(self, values: tuple[Any, ...], type_: ColumnType) -> GroupKey:
        return GroupKey(self.expression, self.source, values, type_, self.thresholded, self.lookup)


MAX_DERIVED_DOMAIN = MAX_DAYS  # integers (or days) evaluated to derive an expression's public key domain


@dataclass(frozen=True)
class QueryShape:
    table: TablePolicy
    group_keys: tuple[GroupKey, ...]
    aggregates: tuple[Aggregate, ...]
    where: exp.Expression | None  # columns unqualified, checked against the allow-list
    postprocess: exp.Select  # over NOISY_TABLE; its i-th select item is the i-th output column
    output_names: tuple[str, ...]
    source: DerivedSource | None = None  # set when the query reads a per-person subquery
    top_k: TopK | None = None  # the query asks for the k keys with the largest count (analysis/top_k.py)
    partition: PartitionPin | None = None  # the partition its WHERE pins (analysis/partitions.py)
    value_bounds: tuple[ValueBound, ...] = ()  # per-person values whose bounds are chosen with DP

    @property
    def thresholded(self) -> bool:
        return any(key.thresholded for key in self.group_keys)

    @property
    def cells(self) -> int | None:
        """How many group rows the answer can have: the product of the public key domains (1 without
        GROUP BY); None when keys come from the data (τ-thresholding)."""
        if self.thresholded:
            return None
        return math.prod(len(key.values or ()) for key in self.group_keys)

    @property
    def passthrough_columns(self) -> tuple[str, ...] | None:
        """The noisy columns the answer shows as they are, when post-processing does nothing else
        (no arithmetic, HAVING, ORDER BY, LIMIT or DISTINCT) — the common case, answered without
        the sandbox engine."""
        post = self.postprocess
        if any(post.args.get(clause) for clause in ("where", "order", "limit", "offset", "distinct")):
            return None
        items = [item.this if isinstance(item, exp.Alias) else item for item in post.expressions]
        if not all(isinstance(item, exp.Column) and item.name.startswith("_dp_") for item in items):
            return None
        return tuple(item.name for item in items)

    def with_group_keys(self, keys: tuple[GroupKey, ...]) -> QueryShape:
        return dataclasses.replace(self, group_keys=keys)

    def with_value_bounds(self, bounds: tuple[ValueBound, ...]) -> QueryShape:
        """The shape with per-person values clamped to bounds chosen with DP (``ValueBound.chosen``): each
        input bounded by one (``AggregateInput.value_bound``), the column or a FILTER's CASE of it."""
        by_key = {bound.key: bound for bound in bounds}

        def bounded(aggregate: Aggregate) -> Aggregate:
            column = aggregate.column
            if aggregate.pair is not None:
                chosen = {key: bound.bounds for key, bound in by_key.items()}
                return dataclasses.replace(aggregate, pair=aggregate.pair.with_bounds(chosen))
            if column is None or column.value_bound not in by_key:
                return aggregate
            lower, upper = by_key[column.value_bound].bounds
            return dataclasses.replace(
                aggregate, column=dataclasses.replace(column, lower=lower, upper=upper)
            )

        aggregates = tuple(bounded(aggregate) for aggregate in self.aggregates)
        return dataclasses.replace(self, aggregates=aggregates, value_bounds=bounds)


def key_column(index: int) -> str:
    return f"_dp_key_{index}"


def aggregate_column(index: int) -> str:
    return f"_dp_agg_{index}"


def referenced_tables(tree: exp.Expression) -> list[exp.Table]:
    return list(tree.find_all(exp.Table))


def query_shape(tree: exp.Expression, dataset: DatasetPolicy) -> QueryShape:
    """Check a statement that references tables and describe it, or refuse it. WITH queries are inlined,
    FILTER clauses become CASE arguments and row-level subqueries are folded first (one file each)."""
    inlined = filters_as_case(inline_with(tree, max_nodes=dataset.limits.max_nodes))
    tree = fold_row_subqueries(inlined)
    if tree is not inlined:  # a subquery's expression is copied to each place that reads it
        check_complexity(tree, dataset.limits)
    for table in referenced_tables(tree):
        _table_policy(table, dataset)
    if not isinstance(tree, exp.Select):
        raise refuse("only SELECT statements may read private tables")
    _refuse_unsupported(tree)
    table, names, source, joined = _single_table(tree, dataset)
    scope = _Scope(table, names, joined, source)
    group_keys = tuple(scope.group_key(item, tree) for item in _group_items(tree))
    builder = _PostprocessBuilder(scope, group_keys)
    postprocess = builder.build(tree)
    if not builder.aggregates:
        raise refuse("a query on private data must aggregate")
    where = tree.args.get("where")
    condition = canonical_order(scope.unqualified(where.this)) if where is not None else None
    if condition is not None:
        check_predicate(condition, clause="WHERE")
    if any(key.thresholded for key in group_keys):
        _refuse_selections_over_data_keys(builder.aggregates)
    names = tuple(output_name(item) for item in tree.expressions)
    aggregates = tuple(builder.aggregates)
    bounds = tuple(scope.chosen.values())
    return QueryShape(
        scope.table, group_keys, aggregates, condition, postprocess, names, source, value_bounds=bounds
    )


def pinned(shape: QueryShape) -> QueryShape:
    """``shape`` with the partition its WHERE pins (analysis/partitions.py) — only for a plain table: a
    join or a per-person subquery reads rows the pin does not describe, and is charged as ordinary."""
    if shape.source is not None:
        return shape
    return dataclasses.replace(shape, partition=partition_pin(shape.table, shape.where))


def _refuse_selections_over_data_keys(aggregates: list[Aggregate]) -> None:
    """Quantiles and modes come from per-group engine histograms, not yet combined with τ-thresholding."""
    kinds = {aggregate.kind for aggregate in aggregates}
    if AggregateKind.QUANTILE in kinds:
        raise refuse("quantiles with GROUP BY keys taken from the data are not supported yet")
    if AggregateKind.MODE in kinds:
        raise refuse(
            "MODE() with GROUP BY keys taken from the data is not supported yet",
            hint="group by columns with public values, or ask for the mode without those keys",
        )


def _table_policy(table: exp.Table, dataset: DatasetPolicy) -> TablePolicy:
    if table.this is None:  # ROWS FROM (f(…), …): table functions only, listed in rows_from
        raise refuse("ROWS FROM is not allowed", hint="query the dataset's tables by name")
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


def _single_table(
    select: exp.Select, dataset: DatasetPolicy
) -> tuple[TablePolicy, set[str], DerivedSource | None, dict[str, TablePolicy] | None]:
    """The table a query reads: a private table, or a per-person subquery (analysis/per_person.py)."""
    from_clause = select.args.get("from_")  # LATERAL and select-list subqueries: _refuse_unsupported
    if from_clause is not None and isinstance(from_clause.this, exp.Subquery):
        if select.args.get("joins"):
            raise refuse_construct("joined subquery")
        derived, source = per_person_table(from_clause.this, dataset)
        return derived, {derived.name}, source, None
    if from_clause is None or not isinstance(from_clause.this, exp.Table):
        raise refuse(
            "subqueries over private tables must be per-person subqueries or joins on the privacy unit"
        )
    table = from_clause.this
    if select.args.get("joins"):
        tables = _joined_tables(select, table, dataset)
        any_public = any(policy.public for policy in tables.values())
        joined = (lookup_join if any_public else unit_join)(select, table, tables)
        return joined.table, set(joined.aliases), joined.source, joined.aliases
    return _table_policy(table, dataset), {table.alias_or_name.lower()}, None, None  # an alias hides the name


def _joined_tables(select: exp.Select, first: exp.Table, dataset: DatasetPolicy) -> dict[str, TablePolicy]:
    tables: dict[str, TablePolicy] = {}
    for table in [first, *(join.this for join in select.args["joins"])]:
        if not isinstance(table, exp.Table):
            raise refuse_construct("joined subquery")
        alias = table.alias_or_name.lower()
        if alias in tables:
            raise refuse(
                f'table name "{alias}" specified more than once', hint="give each table its own alias"
            )
        tables[alias] = _table_policy(table, dataset)
    return tables


def _missing_table(qualifier: str, *, alias: str | None = None) -> UnknownTableError:
    """PostgreSQL's refusal of a qualifier that names no table of the FROM clause — also of the table's
    own name once ``alias`` has replaced it (``FROM visits v … visits.age``)."""
    if alias is not None:
        return UnknownTableError(
            f'invalid reference to FROM-clause entry for table "{qualifier}"',
            hint=f'Perhaps you meant to reference the table alias "{alias}".',
        )
    return UnknownTableError(f'missing FROM-clause entry for table "{qualifier}"')


def _refuse_unsupported(select: exp.Select) -> None:
    """The constructs refused with a message of their own (analysis/refusals.py)."""
    if select.args.get("windows"):
        raise refuse_construct("WINDOW clause")
    if select.args.get("qualify"):
        raise refuse_construct("QUALIFY")
    if any(isinstance(node, exp.Window) for node in select.walk()):
        raise refuse_construct("window function")
    if any(isinstance(node, exp.Lateral) for node in select.walk()):
        raise refuse_construct("LATERAL")
    group = select.args.get("group")
    for node_type, construct in (
        (exp.GroupingSets, "GROUPING SETS"),
        (exp.Rollup, "ROLLUP"),
        (exp.Cube, "CUBE"),
    ):
        if group is not None and group.find(node_type) is not None:  # also WITH ROLLUP / WITH CUBE
            raise refuse_construct(construct)
    if isinstance(select.args.get("limit"), exp.Fetch):
        raise refuse_construct("FETCH")
    outputs = [*select.expressions, select.args.get("having"), select.args.get("order")]
    if any(part.find(exp.Subquery, exp.Select, exp.Exists) for part in outputs if part is not None):
        raise refuse_construct("select-list subquery")


def _group_items(select: exp.Select) -> list[exp.Expression]:
    group = select.args.get("group")
    return list(group.expressions) if group is not None else []


class _Scope:
    """The one table a query reads, and how its column references resolve."""

    def __init__(
        self,
        table: TablePolicy,
        names: set[str],
        joined: dict[str, TablePolicy] | None = None,
        source: DerivedSource | None = None,
    ) -> None:
        self.table, self.names, self.joined, self.source = table, names, joined, source
        self.chosen: dict[str, ValueBound] = {}  # per-person values that need bounds chosen with DP

    def value_bound(self, column: str, condition: exp.Expression | None = None) -> ValueBound | None:
        """How to bound a per-person value the query aggregates without bounds — where ``condition``
        holds, under a FILTER clause: chosen with DP."""
        bound = self.source.value_bound(column) if self.source is not None else None
        if bound is None:
            return None
        bound = dataclasses.replace(bound, condition=condition)
        return self.chosen.setdefault(bound.key, bound)

    def column(self, node: exp.Column) -> ColumnPolicy:
        if self.joined is not None:
            return self._joined_column(node, self.joined)
        if node.table and node.table.lower() not in self.names:
            hidden = node.table.lower() == self.table.name.lower()  # by the alias, the scope's one name
            raise _missing_table(node.table, alias=next(iter(self.names)) if hidden else None)
        policy = self.table.column(node.name)
        if policy is None:
            raise UnknownColumnError(
                f'column "{node.name}" does not exist',
                hint=f"columns of {self.table.name}: {', '.join(self.table.columns)}",
            )
        return policy

    def _joined_column(self, node: exp.Column, joined: dict[str, TablePolicy]) -> ColumnPolicy:
        """``v.cost`` → the joined table's ``v__cost``; a bare name must belong to exactly one table."""
        name = node.name.lower()
        already_resolved = self.table.column(name)
        if not node.table and already_resolved is not None:
            return already_resolved
        if node.table:
            alias = node.table.lower()
            if alias not in joined:
                raise _missing_table(node.table)
            candidates = [alias] if joined[alias].column(name) is not None else []
        else:
            candidates = [alias for alias, policy in joined.items() if policy.column(name) is not None]
        if len(candidates) > 1:
            raise AmbiguousColumnError(
                f'column reference "{node.name}" is ambiguous',
                hint=f"qualify it: {candidates[0]}.{node.name}",
            )
        policy = self.table.column(joined_name(candidates[0], name)) if candidates else None
        if policy is None:
            raise UnknownColumnError(f'column "{node.sql(dialect="postgres")}" does not exist')
        return policy

    def unqualified(self, expression: exp.Expression) -> exp.Expression:
        """A copy with every column checked and stripped of its table qualifier."""

        def strip(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Column):
                if isinstance(node.this, exp.Star):
                    raise refuse("* is only allowed in COUNT(*)")
                return exp.column(self.column(node).name)
            return node

        return expression.copy().transform(strip)

    def group_key(self, item: exp.Expression, select: exp.Select) -> GroupKey:
        """GROUP BY accepts a column, a select-list position (``GROUP BY 1``), a select alias, or an
        expression of one column whose key domain is public or derivable."""
        expression = self.unqualified(_resolve_reference(item, select))
        if isinstance(expression, exp.Column):
            column = self.column(expression)
            if column.name == self.table.privacy_unit:
                raise refuse(
                    f'GROUP BY the privacy unit "{column.name}" would make one group per person',
                    hint="count people with COUNT(DISTINCT …) instead",
                )
            if not column.public and date_range(column):
                return GroupKey(expression, column, date_range(column), column.type)
            if not column.public:
                return GroupKey(expression, column, None, column.type, thresholded=True)
            return GroupKey(expression, column, column.values, column.type, lookup=self.lookup(column))
        check_predicate(expression, clause="GROUP BY")
        columns = {node.name for node in expression.find_all(exp.Column)}
        if len(columns) != 1:
            raise refuse(
                f"GROUP BY {expression.sql(dialect='postgres')} must use exactly one column",
                hint="group by an expression of a single public column or bounded integer column",
            )
        column = self.column(exp.column(columns.pop()))
        derivable = column.public or _small_integer_range(column) or bool(date_range(column))
        if column.type is ColumnType.TIMESTAMP and not column.public:
            derivable = bool(moment_days(column)) and by_whole_days(expression, column.name)
        return GroupKey(
            expression,
            column,
            None,
            expression_type(expression, self.table),
            thresholded=not derivable,
            lookup=self.lookup(column),
        )

    def lookup(self, column: ColumnPolicy) -> tuple[str, str] | None:
        """A column of a joined public lookup table: (that table, its own column name)."""
        if self.joined is None or column.values is not None:
            return None
        for alias, policy in self.joined.items():  # an alias may hold "__" itself (z__x__zone)
            prefix = joined_name(alias, "")
            own = policy.column(column.name[len(prefix) :]) if column.name.startswith(prefix) else None
            if policy.public and own is not None:
                return policy.name, own.name
        return None


def _small_integer_range(column: ColumnPolicy) -> bool:
    if column.type is not ColumnType.INTEGER or column.lower is None or column.upper is None:
        return False
    return column.upper - column.lower <= MAX_DERIVED_DOMAIN


def date_range(column: ColumnPolicy) -> tuple[datetime.date, ...]:
    """Every day between a date column's declared bounds — its public key domain, from which
    ``date_trunc('month', d)`` or ``EXTRACT(year FROM d)`` take theirs; () without bounds, when the
    range is longer than MAX_DERIVED_DOMAIN days, or for a timestamp column, whose own values (every
    second) have no public domain (analysis/moment_domains.py)."""
    return moment_days(column) if column.type is ColumnType.DATE else ()


def _resolve_reference(item: exp.Expression, select: exp.Select) -> exp.Expression:
    items = select.expressions
    if isinstance(item, exp.Literal) and not item.is_string and item.this.isdigit():
        position = int(item.this)
        if not 1 <= position <= len(items):
            raise UnknownColumnError(f"GROUP BY position {position} is not in select list")
        item = items[position - 1]
    elif isinstance(item, exp.Column) and not item.table:
        aliased = [i for i in items if isinstance(i, exp.Alias) and i.alias.lower() == item.name.lower()]
        if aliased:
            item = aliased[0]
    return item.this if isinstance(item, exp.Alias) else item


class _PostprocessBuilder:
    """Rewrites the analyst's SELECT into a query over the noisy table, collecting aggregates."""

    def __init__(self, scope: _Scope, group_keys: tuple[GroupKey, ...]) -> None:
        self.scope, self.group_keys = scope, group_keys
        self.aggregates: list[Aggregate] = []

    def build(self, select: exp.Select) -> exp.Select:
        aliases = {item.alias.lower() for item in select.expressions if isinstance(item, exp.Alias)}
        post = exp.Select(expressions=[self._replace(item, aliases) for item in select.expressions])
        post = post.from_(exp.Table(this=exp.to_identifier(NOISY_TABLE)), copy=False)
        having = select.args.get("having")
        if having is not None:
            post = post.where(self._replace(having.this, aliases))
        for clause in ("order", "limit", "offset", "distinct"):
            if select.args.get(clause) is not None:
                post.set(clause, self._replace(select.args[clause], aliases))
        _check_postprocess(post)
        return post

    def _replace(self, expression: exp.Expression, aliases: set[str]) -> exp.Expression:
        keys = {key.expression.sql(dialect="postgres"): i for i, key in enumerate(self.group_keys)}

        def replace(node: exp.Expression) -> exp.Expression:
            key = self._key_index(node, keys)
            if key is not None:
                return exp.column(key_column(key))
            if isinstance(node, exp.AggFunc | exp.WithinGroup):
                return exp.column(aggregate_column(self._aggregate_index(node)))
            if isinstance(node, exp.Star) or (
                isinstance(node, exp.Column) and isinstance(node.this, exp.Star)
            ):
                raise refuse("SELECT * would reveal private rows")
            if isinstance(node, exp.Column):
                return self._column(node, aliases)
            return node

        return expression.copy().transform(replace)

    def _key_index(self, node: exp.Expression, keys: dict[str, int]) -> int | None:
        """Which group key this node is, if any (compared as unqualified SQL)."""
        if not any(isinstance(n, exp.Column) for n in node.walk()) or node.find(exp.AggFunc, exp.Star):
            return None
        try:
            text = self.scope.unqualified(node).sql(dialect="postgres")
        except (UnknownColumnError, PolicyViolationError):
            return None
        return keys.get(text)

    def _column(self, node: exp.Column, aliases: set[str]) -> exp.Expression:
        if not node.table and node.name.lower() in aliases and self.scope.table.column(node.name) is None:
            return node  # a reference to an output alias (ORDER BY n)
        column = self.scope.column(node)
        if column.public:
            raise refuse(
                f'column "{column.name}" must appear in the GROUP BY clause or be used in an aggregate',
                hint=f"add GROUP BY {column.name} and an aggregate such as COUNT(*)",
            )
        raise refuse(
            f'column "{column.name}" is private',
            hint="use it inside an aggregate (COUNT, SUM, AVG, …), or add a public column to GROUP BY",
        )

    def _aggregate_index(self, node: exp.Expression) -> int:
        aggregate = parse_aggregate(node, self.scope)
        if aggregate not in self.aggregates:
            self.aggregates.append(aggregate)
        return self.aggregates.index(aggregate)


_POSTPROCESS_NODES: tuple[type[exp.Expression], ...] = (
    exp.Select, exp.From, exp.Table, exp.Identifier, exp.Column, exp.Alias, exp.Where,
    exp.Order, exp.Ordered, exp.Limit, exp.Offset, exp.Distinct, *SCALAR_NODES,
)  # fmt: skip


def _check_postprocess(post: exp.Select) -> None:
    """Only scalar operations on the noisy columns: no functions that could reach outside."""
    for node in post.walk():
        if not isinstance(node, _POSTPROCESS_NODES):
            label = node.sql_name().lower() + "()" if isinstance(node, exp.Func) else type(node).__name__
            raise refuse(
                f"{label} is not supported in the select list, HAVING or ORDER BY of a query on private data"
            )
