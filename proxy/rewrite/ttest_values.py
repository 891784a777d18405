"""The engine query of a t-test: one row per person, their clamped value and their group.

    SELECT v, in_a FROM (
      SELECT AVG(CASE WHEN income < 0 THEN 0 WHEN income > 1e6 THEN 1e6 ELSE income END) - 0 AS v,
             BOOL_OR(COALESCE(<sex = 'Female', error-free>, FALSE)) AS in_a
      FROM people WHERE <error-free filter> GROUP BY person_id
    ) AS per_person WHERE v IS NOT NULL ORDER BY in_a, v

Why one row per person: the t-test's privacy is stated for neighbours that differ in one record, so a
person must be one record — the mean of their clamped values (a table without a privacy unit has one
row per person already), shifted to [0, upper − lower] as the mechanism expects. A person belongs to
group A if the predicate holds on any of their rows (on the one row, usually: the predicate describes
the person). The engine sorts the values: the mechanism's smooth bound reads them in order.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.analysis.ttest import TTestQuery
from proxy.rewrite.bound_contributions import table_node
from proxy.rewrite.clamp_values import bound_literal, clamp_value
from proxy.rewrite.safe_predicates import error_free

VALUE, GROUP = "v", "in_a"


def per_person_values(query: TTestQuery, *, dialect: str) -> exp.Select:
    table, column = query.table, query.value
    assert column.lower is not None and column.upper is not None  # checked by ttest_query
    shifted = exp.Sub(
        this=clamp_value(exp.column(column.name), lower=column.lower, upper=column.upper),
        expression=bound_literal(column.lower),
    )
    in_a = exp.func("coalesce", error_free(query.group.copy(), table=table, dialect=dialect), exp.false())
    if table.privacy_unit is None:
        inner = exp.select(shifted.as_(VALUE), in_a.as_(GROUP))
    else:
        inner = exp.select(exp.func("avg", shifted).as_(VALUE), exp.LogicalOr(this=in_a).as_(GROUP))
        inner = inner.group_by(exp.column(table.privacy_unit))
    inner = inner.from_(table_node(table.name))
    if query.where is not None:
        inner = inner.where(error_free(query.where.copy(), table=table, dialect=dialect))
    return (
        exp.select(exp.column(VALUE), exp.column(GROUP))
        .from_(inner.subquery("per_person"))
        .where(exp.Not(this=exp.Is(this=exp.column(VALUE), expression=exp.Null())))
        .order_by(exp.column(GROUP), exp.column(VALUE))
    )
