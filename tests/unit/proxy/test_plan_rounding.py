"""The plan's exact-arithmetic helpers are tight as well as safe: each share is the largest float that
keeps the charge an upper bound (an ε share computed from a float quotient: within 3 ulps of it), each
rounded-up root the smallest. Safety alone (``<=``) let mutants
that give away one more ulp, or keep one less, survive ``make mutants`` (docs/testing.md)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from budget.amounts import as_decimal
from mechanisms.contribution_bound import selection_share
from proxy.analysis.quantities import THRESHOLD_QUANTITY
from proxy.errors import InvalidParameterValueError
from proxy.query.planning import checked_epsilon
from proxy.release.plan import bound_selection_epsilon, l2_sensitivity, split_delta, split_epsilon
from tests.unit.proxy.policy_fixture import clinic_policy

EPSILONS = st.floats(min_value=1e-6, max_value=50.0)


def above(number: float, ulps: int = 1) -> float:
    for _ in range(ulps):
        number = math.nextafter(number, math.inf)
    return number


@given(EPSILONS, st.integers(min_value=1, max_value=40), st.integers(min_value=0, max_value=3))
def test_an_epsilon_share_is_the_largest_float_within_the_charge(
    epsilon: float, parts: int, spent: int
) -> None:
    already = Fraction(as_decimal(epsilon)) * spent / 8  # up to 3/8 of ε spent on the contribution bound
    share = split_epsilon(epsilon, parts, already_spent=already)
    available = Fraction(as_decimal(epsilon)) - already
    assert Fraction(share) * parts <= available
    assert Fraction(above(share, 3)) * parts > available, "within 3 ulps of the largest (a float quotient)"


@given(st.floats(min_value=1e-12, max_value=1e-3), st.integers(min_value=0, max_value=12), st.booleans())
def test_delta_shares_are_the_largest_within_the_charge(
    delta: float, gaussian: int, thresholded: bool
) -> None:
    each, threshold = split_delta(delta, gaussian_parts=gaussian, thresholded=thresholded)
    total = Fraction(as_decimal(delta))
    assert gaussian * Fraction(each) + Fraction(threshold) <= total
    if gaussian and not thresholded:
        assert gaussian * Fraction(above(each, 3)) > total and threshold == 0.0
    if thresholded:
        assert gaussian * Fraction(each) + Fraction(above(threshold)) > total
    if not gaussian:
        assert each == 0.0 and (threshold > 0) == thresholded


@given(EPSILONS)
def test_the_bound_selection_share_is_the_largest_float_within_its_part(epsilon: float) -> None:
    exact = Fraction(as_decimal(epsilon)) * selection_share(epsilon)
    share = bound_selection_epsilon(epsilon)
    assert Fraction(share) <= exact < Fraction(above(share))


@given(
    st.integers(min_value=1, max_value=10_000),
    st.one_of(st.none(), st.integers(min_value=1, max_value=10_000)),
)
def test_the_people_count_l2_sensitivity_is_the_smallest_float_root(bound: int, cells: int | None) -> None:
    """sqrt(min(L, cells)) rounded up: its square is at least the groups, the float below's is less."""
    groups = 1 if cells == 1 else bound if cells is None else min(bound, cells)
    root = l2_sensitivity(THRESHOLD_QUANTITY, max_contributions=bound, cells=cells)
    assert Fraction(root) ** 2 >= groups > Fraction(math.nextafter(root, 0.0)) ** 2


@pytest.mark.parametrize("epsilon", [0.0, -1.0, math.inf, math.nan])
def test_an_epsilon_that_is_not_a_positive_number_is_refused_as_such(epsilon: float) -> None:
    """Not "below the dataset's min_epsilon": an ε of 0 or less is no privacy loss at all."""
    with pytest.raises(InvalidParameterValueError) as refused:
        checked_epsilon(clinic_policy(), epsilon)
    assert str(refused.value) == f"epsilon must be greater than 0, got {epsilon:g}"
