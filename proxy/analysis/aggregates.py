"""Aggregates of a query on private data: which SQL aggregates exist here, what they read, and with
which bounds. Parsing only — no I/O; the release decides how each is measured."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import Any, Protocol

from sqlglot import exp

from proxy.analysis.checks import check_predicate
from proxy.analysis.derived import ValueBound
from proxy.analysis.filter_clauses import FILTERED, as_written, filter_case
from proxy.analysis.intervals import interval, is_integer
from proxy.analysis.refusals import refuse
from proxy.analysis.value_kinds import value_kind
from proxy.config import ColumnPolicy, ColumnType, TablePolicy
from proxy.errors import UnsupportedQueryError


class ColumnScope(Protocol):
    """How a query's column references resolve (analysis/shape.py's scope)."""

    table: TablePolicy

    def column(self, node: exp.Column) -> ColumnPolicy: ...

    def unqualified(self, expression: exp.Expression) -> exp.Expression: ...

    def value_bound(self, column: str, condition: exp.Expression | None = None) -> ValueBound | None: ...


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
    MODE = "mode"  # MODE() WITHIN GROUP over a public domain: the exponential mechanism
    # (y, x) pairs: post-processed from noisy sums over the rows where both are not NULL (spec §2.2, §7)
    CORR = "corr"
    COVAR_POP = "covar_pop"
    COVAR_SAMP = "covar_samp"
    REGR_SLOPE = "regr_slope"
    REGR_INTERCEPT = "regr_intercept"
    REGR_R2 = "regr_r2"
    REGR_COUNT = "regr_count"
    REGR_AVGX = "regr_avgx"
    REGR_AVGY = "regr_avgy"
    REGR_SXX = "regr_sxx"
    REGR_SYY = "regr_syy"
    REGR_SXY = "regr_sxy"

    @property
    def needs_bounds(self) -> bool:
        return self not in (
            AggregateKind.COUNT_ROWS,
            AggregateKind.COUNT,
            AggregateKind.COUNT_UNITS,
            AggregateKind.MODE,
        )


_PAIRS: dict[type[exp.Expression], AggregateKind] = {
    exp.Corr: AggregateKind.CORR,
    exp.CovarPop: AggregateKind.COVAR_POP,
    exp.CovarSamp: AggregateKind.COVAR_SAMP,
    exp.RegrSlope: AggregateKind.REGR_SLOPE,
    exp.RegrIntercept: AggregateKind.REGR_INTERCEPT,
    exp.RegrR2: AggregateKind.REGR_R2,
    exp.RegrCount: AggregateKind.REGR_COUNT,
    exp.RegrAvgx: AggregateKind.REGR_AVGX,
    exp.RegrAvgy: AggregateKind.REGR_AVGY,
    exp.RegrSxx: AggregateKind.REGR_SXX,
    exp.RegrSyy: AggregateKind.REGR_SYY,
    exp.RegrSxy: AggregateKind.REGR_SXY,
}

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


PAIR_STATISTICS: dict[AggregateKind, tuple[str, ...]] = {
    # the noisy sums each (y, x) aggregate is computed from: n pairs, Σy, Σx, Σy², Σx², Σyx
    AggregateKind.CORR: ("n", "sy", "sx", "syy", "sxx", "sxy"),
    AggregateKind.REGR_R2: ("n", "sy", "sx", "syy", "sxx", "sxy"),
    AggregateKind.REGR_SLOPE: ("n", "sy", "sx", "sxx", "sxy"),
    AggregateKind.REGR_INTERCEPT: ("n", "sy", "sx", "sxx", "sxy"),
    AggregateKind.COVAR_POP: ("n", "sy", "sx", "sxy"),
    AggregateKind.COVAR_SAMP: ("n", "sy", "sx", "sxy"),
    AggregateKind.REGR_SXY: ("n", "sy", "sx", "sxy"),
    AggregateKind.REGR_SXX: ("n", "sx", "sxx"),
    AggregateKind.REGR_SYY: ("n", "sy", "syy"),
    AggregateKind.REGR_AVGX: ("n", "sx"),
    AggregateKind.REGR_AVGY: ("n", "sy"),
    AggregateKind.REGR_COUNT: ("n",),
}


@dataclass(frozen=True)
class AggregateInput:
    """What an aggregate reads: a column, or an expression of the table's columns whose bounds come
    from interval analysis (analysis/intervals.py) or an explicit ``veil_clamp(expr, lower, upper)``.
    The engine clamps every value to ``[lower, upper]`` whatever the analysis says."""

    name: str  # SQL-safe and deterministic: the column's name, or input_name(expression, bounds)
    expression: exp.Expression = dataclasses.field(compare=False, hash=False)  # unqualified
    type: ColumnType = ColumnType.REAL
    lower: float | None = None
    upper: float | None = None
    values: tuple[Any, ...] | None = None  # MODE: the column's public domain, its candidates
    # As the analyst wrote it (``v.cost``, ``price * qty``), for notices and ``veil explain`` (default: name);
    # not part of what is measured, so two spellings of one input are one quantity and one stored answer
    shown: str | None = dataclasses.field(default=None, compare=False, repr=False)
    # The condition of the aggregate's FILTER (WHERE …) clause as written, when the input came from one
    # (analysis/filter_clauses.py): naming only, like ``shown``
    condition: str | None = dataclasses.field(default=None, compare=False, repr=False)
    # A per-person value whose bounds are chosen with DP when the query runs: the ValueBound.key whose
    # choice replaces ``lower`` and ``upper`` (QueryShape.with_value_bounds) — the column's, or under a
    # FILTER clause the column's where the condition holds, applied to the whole CASE
    value_bound: str | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def has_bounds(self) -> bool:
        return self.lower is not None and self.upper is not None

    @property
    def text(self) -> str:
        """How plans, ``veil explain`` and notices name the input."""
        return self.shown or self.name

    def called(self, function: str, *, argument: str | None = None) -> str:
        """``sum(cost)``, or ``sum(cost) FILTER (WHERE n > 3)`` for an input read under a FILTER clause:
        ``function`` is everything up to the input (``sum(``, ``percentile_cont(0.9) WITHIN GROUP (ORDER
        BY ``), the closing parenthesis is added; ``argument`` replaces the input's text (``cost ^ 2``)."""
        called = f"{function}{self.text if argument is None else argument})"
        return f"{called} FILTER (WHERE {self.condition})" if self.condition else called


def input_name(text: str, lower: float | None, upper: float | None) -> str:
    """The SQL-safe name of an input that is not a plain column: a digest of its expression *and* its
    bounds, long enough that no two inputs of one query can share it by chance or by design.

    The engine query keys values and partial sums by this name, and each measurement is priced with
    its own input's bounds: two inputs under one name would let a sum priced for ``veil_clamp(x, 0, 1)``
    read values clamped to ``[0, 100]`` (bound_contributions also refuses such a query outright). Bounds
    are compared as floats: a policy's ``-50`` and the ``-50.0`` a FILTER's rewrite carries are one input,
    so ``SUM(x) FILTER (WHERE c)`` and ``SUM(CASE WHEN c THEN x END)`` are one measurement, charged once."""
    bounds = tuple(None if bound is None else float(bound) for bound in (lower, upper))  # -50 is -50.0
    digest = hashlib.sha256(f"{text}\x1f{bounds[0]!r}\x1f{bounds[1]!r}".encode()).hexdigest()
    return "e_" + digest[:32]


@dataclass(frozen=True)
class PairInputs:
    """What CORR(y, x), COVAR_*(y, x) and REGR_*(y, x) read. SQL uses only the rows where neither y
    nor x is NULL, so each is read *masked* by the other (``CASE WHEN x IS NOT NULL THEN y END``,
    bounds and type of y), and their product is read with both factors clamped to their bounds (bounds:
    the extreme products of the corners). These are ordinary inputs: the engine clamps them and the
    plan prices SUM, SUM of squares and COUNT of them as for any column (spec §2.2), so no new
    sensitivity exists. ``y`` and ``x`` are the SQL arguments in order; the product's factors are in
    text order (``input_order``), so CORR(a, b) and CORR(b, a) measure the same quantities."""

    y: AggregateInput
    x: AggregateInput
    product: AggregateInput
    label: str  # "y, x" as written
    arguments: tuple[AggregateInput, AggregateInput]  # y and x as read, before masking

    @property
    def count_input(self) -> AggregateInput:
        """The pairs are counted as the non-NULL values of either masked input: the one first by text."""
        return min(self.y, self.x, key=input_order)

    def with_bounds(self, bounds: Mapping[str, tuple[float, float]]) -> PairInputs:
        """The pair read again with per-person values clamped to bounds chosen with DP (by
        ``AggregateInput.value_bound``): the masked inputs and the product's corners follow them."""
        y, x = (
            dataclasses.replace(source, lower=bounds[key][0], upper=bounds[key][1])
            if (key := source.value_bound) in bounds
            else source
            for source in self.arguments
        )
        return pair_inputs(y, x, self.label)


@dataclass(frozen=True)
class Aggregate:
    kind: AggregateKind
    # None for COUNT(*), COUNT(DISTINCT unit) and the (y, x) aggregates; for COUNT(DISTINCT unit) under a
    # condition, the condition as an input: ``CASE WHEN c THEN 1 END``, counted per person
    column: AggregateInput | None
    q: Fraction | None = None  # the quantile, for QUANTILE (MEDIAN 1/2, MIN 0, MAX 1)
    pair: PairInputs | None = None  # the (y, x) aggregates
    # COUNT(DISTINCT unit): the unit as the analyst wrote it (``v.patient_id``), for its label only
    unit: str = dataclasses.field(default="", compare=False, repr=False)

    @property
    def is_count(self) -> bool:
        return self.kind in (
            AggregateKind.COUNT_ROWS,
            AggregateKind.COUNT,
            AggregateKind.COUNT_UNITS,
            AggregateKind.REGR_COUNT,
        )

    @property
    def inputs(self) -> tuple[AggregateInput, ...]:
        """Every input the engine evaluates for this aggregate."""
        if self.pair is not None:
            return (self.pair.y, self.pair.x, self.pair.product)
        return (self.column,) if self.column is not None else ()

    @property
    def label(self) -> str:
        if self.pair is not None:
            condition = self.pair.y.condition or self.pair.x.condition
            label = f"{self.kind.value}({self.pair.label})"
            return f"{label} FILTER (WHERE {condition})" if condition else label
        if self.kind in (AggregateKind.QUANTILE, AggregateKind.MODE):
            return selection_label(self.kind.value, self.column, self.q)
        if self.kind is AggregateKind.COUNT_ROWS:
            return "count(*)"
        if self.kind is AggregateKind.COUNT_UNITS:
            return people_label(self.unit or "unit", self.column)
        assert self.column is not None
        return self.column.called(f"{self.kind.value}(")


def people_label(unit: str, condition: AggregateInput | None) -> str:
    """``count(DISTINCT patient_id)``, with its FILTER clause as written when ``condition`` came from one."""
    label = f"count(DISTINCT {unit})"
    written_condition = condition.condition if condition is not None else None
    return f"{label} FILTER (WHERE {written_condition})" if written_condition else label


def selection_label(kind: str, column: AggregateInput | None, q: Fraction | None) -> str:
    """``min(age)``, ``median(age)``, ``percentile_cont(0.9) WITHIN GROUP (ORDER BY age)`` or
    ``mode(blood)``: how a selection is named in plans, ``veil explain`` and notices — as SQL
    writes it, with the column as the analyst wrote it."""
    assert column is not None
    if kind == "mode":
        return column.called("mode(")
    names = {Fraction(0): "min", Fraction(1): "max", Fraction(1, 2): "median"}
    if q in names:
        return column.called(f"{names[q]}(")
    return column.called(f"percentile_cont({float(q or 0):g}) WITHIN GROUP (ORDER BY ")


_QUANTILES: dict[type[exp.Expression], Fraction] = {
    exp.Median: Fraction(1, 2),
    exp.Min: Fraction(0),
    exp.Max: Fraction(1),
}


def _quantile(node: exp.Expression, scope: ColumnScope) -> Aggregate | None:
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
    source = _aggregate_input(argument, scope, AggregateKind.QUANTILE, call=as_written(node))
    return Aggregate(AggregateKind.QUANTILE, source, q)


def _fraction_literal(node: exp.Expression) -> Fraction:
    if isinstance(node, exp.Literal) and not node.is_string:
        value = Fraction(node.this)
        if 0 <= value <= 1:
            return value
    raise refuse("PERCENTILE takes a constant fraction between 0 and 1, e.g. PERCENTILE_CONT(0.9)")


def _mode(node: exp.Expression, scope: ColumnScope) -> Aggregate | None:
    """MODE() WITHIN GROUP (ORDER BY col), PostgreSQL's ordered-set aggregate, over a column whose
    values the policy declares public: the candidates must not come from the data."""
    if isinstance(node, exp.Mode):
        raise UnsupportedQueryError(
            "mode(col) is not PostgreSQL's MODE aggregate", hint="write MODE() WITHIN GROUP (ORDER BY col)"
        )
    if not (isinstance(node, exp.WithinGroup) and isinstance(node.this, exp.Mode)):
        return None
    order = node.expression.expressions if isinstance(node.expression, exp.Order) else []
    written_argument = order[0].this if len(order) == 1 else exp.Null()  # not a column: refused below
    conditions, argument = _peeled(written_argument)
    if node.this.this is not None or not isinstance(argument, exp.Column):
        raise UnsupportedQueryError(
            "MODE() is answered only WITHIN GROUP (ORDER BY one column)",
            hint="write MODE() WITHIN GROUP (ORDER BY col) with a column declared public in the policy",
        )
    column = scope.column(argument)
    if not column.public or column.values is None:
        raise refuse(
            f'MODE() of "{argument.sql(dialect="postgres")}": the column has no public value domain',
            hint=f"the candidates of a DP mode must be public: declare {argument.name} public with "
            "values = [...] or range = [start, stop, step] in the policy (veil.toml)",
        )
    source = AggregateInput(
        column.name, exp.column(column.name), column.type, values=column.values, shown=written(argument)
    )
    if conditions:
        source = _mode_under_condition(source, conditions, written_argument, scope)
    return Aggregate(AggregateKind.MODE, source)


def _mode_under_condition(
    source: AggregateInput, conditions: list[exp.Expression], argument: exp.Expression, scope: ColumnScope
) -> AggregateInput:
    """The mode of the rows where the conditions hold (a FILTER clause, or ``CASE WHEN c THEN col END``):
    elsewhere the value is NULL, which the mode histogram drops like any value outside the public domain
    (rewrite/bound_contributions.py), so each person's weights are spread over their matching rows only."""
    test = _checked_condition(conditions, scope)
    expression = exp.Case(ifs=[exp.If(this=test, true=source.expression.copy())])
    shown, written_condition = _as_written(argument)
    return dataclasses.replace(
        source,
        name=input_name(expression.sql(dialect="postgres"), None, None),
        expression=expression,
        shown=shown,
        condition=written_condition,
    )


def parse_aggregate(node: exp.Expression, scope: ColumnScope) -> Aggregate:
    selection = _quantile(node, scope) or _mode(node, scope) or _paired(node, scope)
    if selection is not None:
        return selection
    kind = _AGGREGATES.get(type(node))
    if kind is None:
        name = as_written(node).partition("(")[0]  # string_agg, not sqlglot's group_concat
        raise refuse(f"aggregate {name}() is not supported yet on private data")
    argument = node.this
    if isinstance(argument, exp.Distinct):
        return _distinct_count(node, argument, scope)
    if kind is AggregateKind.COUNT and isinstance(argument, exp.Star):
        return Aggregate(AggregateKind.COUNT_ROWS, None)
    return Aggregate(kind, _aggregate_input(argument, scope, kind, call=as_written(node)))


def _paired(node: exp.Expression, scope: ColumnScope) -> Aggregate | None:
    """CORR(y, x), COVAR_POP/SAMP(y, x), REGR_*(y, x): both arguments numeric with bounds (declared, derived
    or veil_clamp'ed)."""
    kind = _PAIRS.get(type(node))
    if kind is None:
        return None
    arguments = [node.this, node.expression]
    written = [_as_written(argument)[0] for argument in arguments]
    inputs = [_aggregate_input(argument, scope, kind, call=as_written(node)) for argument in arguments]
    y, x = (
        dataclasses.replace(source, shown=text)  # v.cost, not v__cost
        for source, text in zip(inputs, written, strict=True)
    )
    return Aggregate(kind, None, pair=pair_inputs(y, x, ", ".join(written)))


def pair_inputs(y: AggregateInput, x: AggregateInput, label: str) -> PairInputs:
    """Each argument masked by the other, and their product's factors in text order."""
    first, second = sorted((y, x), key=input_order)
    return PairInputs(_masked(y, by=x), _masked(x, by=y), _product(first, second), label, (y, x))


def input_order(source: AggregateInput) -> tuple[str, str]:
    """Order-independent choices (which masked input counts the pairs, the product's factor order), so
    that (y, x) and (x, y) measure the same quantities."""
    return source.text, source.name


def _masked(source: AggregateInput, *, by: AggregateInput) -> AggregateInput:
    """``source`` where ``by`` is not NULL either: NULL otherwise."""
    expression = exp.Case(
        ifs=[
            exp.If(
                this=exp.Not(this=exp.Is(this=by.expression.copy(), expression=exp.Null())),
                true=source.expression.copy(),
            )
        ]
    )
    text = expression.sql(dialect="postgres")
    shown = f"{source.text} | {by.text}"
    return AggregateInput(
        input_name(text, source.lower, source.upper),
        expression,
        source.type,
        source.lower,
        source.upper,
        shown=shown,
        condition=source.condition or by.condition,
    )


def _product(first: AggregateInput, second: AggregateInput) -> AggregateInput:
    """``clamp(first) · clamp(second)``: the Σyx of clamped values that the spec prices at
    L · max |corner product| (the engine clamps the product to the corners' range as well)."""
    assert first.lower is not None and first.upper is not None
    assert second.lower is not None and second.upper is not None
    # multiplied as DOUBLE: in an integer type the product of two clamped values can overflow, an engine
    # error that would depend on the data
    expression = exp.Mul(
        this=exp.cast(_clamped(first.expression, first.lower, first.upper), exp.DataType.Type.DOUBLE),
        expression=exp.cast(
            _clamped(second.expression, second.lower, second.upper), exp.DataType.Type.DOUBLE
        ),
    )
    corners = [a * b for a in (first.lower, first.upper) for b in (second.lower, second.upper)]
    lower, upper = min(corners), max(corners)
    text = expression.sql(dialect="postgres")
    shown = f"{_operand(first.text)} * {_operand(second.text)}"
    condition = first.condition or second.condition
    return AggregateInput(
        input_name(text, lower, upper),
        expression,
        ColumnType.REAL,
        lower,
        upper,
        shown=shown,
        condition=condition,
    )


_NAME = re.compile(r"[\w.]+")  # a column (``v.cost``, ``_``) or a function's name: letters, digits, _ and .


def _operand(text: str) -> str:
    """``y * 2`` as a factor of a product label is ``(y * 2)``; a column or one function call is not."""
    name, _, rest = text.partition("(")
    if _NAME.fullmatch(name) and (not rest or _one_call(rest)):
        return text
    return f"({text})"


def _one_call(rest: str) -> bool:
    """Whether ``rest`` (what follows a function's opening parenthesis) closes it only at its end."""
    depth = 1
    for position, character in enumerate(rest):
        depth += {"(": 1, ")": -1}.get(character, 0)
        if depth == 0:
            return position == len(rest) - 1
    return False


def _clamped(expression: exp.Expression, lower: float, upper: float) -> exp.Expression:
    """As rewrite/clamp_values.py clamps an input (CASE keeps NULL as NULL; LEAST/GREATEST would not)."""
    low, high = (exp.convert(int(b) if float(b).is_integer() else b) for b in (lower, upper))
    return exp.Paren(
        this=exp.Case(
            ifs=[
                exp.If(this=exp.LT(this=expression.copy(), expression=low), true=low.copy()),
                exp.If(this=exp.GT(this=expression.copy(), expression=high), true=high.copy()),
            ],
            default=expression.copy(),
        )
    )


def _aggregate_input(
    argument: exp.Expression,
    scope: ColumnScope,
    kind: AggregateKind,
    *,
    call: str,
    condition: exp.Expression | None = None,
) -> AggregateInput:
    """A column keeps its declared bounds; an expression gets bounds by interval analysis, or from
    ``veil_clamp(expr, lower, upper)``; COUNT needs none. The argument of a FILTER clause is read as the
    argument alone under its ``condition`` (what a per-person value's bounds are chosen over), then
    wrapped in the CASE. ``call`` is the aggregate as written, for refusals."""
    if (filtered := filter_case(argument)) is not None:
        condition, value = filtered
        test = scope.unqualified(condition)
        check_predicate(test, clause="an aggregate")
        source = _aggregate_input(value, scope, kind, call=call, condition=test)
        return _under_condition(source, argument, test)
    if isinstance(argument, exp.Star) or (
        isinstance(argument, exp.Column) and isinstance(argument.this, exp.Star)
    ):
        raise refuse(f"{call} is not allowed", hint="aggregate a column or an expression of columns")
    if isinstance(argument, exp.Column):
        return _column_input(argument, scope, kind, call=call, condition=condition)
    clamp = _veil_clamp(argument)
    expression = scope.unqualified(clamp[0] if clamp else argument)
    check_predicate(expression, clause="an aggregate")
    if kind.needs_bounds and value_kind(expression, table=scope.table).is_moment:
        raise refuse(
            f"{call}: only a date or timestamp column itself is answered, not a date or timestamp computed "
            "from it",
            hint=_DATE_HINT,
        )
    text = expression.sql(dialect="postgres")
    numeric = ColumnType.INTEGER if is_integer(expression, scope.table) else ColumnType.REAL
    low, high = clamp[1:] if clamp else interval(expression, table=scope.table)
    finite = math.isfinite(low) and math.isfinite(high) and low < high
    lower, upper = (low, high) if finite else (None, None)
    shown = written(argument)  # veil_clamp too
    if kind.needs_bounds and not finite:
        raise refuse(
            f"{call}: the range of {shown} cannot be derived from the policy",
            hint=f"clamp it explicitly: veil_clamp({shown}, lower, upper) — or declare bounds for its columns",
        )
    return AggregateInput(input_name(text, lower, upper), expression, numeric, lower, upper, shown=shown)


def _column_input(
    argument: exp.Column,
    scope: ColumnScope,
    kind: AggregateKind,
    *,
    call: str,
    condition: exp.Expression | None = None,
) -> AggregateInput:
    """A column with its declared bounds, or a per-person value with bounds chosen with DP — from the
    people where ``condition`` holds, when it is read under a FILTER clause's condition."""
    column = scope.column(argument)
    if column.type.is_moment:
        return dataclasses.replace(_moment_input(column, kind, call=call), shown=written(argument))
    source = AggregateInput(
        column.name,
        exp.column(column.name),
        column.type,
        column.lower,
        column.upper,
        shown=written(argument),
    )
    needs_choice = kind.needs_bounds and not source.has_bounds
    bound = scope.value_bound(column.name, condition) if needs_choice else None
    if bound is not None:  # a per-person total: bounds chosen with DP when the query runs
        lower, upper = bound.bounds
        return dataclasses.replace(source, lower=lower, upper=upper, value_bound=bound.key)
    if kind.needs_bounds:
        _require_bounds(source, call=call, numeric=column.type.is_numeric)
    return source


def _under_condition(source: AggregateInput, case: exp.Case, test: exp.Expression) -> AggregateInput:
    """``source`` read only where the FILTER clause's condition ``test`` (unqualified, checked) holds:
    ``CASE WHEN test THEN value END``, with the value's bounds and type (NULL elsewhere, which every
    aggregate skips), named by the clause as written. The engine clamps the whole CASE, which is clamping
    its THEN: NULL stays NULL (rewrite/clamp_values.py)."""
    expression = exp.Case(ifs=[exp.If(this=test.copy(), true=source.expression.copy())])
    shown, written_condition = case.meta[FILTERED]
    return dataclasses.replace(
        source,
        name=input_name(expression.sql(dialect="postgres"), source.lower, source.upper),
        expression=expression,
        shown=shown,
        condition=written_condition,
    )


DAY_ZERO = datetime.date(1970, 1, 1)
"""A date column is measured as its day number, the days since this date (``d - DATE '1970-01-01'``,
an integer on both engines); the released day number is turned back into a date."""

SECOND_ZERO = datetime.datetime(1970, 1, 1)
"""A timestamp column is measured as its epoch second (``EXTRACT(epoch FROM ts)``: the seconds since
this instant, read as written — the column has no time zone); the released second is turned back into
a timestamp. Whole seconds: the noise of a quantile is coarser than a second on any range worth declaring."""

_DATE_HINT = (
    "a date or timestamp column answers COUNT, MIN, MAX, MEDIAN and PERCENTILE_CONT/DISC (as dates or "
    "timestamps) once the policy declares its lower and upper bounds; group by date_trunc or EXTRACT of it"
)
_BOUNDS_EXAMPLES = {
    ColumnType.DATE: "dates for column {name} in the policy (veil.toml), e.g. lower = 2024-01-01, upper = 2025-12-31",
    ColumnType.TIMESTAMP: "timestamps for column {name} in the policy (veil.toml), e.g. lower = "
    "2024-01-01T00:00:00, upper = 2025-12-31T23:59:59",
}


def day_number(day: datetime.date) -> int:
    return (day - DAY_ZERO).days


def day_of(number: float) -> datetime.date:
    """The date of a day number (a released quantile's day is chosen in release/apply.py: post-processing)."""
    return DAY_ZERO + datetime.timedelta(days=round(number))


def second_number(moment: datetime.datetime) -> int:
    """The epoch second of a (naive) timestamp, fractions dropped."""
    return (moment - SECOND_ZERO) // datetime.timedelta(seconds=1)


def second_of(number: float) -> datetime.datetime:
    """The timestamp of an epoch second (chosen in release/apply.py: post-processing)."""
    return SECOND_ZERO + datetime.timedelta(seconds=round(number))


def _moment_number(column: ColumnPolicy) -> tuple[exp.Expression, float, float]:
    """A date's day number (``d - DATE '1970-01-01'``, an integer on both engines) or a timestamp's epoch
    second (``EXTRACT(epoch FROM ts)``, NUMERIC on PostgreSQL, DOUBLE on DuckDB, ±infinity or NULL for an
    infinite timestamp — never an error), and the declared bounds in that unit."""
    assert isinstance(column.lower, datetime.date) and isinstance(column.upper, datetime.date)
    if column.type is ColumnType.TIMESTAMP:
        assert isinstance(column.lower, datetime.datetime) and isinstance(column.upper, datetime.datetime)
        seconds = exp.Extract(this=exp.var("epoch"), expression=exp.column(column.name))
        return seconds, float(second_number(column.lower)), float(second_number(column.upper))
    days = exp.Sub(
        this=exp.column(column.name),
        expression=exp.cast(exp.Literal.string(DAY_ZERO.isoformat()), exp.DataType.build("date")),
    )
    return days, float(day_number(column.lower)), float(day_number(column.upper))


def _moment_input(column: ColumnPolicy, kind: AggregateKind, *, call: str) -> AggregateInput:
    """COUNT(d) reads the date or timestamp as it is. A quantile (MIN, MAX, MEDIAN, PERCENTILE) reads
    its day number (a date) or epoch second (a timestamp) clamped to the declared bounds' numbers, so it
    is answered by the same grid histogram and exponential mechanism as a number, and released in the
    column's type (DATE or TIMESTAMP). Sums of moments mean nothing."""
    plain = AggregateInput(column.name, exp.column(column.name), column.type)
    if not kind.needs_bounds:
        return plain
    if kind is not AggregateKind.QUANTILE:
        raise refuse(f'{call}: column "{column.name}" is not numeric', hint=_DATE_HINT)
    if not isinstance(column.lower, datetime.date) or not isinstance(column.upper, datetime.date):
        raise refuse(
            f'{call}: column "{column.name}" has no declared bounds',
            hint="declare lower and upper " + _BOUNDS_EXAMPLES[column.type].format(name=column.name),
        )
    number, lower, upper = _moment_number(column)
    name = input_name(number.sql(dialect="postgres"), lower, upper)
    return AggregateInput(name, number, column.type, lower, upper, shown=column.name)


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


def _distinct_count(node: exp.Expression, distinct: exp.Distinct, scope: ColumnScope) -> Aggregate:
    """COUNT(DISTINCT unit), or the people with a row where a condition holds: COUNT(DISTINCT unit)
    FILTER (WHERE c), or COUNT(DISTINCT CASE WHEN c THEN unit END) as SQL writes it without FILTER."""
    unit = scope.table.privacy_unit
    arguments = distinct.expressions
    if isinstance(node, exp.Count) and unit is not None and len(arguments) == 1:
        conditions, value = _peeled(arguments[0])
        if _is_unit([value], scope):
            shown, _ = _as_written(arguments[0])
            condition = _people_condition(conditions, arguments[0], scope) if conditions else None
            return Aggregate(AggregateKind.COUNT_UNITS, condition, unit=shown)
    raise refuse(
        "DISTINCT aggregates are only supported as COUNT(DISTINCT <privacy unit>)",
        hint=f"count people with COUNT(DISTINCT {unit})" if unit else "each row is one person: use COUNT(*)",
    )


def _peeled(argument: exp.Expression) -> tuple[list[exp.Expression], exp.Expression]:
    """The conditions and the value of ``CASE WHEN c THEN … END`` nested any number of times (a FILTER
    clause's CASE or the analyst's), outermost first: ([], argument) for anything else."""
    conditions: list[exp.Expression] = []
    while (branch := _only_branch(argument)) is not None:
        condition, argument = branch
        conditions.append(condition)
    return conditions, argument


def _only_branch(node: exp.Expression) -> tuple[exp.Expression, exp.Expression] | None:
    """(c, v) of ``CASE WHEN c THEN v END`` (no ELSE, or ELSE NULL): v where c holds, NULL elsewhere."""
    if not isinstance(node, exp.Case) or node.this is not None:
        return None
    branches = node.args.get("ifs") or []
    otherwise = node.args.get("default")
    if len(branches) != 1 or not (otherwise is None or isinstance(otherwise, exp.Null)):
        return None
    return branches[0].this, branches[0].args["true"]


def _people_condition(
    conditions: list[exp.Expression], argument: exp.Expression, scope: ColumnScope
) -> AggregateInput:
    """What the engine counts per person for COUNT(DISTINCT unit) under ``conditions``: ``CASE WHEN c
    THEN 1 END``, checked like any condition on private values. A person is counted when at least one of
    their rows gives 1, so the count keeps sensitivity 1 per group (rewrite/bound_contributions.py)."""
    test = _checked_condition(conditions, scope)
    expression = exp.Case(ifs=[exp.If(this=test, true=exp.Literal.number(1))])
    _, written_condition = _as_written(argument)
    return AggregateInput(
        input_name(expression.sql(dialect="postgres"), None, None),
        expression,
        ColumnType.INTEGER,
        shown="1",
        condition=written_condition,
    )


def _checked_condition(conditions: list[exp.Expression], scope: ColumnScope) -> exp.Expression:
    """All of ``conditions`` (nested CASEs hold where each does), unqualified and checked like any
    condition on private values: the engine makes it unable to fail on any row."""
    test = scope.unqualified(exp.and_(*(condition.copy() for condition in conditions)))
    check_predicate(test, clause="an aggregate")
    return test


def _is_unit(arguments: list[exp.Expression], scope: ColumnScope) -> bool:
    """Whether the arguments of a DISTINCT are the table's privacy unit alone."""
    return (
        len(arguments) == 1
        and isinstance(arguments[0], exp.Column)
        and scope.column(arguments[0]).name == scope.table.privacy_unit
    )


def _as_written(argument: exp.Expression) -> tuple[str, str | None]:
    """An aggregate's argument as written, and its FILTER condition: a CASE that analysis/filter_clauses.py
    made from ``agg(x) FILTER (WHERE c)`` is shown as ``x`` under condition ``c``."""
    filtered = argument.meta.get(FILTERED)
    return (filtered[0], filtered[1]) if filtered else (written(argument), None)


def written(node: exp.Expression) -> str:
    """An expression as the analyst wrote it (normalized by sqlglot: ``v.cost``, ``price * qty``)."""
    return node.sql(dialect="postgres", normalize_functions="lower")


def _require_bounds(column: AggregateInput, *, call: str, numeric: bool) -> None:
    if not numeric:
        raise refuse(f'{call}: column "{column.text}" is not numeric', hint="use COUNT instead")
    if not column.has_bounds:
        raise refuse(
            f'{call}: column "{column.text}" has no declared bounds',
            hint=f"declare lower and upper for column {column.name} in the policy (veil.toml)",
        )
