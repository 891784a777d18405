"""``veil_ttest(value, group_predicate [, 'p_value'])``: Welch's t-test between two groups of people.

    SELECT veil_ttest(income, sex = 'Female') FROM people WHERE age >= 18

compares the mean ``income`` of the people for whom ``sex = 'Female'`` holds (group A) with everyone
else's (group B), as a differentially private release (mechanisms/ttest.py, docs/sql.md). The select list
is that one call; the table is one private table, read directly (no joins, subqueries or GROUP BY).

Why a statement shape of its own rather than an aggregate among others: the t statistic's noise depends
on the data (smooth sensitivity), it needs every person's value rather than a sum, and it answers several
columns at once (t, the noise's size, the privacy spent). The value column and the predicate are checked
by the ordinary analysis: this module asks :func:`query_shape` about ``SELECT COUNT(value) FROM table
WHERE …`` (and about the predicate as a WHERE), so the same allow-list, safety rules and messages apply,
and only then reads the shapes it got.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from proxy.analysis.refusals import CLAUSE_NAMES, refuse
from proxy.analysis.shape import QueryShape, query_shape
from proxy.config import ColumnPolicy, DatasetPolicy, TablePolicy

TTEST_FUNCTION = "veil_ttest"
P_VALUE_OPTION = "p_value"
_USAGE = (
    "SELECT veil_ttest(value_column, group_predicate [, 'p_value']) FROM private_table [WHERE …]: "
    "the value column needs public bounds (lower, upper) in the policy"
)


@dataclass(frozen=True)
class TTestQuery:
    """A checked t-test: the table, the value column, the group predicate and the row filter, both
    unqualified and checked against the allow-list (they are made error-free when the engine SQL is
    built), and whether a p-value was asked for."""

    table: TablePolicy
    value: ColumnPolicy
    group: exp.Expression
    where: exp.Expression | None
    p_value: bool


def is_ttest(tree: exp.Expression) -> bool:
    """Whether a SELECT calls veil_ttest anywhere (then it must be a t-test query, or it is refused)."""
    return isinstance(tree, exp.Select) and any(_is_call(node) for node in tree.find_all(exp.Anonymous))


def ttest_query(tree: exp.Select, dataset: DatasetPolicy) -> TTestQuery:
    """Check a t-test statement, or refuse it (42501, with the accepted form as the hint)."""
    call = _the_call(tree)
    if len(call.expressions) not in (2, 3):
        raise refuse(
            "veil_ttest takes a value column, a group predicate and optionally 'p_value'", hint=_USAGE
        )
    value, group, *options = call.expressions
    p_value = _p_value_option(options)
    if not isinstance(value, exp.Column):
        raise refuse("veil_ttest's first argument must be a column of the table", hint=_USAGE)
    where = tree.args.get("where")
    value_shape = _shape(tree, exp.func("count", value.copy()), where.this.copy() if where else None, dataset)
    group_shape = _shape(tree, exp.func("count", exp.Star()), group.copy(), dataset)
    column = value_shape.table.column(value.name)
    assert column is not None  # COUNT(value) was analysed: the column exists
    if not column.type.is_numeric or not column.has_bounds:
        raise refuse(f'column "{value.name}" is not numeric with public bounds to clamp it to', hint=_USAGE)
    assert group_shape.where is not None  # the predicate was given as the WHERE of the probe
    return TTestQuery(value_shape.table, column, group_shape.where, value_shape.where, p_value)


def _is_call(node: exp.Expression) -> bool:
    return isinstance(node, exp.Anonymous) and str(node.this).lower() == TTEST_FUNCTION


def _the_call(tree: exp.Select) -> exp.Anonymous:
    """The one select item, ``veil_ttest(…)`` (an alias is allowed and ignored), in a statement without
    grouping or ordering clauses: the answer is one row of several columns, named by Veil."""
    items = tree.expressions
    item = items[0].this if len(items) == 1 and isinstance(items[0], exp.Alias) else items[0]
    if len(items) != 1 or not _is_call(item):
        raise refuse("veil_ttest must be the only item of the select list", hint=_USAGE)
    for clause in ("group", "having", "order", "limit", "offset", "distinct", "joins", "with_"):
        if tree.args.get(clause):
            raise refuse(f"a veil_ttest query takes no {CLAUSE_NAMES[clause]} clause", hint=_USAGE)
    return item


def _p_value_option(options: list[exp.Expression]) -> bool:
    if not options:
        return False
    (option,) = options
    if isinstance(option, exp.Literal) and option.is_string and option.this.lower() == P_VALUE_OPTION:
        return True
    raise refuse("veil_ttest's third argument can only be the string 'p_value'", hint=_USAGE)


def _shape(
    tree: exp.Select, aggregate: exp.Expression, condition: exp.Expression | None, dataset: DatasetPolicy
) -> QueryShape:
    """The ordinary analysis of ``SELECT <aggregate> FROM <the t-test's table> [WHERE condition]``."""
    probe = exp.select(aggregate).from_(tree.args["from_"].this.copy())
    if condition is not None:
        probe = probe.where(condition)
    return query_shape(probe, dataset)
