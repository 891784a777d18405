"""CORR, COVAR_* and REGR_* from noisy sums (release/pairs.py) with y and x of *different* widths, so
that no formula may take one argument's bounds for the other's; the NULL boundaries (n = 1, n = 2, a
variance of exactly 0); and the delta method of ``pair_noise_sd`` term by term. Post-processing only,
but it is what the analyst reads. Found open by ``make mutants`` (docs/testing.md)."""

from __future__ import annotations

import dataclasses
import math

import duckdb
import pytest

from proxy.analysis.aggregates import AggregateKind, PairInputs
from proxy.release.pairs import pair_noise_sd, pair_value
from tests.unit.proxy.test_dates_and_pairs import shape_of

K = AggregateKind
Y_BOUNDS, X_BOUNDS = (0.0, 10.0), (-3.0, 2.0)  # widths 10 and 5
WY, WX = 10.0, 5.0


def wide_pair() -> PairInputs:
    """CORR(y, x) of the lab table, with y's bounds widened to [0, 10] (x stays in [-3, 2])."""
    (aggregate,) = shape_of("SELECT CORR(y, x) FROM m").aggregates
    pair = aggregate.pair
    assert pair is not None
    y = dataclasses.replace(pair.y, lower=Y_BOUNDS[0], upper=Y_BOUNDS[1])
    x = dataclasses.replace(pair.x, lower=X_BOUNDS[0], upper=X_BOUNDS[1])
    return dataclasses.replace(pair, y=y, x=x)


PAIR = wide_pair()
ALL_KINDS = (
    K.CORR,
    K.COVAR_POP,
    K.COVAR_SAMP,
    K.REGR_SLOPE,
    K.REGR_INTERCEPT,
    K.REGR_R2,
    K.REGR_COUNT,
    K.REGR_AVGX,
    K.REGR_AVGY,
    K.REGR_SXX,
    K.REGR_SYY,
    K.REGR_SXY,
)


def stats_of(pairs: list[tuple[float, float]]) -> dict[str, float]:
    return {
        "n": float(len(pairs)),
        "sy": sum(y for y, _ in pairs),
        "sx": sum(x for _, x in pairs),
        "syy": sum(y * y for y, _ in pairs),
        "sxx": sum(x * x for _, x in pairs),
        "sxy": sum(y * x for y, x in pairs),
    }


def test_exact_sums_give_what_sql_gives_with_arguments_of_different_widths() -> None:
    """Within the bounds and away from every clamp, each aggregate is what DuckDB computes."""
    pairs = [(9.0, 0.5), (2.0, -1.0), (7.5, 1.5), (0.5, -2.0), (3.0, 2.0), (6.0, -2.5)]
    connection = duckdb.connect()
    connection.execute("CREATE TABLE p (y DOUBLE, x DOUBLE)")
    connection.executemany("INSERT INTO p VALUES (?, ?)", pairs)
    stats = stats_of(pairs)
    for kind in ALL_KINDS:
        (expected,) = connection.execute(f"SELECT {kind.name}(y, x) FROM p").fetchone()  # type: ignore[misc]
        assert pair_value(kind, stats, PAIR) == pytest.approx(expected, rel=1e-12), kind.name


@pytest.mark.parametrize(
    ("kind", "stats", "expected"),
    [
        (K.REGR_AVGY, {"n": 10.0, "sy": 500.0}, 10.0),  # into y's bounds, not x's
        (K.REGR_AVGY, {"n": 10.0, "sy": -50.0}, 0.0),
        (K.REGR_AVGX, {"n": 10.0, "sx": 500.0}, 2.0),
        (K.REGR_AVGX, {"n": 10.0, "sx": -500.0}, -3.0),
        # a variance of values in an interval of width w is at most w²/4: 25 for y, 6.25 for x
        (K.REGR_SYY, {"n": 10.0, "sy": 0.0, "syy": 10_000.0}, 10 * 25.0),
        (K.REGR_SXX, {"n": 10.0, "sx": 0.0, "sxx": 10_000.0}, 10 * 6.25),
        (K.REGR_SYY, {"n": 10.0, "sy": 0.0, "syy": -5.0}, 0.0),
        # |cov| <= w_y·w_x/4 = 12.5
        (K.COVAR_POP, {"n": 10.0, "sy": 0.0, "sx": 0.0, "sxy": 1000.0}, 12.5),
        (K.COVAR_POP, {"n": 10.0, "sy": 0.0, "sx": 0.0, "sxy": -1000.0}, -12.5),
        (K.COVAR_SAMP, {"n": 10.0, "sy": 0.0, "sx": 0.0, "sxy": 1000.0}, 12.5 * 10 / 9),
        (K.REGR_SXY, {"n": 10.0, "sy": 0.0, "sx": 0.0, "sxy": -1000.0}, -125.0),
        # inside the clamps: the formulas themselves
        (K.COVAR_POP, {"n": 4.0, "sy": 8.0, "sx": -2.0, "sxy": 6.0}, 6 / 4 - (8 / 4) * (-2 / 4)),
        (K.COVAR_SAMP, {"n": 4.0, "sy": 8.0, "sx": -2.0, "sxy": 6.0}, (6 / 4 + 1) * 4 / 3),
        (K.REGR_SXY, {"n": 4.0, "sy": 8.0, "sx": -2.0, "sxy": 6.0}, 4 * (6 / 4 + 1)),
        (K.REGR_SYY, {"n": 4.0, "sy": 8.0, "syy": 30.0}, 4 * (30 / 4 - 4)),
        (K.REGR_SXX, {"n": 4.0, "sx": -2.0, "sxx": 9.0}, 4 * (9 / 4 - 0.25)),
        (
            K.REGR_SLOPE,
            {"n": 4.0, "sy": 8.0, "sx": -2.0, "sxx": 9.0, "sxy": 6.0},
            (6 / 4 + 1) / (9 / 4 - 0.25),
        ),
        (
            K.REGR_INTERCEPT,
            {"n": 4.0, "sy": 8.0, "sx": -2.0, "sxx": 9.0, "sxy": 6.0},
            (8 - (6 / 4 + 1) / (9 / 4 - 0.25) * -2) / 4,
        ),
    ],
)
def test_each_aggregate_is_clamped_into_its_own_range(
    kind: AggregateKind, stats: dict[str, float], expected: float
) -> None:
    assert pair_value(kind, stats, PAIR) == pytest.approx(expected, rel=1e-12)


FULL = {"sy": 8.0, "sx": -2.0, "syy": 30.0, "sxx": 9.0, "sxy": 6.0}


@pytest.mark.parametrize("kind", [k for k in ALL_KINDS if k not in (K.REGR_COUNT, K.COVAR_SAMP)])
def test_one_noisy_row_is_enough_and_fewer_is_null(kind: AggregateKind) -> None:
    """SQL returns NULL over no rows: a noisy n below 1 gives NULL, n = 1 a value (when defined)."""
    at_one = {**FULL, "n": 1.0, "sxx": 20.0, "syy": 100.0}  # positive variances at n = 1
    assert pair_value(kind, at_one, PAIR) is not None
    assert pair_value(kind, {**at_one, "n": math.nextafter(1.0, 0.0)}, PAIR) is None


def test_a_sample_covariance_needs_two_noisy_rows() -> None:
    assert pair_value(K.COVAR_SAMP, {**FULL, "n": 2.0}, PAIR) == pytest.approx((6 / 2 + 8 / 2) * 2 / 1)
    assert pair_value(K.COVAR_SAMP, {**FULL, "n": math.nextafter(2.0, 0.0)}, PAIR) is None


def test_a_count_of_pairs_is_released_as_measured_even_below_one() -> None:
    assert pair_value(K.REGR_COUNT, {"n": -3.0}, PAIR) == -3.0
    assert pair_value(K.REGR_COUNT, {"n": 0.5}, PAIR) == 0.5


def test_a_variance_of_exactly_zero_is_not_positive() -> None:
    """Σx² = (Σx)²/n: var_x = 0, so no slope and no correlation; var_y = 0 alone: R² = 1, CORR NULL."""
    flat_x = {"n": 4.0, "sy": 8.0, "sx": 4.0, "syy": 30.0, "sxx": 4.0, "sxy": 6.0}
    for kind in (K.REGR_SLOPE, K.REGR_INTERCEPT, K.REGR_R2, K.CORR):
        assert pair_value(kind, flat_x, PAIR) is None, kind.name
    flat_y = {"n": 4.0, "sy": 8.0, "sx": -2.0, "syy": 16.0, "sxx": 9.0, "sxy": 6.0}
    assert pair_value(K.REGR_R2, flat_y, PAIR) == 1.0
    assert pair_value(K.CORR, flat_y, PAIR) is None


def test_correlation_and_r2_are_their_textbook_formulas_inside_the_clamps() -> None:
    stats = {"n": 4.0, **FULL}
    cov = 6 / 4 - (8 / 4) * (-2 / 4)
    var_y, var_x = 30 / 4 - (8 / 4) ** 2, 9 / 4 - (-2 / 4) ** 2
    assert pair_value(K.CORR, stats, PAIR) == pytest.approx(cov / math.sqrt(var_x * var_y), rel=1e-12)
    assert pair_value(K.REGR_R2, stats, PAIR) == pytest.approx(cov**2 / (var_x * var_y), rel=1e-12)
    negative = {**stats, "sxy": -6.0}  # cov = -1.5 + 1 = -0.5: CORR keeps its sign, R² does not
    assert pair_value(K.CORR, negative, PAIR) < 0 < pair_value(K.REGR_R2, negative, PAIR)  # type: ignore[operator]


# -- pair_noise_sd -------------------------------------------------------------------------------------

HUGE = dict.fromkeys(("n", "sy", "sx", "syy", "sxx", "sxy"), 1e6)


@pytest.mark.parametrize(
    ("kind", "cap"),
    [
        (K.CORR, 1.0),
        (K.REGR_R2, 0.5),
        (K.REGR_AVGY, WY / 2),
        (K.REGR_AVGX, WX / 2),
        (K.COVAR_POP, WY * WX / 4),
        (K.COVAR_SAMP, WY * WX / 4 * 40 / 39),
        (K.REGR_SXY, 40 * WY * WX / 4),
        (K.REGR_SYY, 40 * WY * WY / 8),
        (K.REGR_SXX, 40 * WX * WX / 8),
    ],
)
def test_noise_is_capped_at_half_the_range_of_each_aggregate(kind: AggregateKind, cap: float) -> None:
    """Noise of s.d. 10⁶ on every sum of 40 pairs: whatever the delta method says, nothing confined to
    an interval spreads more than half its width — w_y for y's, w_x for x's."""
    stats = {"n": 40.0, "sy": 200.0, "sx": -20.0, "syy": 1500.0, "sxx": 150.0, "sxy": -40.0}
    assert pair_noise_sd(kind, stats, HUGE, PAIR) == pytest.approx(cap, rel=1e-12)


def central(kind: AggregateKind, stats: dict[str, float], name: str, sd: float) -> float:
    step = sd * 1e-3
    up = pair_value(kind, {**stats, name: stats[name] + step}, PAIR)
    down = pair_value(kind, {**stats, name: stats[name] - step}, PAIR)
    assert up is not None and down is not None
    return (up - down) / (2 * step) * sd


def test_the_spread_of_a_slope_is_the_delta_method_over_every_statistic() -> None:
    """slope = (n·Σxy − Σy·Σx)/(n·Σx² − (Σx)²): its partial derivatives, times each statistic's s.d.,
    summed in quadrature — against the analytic derivatives (the central difference is exact to
    O(step²), about 10⁻⁶ relative here)."""
    stats = {"n": 40.0, "sy": 200.0, "sx": -20.0, "syy": 1500.0, "sxx": 150.0, "sxy": -40.0}
    sds = {"n": 2.0, "sy": 3.0, "sx": 5.0, "syy": 7.0, "sxx": 11.0, "sxy": 13.0}
    n, sy, sx, sxx, sxy = (stats[k] for k in ("n", "sy", "sx", "sxx", "sxy"))
    top, bottom = n * sxy - sy * sx, n * sxx - sx * sx
    partials = {
        "n": (sxy * bottom - top * sxx) / bottom**2,
        "sy": -sx / bottom,
        "sx": (-sy * bottom + 2 * sx * top) / bottom**2,
        "sxx": -top * n / bottom**2,
        "sxy": n / bottom,
        "syy": 0.0,
    }
    expected = math.sqrt(sum((partials[k] * sds[k]) ** 2 for k in sds))
    assert pair_noise_sd(K.REGR_SLOPE, stats, sds, PAIR) == pytest.approx(expected, rel=1e-5)
    # each statistic's term alone
    for name, sd in sds.items():
        only = {name: sd}
        assert pair_noise_sd(K.REGR_SLOPE, stats, only, PAIR) == pytest.approx(
            abs(partials[name] * sd), abs=1e-12, rel=1e-5
        )


def test_statistics_without_a_usable_spread_are_left_out() -> None:
    """A s.d. of 0, a negative one, NaN or ∞ adds nothing (and breaks nothing)."""
    stats = {"n": 40.0, "sy": 200.0, "sx": -20.0, "syy": 1500.0, "sxx": 150.0, "sxy": -40.0}
    base = pair_noise_sd(K.REGR_SLOPE, stats, {"sxy": 13.0}, PAIR)
    noisy = {"sxy": 13.0, "n": 0.0, "sy": -1.0, "sx": math.nan, "sxx": math.inf}
    assert pair_noise_sd(K.REGR_SLOPE, stats, noisy, PAIR) == base
    assert pair_noise_sd(K.REGR_SLOPE, stats, {}, PAIR) == 0.0


def test_next_to_a_null_the_derivative_is_one_sided() -> None:
    """COVAR_POP at n = 1.0005 with s.d. 1 on n: n − 0.001 is below 1 (NULL), so the slope in n is
    (f(n + step) − f(n)) / step, not a central difference."""
    stats = {"n": 1.0005, "sy": 3.0, "sx": -1.0, "sxy": 0.5}
    value = pair_value(K.COVAR_POP, stats, PAIR)
    up = pair_value(K.COVAR_POP, {**stats, "n": 1.0015}, PAIR)
    assert value is not None and up is not None
    expected = abs((up - value) / 1e-3 * 1.0)
    assert pair_noise_sd(K.COVAR_POP, stats, {"n": 1.0}, PAIR) == pytest.approx(expected, rel=1e-9)
    # and where the upper side is NULL: REGR_SLOPE with var_x just above 0, s.d. on Σx²
    flat = {"n": 4.0, "sy": 8.0, "sx": 4.0, "syy": 30.0, "sxx": 4.0 + 4e-4, "sxy": 6.0}
    value = pair_value(K.REGR_SLOPE, flat, PAIR)
    up = pair_value(K.REGR_SLOPE, {**flat, "sxx": flat["sxx"] + 1e-3}, PAIR)
    down = pair_value(K.REGR_SLOPE, {**flat, "sxx": flat["sxx"] - 1e-3}, PAIR)
    assert value is not None and up is not None and down is None
    expected = abs((up - value) / 1e-3)
    assert pair_noise_sd(K.REGR_SLOPE, flat, {"sxx": 1.0}, PAIR) == pytest.approx(expected, rel=1e-9)


def test_where_the_upper_side_is_null_the_derivative_is_taken_below() -> None:
    """REGR_SLOPE with var_x = Σx²/n − (Σx/n)² just above 0 and Σx > 0: Σx + step makes var_x negative
    (NULL), so the slope in Σx is (f(Σx) − f(Σx − step)) / step."""
    flat = {"n": 4.0, "sy": 8.0, "sx": 4.0, "syy": 30.0, "sxx": 4.0 + 4e-4, "sxy": 6.0}
    value = pair_value(K.REGR_SLOPE, flat, PAIR)
    up = pair_value(K.REGR_SLOPE, {**flat, "sx": flat["sx"] + 1e-3}, PAIR)
    down = pair_value(K.REGR_SLOPE, {**flat, "sx": flat["sx"] - 1e-3}, PAIR)
    assert value is not None and up is None and down is not None
    expected = abs((value - down) / 1e-3)
    assert pair_noise_sd(K.REGR_SLOPE, flat, {"sx": 1.0}, PAIR) == pytest.approx(expected, rel=1e-9)


def test_a_statistic_null_on_both_sides_is_skipped_and_the_others_still_count() -> None:
    """var_x = Σx²/n − (Σx/n)² is largest at Σx = 0; just above 0 there, Σx ± step makes it negative on
    both sides: that statistic adds nothing, and the statistics after it are still carried through."""
    stats = {"n": 4.0, "sy": 8.0, "sx": 0.0, "syy": 30.0, "sxx": 1e-9, "sxy": 6.0}
    assert pair_value(K.REGR_SLOPE, stats, PAIR) is not None
    assert pair_value(K.REGR_SLOPE, {**stats, "sx": 1e-3}, PAIR) is None
    assert pair_value(K.REGR_SLOPE, {**stats, "sx": -1e-3}, PAIR) is None
    alone = pair_noise_sd(K.REGR_SLOPE, stats, {"sxy": 1e-9}, PAIR)
    assert alone is not None and alone > 0
    assert pair_noise_sd(K.REGR_SLOPE, stats, {"sx": 1.0, "sxy": 1e-9}, PAIR) == alone


def test_no_spread_without_a_value_or_for_a_count() -> None:
    stats = {"n": 0.5, "sy": 3.0, "sx": -1.0, "sxy": 0.5}
    assert pair_noise_sd(K.COVAR_POP, stats, {"n": 1.0}, PAIR) is None
    assert pair_noise_sd(K.REGR_COUNT, {"n": 40.0}, {"n": 1.0}, PAIR) is None
