"""The noise standard deviations and error bounds a release reports, against their documented formulas.

``veil.round = auto`` rounds an answer to the digits its noise leaves meaningful, and ``veil.show_error``
prints a 95 % error bound: both come from the standard deviations computed here (apply.py, pairs.py) and
from ``Measurement.error_bound`` / ``TopKSelection.score_gap``. A wrong spread makes Veil claim digits
that are noise (too small) or throw away digits that are not (too large). Found missing by ``make
mutants`` (docs/testing.md): these formulas were only checked loosely. Every expected number below is
derived by hand from the formula in the docstring, never by calling the code under test.
"""

from __future__ import annotations

import math
import random

import pytest

from proxy.analysis.aggregates import AggregateKind, PairInputs
from proxy.analysis.parse import parse_statements
from proxy.analysis.quantities import Quantity, QuantityKind
from proxy.analysis.statements import PrivateQuery, classify
from proxy.release.apply import OTHER, _average, _spread, release
from proxy.release.pairs import pair_noise_sd
from proxy.release.plan import Measurement, ReleasePlan, price_query
from proxy.release.top_k import TopKSelection
from tests.unit.proxy.policy_fixture import clinic_policy


def plan_for(sql: str, *, other_row: bool = False) -> ReleasePlan:
    statement = classify(parse_statements(sql)[0], clinic_policy())
    assert isinstance(statement, PrivateQuery)
    return price_query(statement.shape, epsilon=1.0, other_row=other_row)


def pair_of(sql: str) -> PairInputs:
    statement = classify(parse_statements(sql)[0], clinic_policy())
    assert isinstance(statement, PrivateQuery)
    pair = statement.shape.aggregates[0].pair
    assert pair is not None
    return pair


def test_average_spread_is_the_delta_method_of_sum_over_count() -> None:
    """AVG = S/n from a noisy sum S and a noisy count n: to first order its noise has variance
    (sd_S² + avg²·sd_n²)/n². The count's noise moves the average in proportion to the average itself;
    dividing by the count's s.d. instead would report a spread about 3× too small here, and
    ``veil.round`` would show digits that are noise."""
    value, sd = _average(total=50.0, count=10.0, total_sd=3.0, count_sd=2.0, lower=0.0, upper=100.0)
    assert value == 5.0
    assert sd == pytest.approx(math.sqrt(3.0**2 + (5.0 * 2.0) ** 2) / 10.0, rel=1e-12)  # √109 / 10


def test_variance_spread_is_the_delta_method_of_the_moments() -> None:
    """var_pop = S₂/n − (S₁/n)²: ∂/∂S₂ = 1/n, ∂/∂S₁ = −2·mean/n, ∂/∂n = (2·mean² − S₂/n)/n. At S₁ = 500,
    S₂ = 3000, n = 100 (mean 5, variance 5) with s.d.s 10, 100 and 5 each term is exactly 1, so the
    spread is √3; a wrong coefficient on any term changes it."""
    variance, sd = _spread(AggregateKind.VAR_POP, (500.0, 3000.0, 100.0), (10.0, 100.0, 5.0), width=100.0)
    assert variance == pytest.approx(5.0, rel=1e-12)
    assert sd == pytest.approx(math.sqrt(3.0), rel=1e-12)


def test_sample_and_deviation_spreads_follow_the_variance_spread() -> None:
    """VAR_SAMP scales the population variance and its spread by n/(n − 1); STDDEV_POP = √var has
    spread sd_var / (2·√var) (delta method)."""
    values, sds = (500.0, 3000.0, 100.0), (10.0, 100.0, 5.0)
    sample, sample_sd = _spread(AggregateKind.VAR_SAMP, values, sds, width=100.0)
    assert sample == pytest.approx(5.0 * 100 / 99, rel=1e-12)
    assert sample_sd == pytest.approx(math.sqrt(3.0) * 100 / 99, rel=1e-12)
    deviation, deviation_sd = _spread(AggregateKind.STDDEV_POP, values, sds, width=100.0)
    assert deviation == pytest.approx(math.sqrt(5.0), rel=1e-12)
    assert deviation_sd == pytest.approx(math.sqrt(3.0) / (2 * math.sqrt(5.0)), rel=1e-12)


def test_other_row_spread_adds_the_total_and_every_released_group() -> None:
    """The "(other)" row is the noisy total minus each released group's noisy value, so its noise
    variance is the total's plus one group's per released group: sd = √(sd_t² + g·sd_g²). For SUM(cost)
    (Δ = L·max(|lower|, |upper|) = 3·500.5, ε = 1/2 for each of the two measurements, Laplace
    sd = √2·Δ/ε) over g = 2 public regions that is √2·3003·√3. Reporting only the total's noise would
    make the row that carries the suppressed groups look as precise as one group."""
    plan = plan_for("SELECT region, SUM(cost) FROM visits GROUP BY region", other_row=True)
    assert [(m.sensitivity, m.epsilon, m.total) for m in plan.measurements] == [
        (1501.5, 0.5, False),
        (1501.5, 0.5, True),
    ]
    table = release(plan, [("north", 100.0), ("south", 200.0)], rng=random.Random(7), exact_totals=[400.0])
    one = math.sqrt(2.0) * 1501.5 / 0.5
    *groups, other = table.rows
    assert [row[0] for row in groups] == ["north", "south"] and other[0] == OTHER
    assert [row[2] for row in groups] == pytest.approx([one, one], rel=1e-12)
    assert other[2] == pytest.approx(math.sqrt(one**2 + 2 * one**2), rel=1e-12)
    assert isinstance(other[1], float)  # the row's value is there, not NULL


def test_regr_syy_spread_is_capped_at_half_its_range() -> None:
    """REGR_SYY = n·var_y with var_y clamped into [0, w_y²/4], so it lies in an interval of width
    n·w_y²/4 and its noise s.d. is capped at n·w_y²/8: here 100·100²/8 = 125,000 for age in [0, 100].
    A noisy Σy² with s.d. 10⁶ (∂REGR_SYY/∂Σy² = 1) would otherwise report a spread of 10⁶, eight times
    the whole range the answer can take."""
    pair = pair_of("SELECT REGR_SYY(age, cost) FROM visits")
    assert (pair.y.lower, pair.y.upper) == (0, 100)
    stats = {"n": 100.0, "sy": 5000.0, "syy": 260_000.0, "sx": 0.0, "sxx": 0.0, "sxy": 0.0}
    sds = {"n": 0.0, "sy": 0.0, "syy": 1e6, "sx": 0.0, "sxx": 0.0, "sxy": 0.0}
    assert pair_noise_sd(AggregateKind.REGR_SYY, stats, sds, pair) == 100 * 100 * 100 / 8
    small = {**sds, "syy": 1000.0}  # below the cap: the delta method itself, slope 1
    assert pair_noise_sd(AggregateKind.REGR_SYY, stats, small, pair) == pytest.approx(1000.0, rel=1e-9)


def test_count_error_bound_adds_one_grid_step_for_discrete_noise() -> None:
    """A count's noise is discrete Laplace, whose tail can exceed the continuous one; the documented
    bound is the continuous T = (Δ/ε)·ln(cells/(1 − confidence)) *plus* one unit. Subtracting it would
    understate the error ``veil.show_error`` prints."""
    count = Measurement(Quantity(QuantityKind.ROWS, None), 3.0, 0.5, exact_integer=True, integer_output=True)
    assert count.error_bound(cells=4) == pytest.approx(6.0 * math.log(4 / 0.05) + 1.0, rel=1e-12)
    real = Measurement(Quantity(QuantityKind.ROWS, None), 3.0, 0.5, exact_integer=False, integer_output=True)
    assert real.error_bound(cells=4) == pytest.approx(6.0 * math.log(4 / 0.05), rel=1e-12)


@pytest.mark.parametrize(
    ("selection", "expected"),
    [
        # k = 3 rounds over 10 keys in 2 partitions at ε = 1.5: (3/1.5)·(ln 10 + ln(3·2/0.05)) = 2·ln 1200
        (TopKSelection(k=3, epsilon=1.5, candidates=10, partitions=2), 2 * math.log(1200)),
        # keys from the data (counted as 10⁶ candidates), k = 4 at ε = 2: 2·(ln 10⁶ + ln(4/0.05))
        (TopKSelection(k=4, epsilon=2.0, candidates=None, partitions=None), 2 * math.log(8e7)),
    ],
    ids=["public-keys", "keys-from-the-data"],
)
def test_top_k_score_gap_uses_the_monotone_bound(selection: TopKSelection, expected: float) -> None:
    """Counts of people are monotone scores (adding a person never lowers one), so the selection's
    shortfall bound is G = (k·Δ/ε)·(ln(candidates) + ln(k·outputs/(1 − confidence))); the general bound
    is twice that and would tell the analyst the selected keys may be twice as far from the true top k."""
    assert selection.score_gap() == pytest.approx(expected, rel=1e-12)
