"""PrivacyLoss validation and sequential composition (fsum, then one step up)."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from budget.errors import InvalidBudgetError
from budget.loss import ZERO_LOSS, PrivacyLoss, compose_sequential, round_up

epsilons = st.floats(min_value=0.0, max_value=10.0, allow_nan=False, allow_infinity=False)


def test_ten_tenths_compose_to_at_least_one() -> None:
    total = compose_sequential([PrivacyLoss(0.1)] * 10)
    assert total.epsilon >= 1.0


def test_composition_is_the_next_float_above_fsum() -> None:
    total = compose_sequential([PrivacyLoss(0.1)] * 10)
    assert total.epsilon == math.nextafter(math.fsum([0.1] * 10), math.inf)
    assert total.epsilon == math.nextafter(1.0, math.inf)


def test_composition_adds_deltas_and_rounds_them_up() -> None:
    total = compose_sequential([PrivacyLoss(0.5, 1e-6), PrivacyLoss(0.5, 2e-6)])
    assert total.delta == math.nextafter(math.fsum([1e-6, 2e-6]), math.inf)


def test_composition_of_nothing_is_zero() -> None:
    assert compose_sequential([]) == ZERO_LOSS


def test_round_up_keeps_zero() -> None:
    assert round_up(0.0) == 0.0


def test_pure_dp_is_the_default() -> None:
    assert PrivacyLoss(1.0).delta == 0.0


@pytest.mark.parametrize("epsilon", [-0.1, math.nan, math.inf])
def test_rejects_epsilon_outside_its_range(epsilon: float) -> None:
    with pytest.raises(InvalidBudgetError, match="epsilon must be a finite number >= 0"):
        PrivacyLoss(epsilon)


@pytest.mark.parametrize("delta", [-1e-9, 1.0, math.nan])
def test_rejects_delta_outside_its_range(delta: float) -> None:
    with pytest.raises(InvalidBudgetError, match=r"delta must be in \[0, 1\)"):
        PrivacyLoss(1.0, delta)


def test_privacy_loss_is_frozen() -> None:
    loss = PrivacyLoss(1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        loss.epsilon = 2.0  # type: ignore[misc]


@given(st.lists(epsilons, max_size=20))
def test_composition_never_undercharges_the_exact_sum(values: list[float]) -> None:
    total = compose_sequential(PrivacyLoss(value) for value in values)
    assert Fraction(total.epsilon) >= sum((Fraction(value) for value in values), Fraction(0))


@given(st.lists(epsilons, max_size=20), epsilons)
def test_composition_is_monotone(values: list[float], extra: float) -> None:
    before = compose_sequential(PrivacyLoss(value) for value in values)
    after = compose_sequential(PrivacyLoss(value) for value in [*values, extra])
    assert after.epsilon >= before.epsilon
