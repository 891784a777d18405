"""Pricing details of release/plan.py that the other suites left open (``make mutants``, docs/testing.md):
the target of the DP choice of L, and more below as the mutation run finds them."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mechanisms.contribution_bound import bound_target
from mechanisms.gaussian import analytic_gaussian_sigma, discrete_gaussian_sigma
from proxy.analysis.parse import parse_statements
from proxy.analysis.shape import QueryShape
from proxy.analysis.statements import PrivateQuery, classify
from proxy.release.plan import ReleasePlan, _float_at_most, bound_target_people, price_query
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


# -- _float_at_most: the probability τ is computed for -------------------------------------------------


@given(st.fractions(min_value=Fraction(1, 10**12), max_value=1))
def test_the_tail_probability_is_the_largest_float_not_above_delta_per_key(number: Fraction) -> None:
    """τ must hold every single person's key back with probability at least 1 − δ/L: a probability a
    hair above δ/L would give a τ a hair too low."""
    below = _float_at_most(number)
    assert Fraction(below) <= number < Fraction(math.nextafter(below, math.inf))


@pytest.mark.parametrize(
    ("number", "expected"),
    [
        (Fraction(1, 2), 0.5),  # exact: kept
        (Fraction(1, 10), math.nextafter(0.1, 0.0)),  # the float 0.1 is above 1/10: one step down
        (Fraction(1, 3), 1 / 3),  # the float 1/3 is below 1/3: kept
    ],
)
def test_the_tail_probability_is_rounded_down_only_when_the_nearest_float_is_above(
    number: Fraction, expected: float
) -> None:
    assert _float_at_most(number) == expected


# -- gaussian_sigma: the calibration of Gaussian noise ---------------------------------------------------


def test_integer_answers_get_the_discrete_gaussian_sigma_and_real_ones_the_analytic() -> None:
    """A count of a table of people is an exact integer: its noise is the discrete Gaussian, whose σ is
    calibrated on the discrete δ (and a whole-unit sensitivity). Counts of visits are fractional (per-
    person weights): the analytic Gaussian σ."""
    people = plan_for(
        "SELECT smoker, COUNT(*) FROM people GROUP BY smoker", epsilon=1.0, delta=1e-6, gaussian=True
    )
    (count,) = people.measurements
    assert count.gaussian and count.exact_integer
    assert count.gaussian_sigma() == discrete_gaussian_sigma(
        sensitivity=1.0, epsilon=count.epsilon, delta=count.delta
    )
    louder = dataclasses.replace(count, sensitivity=1.5)  # rounded up to 2 whole units
    assert louder.gaussian_sigma() == discrete_gaussian_sigma(
        sensitivity=2.0, epsilon=count.epsilon, delta=count.delta
    )
    assert louder.gaussian_sigma() > analytic_gaussian_sigma(
        sensitivity=1.5, epsilon=count.epsilon, delta=count.delta
    )
    visits = plan_for(
        "SELECT region, COUNT(*) FROM visits GROUP BY region", epsilon=1.0, delta=1e-6, gaussian=True
    )
    (weighted,) = visits.measurements
    assert weighted.gaussian and not weighted.exact_integer
    assert weighted.gaussian_sigma() == analytic_gaussian_sigma(
        sensitivity=weighted.sensitivity, epsilon=weighted.epsilon, delta=weighted.delta
    )
