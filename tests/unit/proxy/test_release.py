"""Pricing (sensitivity and ε split) and release (noise, public cells, post-processing)."""

from __future__ import annotations

import random
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


def test_average_is_clamped_into_bounds() -> None:
    plan = plan_for("SELECT AVG(age) FROM visits", epsilon=1.0)
    # a tiny true count makes sum/count wild; post-processing keeps it inside [0, 100] or NULL
    answers = [release(plan, [(5000, 2)], rng=random.Random(seed)).rows[0][0] for seed in range(100)]
    assert all(answer is None or 0 <= answer <= 100 for answer in answers)
    assert any(answer is None for answer in answers), "a noisy count below 1 gives NULL, like AVG of no rows"


def test_output_names_follow_postgres_defaults_and_aliases() -> None:
    plan = plan_for(
        "SELECT sex, COUNT(*), SUM(cost) AS total, AVG(age), STDDEV(age) FROM visits GROUP BY sex"
    )
    assert plan.shape.output_names == ("sex", "count", "total", "avg", "stddev")


def test_noisy_table_has_one_column_per_key_and_aggregate() -> None:
    plan = plan_for("SELECT sex, COUNT(*), SUM(cost) AS total, AVG(age) FROM visits GROUP BY sex")
    table = release(plan, [], rng=random.Random(3))
    assert [c.name for c in table.columns] == ["_dp_key_0", "_dp_agg_0", "_dp_agg_1", "_dp_agg_2"]
    assert [c.type for c in table.columns] == [
        ColumnType.TEXT,
        ColumnType.INTEGER,
        ColumnType.REAL,
        ColumnType.REAL,
    ]


def test_variance_is_clamped_into_its_possible_range() -> None:
    plan = plan_for("SELECT VAR_POP(age), STDDEV_POP(age) FROM visits", epsilon=1.0)
    # ages in [0, 100]: a population variance lies in [0, 50²]
    for seed in range(50):
        variance, deviation = release(plan, [(3000, 200_000, 40)], rng=random.Random(seed)).rows[0]
        assert variance is None or 0 <= variance <= 2500
        assert deviation is None or 0 <= deviation <= 50


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
