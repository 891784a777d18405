"""Exact values of the ledger's amounts, a release's charge, the running totals and partitions: the
messages a refused amount carries, the strict text form, the float bounds shown to people, how one
release moves every statistic (and how a cancel moves it back), how totals combine and widen, and how a
partition normalises, stores and describes its values.

Found by mutation testing (issue 21): the property tests bound these from one side; here each is pinned."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from budget.amounts import (
    SCALE,
    ZERO_TEXT,
    add_up,
    as_decimal,
    charge_units,
    exact_units,
    float_down,
    float_up,
    from_text,
    subtract_up,
    to_text,
    units_up,
)
from budget.errors import InvalidBudgetError
from budget.loss import PrivacyLoss
from budget.partitions import Partition, order, sql_literal, value_key, value_of
from budget.totals import Charge, Release, Totals

TENTH = SCALE // 10


def up2(value: float) -> float:
    """Two steps up: a product rounded up (``_up``), then added to zero rounding up (``add_up``)."""
    return math.nextafter(math.nextafter(value, math.inf), math.inf)


# -- amounts ----------------------------------------------------------------------------------------------


def test_a_positive_amount_below_the_quantum_is_refused_with_its_name_and_a_hint() -> None:
    with pytest.raises(InvalidBudgetError) as refused:
        charge_units(1e-31, name="delta")
    assert (
        str(refused.value)
        == "delta 1e-31 is below the ledger's quantum of 1e-30, the smallest amount it charges"
    )
    assert refused.value.hint == "ask for a delta of at least 1e-30: the ledger counts whole multiples of it"
    with pytest.raises(InvalidBudgetError, match=r"^epsilon 5e-31 is below"):
        charge_units(5e-31)


def test_zero_and_exactly_one_quantum_are_charged_as_they_are() -> None:
    assert charge_units(0.0) == 0
    assert charge_units(1e-30) == 1
    assert charge_units(1.5e-30) == 2  # rounded up, never down
    assert charge_units(0.1) == TENTH


def test_units_up_rounds_up_without_refusing_and_names_delta() -> None:
    assert units_up(1e-31) == 1
    assert units_up(0.0) == 0
    assert units_up(2.5e-30) == 3
    with pytest.raises(InvalidBudgetError, match=r"^delta must be a finite number >= 0, got -1\.0$"):
        units_up(-1.0)


def test_exact_units_names_the_amount_finer_than_the_quantum() -> None:
    with pytest.raises(InvalidBudgetError) as refused:
        exact_units(1.5e-30)
    assert str(refused.value) == "epsilon 1.5e-30 is finer than the ledger's quantum of 1e-30"
    assert exact_units(0.0) == 0 and exact_units(0.3) == 3 * TENTH
    with pytest.raises(InvalidBudgetError, match=r"^epsilon must be a finite number >= 0"):
        exact_units(-0.5)


def test_the_text_form_has_the_point_written_in_and_thirty_decimals() -> None:
    assert to_text(0) == ZERO_TEXT == "0." + "0" * 30
    assert to_text(1) == "0." + "0" * 29 + "1"
    assert to_text(SCALE + 5) == "1." + "0" * 29 + "5"
    assert to_text(12 * SCALE + TENTH) == "12.1" + "0" * 29
    with pytest.raises(InvalidBudgetError) as refused:
        to_text(-1)
    assert str(refused.value) == "an amount cannot be negative, got -1 quanta"


@pytest.mark.parametrize(
    "text",
    [
        "0.5",
        "00." + "0" * 30,
        "-0." + "0" * 30,
        " 0." + "0" * 30,
        "0." + "0" * 31,
        "1e-30",
        "0," + "0" * 30,
        "",
    ],
)
def test_text_in_another_form_is_refused_and_shown(text: str) -> None:
    with pytest.raises(InvalidBudgetError) as refused:
        from_text(text)
    assert str(refused.value) == f"the ledger holds {text!r} where an amount of ε or δ belongs"


def test_text_is_read_back_to_the_quantum() -> None:
    assert from_text("0." + "0" * 29 + "1") == 1
    assert from_text("12.1" + "0" * 29) == 12 * SCALE + TENTH
    assert from_text("10." + "0" * 30) == 10 * SCALE


def test_floats_shown_for_amounts_are_the_nearest_on_the_right_side() -> None:
    """A spend is shown rounded up and what may still be spent rounded down, to the float next to it."""
    assert float_up(0) == float_down(0) == 0.0
    assert float_up(1) == float_down(1) == 1e-30
    assert float_up(TENTH) == float_down(TENTH) == 0.1
    assert float_up(TENTH + 1) == math.nextafter(0.1, math.inf)
    assert float_down(TENTH - 1) == math.nextafter(0.1, 0.0)
    assert float_up(TENTH - 1) == 0.1 and float_down(TENTH + 1) == 0.1
    assert float_up(3 * TENTH) == 0.3 and float_down(2) == 2e-30


@given(st.integers(min_value=1, max_value=10**32))
def test_float_up_is_the_smallest_float_whose_decimal_reaches_the_amount(units: int) -> None:
    target = Fraction(units, SCALE)
    up, down = float_up(units), float_down(units)
    assert Fraction(as_decimal(up)) >= target > Fraction(as_decimal(math.nextafter(up, 0.0)))
    assert Fraction(as_decimal(down)) <= target < Fraction(as_decimal(math.nextafter(down, math.inf)))


def test_running_float_sums_step_up_and_never_below_zero() -> None:
    assert add_up(1.0, 0.5) == math.nextafter(1.5, math.inf)
    assert add_up(0.25, 0.0) == 0.25  # adding nothing moves nothing
    assert subtract_up(1.5, 0.5) == math.nextafter(1.0, math.inf)
    assert subtract_up(0.1, 0.1) == math.nextafter(0.0, math.inf)
    assert subtract_up(0.1, 0.2) == 0.0
    assert subtract_up(0.25, 0.0) == 0.25


# -- a release and its charge --------------------------------------------------------------------------------


def test_a_release_is_charged_its_epsilon_delta_and_delta_outside_rho_in_quanta() -> None:
    release = Release(0.1, 1e-6, rho=0.5, rho_delta=1e-7)
    assert release.charge == Charge(TENTH, SCALE // 10**6, SCALE // 10**7)
    assert release.loss == PrivacyLoss(0.1, 1e-6)
    assert Release(0.5).charge == Charge(SCALE // 2, 0, 0)


def test_a_delta_outside_rho_below_the_quantum_is_charged_one_quantum() -> None:
    """A part of a charged δ is rounded up, never refused: at most the whole, which is charged too."""
    assert Release(0.1, 1e-6, rho=0.5, rho_delta=1e-31).charge.rho_delta == 1


def test_a_release_read_back_keeps_the_charge_it_was_given() -> None:
    charged = Charge(SCALE // 5, 7, 3)
    assert Release(0.1, 1e-6, charged=charged).charge == charged


def test_a_delta_below_the_quantum_is_refused_by_name() -> None:
    with pytest.raises(InvalidBudgetError, match=r"^delta 1e-31 is below the ledger's quantum"):
        Release(0.1, 1e-31)


@pytest.mark.parametrize("epsilon", [0.0, -0.0])
def test_a_release_of_no_epsilon_is_refused_with_a_hint(epsilon: float) -> None:
    with pytest.raises(InvalidBudgetError) as refused:
        Release(epsilon)
    assert str(refused.value) == f"a release needs epsilon > 0, got {epsilon!r}"
    assert refused.value.hint == "a release that costs nothing needs no reservation"


@pytest.mark.parametrize("rho", [0.0, -1.0, math.inf, math.nan])
def test_a_gaussian_release_needs_a_finite_positive_rho(rho: float) -> None:
    with pytest.raises(InvalidBudgetError) as refused:
        Release(0.1, 1e-6, rho=rho)
    assert str(refused.value) == f"rho must be a finite number > 0, got {rho!r}"


@pytest.mark.parametrize("rho_delta", [-1e-9, 2e-6])
def test_the_delta_outside_rho_must_lie_within_the_delta(rho_delta: float) -> None:
    with pytest.raises(InvalidBudgetError) as refused:
        Release(0.1, 1e-6, rho=0.5, rho_delta=rho_delta)
    assert str(refused.value) == f"rho_delta must be in [0, delta], got {rho_delta!r}"


def test_the_delta_outside_rho_may_be_all_of_the_delta() -> None:
    assert Release(0.1, 1e-6, rho=0.5, rho_delta=1e-6).charge.rho_delta == SCALE // 10**6


# -- totals -------------------------------------------------------------------------------------------------


def test_a_laplace_release_moves_every_statistic() -> None:
    """ε-DP answers are (ε²/2)-zCDP and all of their δ is outside ρ."""
    totals = Totals().plus(Release(0.1, 1e-6))
    assert totals == Totals(
        releases=1,
        epsilon=TENTH,
        delta=SCALE // 10**6,
        epsilon_squares=up2(0.1 * 0.1),
        epsilon_expm1=up2(0.1 * math.expm1(0.1)),
        rho=up2(0.1 * 0.1 / 2),
        zcdp_delta=SCALE // 10**6,
    )


def test_a_gaussian_release_adds_its_rho_and_only_the_delta_outside_it() -> None:
    totals = Totals().plus(Release(0.5, 1e-6, rho=0.02, rho_delta=1e-7))
    assert (totals.rho, totals.zcdp_delta, totals.delta) == (up2(0.02), SCALE // 10**7, SCALE // 10**6)
    assert totals.epsilon_squares == up2(0.25)
    assert totals.epsilon_expm1 == up2(0.5 * math.expm1(0.5))


def test_the_float_statistics_use_the_epsilon_charged() -> None:
    """A spend read back from the ledger carries its charge; the statistics follow the charge."""
    totals = Totals().plus(Release(0.1, charged=Charge(SCALE // 5, 0, 0)))
    assert totals.epsilon == SCALE // 5
    assert totals.epsilon_squares == up2(0.2 * 0.2)
    assert totals.rho == up2(0.2 * 0.2 / 2)


def test_taking_a_release_back_restores_the_exact_sums_and_leaves_the_floats_just_above() -> None:
    laplace, gaussian = Release(0.1, 1e-6), Release(0.5, 1e-6, rho=0.02, rho_delta=1e-7)
    both = Totals().plus(laplace).plus(gaussian)
    back = both.minus(gaussian)
    assert (back.releases, back.epsilon, back.delta, back.zcdp_delta) == (
        1,
        TENTH,
        SCALE // 10**6,
        SCALE // 10**6,
    )
    expected_rho = max(0.0, math.nextafter(both.rho - math.nextafter(0.02, math.inf), math.inf))
    assert back.rho == expected_rho >= Totals().plus(laplace).rho * (1 - 1e-12)
    nothing = back.minus(laplace)
    assert (nothing.releases, nothing.epsilon, nothing.delta, nothing.zcdp_delta) == (0, 0, 0, 0)
    assert 0.0 <= nothing.epsilon_squares < 1e-15 and 0.0 <= nothing.rho < 1e-15


def test_combined_totals_add_exactly_where_floats_can() -> None:
    first = Totals(1, 2, 3, 0.5, 0.25, 0.125, 4)
    second = Totals(10, 20, 30, 0.5, 0.25, 0.125, 40)
    assert first.combined(second) == Totals(11, 22, 33, 1.0, 0.5, 0.25, 44)


def test_combined_totals_round_a_float_sum_up_only_when_it_rounded_down() -> None:
    rounded_down = Totals(epsilon_squares=1.0, epsilon_expm1=1.0, rho=1.0).combined(
        Totals(epsilon_squares=1e-17, epsilon_expm1=0.1, rho=math.inf)
    )
    assert rounded_down.epsilon_squares == math.nextafter(1.0, math.inf)  # 1 + 1e-17 rounds down to 1
    assert rounded_down.epsilon_expm1 == 1.1  # 1 + 0.1 rounds up to 1.1 already
    assert rounded_down.rho == math.inf


finite = st.floats(min_value=0.0, max_value=1e300, allow_nan=False, allow_infinity=False)


@given(finite, finite)
def test_a_combined_float_sum_is_the_smallest_float_not_below_the_exact_sum(
    first: float, second: float
) -> None:
    total = Totals(rho=first).combined(Totals(rho=second)).rho
    exact = Fraction(first) + Fraction(second)
    assert Fraction(total) >= exact
    assert total == 0.0 or Fraction(math.nextafter(total, 0.0)) < exact


def test_the_widest_totals_take_each_statistic_from_whichever_is_larger() -> None:
    first = Totals(1, 5, 0, 0.1, 0.9, 0.0, 3)
    second = Totals(2, 3, 7, 0.2, 0.1, 0.5, 1)
    widest = Totals(2, 5, 7, 0.2, 0.9, 0.5, 3)
    assert first.widest(second) == second.widest(first) == widest


# -- partitions -------------------------------------------------------------------------------------------


def test_a_partitions_values_are_made_distinct_and_sorted() -> None:
    assert Partition("t.c", ("b", "a", "b")).values == ("a", "b")
    assert Partition("t.c", (10, 9, 100, 9)).values == (9, 10, 100)  # by value, not as text
    assert Partition("t.c", ("a", 2)).values == (2, "a")  # integers first


@pytest.mark.parametrize("column", ["", None, 5])
def test_a_partition_needs_a_column(column: object) -> None:
    with pytest.raises(InvalidBudgetError) as refused:
        Partition(column, ("a",))  # type: ignore[arg-type]
    assert str(refused.value) == "a partition needs a column (table.column)"


def test_a_partition_needs_a_value() -> None:
    with pytest.raises(InvalidBudgetError) as refused:
        Partition("t.c", ())
    assert str(refused.value) == "a partition needs at least one value"
    assert refused.value.hint == "a spend over no value needs no partition"


@pytest.mark.parametrize("value", [True, False, 1.5, None, b"a"])
def test_a_partition_value_is_text_or_an_integer(value: object) -> None:
    with pytest.raises(InvalidBudgetError) as refused:
        Partition("t.c", ("a", value))  # type: ignore[arg-type]
    assert str(refused.value) == f"partition values are text or integers, got {value!r}"


def test_values_are_stored_as_json_so_text_and_integers_differ() -> None:
    assert value_key("2020") == '"2020"' and value_key(2020) == "2020"
    assert value_key("zoë") == '"zoë"'
    assert Partition("t.c", ("zoë", 2020, "2020")).stored_values() == ("2020", '"2020"', '"zoë"')


def test_a_stored_value_is_read_back_as_text_or_an_integer() -> None:
    assert value_of('"north"') == "north" and value_of("7") == 7 and value_of('"7"') == "7"
    for bad in ("true", "1.5", "null", "[1]"):
        with pytest.raises(AssertionError):
            value_of(bad)


def test_a_partition_round_trips_through_the_spends_table() -> None:
    partition = Partition("patients.region", ("zoë", "north", 3))
    assert partition.to_json() == '[3, "north", "zoë"]'
    assert Partition.from_stored("patients.region", partition.to_json()) == partition
    assert Partition.from_stored("", "") is None


def test_order_puts_integers_before_text_and_sql_literals_quote_text_only() -> None:
    assert order(5) == (False, 5) and order("a") == (True, "a")
    assert sql_literal(-3) == "-3" and sql_literal("it's") == "'it''s'"
    assert Partition("t.c", (3,)).describe() == "t.c = 3"


@pytest.mark.parametrize(
    ("epsilon", "delta", "message"),
    [
        (-1.0, 0.0, "epsilon must be a finite number >= 0, got -1.0"),
        (math.nan, 0.0, "epsilon must be a finite number >= 0, got nan"),
        (math.inf, 0.0, "epsilon must be a finite number >= 0, got inf"),
        (0.1, 1.0, "delta must be in [0, 1), got 1.0"),
        (0.1, 1.5, "delta must be in [0, 1), got 1.5"),
        (0.1, -1e-9, "delta must be in [0, 1), got -1e-09"),
    ],
)
def test_a_release_outside_the_ranges_of_a_privacy_loss_is_refused(
    epsilon: float, delta: float, message: str
) -> None:
    """A δ of 1 or more would be charged (it is a whole number of quanta) yet promises nothing."""
    with pytest.raises(InvalidBudgetError) as refused:
        Release(epsilon, delta)
    assert str(refused.value) == message


def test_a_charge_refused_as_negative_names_the_amount() -> None:
    with pytest.raises(InvalidBudgetError) as refused:
        charge_units(-1.0, name="delta")
    assert str(refused.value) == "delta must be a finite number >= 0, got -1.0"
