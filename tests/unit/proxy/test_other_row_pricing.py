"""The "(other)" row (``veil.other_row``): which quantities are measured again over all rows, and at what
price. Found missing by ``make mutants`` (docs/testing.md): nothing checked that only additive quantities
get a total, or that the totals share ε with the grouped quantities."""

from __future__ import annotations

from fractions import Fraction

from budget.amounts import as_decimal
from proxy.analysis.parse import parse_statements
from proxy.analysis.quantities import QuantityKind
from proxy.analysis.statements import PrivateQuery, classify
from proxy.release.plan import ReleasePlan, price_query
from tests.unit.proxy.policy_fixture import clinic_policy

SQL = (
    "SELECT region, COUNT(*), SUM(cost), VAR_POP(age), MEDIAN(age), COUNT(DISTINCT patient_id)"
    " FROM visits GROUP BY region"
)


def plan_for(sql: str, *, other_row: bool) -> ReleasePlan:
    statement = classify(parse_statements(sql)[0], clinic_policy())
    assert isinstance(statement, PrivateQuery)
    return price_query(statement.shape, epsilon=1.0, other_row=other_row)


def test_only_additive_quantities_get_a_total() -> None:
    """Counts and sums add up over groups; quantiles and counts of distinct people do not."""
    totals = plan_for(SQL, other_row=True).total_measurements
    assert [m.quantity.kind for m in totals] == [
        QuantityKind.ROWS,
        QuantityKind.SUM,
        QuantityKind.SUM,
        QuantityKind.SUM_SQUARES,
        QuantityKind.NON_NULL,
    ]
    assert all(m.total for m in totals)


def test_totals_share_epsilon_with_the_grouped_quantities() -> None:
    plan = plan_for(SQL, other_row=True)
    grouped = plan_for(SQL, other_row=False)
    assert len(plan.measurements) == len(grouped.measurements) + 5
    assert sum(Fraction(m.epsilon) for m in plan.measurements) <= Fraction(as_decimal(1.0))
    assert plan.measurements[0].epsilon < grouped.measurements[0].epsilon


def test_a_total_has_the_sensitivity_of_one_cell() -> None:
    """Without GROUP BY a person's L rows land in one cell: the total's sensitivity is that of a sum."""
    (count,) = [
        m for m in plan_for(SQL, other_row=True).total_measurements if m.quantity.kind is QuantityKind.ROWS
    ]
    assert count.sensitivity == 3.0


def test_no_totals_without_group_by() -> None:
    assert plan_for("SELECT COUNT(*) FROM visits", other_row=True).total_measurements == ()
