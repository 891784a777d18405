"""Build the engine query that computes a shape's exact, contribution-bounded quantities.

Every privacy unit keeps at most ``max_contributions`` (L) rows — a random per-unit sample drawn
inside the engine — after the WHERE filter and after rows whose group key lies outside the public
domain are dropped. Summed values are clamped to the declared bounds. So one person changes any
count vector by at most L in ℓ1 and any sum vector by at most L·max(|lower|, |upper|): the
sensitivities the release plan uses (spec dp-mechanisms.md §2.1–2.2).

>>> bounded_query(shape, quantities).sql()   # for SELECT region, COUNT(*) FROM visits GROUP BY region
SELECT _dp_key_0, COUNT(*) AS _dp_q0 FROM (SELECT region AS _dp_key_0, ROW_NUMBER() OVER
(PARTITION BY patient_id ORDER BY RANDOM()) AS _dp_row_number FROM visits WHERE region IN (…))
AS _dp_bounded WHERE _dp_row_number <= 10 GROUP BY _dp_key_0
"""

from __future__ import annotations

from sqlglot import exp

from proxy.analysis.quantities import Quantity, QuantityKind
from proxy.analysis.shape import QueryShape
from proxy.config import ColumnPolicy
from proxy.rewrite.clamp_values import clamp_value
from proxy.rewrite.safe_predicates import error_free

ROW_NUMBER = "_dp_row_number"
BOUNDED = "_dp_bounded"
ROWS = "_dp_rows"
UNIT = "_dp_unit"
RANDOM = "_dp_random"


def key_alias(index: int) -> str:
    return f"_dp_key_{index}"


def quantity_alias(index: int) -> str:
    return f"_dp_q{index}"


def value_alias(column: ColumnPolicy) -> str:
    return f"_dp_value_{column.name}"


def bounded_query(shape: QueryShape, quantities: tuple[Quantity, ...]) -> exp.Select:
    keys = [exp.column(key_alias(i)) for i in range(len(shape.group_keys))]
    measures = [_measure(q).as_(quantity_alias(i)) for i, q in enumerate(quantities)]
    query = exp.select(*keys, *measures).from_(_bounded_rows(shape, quantities).subquery(BOUNDED))
    if shape.table.privacy_unit is not None:
        query = query.where(
            exp.LTE(this=exp.column(ROW_NUMBER), expression=exp.convert(shape.table.max_contributions))
        )
    return query.group_by(*keys) if keys else query


def _measure(quantity: Quantity) -> exp.Expression:
    if quantity.kind is QuantityKind.ROWS:
        return exp.Count(this=exp.Star())
    assert quantity.column is not None
    value = exp.column(value_alias(quantity.column))
    return exp.Count(this=value) if quantity.kind is QuantityKind.NON_NULL else exp.Sum(this=value)


def _bounded_rows(shape: QueryShape, quantities: tuple[Quantity, ...]) -> exp.Select:
    """Filtered rows with group keys and clamped values, ranked at random within each privacy unit."""
    keys = [exp.column(column.name).as_(key_alias(i)) for i, column in enumerate(shape.group_keys)]
    columns = {q.column.name: q.column for q in quantities if q.column is not None}
    values = [_value(column).as_(value_alias(column)) for column in columns.values()]
    unit = shape.table.privacy_unit
    draws = [exp.column(unit).as_(UNIT), exp.Rand().as_(RANDOM)] if unit is not None else []
    rows = exp.select(*keys, *values, *draws).from_(exp.to_table(shape.table.name))
    conditions = [error_free(shape.where)] if shape.where is not None else []
    conditions += [_in_public_domain(column) for column in shape.group_keys]
    if conditions:
        rows = rows.where(exp.and_(*conditions))
    if unit is None:
        return rows
    # Engines refuse a volatile ORDER BY inside a window, so the random draw is a column first.
    window = exp.Window(
        this=exp.RowNumber(),
        partition_by=[exp.column(UNIT)],
        order=exp.Order(expressions=[exp.Ordered(this=exp.column(RANDOM))]),
    )
    return exp.select(exp.Star(), window.as_(ROW_NUMBER)).from_(rows.subquery(ROWS))


def _value(column: ColumnPolicy) -> exp.Expression:
    if column.lower is None or column.upper is None:
        return exp.column(column.name)
    return clamp_value(exp.column(column.name), lower=column.lower, upper=column.upper)


def _in_public_domain(column: ColumnPolicy) -> exp.Expression:
    """Rows outside the declared domain (or NULL) cannot form a released group, so drop them early."""
    assert column.values is not None
    return exp.column(column.name).isin(*[exp.convert(value) for value in column.values])
