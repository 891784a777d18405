"""Build the engine query that computes a shape's exact, contribution-bounded quantities.

Rows are filtered, keys outside the public domain dropped and summed values clamped to the
declared bounds. Then each person's rows are **pre-aggregated per (person, group)** and the
person's whole contribution vector is **scaled to an ℓ1 bound**: with N_u rows in total, every
partial of person u is multiplied by ``w_u = min(1, L / N_u)``. One person therefore moves the
vector of all group counts by at most ``L`` in ℓ1, and the vector of sums by at most
``L·max(|lower|, |upper|)`` — the sensitivities the release plan uses (spec dp-mechanisms.md
§2.1–2.2) — while people within the bound keep their exact contribution. Unlike row sampling
(``ROW_NUMBER() OVER (PARTITION BY person ORDER BY random())``) this is deterministic, sorts only
the small per-person table, and does not drop a random subset of rows.

When each row is its own person there is nothing to bound: one plain GROUP BY.

>>> bounded_query(shape, quantities, dialect="duckdb").sql()  # SELECT region, COUNT(*) … GROUP BY region
WITH _dp_partials AS (SELECT _dp_unit, _dp_key_0, COUNT(*) AS _dp_rows FROM (SELECT patient_id AS
_dp_unit, region AS _dp_key_0 FROM visits WHERE region IN (…)) AS _dp_filtered GROUP BY _dp_unit,
_dp_key_0), _dp_totals AS (SELECT _dp_unit, SUM(_dp_rows) AS _dp_person_rows FROM _dp_partials
GROUP BY _dp_unit) SELECT _dp_key_0, SUM(_dp_rows * CASE WHEN _dp_person_rows <= 10.0 THEN 1.0
ELSE 10.0 / _dp_person_rows END) AS _dp_q0 FROM _dp_partials JOIN _dp_totals USING (_dp_unit)
GROUP BY _dp_key_0
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp

from proxy.analysis.aggregates import AggregateInput, input_name
from proxy.analysis.derived import ValueBound
from proxy.analysis.quantities import Quantity, QuantityKind
from proxy.analysis.refusals import refuse
from proxy.analysis.shape import GroupKey, QueryShape
from proxy.rewrite.clamp_values import clamp_value
from proxy.rewrite.partition_guard import partition_guard
from proxy.rewrite.safe_predicates import error_free

UNIT = "_dp_unit"
ROWS = "_dp_rows"
PERSON_ROWS = "_dp_person_rows"
PERSON_GROUPS = "_dp_person_groups"


def table_node(name: str) -> exp.Table:
    """A table node built directly: a string argument would be parsed by sqlglot on every query."""
    return exp.Table(this=exp.to_identifier(name))


def key_alias(index: int) -> str:
    return f"_dp_key_{index}"


def quantity_alias(index: int) -> str:
    return f"_dp_q{index}"


def value_alias(column: AggregateInput) -> str:
    return f"_dp_value_{column.name}"


def partial_alias(quantity: Quantity) -> str:
    """Per-(person, group) partial of a quantity: ``_dp_rows``, ``_dp_count_age``, ``_dp_sum_age``…"""
    prefixes = {
        QuantityKind.NON_NULL: "count",
        QuantityKind.UNITS: "units",
        QuantityKind.SUM: "sum",
        QuantityKind.SUM_SQUARES: "sumsq",
    }
    if quantity.column is None:
        return ROWS if quantity.kind is QuantityKind.ROWS else "_dp_units"
    return f"_dp_{prefixes[quantity.kind]}_{quantity.column.name}"


def bounded_query(shape: QueryShape, quantities: tuple[Quantity, ...], *, dialect: str) -> exp.Select:
    rows = _filtered_rows(shape, quantities, dialect=dialect)
    keys = [exp.column(key_alias(i)) for i in range(len(shape.group_keys))]
    if shape.table.privacy_unit is None:
        measures = [_aggregate(q).as_(quantity_alias(i)) for i, q in enumerate(quantities)]
        return _grouped(
            exp.select(*keys, *measures, copy=False).from_(rows.subquery("_dp_filtered"), copy=False), keys
        )
    partials = _per_person_partials(rows, quantities, keys)
    bound = shape.table.max_contributions
    if shape.thresholded:
        partials = _first_groups(partials, keys, bound)
    if not keys:  # one partial per person: the person's total is the partial itself
        measures = _weighted_sums(quantities, rows=_weight(bound, exp.column(ROWS), dialect), groups=None)
        return exp.select(*measures, copy=False).from_(partials.subquery("_dp_partials"), copy=False)
    # A person's totals over all groups, joined back (measured 2× faster than a window in DuckDB).
    totals = (
        exp.select(
            exp.column(UNIT),
            exp.Sum(this=exp.column(ROWS)).as_(PERSON_ROWS),
            exp.Count(this=exp.Star()).as_(PERSON_GROUPS),
            copy=False,
        )
        .from_(table_node("_dp_partials"), copy=False)
        .group_by(exp.column(UNIT), copy=False)
    )
    measures = _weighted_sums(
        quantities,
        rows=_weight(bound, exp.column(PERSON_ROWS), dialect),
        groups=_weight(bound, exp.column(PERSON_GROUPS), dialect),
    )
    query = (
        exp.select(*keys, *measures, copy=False)
        .from_(table_node("_dp_partials"), copy=False)
        .join(table_node("_dp_totals"), using=[exp.to_identifier(UNIT)], copy=False)
        .group_by(*_copies(keys), copy=False)
    )
    return query.with_(
        exp.TableAlias(this=exp.to_identifier("_dp_partials")), as_=partials, copy=False
    ).with_(exp.TableAlias(this=exp.to_identifier("_dp_totals")), as_=totals, copy=False)


def _weighted_sums(
    quantities: tuple[Quantity, ...], *, rows: exp.Expression, groups: exp.Expression | None
) -> list[exp.Expression]:
    """Row quantities are scaled by the row weight; COUNT(DISTINCT unit) by the group weight
    (a person counts once per group, so their ℓ1 contribution is their number of groups)."""
    measures = []
    for index, quantity in enumerate(quantities):
        if quantity.kind is QuantityKind.UNITS:
            measure = _people(quantity, groups)
        else:
            measure = exp.Sum(this=exp.Mul(this=exp.column(partial_alias(quantity)), expression=rows.copy()))
        measures.append(measure.as_(quantity_alias(index)))
    return measures


def _people(quantity: Quantity, groups: exp.Expression | None) -> exp.Expression:
    """The people of each group (one partial per person and group), each weighted by ``groups``; under a
    condition, only the people with a row where it holds. The weight still divides by all the person's
    groups, the ones without such a row included: their ℓ1 (and ℓ2) contribution can only shrink, so the
    sensitivity of plain COUNT(DISTINCT unit) holds."""
    if quantity.column is None:
        return exp.Count(this=exp.Star()) if groups is None else exp.Sum(this=groups.copy())
    matched = exp.GT(this=exp.column(partial_alias(quantity)), expression=exp.Literal.number(0))
    if groups is None:  # one partial per person: a count of people, an exact integer
        return exp.Count(this=exp.Case(ifs=[exp.If(this=matched, true=exp.Literal.number(1))]))
    weighted = exp.Case(ifs=[exp.If(this=matched, true=groups.copy())], default=exp.Literal.number(0))
    return exp.Sum(this=weighted)


def _copies(nodes: list[exp.Column]) -> list[exp.Column]:
    """Builders run with copy=False (deep copies dominated planning time); a node used in two
    places of the tree must be two nodes."""
    return [node.copy() for node in nodes]


def _grouped(query: exp.Select, keys: list[exp.Column]) -> exp.Select:
    return query.group_by(*_copies(keys), copy=False) if keys else query


def _aggregate(quantity: Quantity) -> exp.Expression:
    """The plain aggregate of a quantity over filtered rows (or per person, for partials)."""
    if quantity.column is None:  # COUNT(*), or COUNT(DISTINCT unit) where rows are people
        return exp.Count(this=exp.Star())
    value = exp.column(value_alias(quantity.column))
    if quantity.kind in (QuantityKind.NON_NULL, QuantityKind.UNITS):  # UNITS: rows where the condition holds
        return exp.Count(this=value)
    if quantity.kind is QuantityKind.SUM_SQUARES:
        # squared as DOUBLE: in the column's own type, a clamped value's square overflows (an INTEGER from
        # 46,341), and an overflow is an engine error that depends on the data
        squared = exp.cast(value, exp.DataType.Type.DOUBLE)
        return exp.Sum(this=exp.Mul(this=squared, expression=squared.copy()))
    return exp.Sum(this=value)


def _per_person_partials(
    rows: exp.Select, quantities: tuple[Quantity, ...], keys: list[exp.Column]
) -> exp.Select:
    """One row per (person, group): the row count (always, for the weight) and each partial."""
    needed = {partial_alias(q): q for q in quantities if q.column is not None}
    partials = [exp.Count(this=exp.Star()).as_(ROWS)]
    partials += [_aggregate(q).as_(alias) for alias, q in needed.items()]
    unit = exp.column(UNIT)
    return (
        exp.select(unit, *keys, *partials, copy=False)
        .from_(rows.subquery("_dp_filtered"), copy=False)
        .group_by(unit.copy(), *_copies(keys), copy=False)
    )


def _first_groups(partials: exp.Select, keys: list[exp.Column], bound: int) -> exp.Select:
    """Keys come from the data: keep each person in at most L groups (the first L by key), so one
    person can add at most L keys — the count the threshold's δ is calibrated for."""
    rank = exp.Window(
        this=exp.RowNumber(),
        partition_by=[exp.column(UNIT)],
        order=exp.Order(expressions=[exp.Ordered(this=key.copy()) for key in keys]),
    )
    ranked = exp.select(exp.Star(), rank.as_("_dp_group_rank"), copy=False).from_(
        partials.subquery("_dp_all_groups"), copy=False
    )
    limit = exp.LTE(this=exp.column("_dp_group_rank"), expression=exp.convert(bound))
    return (
        exp.select(exp.Star(), copy=False)
        .from_(ranked.subquery("_dp_ranked"), copy=False)
        .where(limit, copy=False)
    )


def _weight(bound: int, total: exp.Column, dialect: str) -> exp.Expression:
    """``min(1, L / total)``: 1 for people within the bound, L/total for the rest. On Spark the total is
    read as DOUBLE: ``10.0 / total`` would be DECIMAL arithmetic there (the literal is a DECIMAL), which
    made the whole bounded query 1.9× the expert's (docs/benchmarks.md)."""
    limit = exp.Literal.number(f"{float(bound)!r}")
    if dialect == "spark":
        total = exp.cast(total, exp.DataType.Type.DOUBLE)  # type: ignore[assignment]
    return exp.Case(
        ifs=[exp.If(this=exp.LTE(this=total, expression=limit), true=exp.Literal.number("1.0"))],
        default=exp.Div(this=limit.copy(), expression=total.copy()),
    )


def _filtered_rows(shape: QueryShape, quantities: tuple[Quantity, ...], *, dialect: str) -> exp.Select:
    """Filtered rows: the person, the group keys and the clamped values."""
    unit = [exp.column(shape.table.privacy_unit).as_(UNIT)] if shape.table.privacy_unit is not None else []
    keys = [_key(key, shape, dialect).as_(key_alias(i)) for i, key in enumerate(shape.group_keys)]
    columns = distinct_inputs(q.column for q in quantities if q.column is not None)
    values = [_value(source, shape, dialect).as_(value_alias(source)) for source in columns]
    projection = [*unit, *keys, *values] or [exp.Literal.number(1).as_("_dp_one")]  # COUNT(*) alone
    rows = exp.select(*projection, copy=False).from_(_source(shape, dialect), copy=False)
    conditions = (
        [error_free(shape.where, table=shape.table, dialect=dialect)] if shape.where is not None else []
    )
    conditions += [_in_public_domain(key, shape, dialect) for key in shape.group_keys if not key.thresholded]
    if (guard := partition_guard(shape)) is not None:
        conditions.append(guard)
    return rows.where(exp.and_(*conditions), copy=False) if conditions else rows


def distinct_inputs(inputs: Iterable[AggregateInput]) -> list[AggregateInput]:
    """Each input once, by name. Values and partial sums are keyed by the input's name while each
    measurement is priced with its own input's bounds, so two different inputs under one name could
    make a sum priced for one read the other's values: refused, before anything runs."""
    by_name: dict[str, AggregateInput] = {}
    for source in inputs:
        known = by_name.setdefault(source.name, source)
        if known != source or known.expression != source.expression:
            raise refuse(
                f'the aggregate inputs "{known.text}" and "{source.text}" cannot be told apart',
                hint="write one of them differently, e.g. with veil_clamp",
            )
    return list(by_name.values())


def _source(shape: QueryShape, dialect: str) -> exp.Expression:
    """The table, or the per-person subquery (its own WHERE and aggregate arguments made error-free like
    any filter)."""
    if shape.source is None:
        return table_node(shape.table.name)
    inner = shape.source.select.copy()
    table = shape.source.table
    where = inner.args.get("where")
    if where is not None:
        inner.set("where", exp.Where(this=error_free(where.this, table=table, dialect=dialect)))
    for aggregate in inner.find_all(exp.AggFunc):
        argument = aggregate.this
        if isinstance(argument, exp.Distinct):
            argument.set(
                "expressions", [error_free(e, table=table, dialect=dialect) for e in argument.expressions]
            )
        elif argument is not None and not isinstance(argument, exp.Star):
            aggregate.set("this", error_free(argument, table=table, dialect=dialect))
    return inner.subquery(shape.table.name, copy=False)


def _value(source: AggregateInput, shape: QueryShape, dialect: str) -> exp.Expression:
    """The aggregate's input, made unable to fail on any row if it is an expression, then clamped."""
    value = source.expression.copy()
    if not isinstance(value, exp.Column):
        value = error_free(value, table=shape.table, dialect=dialect)
    if source.lower is None or source.upper is None:
        return value
    return clamp_value(value, lower=source.lower, upper=source.upper)


def _key(key: GroupKey, shape: QueryShape, dialect: str) -> exp.Expression:
    """A plain column as is; an expression made unable to fail on any row, like the filter."""
    if isinstance(key.expression, exp.Column):
        return key.expression.copy()
    return error_free(key.expression, table=shape.table, dialect=dialect)


def _in_public_domain(key: GroupKey, shape: QueryShape, dialect: str) -> exp.Expression:
    """Rows whose key is outside the public domain (or NULL) form no released group: drop them early.
    An empty domain keeps no row (``IN ()`` is not SQL on PostgreSQL)."""
    assert key.values is not None, "key domains are resolved before the query is built"
    if not key.values:
        return exp.false()
    return _key(key, shape, dialect).isin(*[exp.convert(value) for value in key.values])


QUANTILE_GRID = 1000  # G: a quantile is one of the G + 1 grid points over [lower, upper]
WEIGHT_UNIT = 2520  # K: integer weights in units of 1/K keep histogram counts exact (lcm of 1..10)
BUCKET = "_dp_bucket"


def histogram_query(shape: QueryShape, column: AggregateInput, *, dialect: str) -> exp.Select:
    """Per group, the weighted count of a column's clamped values in each of G grid cells — all a
    DP quantile needs, computed in the engine (weights: :func:`_weighted_histogram`)."""
    value = exp.column(value_alias(column))
    rows = _filtered_rows(shape, (Quantity(QuantityKind.SUM, column),), dialect=dialect)
    assert column.lower is not None and column.upper is not None
    width = exp.Literal.number(f"{float(column.upper - column.lower)!r}")
    position = exp.Div(
        this=exp.Mul(
            this=exp.Paren(this=exp.Sub(this=value, expression=exp.convert(column.lower))),
            expression=exp.convert(QUANTILE_GRID),
        ),
        expression=width,
    )
    bucket = exp.Least(
        this=exp.convert(QUANTILE_GRID - 1),
        expressions=[exp.Cast(this=exp.Floor(this=position), to=exp.DataType(this=exp.DataType.Type.INT))],
    )
    values = (
        exp.select(exp.Star(), bucket.as_(BUCKET), copy=False)
        .from_(rows.subquery("_dp_rows"), copy=False)
        .where(value.copy().is_(exp.null()).not_(), copy=False)
    )
    return _weighted_histogram(shape, values, BUCKET)


def mode_histogram_query(shape: QueryShape, column: AggregateInput, *, dialect: str) -> exp.Select:
    """Per group, the weighted count of each public value of a column — all a DP mode needs, computed
    in the engine. Values outside the policy's domain (and NULL) are dropped, like group keys outside
    theirs; the values are not clamped, so each row counts for the value it holds.

    >>> mode_histogram_query(shape, blood, dialect="duckdb").sql()  # MODE() WITHIN GROUP (ORDER BY blood)
    WITH _dp_values AS (SELECT * FROM (SELECT patient_id AS _dp_unit, blood AS _dp_value_blood FROM
    visits) AS _dp_rows WHERE _dp_value_blood IN ('A', 'B', 'O')), _dp_totals AS (…) SELECT
    _dp_value_blood, SUM(…) AS _dp_weight FROM _dp_values JOIN _dp_totals USING (_dp_unit) GROUP BY …
    """
    assert column.values is not None, "a mode's candidates are the column's public values"
    rows = _filtered_rows(shape, (Quantity(QuantityKind.MODE, column),), dialect=dialect)
    value = exp.column(value_alias(column))
    values = (
        exp.select(exp.Star(), copy=False)
        .from_(rows.subquery("_dp_rows"), copy=False)
        .where(value.isin(*[exp.convert(candidate) for candidate in column.values]), copy=False)
    )
    return _weighted_histogram(shape, values, value_alias(column))


def _weighted_histogram(shape: QueryShape, values: exp.Select, label: str) -> exp.Select:
    """``SUM(weight)`` per group and ``label`` over the rows of ``values``. Each person's weights are
    integers summing to at most L·K (K per row within the bound, ``L·K // N_u`` beyond it, N_u the
    person's rows here), so histogram counts stay exact integers whatever L is."""
    keys = [exp.column(key_alias(i)) for i in range(len(shape.group_keys))]
    if shape.table.privacy_unit is None:
        counts = exp.select(
            *keys, exp.column(label), exp.Count(this=exp.Star()).as_("_dp_weight"), copy=False
        )
        return counts.from_(values.subquery("_dp_values"), copy=False).group_by(
            *_copies(keys), exp.column(label), copy=False
        )
    totals = (
        exp.select(exp.column(UNIT), exp.Count(this=exp.Star()).as_(PERSON_ROWS), copy=False)
        .from_(table_node("_dp_values"), copy=False)
        .group_by(exp.column(UNIT), copy=False)
    )
    limit = shape.table.max_contributions * WEIGHT_UNIT
    weight = exp.Case(
        ifs=[
            exp.If(
                this=exp.LTE(
                    this=exp.column(PERSON_ROWS), expression=exp.convert(shape.table.max_contributions)
                ),
                true=exp.convert(WEIGHT_UNIT),
            )
        ],
        default=exp.IntDiv(this=exp.convert(limit), expression=exp.column(PERSON_ROWS)),
    )
    query = (
        exp.select(*keys, exp.column(label), exp.Sum(this=weight).as_("_dp_weight"), copy=False)
        .from_(table_node("_dp_values"), copy=False)
        .join(table_node("_dp_totals"), using=[exp.to_identifier(UNIT)], copy=False)
        .group_by(*_copies(keys), exp.column(label), copy=False)
    )
    return query.with_(exp.TableAlias(this=exp.to_identifier("_dp_values")), as_=values, copy=False).with_(
        exp.TableAlias(this=exp.to_identifier("_dp_totals")), as_=totals, copy=False
    )


def value_histogram_query(shape: QueryShape, bound: ValueBound, *, dialect: str) -> exp.Select:
    """How many people have each ``⌈|value| / unit⌉`` of a per-person value (NULLs left out, counts above
    the cap counted as the cap), after the query's own filters — what the DP choice of the value's bound
    needs. Each person is one row of the per-person table, so one count here: sensitivity 1.

    >>> value_histogram_query(shape, ValueBound("n", 1.0, 100, 1), dialect="duckdb").sql()
    SELECT CAST(LEAST(CEIL(ABS(_dp_value_n) / 1.0), 100) AS BIGINT) AS _dp_count, COUNT(*) AS _dp_people
    FROM (SELECT n AS _dp_value_n FROM (SELECT user_id, COUNT(*) AS n …) AS per_user) AS _dp_rows
    WHERE NOT _dp_value_n IS NULL GROUP BY …
    """
    column = _unbounded_value(bound)
    rows = _filtered_rows(shape, (Quantity(QuantityKind.SUM, column),), dialect=dialect)
    value = exp.column(value_alias(column))
    steps = exp.Ceil(
        this=exp.Div(this=exp.Abs(this=value), expression=exp.Literal.number(f"{float(bound.unit)!r}"))
    )
    capped = exp.Cast(
        this=exp.Least(this=steps, expressions=[exp.convert(bound.cap)]),
        to=exp.DataType(this=exp.DataType.Type.BIGINT),
    )
    counts = exp.select(capped.as_("_dp_count"), exp.Count(this=exp.Star()).as_("_dp_people"), copy=False)
    return (
        counts.from_(rows.subquery("_dp_rows"), copy=False)
        .where(value.copy().is_(exp.null()).not_(), copy=False)
        .group_by(capped.copy(), copy=False)
    )


def _unbounded_value(bound: ValueBound) -> AggregateInput:
    """The per-person value as it is (no bounds), NULL where the bound's FILTER condition does not
    hold: the histogram then leaves out the people whose value the filtered aggregate never reads."""
    column = exp.column(bound.column)
    if bound.condition is None:
        return AggregateInput(bound.column, column)
    expression = exp.Case(ifs=[exp.If(this=bound.condition.copy(), true=column)])
    return AggregateInput(input_name(expression.sql(dialect="postgres"), None, None), expression)


def contributions_histogram_query(shape: QueryShape, *, cap: int, dialect: str) -> exp.Select:
    """How many people have how many rows (after the query's own filters; counts above ``cap`` as
    ``cap``) — what a DP quantile needs to choose max_contributions when the policy says "auto".
    One person is one count here, so this histogram's sensitivity is 1."""
    assert shape.table.privacy_unit is not None
    rows = _filtered_rows(shape, (), dialect=dialect)
    per_person = (
        exp.select(exp.Count(this=exp.Star()).as_("_dp_n"), copy=False)
        .from_(rows.subquery("_dp_rows"), copy=False)
        .group_by(exp.column(UNIT), copy=False)
    )
    capped = exp.Least(this=exp.column("_dp_n"), expressions=[exp.convert(cap)])
    counts = exp.select(capped.as_("_dp_count"), exp.Count(this=exp.Star()).as_("_dp_people"), copy=False)
    return counts.from_(per_person.subquery("_dp_per_person"), copy=False).group_by(
        exp.column("_dp_count"), copy=False
    )
