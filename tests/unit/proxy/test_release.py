"""Pricing (sensitivity and ε split) and release (noise, public cells, post-processing)."""

from __future__ import annotations

import random
import re
import statistics
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from budget.amounts import as_decimal
from proxy.analysis.parse import parse_statements
from proxy.analysis.quantities import QuantityKind
from proxy.analysis.statements import PrivateQuery, classify
from proxy.config import ColumnType
from proxy.release.apply import release
from proxy.release.plan import ReleasePlan, price_query, split_epsilon
from proxy.rewrite.bound_contributions import WEIGHT_UNIT
from tests.unit.proxy.policy_fixture import clinic_policy


def plan_for(sql: str, epsilon: float = 1.0) -> ReleasePlan:
    (tree,) = parse_statements(sql)
    statement = classify(tree, clinic_policy())
    assert isinstance(statement, PrivateQuery)
    return price_query(statement.shape, epsilon=epsilon)


def test_count_sensitivity_is_max_contributions() -> None:
    (measurement,) = plan_for("SELECT region, COUNT(*) FROM visits GROUP BY region").measurements
    assert (measurement.sensitivity, measurement.epsilon) == (3.0, 1.0)
    assert measurement.integer_output is True
    assert measurement.exact_integer is False, "per-person weights make the engine's count fractional"


def test_counts_of_a_table_of_people_are_exact_integers() -> None:
    (measurement,) = plan_for("SELECT smoker, COUNT(*) FROM people GROUP BY smoker").measurements
    assert (measurement.sensitivity, measurement.exact_integer) == (1.0, True)


def test_sum_sensitivity_uses_the_larger_bound_magnitude() -> None:
    (measurement,) = plan_for("SELECT SUM(cost) FROM visits").measurements
    assert measurement.sensitivity == 3 * 500.5
    assert (measurement.exact_integer, measurement.integer_output) == (False, False)


def test_integer_sum_is_released_as_an_integer() -> None:
    (measurement,) = plan_for("SELECT SUM(age) FROM visits").measurements
    assert (measurement.sensitivity, measurement.integer_output) == (300.0, True)


def test_average_splits_epsilon_between_sum_and_count() -> None:
    plan = plan_for("SELECT AVG(age), COUNT(*) FROM visits", epsilon=0.9)
    kinds = [m.quantity.kind for m in plan.measurements]
    assert kinds == [QuantityKind.SUM, QuantityKind.NON_NULL, QuantityKind.ROWS]
    assert all(m.epsilon == pytest.approx(0.3) for m in plan.measurements)
    assert plan.loss.epsilon == 0.9


def test_shared_quantities_are_charged_once() -> None:
    plan = plan_for("SELECT SUM(age), AVG(age), COUNT(age) FROM visits", epsilon=1.0)
    assert len(plan.measurements) == 2
    assert plan.measurements[0].epsilon == 0.5


@given(st.floats(min_value=1e-9, max_value=100.0), st.integers(min_value=1, max_value=50))
def test_epsilon_shares_never_exceed_the_charge(epsilon: float, parts: int) -> None:
    share = split_epsilon(epsilon, parts)
    assert share > 0
    assert Fraction(share) * parts <= Fraction(as_decimal(epsilon)), "the charged decimal bounds the loss"


def test_every_public_cell_is_released_even_when_empty() -> None:
    plan = plan_for("SELECT region, sex, COUNT(*) FROM visits GROUP BY region, sex")
    table = release(plan, [("north", "male", 40)], rng=random.Random(1))
    assert [row[:2] for row in table.rows] == [
        ("north", "female"),
        ("north", "male"),
        ("south", "female"),
        ("south", "male"),
    ]
    assert all(isinstance(row[2], int) for row in table.rows)
    assert [c.type for c in table.columns] == [ColumnType.TEXT, ColumnType.TEXT, ColumnType.INTEGER]


def test_rows_outside_the_public_domain_are_ignored() -> None:
    plan = plan_for("SELECT region, COUNT(*) FROM visits GROUP BY region")
    table = release(plan, [("west", 10_000)], rng=random.Random(2))
    assert [row[0] for row in table.rows] == ["north", "south"]
    assert all(abs(row[1]) < 10_000 for row in table.rows), "the 'west' count must not leak into any cell"


def test_noisy_values_differ_from_the_truth_but_stay_near_it() -> None:
    plan = plan_for("SELECT COUNT(*) FROM visits", epsilon=1.0)  # scale 3
    answers = [release(plan, [(1000,)], rng=random.Random(seed)).rows[0][0] for seed in range(200)]
    assert len(set(answers)) > 10, "noise is added"
    # P(|noise| > 60) = exp(-20) per draw for scale 3: never in 200 draws
    assert all(abs(answer - 1000) <= 60 for answer in answers)


def test_average_is_clamped_into_bounds_and_never_null() -> None:
    plan = plan_for("SELECT AVG(age) FROM visits", epsilon=1.0)
    # a tiny true count makes sum/count wild; post-processing keeps it inside [0, 100], never NULL
    answers = [release(plan, [(5000, 2)], rng=random.Random(seed)).rows[0][0] for seed in range(100)]
    assert all(isinstance(answer, float) and 0 <= answer <= 100 for answer in answers)


def test_output_names_follow_postgres_defaults_and_aliases() -> None:
    plan = plan_for(
        "SELECT sex, COUNT(*), SUM(cost) AS total, AVG(age), STDDEV(age) FROM visits GROUP BY sex"
    )
    assert plan.shape.output_names == ("sex", "count", "total", "avg", "stddev")


def test_noisy_table_has_one_column_per_key_and_aggregate_then_the_noise_of_rounded_ones() -> None:
    plan = plan_for("SELECT sex, COUNT(*), SUM(cost) AS total, AVG(age) FROM visits GROUP BY sex")
    table = release(plan, [], rng=random.Random(3))
    names = ["_dp_key_0", "_dp_agg_0", "_dp_agg_1", "_dp_agg_2", "_dp_sd_1", "_dp_sd_2"]
    assert [c.name for c in table.columns] == names
    assert [c.type for c in table.columns] == [
        ColumnType.TEXT,
        ColumnType.INTEGER,
        ColumnType.REAL,
        ColumnType.REAL,
        ColumnType.REAL,
        ColumnType.REAL,
    ]


def test_variance_is_clamped_into_its_possible_range() -> None:
    plan = plan_for("SELECT VAR_POP(age), STDDEV_POP(age) FROM visits", epsilon=1.0)
    # ages in [0, 100]: a population variance lies in [0, 50²]
    for seed in range(50):
        variance, deviation = release(plan, [(3000, 200_000, 40)], rng=random.Random(seed)).rows[0][:2]
        assert 0 <= variance <= 2500
        assert 0 <= deviation <= 50


def test_gaussian_plan_shares_delta_over_the_noisy_quantities() -> None:
    (tree,) = parse_statements("SELECT AVG(age), MEDIAN(age) FROM visits")
    statement = classify(tree, clinic_policy())
    assert isinstance(statement, PrivateQuery)
    plan = price_query(statement.shape, epsilon=1.0, delta=1e-6, gaussian=True)
    noisy = [m for m in plan.measurements if m.gaussian]
    assert [m.quantity.kind for m in noisy] == [QuantityKind.SUM, QuantityKind.NON_NULL]
    assert sum(Fraction(m.delta) for m in noisy) <= Fraction("1e-6")
    assert plan.loss.delta == 1e-6
    assert noisy[0].mechanism == "Gaussian on a 2^k grid"
    assert plan.quantile_measurements[0].mechanism == "exponential (permute-and-flip)"


def test_gaussian_noise_has_the_calibrated_spread() -> None:
    (tree,) = parse_statements("SELECT COUNT(*) FROM people")
    statement = classify(tree, clinic_policy())
    assert isinstance(statement, PrivateQuery)
    plan = price_query(statement.shape, epsilon=0.5, delta=1e-5, gaussian=True)
    (measurement,) = plan.measurements
    sigma = measurement.gaussian_sigma()  # discrete Gaussian, Δ = 1: about 9.7 (TV-GAU-1's 9.69 continuous)
    draws = [release(plan, [(1000,)], rng=random.Random(seed)).rows[0][0] - 1000 for seed in range(2000)]
    variance = statistics.pvariance(draws)
    # sample variance of 2,000 normal draws: relative s.e. sqrt(2/2000) ≈ 3.2%; allow 4 s.e.
    assert abs(variance / sigma**2 - 1) < 4 * (2 / 2000) ** 0.5


# --- issue 18: answers that look like SQL answers ---------------------------------------------------------


def test_average_of_an_empty_group_is_a_value_within_bounds_not_null() -> None:
    plan = plan_for("SELECT sex, AVG(age), VAR_SAMP(age), STDDEV(age) FROM visits GROUP BY sex")
    for seed in range(30):  # no row at all: every noisy count is pure noise, often below 1
        for _, average, variance, deviation, *_ in release(plan, [], rng=random.Random(seed)).rows:
            assert 0 <= average <= 100 and 0 <= variance <= 2 * 50**2 and 0 <= deviation <= 100
            assert all(isinstance(value, float) for value in (average, variance, deviation))


def test_average_floors_the_noisy_count_at_one_row() -> None:
    plan = plan_for("SELECT AVG(cost) FROM people_visits".replace("people_visits", "visits"))
    # exact sum 30, count 0 at ε = 1e6: noise ~ 1e-3, so the noisy count is about 0 and floored at 1 → 30
    (average, _), *_ = release(
        plan_for("SELECT AVG(cost) FROM visits", 1e6), [(30.0, 0)], rng=random.Random(1)
    ).rows
    assert average == pytest.approx(30.0, abs=0.01)
    assert plan.shape.aggregates[0].column is not None


def test_noise_standard_deviations_follow_the_measurements() -> None:
    plan = plan_for("SELECT SUM(cost), AVG(cost), MEDIAN(age) FROM visits", epsilon=1.0)
    # three quantities (the SUM is shared), ε/3 each: Laplace s.d. √2·Δ/ε
    sum_sd_expected = 2**0.5 * 3 * 500.5 / (1 / 3)
    count_sd = 2**0.5 * 3 / (1 / 3)
    row = release(plan, [(100_000.0, 1000)], rng=random.Random(4)).rows[0]
    total, average, median, total_sd, average_sd, median_sd = row
    assert total_sd == pytest.approx(sum_sd_expected, rel=1e-9)
    # delta method over the noisy values: √(sd_S² + (S/C)²·sd_C²) / C
    assert average_sd == pytest.approx(
        (sum_sd_expected**2 + average**2 * count_sd**2) ** 0.5 / (total / average), rel=0.05
    )
    assert median_sd == pytest.approx(100 / 1000), "a quantile's resolution is its grid step"
    assert isinstance(median, int)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT MIN(age), MAX(age), MEDIAN(age) FROM visits", [ColumnType.INTEGER] * 3),
        ("SELECT PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY age) FROM visits", [ColumnType.INTEGER]),
        ("SELECT PERCENTILE_DISC(0.9) WITHIN GROUP (ORDER BY age * 2) FROM visits", [ColumnType.INTEGER]),
        ("SELECT MEDIAN(cost), MAX(age / 3.0) FROM visits", [ColumnType.REAL] * 2),
    ],
)
def test_quantiles_of_integer_columns_are_integers(sql: str, expected: list[ColumnType]) -> None:
    plan = plan_for(sql)
    table = release(plan, [], rng=random.Random(5))
    width = len(plan.shape.aggregates)
    assert [column.type for column in table.columns[:width]] == expected
    python = {ColumnType.INTEGER: int, ColumnType.REAL: float}
    assert [type(value) for value in table.rows[0][:width]] == [python[t] for t in expected]


@pytest.mark.parametrize(
    ("point", "integer"),
    [(9.3, 10), (9.0, 9), (9.000000000001, 9), (8.99999999999, 9), (0.0, 0), (100.0, 100), (0.1, 1)],
)
def test_an_integer_quantile_is_the_grid_point_taken_up_to_the_next_integer(
    point: float, integer: int
) -> None:
    """#{x < ⌈y⌉} = #{x < y} on integer data: the rank the mechanism scored (float fuzz aside)."""
    from proxy.release.apply import _integer_at_rank

    assert _integer_at_rank(point, 0.0, 100.0) == integer


def test_max_of_integer_data_reaching_the_upper_bound_is_that_bound() -> None:
    plan = plan_for("SELECT MAX(age) FROM visits", epsilon=1000.0)
    histogram = [0] * 1000
    # forty rows at 50, ten at 100 (the last cell holds upper), each of weight K
    histogram[500], histogram[999] = 40 * WEIGHT_UNIT, 10 * WEIGHT_UNIT
    table = release(plan, [], rng=random.Random(6), histograms={"age": {(): histogram}})
    assert table.rows[0][0] == 100


@pytest.mark.parametrize(
    ("sql", "labels"),
    [
        ("SELECT COUNT(*), COUNT(age) FROM visits", ["count(*)", "count(age)"]),
        ("SELECT COUNT(DISTINCT v.patient_id) FROM visits v", ["count(DISTINCT v.patient_id)"]),
        ("SELECT SUM(age * 2), AVG(cost) FROM visits", ["sum(age * 2)", "sum(cost)", "count(cost)"]),
        ("SELECT STDDEV(age) FROM visits", ["sum(age)", "sum(age ^ 2)", "count(age)"]),
        ("SELECT VAR_POP(age + 1) FROM visits", ["sum(age + 1)", "sum((age + 1) ^ 2)", "count(age + 1)"]),
        (
            "SELECT MIN(age), MAX(age), MEDIAN(age), PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY age) FROM visits",
            ["min(age)", "max(age)", "median(age)", "percentile_cont(0.9) WITHIN GROUP (ORDER BY age)"],
        ),
        ("SELECT MODE() WITHIN GROUP (ORDER BY v.sex) FROM visits v", ["mode(v.sex)"]),
        (
            "SELECT SUM(v.cost), AVG(p.age) FROM visits v JOIN patients p ON v.patient_id = p.patient_id",
            ["sum(v.cost)", "sum(p.age)", "count(p.age)"],
        ),
        ("SELECT SUM(veil_clamp(age * cost, 0, 1000)) FROM visits", ["sum(veil_clamp(age * cost, 0, 1000))"]),
    ],
)
def test_quantities_are_named_as_the_analyst_wrote_them(sql: str, labels: list[str]) -> None:
    plan = plan_for(sql)
    assert [m.quantity.label for m in plan.measurements] == labels
    assert not any(re.search(r"__|\be_[0-9a-f]{8}\b", label) for label in labels)


def test_two_spellings_of_one_column_are_one_quantity_and_one_stored_answer() -> None:
    from proxy.release.cache_key import answer_digest

    plain, qualified = plan_for("SELECT SUM(cost) FROM visits"), plan_for("SELECT SUM(v.cost) FROM visits v")
    assert plain.measurements == qualified.measurements
    assert answer_digest(plain, ("q",)) == answer_digest(qualified, ("q",))
