"""Pricing details of release/plan.py that the other suites left open (``make mutants``, docs/testing.md):
the target of the DP choice of L, and more below as the mutation run finds them."""

from __future__ import annotations

import dataclasses

import pytest

from mechanisms.contribution_bound import bound_target
from proxy.analysis.parse import parse_statements
from proxy.analysis.shape import QueryShape
from proxy.analysis.statements import PrivateQuery, classify
from proxy.release.plan import ReleasePlan, bound_target_people, price_query
from tests.unit.proxy.policy_fixture import clinic_policy


def shape_for(sql: str) -> QueryShape:
    statement = classify(parse_statements(sql)[0], clinic_policy())
    assert isinstance(statement, PrivateQuery)
    return statement.shape


def plan_for(sql: str, **options: object) -> ReleasePlan:
    return price_query(shape_for(sql), **options)  # type: ignore[arg-type]


# -- bound_target_people -------------------------------------------------------------------------------


def test_the_bound_target_is_cells_over_the_epsilon_of_one_quantity() -> None:
    """C = cells / ε_q: 2 regions × 2 sexes, ε = 1 over COUNT(*) and SUM(age): ε_q = 1/2, C = 8."""
    plan = plan_for("SELECT region, sex, COUNT(*), SUM(age) FROM visits GROUP BY region, sex", epsilon=1.0)
    assert plan.shape.cells == 4
    assert bound_target_people(plan) == bound_target(cells=4, epsilon_per_quantity=0.5) == 8


@pytest.mark.parametrize(
    ("sql", "cells"),
    [
        ("SELECT COUNT(*) FROM visits", 1),  # no GROUP BY: one cell
        ("SELECT note, COUNT(*) FROM visits GROUP BY note", None),  # keys from the data: one cell
    ],
)
def test_data_derived_keys_and_no_grouping_count_as_one_cell(sql: str, cells: int | None) -> None:
    plan = plan_for(sql, epsilon=0.5, delta=1e-6)
    assert plan.shape.cells == cells
    share = min(m.epsilon for m in plan.measurements)  # the gate's people count takes a share too
    assert bound_target_people(plan) == round(1 / share)
    assert bound_target_people(plan) != round(2 / share)


def test_a_plan_without_noisy_quantities_aims_at_its_own_epsilon() -> None:
    """No measurement to share ε with: the query's ε is the ε of "one quantity"."""
    plan = dataclasses.replace(plan_for("SELECT COUNT(*) FROM visits", epsilon=0.25), measurements=())
    assert bound_target_people(plan) == 4
