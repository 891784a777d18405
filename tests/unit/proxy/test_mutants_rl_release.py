"""Release and pricing details of release/plan.py and release/apply.py that the fresh mutation sample of
seed 2104 found untested (``make mutants``, docs/testing.md). Expected numbers are derived by hand from
the documented formulas, never by calling the code under test."""

from __future__ import annotations

import math
import random

import pytest

from proxy.analysis.aggregates import AggregateKind
from proxy.release.apply import ReleasedTable, _spread, null_notes, release
from proxy.release.plan import price_query
from tests.unit.proxy.test_dates_and_pairs import shape_of
from tests.unit.proxy.test_release_spreads import plan_for as spread_plan_for

# -- the "(other)" row ---------------------------------------------------------------------------------


def test_an_engine_answer_with_too_few_totals_is_refused() -> None:
    """The "(other)" row needs one exact total per total measurement: an engine answer with fewer must
    stop the release, not give a row whose missing quantities read as NULL as if nothing were there."""
    plan = spread_plan_for("SELECT region, COUNT(*), SUM(cost) FROM visits GROUP BY region", other_row=True)
    assert len(plan.total_measurements) == 2
    with pytest.raises(ValueError, match="shorter"):
        release(plan, [("north", 4, 100.0)], rng=random.Random(3), exact_totals=[400.0])


# -- VAR / STDDEV from noisy sums ----------------------------------------------------------------------


def test_a_sample_variance_of_two_noisy_rows_divides_by_one() -> None:
    """VAR_SAMP floors its noisy count at two rows (it divides by n − 1), not more: values 3 and 7 —
    Σx = 10, Σx² = 58, n = 2 — have a sample variance of exactly 8; a floor of three rows would give 37/3."""
    variance, _ = _spread(AggregateKind.VAR_SAMP, (10.0, 58.0, 2.0), (1.0, 1.0, 1.0), width=100.0)
    assert variance == pytest.approx(8.0, rel=1e-12)
    below, _ = _spread(AggregateKind.VAR_SAMP, (10.0, 58.0, 0.4), (1.0, 1.0, 1.0), width=100.0)
    assert below == pytest.approx(8.0, rel=1e-12), "a noisy count below two is taken as two rows"


def test_a_small_standard_deviation_keeps_its_delta_method_spread() -> None:
    """STDDEV = √var has spread sd_var / (2·√var) whenever √var > 0 — also below 1, where it is larger
    than sd_var but still far below the cap (half the width). n = 10, Σx = 10, Σx² = 12.5: mean 1,
    variance 0.25, deviation 0.5."""
    values, sds = (10.0, 12.5, 10.0), (0.01, 0.01, 0.01)
    variance, variance_sd = _spread(AggregateKind.VAR_POP, values, sds, width=100.0)
    assert variance == pytest.approx(0.25, rel=1e-12)
    deviation, deviation_sd = _spread(AggregateKind.STDDEV_POP, values, sds, width=100.0)
    assert deviation == pytest.approx(0.5, rel=1e-12)
    assert deviation_sd == pytest.approx(variance_sd / (2 * 0.5), rel=1e-12)
    assert deviation_sd < 1.0 < math.sqrt(100.0**2 / 4)


# -- notices -------------------------------------------------------------------------------------------


def test_the_null_correlation_notice_tells_the_analyst_what_helps() -> None:
    """The NOTICE beside a NULL CORR reaches the analyst: it ends with what to change, in its own case."""
    plan = price_query(shape_of("SELECT CORR(y, x) FROM m"), epsilon=1.0)
    (note,) = null_notes(plan, ReleasedTable(columns=(), rows=[(None,), (0.2,)]))
    assert note.startswith("corr(y, x) is NULL in 1 of 2 row(s): ")
    assert note.endswith(
        "(too few rows or too little spread for the noise at this ε; a larger ε or a wider group helps)"
    )


def test_a_noisy_covariance_reports_the_spread_of_its_noise() -> None:
    """COVAR_POP comes from four noisy statistics; its ``veil.round = auto`` spread carries their noise
    (delta method), so it is positive: a spread of 0 would present the noisy covariance as exact. At
    n = 10,000, mean x = 0.5, mean y = 1 and covariance 1 (inside the clamp of ±6.25), each statistic's
    noise moves the value."""
    plan = price_query(shape_of("SELECT COVAR_POP(y, x) FROM m"), epsilon=10.0)
    ((value, spread),) = release(plan, [(10_000, 5_000.0, 10_000, 15_000.0)], rng=random.Random(5)).rows
    assert value == pytest.approx(1.0, abs=0.05)
    assert 0.0 < spread < 0.05
