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
import hashlib
import math
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import Any

from sqlglot import exp

from proxy.analysis.checks import SCALAR_NODES, check_predicate
from proxy.analysis.derived import DerivedSource
from proxy.analysis.intervals import interval, is_integer
from proxy.analysis.per_person import per_person_table
from proxy.analysis.unit_join import joined_name, unit_join
from proxy.config import ColumnPolicy, ColumnType, DatasetPolicy, TablePolicy
from proxy.errors import AmbiguousColumnError, PolicyViolationError, UnknownColumnError, UnknownTableError

NOISY_TABLE = "_dp_noisy"
ALLOWED_SHAPE = (
    "queries on private tables must aggregate: SELECT [public group columns,] aggregates FROM table "
    "[WHERE …] [GROUP BY public columns] [HAVING …] [ORDER BY …] [LIMIT …], where the aggregates are COUNT(*), "
    "COUNT(col), COUNT(DISTINCT <privacy unit>), SUM, AVG, VAR_*, STDDEV_*, MEDIAN, PERCENTILE_CONT/DISC, MIN, MAX"
)


class AggregateKind(StrEnum):
    COUNT_ROWS = "count_rows"
    COUNT = "count"
    COUNT_UNITS = "count_units"
    SUM = "sum"
    AVG = "avg"
    VAR_POP = "var_pop"
    VAR_SAMP = "var_samp"
    STDDEV_POP = "stddev_pop"
    STDDEV_SAMP = "stddev_samp"
    QUANTILE = "quantile"  # MEDIAN, PERCENTILE_CONT/DISC, MIN, MAX: the exponential mechanism

    @property
    def needs_bounds(self) -> bool:
        return self not in (AggregateKind.COUNT_ROWS, AggregateKind.COUNT, AggregateKind.COUNT_UNITS)


_AGGREGATES: dict[type[exp.Expression], AggregateKind] = {
    exp.Count: AggregateKind.COUNT,
    exp.Sum: AggregateKind.SUM,
    exp.Avg: AggregateKind.AVG,
    exp.VariancePop: AggregateKind.VAR_POP,
    exp.Variance: AggregateKind.VAR_SAMP,
    exp.StddevPop: AggregateKind.STDDEV_POP,
    exp.Stddev: AggregateKind.STDDEV_SAMP,
    exp.StddevSamp: AggregateKind.STDDEV_SAMP,
}


@dataclass(frozen=True)
class AggregateInput:
    """What an aggregate reads: a column, or an expression of the table's columns whose bounds come
    from interval analysis (analysis/intervals.py) or an explicit ``veil_clamp(expr, lower, upper)``.
    The engine clamps every value to ``[lower, upper]`` whatever the analysis says."""

    name: str  # SQL-safe and deterministic: the column's name, or e_<hash of the expression>
    expression: exp.Expression = dataclasses.field(compare=False, hash=False)  # unqualified
    type: ColumnType = ColumnType.REAL
    lower: float | None = None
    upper: float | None = None

    @property
    def has_bounds(self) -> bool:
        return self.lower is not None and self.upper is not None


@dataclass(frozen=True)
class Aggregate:
    kind: AggregateKind
    column: AggregateInput | None  # None for COUNT(*) and COUNT(DISTINCT unit)
    q: Fraction | None = None  # the quantile, for QUANTILE (MEDIAN 1/2, MIN 0, MAX 1)

    @property
    def label(self) -> str:
        if self.kind is AggregateKind.QUANTILE:
            assert self.column is not None
            return f"quantile({self.column.name}, {float(self.q or 0):g})"
        if self.kind is AggregateKind.COUNT_ROWS:
            return "count(*)"
        if self.kind is AggregateKind.COUNT_UNITS:
            return "count(distinct unit)"
        assert self.column is not None
        return f"{self.kind.value}({self.column.name})"


@dataclass(frozen=True)
class GroupKey:
    """A GROUP BY item: a public column, or an expression of one column whose value domain is
    public — the column's own value list, or the expression evaluated over every integer between
    the column's bounds (``FLOOR(age / 10) * 10``). ``values`` is None until that is computed.

    A key with no public domain is ``thresholded``: its keys come from the data, and only those that
    enough people share pass a noisy threshold calibrated to (ε, δ) (τ-thresholding)."""

    expression: exp.Expression  # over the table's own columns, unqualified
    source: ColumnPolicy
    values: tuple[Any, ...] | None
    type: ColumnType
    thresholded: bool = False

    @property
    def label(self) -> str:
        return self.expression.sql(dialect="postgres")

    def with_domain(self, values: tuple[Any, ...], type_: ColumnType) -> GroupKey:
        return GroupKey(self.expression, self.source, values, type_, self.thresholded)


MAX_DERIVED_DOMAIN = 100_000  # integers evaluated to derive an expression's public key domain


@dataclass(frozen=True)
class QueryShape:
    table: TablePolicy
    group_keys: tuple[GroupKey, ...]
    aggregates: tuple[Aggregate, ...]
    where: exp.Expression | None  # columns unqualified, checked against the allow-list
    postprocess: exp.Select  # over NOISY_TABLE; its i-th select item is the i-th output column
    output_names: tuple[str, ...]
    source: DerivedSource | None = None  # set when the query reads a per-person subquery

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


def key_column(index: int) -> str:
    return f"_dp_key_{index}"


def aggregate_column(index: int) -> str:
    return f"_dp_agg_{index}"


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
    table, names, source, joined = _single_table(tree, dataset)
    scope = _Scope(table, names, joined)
    _refuse_unsupported(tree)
    group_keys = tuple(scope.group_key(item, tree) for item in _group_items(tree))
    builder = _PostprocessBuilder(scope, group_keys)
    postprocess = builder.build(tree)
    if not builder.aggregates:
        raise refuse("a query on private data must aggregate")
    where = tree.args.get("where")
    condition = scope.unqualified(where.this) if where is not None else None
    if condition is not None:
        check_predicate(condition, clause="WHERE")
    if any(key.thresholded for key in group_keys) and any(
        a.kind is AggregateKind.QUANTILE for a in builder.aggregates
    ):
        raise refuse("quantiles with GROUP BY keys taken from the data are not supported yet")
    names = tuple(_output_name(item) for item in tree.expressions)
    aggregates = tuple(builder.aggregates)
    return QueryShape(scope.table, group_keys, aggregates, condition, postprocess, names, source)


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


def _single_table(
    select: exp.Select, dataset: DatasetPolicy
) -> tuple[TablePolicy, set[str], DerivedSource | None, dict[str, TablePolicy] | None]:
    """The table a query reads: a private table, or a per-person subquery (analysis/per_person.py)."""
    from_clause = select.args.get("from_") or select.args.get("from")
    if select.args.get("with") or select.args.get("with_"):
        raise refuse("WITH clauses over private tables are not supported yet")
    if (
        from_clause is not None
        and isinstance(from_clause.this, exp.Subquery)
        and not select.args.get("joins")
    ):
        derived, source = per_person_table(from_clause.this, dataset)
        return derived, {derived.name}, source, None
    if from_clause is None or not isinstance(from_clause.this, exp.Table):
        raise refuse(
            "subqueries over private tables must be per-person subqueries or joins on the privacy unit"
        )
    table = from_clause.this
    if select.args.get("joins"):
        joined = unit_join(select, table, _joined_tables(select, table, dataset))
        return joined.table, set(joined.aliases), joined.source, joined.aliases
    return _table_policy(table, dataset), {table.name.lower(), table.alias_or_name.lower()}, None, None


def _joined_tables(select: exp.Select, first: exp.Table, dataset: DatasetPolicy) -> dict[str, TablePolicy]:
    tables: dict[str, TablePolicy] = {}
    for table in [first, *(join.this for join in select.args["joins"])]:
        if not isinstance(table, exp.Table):
            raise refuse("only tables can be joined (per-person subqueries cannot be joined yet)")
        alias = table.alias_or_name.lower()
        if alias in tables:
            raise refuse(
                f'table name "{alias}" specified more than once', hint="give each table its own alias"
            )
        tables[alias] = _table_policy(table, dataset)
    return tables


def _refuse_unsupported(select: exp.Select) -> None:
    for clause in ("qualify", "windows"):
        if select.args.get(clause):
            raise refuse(f"{clause.upper()} is not supported on private data")
    if any(isinstance(node, exp.Window) for node in select.walk()):
        raise refuse("window functions are not allowed on private data")


def _group_items(select: exp.Select) -> list[exp.Expression]:
    group = select.args.get("group")
    return list(group.expressions) if group is not None else []


class _Scope:
    """The one table a query reads, and how its column references resolve."""

    def __init__(
        self, table: TablePolicy, names: set[str], joined: dict[str, TablePolicy] | None = None
    ) -> None:
        self.table, self.names, self.joined = table, names, joined

    def column(self, node: exp.Column) -> ColumnPolicy:
        if self.joined is not None:
            return self._joined_column(node, self.joined)
        if node.table and node.table.lower() not in self.names:
            raise UnknownColumnError(f'missing FROM-clause entry for table "{node.table}"')
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
                raise UnknownColumnError(f'missing FROM-clause entry for table "{node.table}"')
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
            if not column.public:
                return GroupKey(expression, column, None, column.type, thresholded=True)
            return GroupKey(expression, column, column.values, column.type)
        check_predicate(expression, clause="GROUP BY")
        columns = {node.name for node in expression.find_all(exp.Column)}
        if len(columns) != 1:
            raise refuse(
                f"GROUP BY {expression.sql(dialect='postgres')} must use exactly one column",
                hint="group by an expression of a single public column or bounded integer column",
            )
        column = self.column(exp.column(columns.pop()))
        derivable = column.public or _small_integer_range(column)
        return GroupKey(expression, column, None, column.type, thresholded=not derivable)


def _small_integer_range(column: ColumnPolicy) -> bool:
    if column.type is not ColumnType.INTEGER or column.lower is None or column.upper is None:
        return False
    return column.upper - column.lower <= MAX_DERIVED_DOMAIN


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
        post = post.from_(NOISY_TABLE)
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
        aggregate = _aggregate(node, self.scope)
        if aggregate not in self.aggregates:
            self.aggregates.append(aggregate)
        return self.aggregates.index(aggregate)


_QUANTILES: dict[type[exp.Expression], Fraction] = {
    exp.Median: Fraction(1, 2),
    exp.Min: Fraction(0),
    exp.Max: Fraction(1),
}


def _quantile(node: exp.Expression, scope: _Scope) -> Aggregate | None:
    """MEDIAN(col), MIN(col), MAX(col), PERCENTILE_CONT/DISC(q) WITHIN GROUP (ORDER BY col)."""
    if type(node) in _QUANTILES:
        q, argument = _QUANTILES[type(node)], node.this
    elif isinstance(node, exp.WithinGroup) and isinstance(node.this, exp.PercentileCont | exp.PercentileDisc):
        q = _fraction_literal(node.this.this)
        order = node.expression.expressions if isinstance(node.expression, exp.Order) else []
        if len(order) != 1 or order[0].args.get("desc"):
            raise refuse("PERCENTILE needs WITHIN GROUP (ORDER BY one column) in ascending order")
        argument = order[0].this
    else:
        return None
    source = _aggregate_input(argument, scope, AggregateKind.QUANTILE)
    return Aggregate(AggregateKind.QUANTILE, source, q)


def _fraction_literal(node: exp.Expression) -> Fraction:
    if isinstance(node, exp.Literal) and not node.is_string:
        value = Fraction(node.this)
        if 0 <= value <= 1:
            return value
    raise refuse("PERCENTILE takes a constant fraction between 0 and 1, e.g. PERCENTILE_CONT(0.9)")


def _aggregate(node: exp.Expression, scope: _Scope) -> Aggregate:
    quantile = _quantile(node, scope)
    if quantile is not None:
        return quantile
    kind = _AGGREGATES.get(type(node))
    if kind is None:
        name = node.this.sql_name() if isinstance(node, exp.WithinGroup) else node.sql_name()
        raise refuse(f"aggregate {name.lower()}() is not supported yet on private data")
    argument = node.this
    if isinstance(argument, exp.Distinct):
        return _distinct_count(node, argument, scope)
    if kind is AggregateKind.COUNT and isinstance(argument, exp.Star):
        return Aggregate(AggregateKind.COUNT_ROWS, None)
    return Aggregate(kind, _aggregate_input(argument, scope, kind))


def _aggregate_input(argument: exp.Expression, scope: _Scope, kind: AggregateKind) -> AggregateInput:
    """A column keeps its declared bounds; an expression gets bounds by interval analysis, or from
    ``veil_clamp(expr, lower, upper)``; COUNT needs none."""
    if isinstance(argument, exp.Star) or (
        isinstance(argument, exp.Column) and isinstance(argument.this, exp.Star)
    ):
        raise refuse(f"{kind.value}(*) is not allowed", hint="aggregate a column or an expression of columns")
    if isinstance(argument, exp.Column):
        column = scope.column(argument)
        source = AggregateInput(column.name, exp.column(column.name), column.type, column.lower, column.upper)
        if kind.needs_bounds:
            _require_bounds(source, kind, column.type.is_numeric)
        return source
    clamp = _veil_clamp(argument)
    expression = scope.unqualified(clamp[0] if clamp else argument)
    check_predicate(expression, clause="an aggregate")
    text = expression.sql(dialect="postgres")
    name = "e_" + hashlib.sha1(text.encode()).hexdigest()[:8]
    numeric = ColumnType.INTEGER if is_integer(expression, scope.table) else ColumnType.REAL
    low, high = clamp[1:] if clamp else interval(expression, table=scope.table)
    finite = math.isfinite(low) and math.isfinite(high) and low < high
    source = AggregateInput(name, expression, numeric, low if finite else None, high if finite else None)
    if kind.needs_bounds and not finite:
        raise refuse(
            f"{kind.value.upper()}({text}): the range of the expression cannot be derived from the policy",
            hint=f"clamp it explicitly: veil_clamp({text}, lower, upper) — or declare bounds for its columns",
        )
    return source


def _veil_clamp(node: exp.Expression) -> tuple[exp.Expression, float, float] | None:
    """``veil_clamp(expr, lower, upper)`` with constant bounds, lower < upper."""
    if not (isinstance(node, exp.Anonymous) and str(node.this).lower() == "veil_clamp"):
        return None
    arguments = node.expressions
    bounds = [_number(argument) for argument in arguments[1:]]
    if len(arguments) != 3 or None in bounds or not bounds[0] < bounds[1]:  # type: ignore[operator]
        raise refuse("veil_clamp takes (expression, lower, upper) with constant numbers, lower < upper")
    return arguments[0], float(bounds[0]), float(bounds[1])  # type: ignore[arg-type]


def _number(node: exp.Expression) -> float | None:
    if isinstance(node, exp.Neg):
        inner = _number(node.this)
        return None if inner is None else -inner
    if isinstance(node, exp.Literal) and not node.is_string:
        return float(node.this)
    return None


def _distinct_count(node: exp.Expression, distinct: exp.Distinct, scope: _Scope) -> Aggregate:
    unit = scope.table.privacy_unit
    arguments = distinct.expressions
    if (
        isinstance(node, exp.Count)
        and unit is not None
        and len(arguments) == 1
        and isinstance(arguments[0], exp.Column)
        and scope.column(arguments[0]).name == unit
    ):
        return Aggregate(AggregateKind.COUNT_UNITS, None)
    raise refuse(
        "DISTINCT aggregates are only supported as COUNT(DISTINCT <privacy unit>)",
        hint=f"count people with COUNT(DISTINCT {unit})" if unit else "each row is one person: use COUNT(*)",
    )


def _require_bounds(column: AggregateInput, kind: AggregateKind, numeric: bool) -> None:
    name = kind.value.upper()
    if not numeric:
        raise refuse(f'{name}("{column.name}") needs a numeric column', hint="use COUNT instead")
    if not column.has_bounds:
        raise refuse(
            f'{name}("{column.name}") needs declared bounds',
            hint=f"declare lower and upper for column {column.name} in the policy (veil.toml)",
        )


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


def _output_name(item: exp.Expression) -> str:
    """The column name PostgreSQL would give a select item."""
    if isinstance(item, exp.Alias):
        return item.alias
    if isinstance(item, exp.Column):
        return item.name
    if isinstance(item, exp.WithinGroup):
        return item.this.sql_name().lower()
    if isinstance(item, exp.Count | exp.Sum | exp.Avg | exp.Median | exp.Min | exp.Max):
        return item.sql_name().lower()
    names = {exp.VariancePop: "var_pop", exp.Variance: "variance", exp.StddevPop: "stddev_pop"}
    names |= {exp.Stddev: "stddev", exp.StddevSamp: "stddev_samp"}
    if type(item) in names:
        return names[type(item)]
    if isinstance(item, exp.Func):
        return item.sql_name().lower()
    return "?column?"
