"""How noisy answers are shown (proxy/release/present.py): counts clamped at 0 unless ``veil.raw_counts``,
sums, averages, variances and quantiles rounded by ``veil.round`` — post-processing of the noisy table
alone."""

from __future__ import annotations

import datetime
import random
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import PrivateQuery, classify
from proxy.config import ColumnType
from proxy.errors import InvalidParameterValueError
from proxy.release.apply import ReleasedTable, ResultColumn, noisy_columns, release
from proxy.release.plan import ReleasePlan, price_query
from proxy.release.present import Presentation, auto_digits, present, settings_presentation
from proxy.settings import SessionSettings
from tests.unit.proxy.policy_fixture import clinic_policy

COUNTS = "SELECT region, COUNT(*), COUNT(age), COUNT(DISTINCT patient_id) FROM visits GROUP BY region"
RAW = Presentation(raw_counts=True, rounding="off")


def plan_for(sql: str, epsilon: float = 1.0) -> ReleasePlan:
    (tree,) = parse_statements(sql)
    statement = classify(tree, clinic_policy())
    assert isinstance(statement, PrivateQuery)
    return price_query(statement.shape, epsilon=epsilon)


def noisy_table(plan: ReleasePlan, *rows: tuple[object, ...]) -> ReleasedTable:
    return ReleasedTable(noisy_columns(plan), list(rows))


# --- counts (veil.raw_counts) ----------------------------------------------------------------------------


def test_counts_are_clamped_at_zero_by_default() -> None:
    plan = plan_for(COUNTS)
    table = present(plan, noisy_table(plan, ("north", -3, -1, 5), ("south", 7, 0, -2)), Presentation())
    assert table.rows == [("north", 0, 0, 5), ("south", 7, 0, 0)]


def test_raw_counts_are_shown_as_drawn() -> None:
    plan = plan_for(COUNTS)
    rows = [("north", -3, -1, 5), ("south", 7, 0, -2)]
    assert present(plan, noisy_table(plan, *rows), Presentation(raw_counts=True)).rows == rows


def test_counts_of_an_empty_group_are_non_negative_integers_at_a_small_epsilon() -> None:
    plan = plan_for("SELECT sex, COUNT(*) FROM visits GROUP BY sex", epsilon=0.01)  # scale 300
    shown = [present(plan, release(plan, [], rng=random.Random(seed)), Presentation()) for seed in range(20)]
    counts = [count for table in shown for _, count in table.rows]
    assert all(isinstance(count, int) and count >= 0 for count in counts)
    assert 0 in counts, "about half the draws of an empty group's count are negative, and show 0"


def test_raw_counts_stay_unbiased_where_clamped_ones_do_not() -> None:
    plan = plan_for("SELECT COUNT(*) FROM people")  # rows are people: discrete Laplace, Δ = 1, ε = 1
    draws = [release(plan, [(0,)], rng=random.Random(seed)) for seed in range(2000)]
    raw = [present(plan, table, RAW).rows[0][0] for table in draws]
    clamped = [present(plan, table, Presentation()).rows[0][0] for table in draws]
    # discrete Laplace with p = e^-1: s.d. √(2p)/(1 − p) = 1.35; the mean of 2,000 draws has s.e. 0.03
    assert abs(statistics.fmean(raw)) < 4 * 1.35 / 2000**0.5
    # E[max(X, 0)] = p/(1 − p²) = 0.43 for that noise: clamping biases the answer upward, as documented
    assert statistics.fmean(clamped) == pytest.approx(0.43, abs=4 * 1.35 / 2000**0.5)


# --- rounding (veil.round) -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("noise_sd", "digits"),
    [(1234.0, -2), (100.0, -1), (99.9, 0), (10.0, 0), (9.99, 1), (1.0, 1), (0.0456, 3), (1e-9, 10)],
)
def test_auto_keeps_digits_down_to_one_below_the_noise_order_of_magnitude(
    noise_sd: float, digits: int
) -> None:
    assert auto_digits(noise_sd) == digits


@pytest.mark.parametrize("noise_sd", [None, 0.0, -1.0, float("inf"), float("nan")])
def test_auto_leaves_a_value_alone_without_a_usable_spread(noise_sd: float | None) -> None:
    assert auto_digits(noise_sd) is None


def test_rounding_keeps_a_correlation_in_its_range_and_an_r2_in_0_1() -> None:
    plan = plan_for("SELECT REGR_R2(cost, age), CORR(cost, age) FROM visits")
    sds = (0.1, 0.1)  # the noise columns: _dp_sd_0, _dp_sd_1
    out_of_range = present(plan, noisy_table(plan, (-0.3, -1.2, *sds)), Presentation(rounding=2))
    assert out_of_range.rows == [(0.0, -1.0)]
    within = present(plan, noisy_table(plan, (0.456, 1.7, *sds)), Presentation(rounding=2))
    assert within.rows == [(0.46, 1.0)]


def test_sums_are_rounded_to_their_noise_by_default() -> None:
    plan = plan_for("SELECT SUM(cost), SUM(age) FROM visits")
    table = present(plan, noisy_table(plan, (123456.78, 123456, 1234.0, 1234.0)), Presentation())
    assert table.rows == [(123500.0, 123500)]
    assert [type(value) for value in table.rows[0]] == [float, int], "an integer sum stays an integer"
    assert [column.name for column in table.columns] == ["_dp_agg_0", "_dp_agg_1"], "noise columns dropped"


@pytest.mark.parametrize(
    ("rounding", "expected"),
    [("off", (123456.78, 123456)), (1, (123456.8, 123456)), (-3, (123000.0, 123000))],
)
def test_round_off_or_a_number_of_digits(rounding: str | int, expected: tuple[object, ...]) -> None:
    plan = plan_for("SELECT SUM(cost), SUM(age) FROM visits")
    table = present(
        plan, noisy_table(plan, (123456.78, 123456, 1234.0, 1234.0)), Presentation(rounding=rounding)
    )
    assert table.rows == [expected]


def test_counts_and_modes_are_not_rounded() -> None:
    plan = plan_for("SELECT COUNT(*) FROM visits")
    assert present(plan, noisy_table(plan, (123456,)), Presentation(rounding=-3)).rows == [(123456,)]


def test_rounding_keeps_an_average_within_the_declared_bounds() -> None:
    plan = plan_for("SELECT AVG(cost), AVG(age) FROM visits")  # cost in [-50, 500.5], age in [0, 100]
    table = present(plan, noisy_table(plan, (500.4, 99.5, 0.1, 0.1)), Presentation(rounding=-3))
    assert table.rows == [(500.5, 0.0)], "500.4 → 1000.0, clamped back to 500.5"


def test_rounding_keeps_an_integer_quantile_within_the_integers_of_its_bounds() -> None:
    plan = plan_for("SELECT MAX(age), MIN(cost) FROM visits")
    table = present(plan, noisy_table(plan, (96, -49.95, 0.1, 0.55)), Presentation(rounding=-2))
    assert table.rows == [(100, 0.0)]
    assert str(table.rows[0][1]) == "0.0", "never a negative zero"


def test_auto_rounds_a_real_quantile_to_its_grid() -> None:
    plan = plan_for("SELECT MEDIAN(cost) FROM visits")  # grid step 550.5 / 1000 = 0.5505
    (quantile,) = present(plan, noisy_table(plan, (37.08150000000001, 0.5505)), Presentation()).rows[0]
    assert quantile == 37.08


def test_a_table_stored_before_noise_columns_existed_is_shown_unrounded() -> None:
    plan = plan_for("SELECT SUM(cost), COUNT(*) FROM visits")
    old = ReleasedTable(noisy_columns(plan)[:2], [(123456.78, -4)])
    assert present(plan, old, Presentation()).rows == [(123456.78, 0)]


@given(
    count=st.integers(-(10**6), 10**6),
    total=st.floats(-1e9, 1e9),
    average=st.floats(-50, 500.5),
    noise=st.floats(1e-6, 1e6),
    rounding=st.sampled_from(["auto", "off", -3, 0, 2]),
    raw=st.booleans(),
)
def test_shown_values_keep_their_types_and_ranges(
    count: int, total: float, average: float, noise: float, rounding: str | int, raw: bool
) -> None:
    plan = plan_for("SELECT COUNT(*), SUM(cost), AVG(cost) FROM visits")
    table = present(
        plan, noisy_table(plan, (count, total, average, noise, noise)), Presentation(raw, rounding)
    )
    shown_count, shown_total, shown_average = table.rows[0]
    assert isinstance(shown_count, int) and (raw or shown_count >= 0)
    assert isinstance(shown_total, float) and isinstance(shown_average, float)
    assert -50 <= shown_average <= 500.5


# --- settings ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "stored"), [("auto", "auto"), ("OFF", "off"), ("2", "2"), ("-3", "-3"), ("15", "15")]
)
def test_veil_round_takes_auto_off_or_digits(value: str, stored: str) -> None:
    settings = SessionSettings()
    settings.set("veil.round", value)
    assert settings.get("veil.round") == stored


@pytest.mark.parametrize("value", ["1.5", "16", "-16", "two", ""])
def test_veil_round_refuses_anything_else(value: str) -> None:
    with pytest.raises(InvalidParameterValueError, match=r'invalid value for parameter "veil\.round"'):
        SessionSettings().set("veil.round", value)


def test_defaults_clamp_counts_and_round_automatically() -> None:
    settings = SessionSettings()
    assert (settings.get("veil.raw_counts"), settings.get("veil.round")) == ("off", "auto")
    assert settings_presentation("off", "auto") == Presentation(raw_counts=False, rounding="auto")
    assert settings_presentation("on", "-2") == Presentation(raw_counts=True, rounding=-2)


def test_with_value_leaves_the_session_settings_alone() -> None:
    settings = SessionSettings({"veil.epsilon": "0.5"})
    raw = settings.with_value("veil.raw_counts", "on")
    assert (raw.get("veil.raw_counts"), raw.get("veil.epsilon")) == ("on", "0.5")
    assert settings.get("veil.raw_counts") == "off"


def test_noise_columns_are_real_and_named_after_their_aggregate() -> None:
    plan = plan_for("SELECT COUNT(*), SUM(cost), MODE() WITHIN GROUP (ORDER BY sex), MEDIAN(age) FROM visits")
    columns = noisy_columns(plan)
    assert columns[-2:] == (
        ResultColumn("_dp_sd_1", ColumnType.REAL),
        ResultColumn("_dp_sd_3", ColumnType.REAL),
    )


def test_a_sum_of_non_negative_values_is_clamped_like_a_count() -> None:
    plan = plan_for("SELECT SUM(age), SUM(cost) FROM visits")  # age in [0, 100]; cost in [-50, 500.5]
    noisy = noisy_table(plan, (-1234, -250.0, 10.0, 10.0))
    assert present(plan, noisy, Presentation(rounding="off")).rows == [(0, -250.0)]
    assert present(plan, noisy, RAW).rows == [(-1234, -250.0)]


def test_a_number_of_digits_rounds_a_correlation_but_never_a_date_or_a_pair_count() -> None:
    from tests.unit.proxy.test_dates_and_pairs import shape_of as lab_shape

    plan = price_query(lab_shape("SELECT MEDIAN(day), CORR(y, x), REGR_COUNT(y, x) FROM m"), epsilon=1.0)
    middle = datetime.date(2024, 7, 1)
    table = noisy_table(plan, (middle, -0.99996, -3, 0.4, 0.0123))  # the median's and CORR's noise s.d.
    assert present(plan, table, Presentation(rounding=2)).rows == [(middle, -1.0, 0)]
    assert present(plan, table, Presentation(rounding=-1)).rows == [(middle, 0.0, 0)]
    assert present(plan, table, RAW).rows == [(middle, -0.99996, -3)]


def test_auto_rounds_a_correlation_to_the_noise_composed_from_its_sums() -> None:
    """s.d. 0.0123 → thousandths; the noisy table carries it for CORR as for a SUM (release/pairs.py)."""
    from tests.unit.proxy.test_dates_and_pairs import shape_of as lab_shape

    plan = price_query(lab_shape("SELECT CORR(y, x), REGR_SLOPE(y, x), REGR_COUNT(y, x) FROM m"), epsilon=1.0)
    table = noisy_table(plan, (-0.91234, 3.14159, 17, 0.0123, 0.456))
    assert present(plan, table, Presentation()).rows == [(-0.912, 3.14, 17)]
