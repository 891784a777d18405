"""How sums are shown when their bounds fix their sign (release/present.py ``_signed``): a sum of values
never positive is never positive, a sum of values of either sign is shown as drawn. Post-processing
of the noisy table alone. Found open by ``make mutants`` (docs/testing.md)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import PrivateQuery, classify
from proxy.config import DatasetPolicy, parse_config
from proxy.release.apply import ReleasedTable, noisy_columns
from proxy.release.plan import price_query
from proxy.release.present import Presentation, present
from tests.unit.proxy.policy_fixture import POLICY
from tests.unit.proxy.test_present import RAW, noisy_table, plan_for

OFF = Presentation(rounding="off")


@pytest.mark.parametrize(
    ("sql", "drawn", "shown"),
    [
        ("SELECT SUM(-age) FROM visits", 37, 0),  # -age in [-100, 0]: an upper bound of exactly 0
        ("SELECT SUM(-age) FROM visits", -37, -37),
        ("SELECT SUM(age - 100) FROM visits", 5, 0),
        ("SELECT SUM(-cost - 60) FROM visits", 2.5, 0.0),  # [-560.5, -10]: never positive
        ("SELECT SUM(-cost - 60) FROM visits", -2.5, -2.5),
        ("SELECT SUM(veil_clamp(cost, -1, 0.5)) FROM visits", 3.25, 3.25),  # either sign: as drawn
        ("SELECT SUM(veil_clamp(cost, -1, 1)) FROM visits", -3.25, -3.25),
        ("SELECT SUM(veil_clamp(cost, -1, 1)) FROM visits", 3.25, 3.25),
    ],
)
def test_a_sum_is_clamped_only_to_the_sign_its_bounds_fix(sql: str, drawn: float, shown: float) -> None:
    plan = plan_for(sql)
    (aggregate,) = plan.shape.aggregates
    assert aggregate.column is not None
    table = present(plan, noisy_table(plan, (drawn, 10.0)), OFF)
    assert table.rows == [(shown,)]
    assert type(table.rows[0][0]) is type(drawn), "a clamped integer sum stays an integer, a real one real"
    assert present(plan, noisy_table(plan, (drawn, 10.0)), RAW).rows == [(drawn,)]


def integer_age_between(lower: float, upper: float) -> DatasetPolicy:
    """The clinic with visits.age an INTEGER column declared in [lower, upper] (bounds need not be whole)."""
    declared = 'age = { type = "integer", lower = 0, upper = 100 }'
    assert POLICY.count(declared) == 2  # visits, then patients
    policy = POLICY.replace(declared, f'age = {{ type = "integer", lower = {lower}, upper = {upper} }}', 1)
    dataset = parse_config(policy, path=Path("/nonexistent/veil.toml")).dataset("clinic")
    assert dataset is not None
    return dataset


@pytest.mark.parametrize(
    ("lower", "upper", "drawn", "shown"),
    [
        (0.5, 1.5, 3, 1),  # the only integer in range is 1: a rounded quantile is clamped to it
        (0.5, 1.5, -2, 1),
        (0.5, 2.5, 3, 2),
        (0.5, 0.7, 3, 3),  # no integer in range: the value is left as drawn, not forced out of it
    ],
)
def test_an_integer_quantile_is_clamped_to_the_integers_within_its_bounds(
    lower: float, upper: float, drawn: int, shown: int
) -> None:
    statement = classify(
        parse_statements("SELECT MEDIAN(age) FROM visits")[0], integer_age_between(lower, upper)
    )
    assert isinstance(statement, PrivateQuery)
    plan = price_query(statement.shape, epsilon=1.0)
    table = present(plan, noisy_table(plan, (drawn, 0.1)), Presentation(rounding=0))
    assert table.rows == [(shown,)]
    assert type(table.rows[0][0]) is int


@pytest.mark.parametrize(
    ("sql", "drawn", "shown"),
    [
        ("SELECT VAR_POP(age) FROM visits", -0.04, 0.0),  # rounds to -0.0: shown as 0.0, never -0.0
        ("SELECT VAR_POP(age) FROM visits", -7.0, 0.0),
        ("SELECT STDDEV_SAMP(age) FROM visits", 0.04, 0.0),
        ("SELECT VAR_SAMP(age) FROM visits", 0.46, 0.5),
        ("SELECT STDDEV_POP(age) FROM visits", 12.34, 12.3),
        ("SELECT SUM(cost) FROM visits", -0.04, 0.0),  # a sum of either sign: still no negative zero
        ("SELECT SUM(cost) FROM visits", -0.46, -0.5),
    ],
)
def test_a_rounded_spread_is_non_negative_and_never_a_negative_zero(
    sql: str, drawn: float, shown: float
) -> None:
    plan = plan_for(sql)
    (value,) = present(plan, noisy_table(plan, (drawn, 0.1)), Presentation(rounding=1)).rows[0]
    assert repr(value) == repr(shown), "0.0, not -0.0"


def test_a_correlation_rounded_to_zero_is_a_positive_zero() -> None:
    from tests.unit.proxy.test_dates_and_pairs import shape_of as lab_shape

    plan = price_query(lab_shape("SELECT CORR(y, x) FROM m"), epsilon=1.0)
    (value,) = present(plan, noisy_table(plan, (-0.0004, 0.1)), Presentation(rounding=2)).rows[0]
    assert value == 0.0 and math.copysign(1.0, value) == 1.0


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT region, SUM(cost) FROM visits GROUP BY region",
        "SELECT region, sex, COUNT(*), AVG(age), SUM(cost) FROM visits GROUP BY region, sex",
        "SELECT COUNT(*), SUM(cost) FROM visits",
    ],
)
def test_the_presented_table_has_the_keys_and_aggregates_without_the_noise_columns(sql: str) -> None:
    plan = plan_for(sql)
    columns = noisy_columns(plan)
    width = len(plan.shape.group_keys) + len(plan.shape.aggregates)
    assert len(columns) > width  # there are noise columns to drop
    row = tuple(range(len(columns)))
    table = present(plan, ReleasedTable(columns, [row]), RAW)
    assert table.columns == columns[:width]
    assert [column.name for column in table.columns if column.name.startswith("_dp_sd_")] == []
