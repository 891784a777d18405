"""How sums are shown when their bounds fix their sign (release/present.py ``_signed``): a sum of values
never positive is never positive, a sum of values of either sign is shown as drawn. Post-processing
of the noisy table alone. Found open by ``make mutants`` (docs/testing.md)."""

from __future__ import annotations

import pytest

from proxy.release.present import Presentation, present
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
