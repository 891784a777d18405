"""The selections built on permute-and-flip (top-k, MODE, quantiles, the contribution bound): exact ε
arithmetic, boundaries of every check, and every refusal's exact message and hint. Found by a mutation run
of mechanisms/ (docs/testing.md): a refusal matched only by a fragment survived a mutated text, and a
boundary that no test sat on survived an off-by-one."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest

from budget.loss import PrivacyLoss
from mechanisms.contribution_bound import (
    bound_candidates,
    bound_scores,
    bound_target,
    dp_contribution_bound,
    nearest_candidate,
    selection_share,
)
from mechanisms.errors import MechanismError
from mechanisms.exponential import exponential_privacy_loss
from mechanisms.mode import dp_mode_from_histogram, mode_count_gap_bound, mode_privacy_loss
from mechanisms.quantile import (
    MAX_GRID_SIZE,
    dp_quantile,
    dp_quantile_from_histogram,
    quantile_grid,
    quantile_rank_error_bound,
)
from mechanisms.top_k import (
    dp_top_k,
    top_k_privacy_loss,
    top_k_rho,
    top_k_round_epsilon,
    top_k_score_gap_bound,
)
from mechanisms.validation import check_positive_finite

EPSILON_HINT = "spend a positive budget, e.g. epsilon=1.0"


def refusal(call: Callable[[], object]) -> MechanismError:
    with pytest.raises(MechanismError) as refused:
        call()
    return refused.value


def rng() -> random.Random:
    return random.Random(0)


# --- validation ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("number", [0, 0.0, -1e-300, math.inf, -math.inf, math.nan, True, False, "1", None])
def test_check_positive_finite_refuses_with_the_callers_name_and_hint(number: object) -> None:
    error = refusal(lambda: check_positive_finite(number, name="width", hint="try 2"))
    assert error.message == f"width must be a finite number greater than 0, got {number!r}"
    assert error.hint == "try 2"


@pytest.mark.parametrize("number", [5e-324, 1, Fraction(1, 3), 1.7e308, np.float64(0.5), np.int64(3)])
def test_check_positive_finite_accepts_every_positive_finite_real(number: object) -> None:
    check_positive_finite(number, name="width", hint="try 2")


# --- privacy maps: (ε, 0) exactly, refusals with the budget hint ------------------------------------------------


@pytest.mark.parametrize("price", [exponential_privacy_loss, top_k_privacy_loss, mode_privacy_loss])
def test_selections_cost_their_epsilon_and_refuse_a_bad_one_with_the_hint(
    price: Callable[..., PrivacyLoss],
) -> None:
    assert price(epsilon=0.7) == PrivacyLoss(0.7, 0.0)
    assert type(price(epsilon=2).epsilon) is float
    error = refusal(lambda: price(epsilon=0.0))
    assert error.message == "epsilon must be a finite number greater than 0, got 0.0"
    assert error.hint == EPSILON_HINT


# --- top-k ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("epsilon", "rounds"), [(1.0, 2), (1.0, 4), (3.0, 3), (0.5, 1), (0.75, 3)])
def test_round_epsilon_is_exact_when_the_split_is_exact(epsilon: float, rounds: int) -> None:
    """ε/k is a float here: the share is exactly it, not the float below (which would waste budget)."""
    assert Fraction(epsilon) / rounds == Fraction(epsilon / rounds)
    assert top_k_round_epsilon(epsilon, rounds) == epsilon / rounds


@pytest.mark.parametrize(("epsilon", "rounds"), [(0.1, 3), (1.0, 3), (0.3, 7), (2.0, 9)])
def test_round_epsilon_is_the_largest_float_that_does_not_overspend(epsilon: float, rounds: int) -> None:
    share = top_k_round_epsilon(epsilon, rounds)
    assert Fraction(share) * rounds <= Fraction(epsilon)
    assert Fraction(math.nextafter(share, math.inf)) * rounds > Fraction(epsilon)


def test_round_epsilon_refuses_an_epsilon_too_small_to_split() -> None:
    error = refusal(lambda: top_k_round_epsilon(5e-324, 3))
    assert error.message == "epsilon 5e-324 is too small to split over 3 rounds"
    assert error.hint == "spend more epsilon or ask for fewer candidates"
    # one round keeps even the smallest float
    assert top_k_round_epsilon(5e-324, 1) == 5e-324


def test_round_epsilon_refusals_are_exact() -> None:
    error = refusal(lambda: top_k_round_epsilon(0.0, 2))
    assert (error.message, error.hint) == (
        "epsilon must be a finite number greater than 0, got 0.0",
        EPSILON_HINT,
    )
    error = refusal(lambda: top_k_round_epsilon(1.0, 0))
    assert (error.message, error.hint) == (
        "rounds must be a whole number >= 1, got 0",
        "one round per released candidate",
    )


def test_rho_is_rounds_times_the_round_epsilon_squared_over_two_rounded_up() -> None:
    for epsilon, rounds in [(1.0, 10), (0.3, 3), (2.0, 1), (0.7, 6)]:
        share = Fraction(top_k_round_epsilon(epsilon, rounds))
        exact = rounds * share * share / 2
        rho = top_k_rho(epsilon=epsilon, rounds=rounds)
        assert Fraction(rho) >= exact
        assert rho <= float(exact) * (1 + 1e-15)


def test_dp_top_k_refuses_a_string_of_scores() -> None:
    for scores in ("ab", b"ab", {1: 2}, []):
        error = refusal(lambda scores=scores: dp_top_k(scores, k=1, epsilon=1.0, sensitivity=1, rng=rng()))
        assert error.message == "scores must be a non-empty sequence of integers or fractions.Fraction"
        assert error.hint == "pass one score per candidate; the candidate set must never be empty"


def test_dp_top_k_refuses_a_bad_k_with_the_hint() -> None:
    error = refusal(lambda: dp_top_k([1, 2], k=0, epsilon=1.0, sensitivity=1, rng=rng()))
    assert error.message == "k must be a whole number >= 1, got 0"
    assert error.hint == "the number of candidates to release, e.g. 10"


def test_dp_top_k_splits_epsilon_over_the_rounds_it_runs() -> None:
    """k = 5 over 2 candidates runs 2 rounds at ε/2 each (not ε/5): with scores (0, 2), Δ = 1, ε = 2,
    monotone, the first round accepts the loser with exp(-(ε/2)·2) = e^-2 when visited first, so it
    leads with probability e^-2/2 = 0.0677; at ε/5 it would be e^-0.8/2 = 0.225. 10 000 draws, 4.5 standard
    errors (±0.011)."""
    source = random.Random(5)
    draws = 10_000
    first = sum(
        dp_top_k([0, 2], k=5, epsilon=2.0, sensitivity=1, rng=source, monotone=True)[0] == 0
        for _ in range(draws)
    )
    p = math.exp(-2) / 2
    assert abs(first / draws - p) <= 4.5 * math.sqrt(p * (1 - p) / draws)


def test_dp_top_k_returns_indices_into_the_original_scores() -> None:
    """After a pick the remaining candidates keep their original indices: a clear order is reproduced."""
    scores = [10, 5000, 3000, 0, 4000, 1000]
    for seed in range(10):
        assert dp_top_k(scores, k=4, epsilon=1.0, sensitivity=1, rng=random.Random(seed)) == [1, 4, 2, 5]


def test_score_gap_bound_uses_min_k_candidates_rounds() -> None:
    """k = 10 over 4 candidates runs 4 rounds: G = (4Δ/ε)·(ln 4 + ln(4/β)) (monotone)."""
    bound = top_k_score_gap_bound(
        epsilon=2.0, sensitivity=1, k=10, candidates=4, confidence=0.9, monotone=True
    )
    assert bound == pytest.approx(2 * (math.log(4) + math.log(4 / 0.1)), rel=1e-12)


@pytest.mark.parametrize(
    ("arguments", "message", "hint"),
    [
        (
            {"candidates": 0},
            "candidates must be a whole number >= 1, got 0",
            "the number of candidates selected from",
        ),
        (
            {"outputs": 0},
            "outputs must be a whole number >= 1, got 0",
            "the number of independent selections, e.g. 1",
        ),
        ({"k": 0}, "k must be a whole number >= 1, got 0", "the number of candidates to release, e.g. 10"),
        (
            {"confidence": 1.0},
            "confidence must be strictly between 0 and 1, got 1.0",
            "use e.g. confidence=0.95",
        ),
        (
            {"confidence": 0.0},
            "confidence must be strictly between 0 and 1, got 0.0",
            "use e.g. confidence=0.95",
        ),
        # refused on entry with the caller's value, not later with the per-round confidence derived from it
        ({"confidence": 1}, "confidence must be strictly between 0 and 1, got 1", "use e.g. confidence=0.95"),
        (
            {"confidence": 1.5},
            "confidence must be strictly between 0 and 1, got 1.5",
            "use e.g. confidence=0.95",
        ),
    ],
)
def test_score_gap_bound_refusals_are_exact(arguments: dict[str, object], message: str, hint: str) -> None:
    parameters: dict[str, object] = {"epsilon": 1.0, "sensitivity": 1, "k": 2, "candidates": 5, **arguments}
    error = refusal(lambda: top_k_score_gap_bound(**parameters))  # type: ignore[arg-type]
    assert (error.message, error.hint) == (message, hint)


# --- MODE ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("counts", [[], [1, -1], [1.5, 2], [True, 3], ["2"]])
def test_mode_refuses_bad_counts_exactly(counts: list[object]) -> None:
    error = refusal(lambda: dp_mode_from_histogram(counts, epsilon=1.0, sensitivity=1, rng=rng()))  # type: ignore[arg-type]
    assert error.message == "counts must be a non-empty sequence of non-negative integers"
    assert error.hint == "pass one (weighted) row count per public value, zeros included"


def test_mode_takes_numpy_counts_and_a_single_value() -> None:
    assert (
        dp_mode_from_histogram(
            [np.int64(0), np.int64(7), np.int64(0)], epsilon=50.0, sensitivity=1, rng=rng()
        )
        == 1
    )
    assert dp_mode_from_histogram([0], epsilon=1.0, sensitivity=1, rng=rng()) == 0


def test_mode_refusals_are_exact() -> None:
    error = refusal(lambda: dp_mode_from_histogram([1], epsilon=1.0, sensitivity=0, rng=rng()))
    assert error.message == "sensitivity must be a whole number >= 1, got 0"
    assert error.hint == "the most weight one unit can carry, e.g. 1"
    error = refusal(lambda: dp_mode_from_histogram([1], epsilon=math.nan, sensitivity=1, rng=rng()))
    assert (error.message, error.hint) == (
        "epsilon must be a finite number greater than 0, got nan",
        EPSILON_HINT,
    )
    for name, arguments, hint in [
        ("max_contributions", {"max_contributions": 0}, "rows kept per privacy unit, e.g. 1"),
        ("outputs", {"outputs": 0}, "the number of groups answered, e.g. 1"),
        ("candidates", {"candidates": 0}, "the number of public values, e.g. 3"),
    ]:
        parameters: dict[str, object] = {"epsilon": 1.0, "max_contributions": 1, "candidates": 3, **arguments}
        error = refusal(lambda parameters=parameters: mode_count_gap_bound(**parameters))  # type: ignore[arg-type]
        assert (error.message, error.hint) == (f"{name} must be a whole number >= 1, got 0", hint)


def test_mode_gap_bound_passes_its_confidence_on() -> None:
    # (L/ε)·ln(candidates·outputs/(1 − confidence)) = (2/1)·ln(5·1/0.2)
    assert mode_count_gap_bound(
        epsilon=1.0, max_contributions=2, candidates=5, confidence=0.8
    ) == pytest.approx(2 * math.log(25), rel=1e-12)


def test_mode_uses_the_sensitivity_it_is_given() -> None:
    """Counts (3, 0) at ε = 1: with Δ = 3 the loser accepts with e^-1 (P = e^-1/2 = 0.184); with Δ = 1 it
    would be e^-3/2 = 0.025. 10 000 draws, 4.5 standard errors (±0.017)."""
    source = random.Random(6)
    draws = 10_000
    losers = sum(dp_mode_from_histogram([3, 0], epsilon=1.0, sensitivity=3, rng=source) for _ in range(draws))
    p = math.exp(-1) / 2
    assert abs(losers / draws - p) <= 4.5 * math.sqrt(p * (1 - p) / draws)


# --- quantiles ------------------------------------------------------------------------------------------------------


def test_values_on_the_bounds_are_inside_them() -> None:
    """[lower, upper] is closed: a column clamped to its bounds holds them."""
    y = dp_quantile([0.0, 0.5, 1.0], q=0.5, lower=0.0, upper=1.0, epsilon=1.0, rng=rng(), grid_size=4)
    assert y in {0.0, 0.25, 0.5, 0.75, 1.0}
    # a single value, and equal values, are sorted
    dp_quantile([0.5], q=0.5, lower=0.0, upper=1.0, epsilon=1.0, rng=rng(), grid_size=4)
    dp_quantile([0.5, 0.5], q=0.5, lower=0.0, upper=1.0, epsilon=1.0, rng=rng(), grid_size=4)


def test_the_largest_grid_is_allowed_and_one_more_point_is_not() -> None:
    y = dp_quantile([], q=0.5, lower=0.0, upper=1.0, epsilon=1.0, rng=rng(), grid_size=MAX_GRID_SIZE)
    assert 0.0 <= y <= 1.0 and (y * MAX_GRID_SIZE) == pytest.approx(round(y * MAX_GRID_SIZE), abs=1e-6)
    error = refusal(
        lambda: dp_quantile(
            [], q=0.5, lower=0.0, upper=1.0, epsilon=1.0, rng=rng(), grid_size=MAX_GRID_SIZE + 1
        )
    )
    assert error.message == f"grid_size must be at most {MAX_GRID_SIZE}, got {MAX_GRID_SIZE + 1}"
    assert error.hint == "a finer answer needs tighter lower/upper bounds rather than more grid points"


def test_ranks_count_the_values_strictly_below_a_grid_point() -> None:
    """Scores use #{x < y}: values 1, 1, 1, 3 with grid 0..4 give counts 0, 0, 3, 3, 4. For q = 0.75 (target
    3) the grid points 2 and 3 score 0, every other point is ≥ 3 ranks away: at ε = 40 (gap·ε/2 ≥ 60) only 2
    or 3 is released. Counting x <= y would give 0, 3, 3, 4, 4 (best points 1 and 2)."""
    values = [1.0, 1.0, 1.0, 3.0]
    answers = {
        dp_quantile(values, q=0.75, lower=0.0, upper=4.0, epsilon=40.0, rng=random.Random(seed), grid_size=4)
        for seed in range(40)
    }
    assert answers == {2.0, 3.0}


@pytest.mark.parametrize(("q", "expected"), [(0.75, 6.0), (0.125, 1.0), (1.0, 8.0)])
def test_the_target_rank_counts_every_value(q: float, expected: float) -> None:
    """q·n with n the number of values (the histogram's total): for 8 values 0.5, …, 7.5 on the grid 0..8,
    #{x < j} = j, so the target 8q is the one grid point scoring 0; its neighbours are a whole rank off
    (gap·ε/2 >= 100 at ε = 200 with the scaled sensitivity). A target from 7 values would pick 5 for q = 0.75."""
    values = [i + 0.5 for i in range(8)]
    for seed in range(10):
        y = dp_quantile(
            values, q=q, lower=0.0, upper=8.0, epsilon=200.0, rng=random.Random(seed), grid_size=8
        )
        assert y == expected
        from_histogram = dp_quantile_from_histogram(
            [1] * 8, q=q, lower=0.0, upper=8.0, epsilon=200.0, sensitivity=1, rng=random.Random(seed)
        )
        assert from_histogram == expected


def test_the_target_rank_is_q_times_n_exactly() -> None:
    """q = 0.25 of 8 values 0.5, 1.5, …, 7.5 on the grid 0..8: #{x < j} = j, target 2: only grid point 2
    scores 0, the neighbours are 1 rank off; at ε = 200 (gap·ε/2 = 100 per rank) it is always 2."""
    values = [i + 0.5 for i in range(8)]
    for seed in range(20):
        y = dp_quantile(
            values, q=0.25, lower=0.0, upper=8.0, epsilon=200.0, rng=random.Random(seed), grid_size=8
        )
        assert y == 2.0
        from_histogram = dp_quantile_from_histogram(
            [1] * 8, q=0.25, lower=0.0, upper=8.0, epsilon=200.0, sensitivity=1, rng=random.Random(seed)
        )
        assert from_histogram == 2.0


def test_the_rank_sensitivity_is_max_contributions() -> None:
    """Values 0.5 … 7.5, median (target 4) on the grid 0..8 at ε = 2: with L = 1 a point one rank off accepts
    with e^-1 per visit; with L = 4 with e^-1/4. The released point's mean rank error differs clearly."""

    def off_target(contributions: int) -> float:
        source = random.Random(8)
        values = [i + 0.5 for i in range(8)]
        answers = [
            dp_quantile(
                values,
                q=0.5,
                lower=0.0,
                upper=8.0,
                epsilon=2.0,
                rng=source,
                grid_size=8,
                max_contributions=contributions,
            )
            for _ in range(2000)
        ]
        return sum(y != 4.0 for y in answers) / len(answers)

    # the rates are about 0.42 and 0.80 (estimated from 20 000 draws each); over 2 000 draws the standard
    # errors are <= 0.012, so 0.7 is more than 8 of them from either
    assert off_target(1) < 0.7 < off_target(4)


def test_histogram_sensitivity_scales_the_rank_noise() -> None:
    def off_target(sensitivity: int) -> float:
        source = random.Random(9)
        answers = [
            dp_quantile_from_histogram(
                [1] * 8, q=0.5, lower=0.0, upper=8.0, epsilon=2.0, sensitivity=sensitivity, rng=source
            )
            for _ in range(2000)
        ]
        return sum(y != 4.0 for y in answers) / len(answers)

    # the same scores as test_the_rank_sensitivity_is_max_contributions: rates about 0.42 and 0.80
    assert off_target(1) < 0.7 < off_target(4)


@pytest.mark.parametrize("counts", [[], [1, -2], [1, 2.5]])
def test_histogram_refuses_bad_counts_exactly(counts: list[object]) -> None:
    error = refusal(
        lambda: dp_quantile_from_histogram(
            counts, q=0.5, lower=0, upper=1, epsilon=1.0, sensitivity=1, rng=rng()
        )  # type: ignore[arg-type]
    )
    assert error.message == "bucket counts must be non-negative integers"
    assert error.hint == "pass one count per grid cell"


def test_histogram_accepts_zero_counts_and_refuses_bad_parameters_exactly() -> None:
    assert dp_quantile_from_histogram(
        [0, 0], q=0.5, lower=0, upper=1, epsilon=1.0, sensitivity=1, rng=rng()
    ) in {
        0.0,
        0.5,
        1.0,
    }
    error = refusal(
        lambda: dp_quantile_from_histogram(
            [1], q=0.5, lower=0, upper=1, epsilon=1.0, sensitivity=0, rng=rng()
        )
    )
    assert (error.message, error.hint) == (
        "sensitivity must be a whole number >= 1, got 0",
        "the largest weight one unit can carry, e.g. 1",
    )
    error = refusal(
        lambda: dp_quantile_from_histogram(
            [1], q=0.5, lower=0, upper=1, epsilon=-1.0, sensitivity=1, rng=rng()
        )
    )
    assert (error.message, error.hint) == (
        "epsilon must be a finite number greater than 0, got -1.0",
        EPSILON_HINT,
    )


@pytest.mark.parametrize(
    ("arguments", "message", "hint"),
    [
        (
            {"q": 1.5},
            "q must be a number between 0 and 1, got 1.5",
            "0.5 for MEDIAN, p/100 for PERCENTILE p, 0 for MIN, 1 for MAX",
        ),
        (
            {"q": True},
            "q must be a number between 0 and 1, got True",
            "0.5 for MEDIAN, p/100 for PERCENTILE p, 0 for MIN, 1 for MAX",
        ),
        (
            {"lower": math.inf},
            "lower must be a finite number, got inf",
            "declare finite bounds for the column",
        ),
        ({"upper": True}, "upper must be a finite number, got True", "declare finite bounds for the column"),
        ({"upper": "1"}, "upper must be a finite number, got '1'", "declare finite bounds for the column"),
        (
            {"lower": 1.0},
            "lower must be less than upper, got lower=1.0, upper=1.0",
            "declare bounds with lower < upper for the column",
        ),
        (
            {"max_contributions": 0},
            "max_contributions must be a whole number >= 1, got 0",
            "rows kept per privacy unit, e.g. 1",
        ),
        ({"grid_size": 0}, "grid_size must be a whole number >= 1, got 0", "use e.g. the default 1000"),
        ({"grid_size": True}, "grid_size must be a whole number >= 1, got True", "use e.g. the default 1000"),
    ],
)
def test_quantile_refusals_are_exact(arguments: dict[str, object], message: str, hint: str) -> None:
    parameters: dict[str, object] = {"q": 0.5, "lower": 0.0, "upper": 1.0, "epsilon": 1.0, **arguments}
    error = refusal(lambda: dp_quantile([], rng=rng(), **parameters))  # type: ignore[arg-type]
    assert (error.message, error.hint) == (message, hint)


@pytest.mark.parametrize(
    ("values", "message", "hint"),
    [
        ((0.5, 0.25), "sorted_values must be sorted ascending", "ORDER BY the column (or sort it)"),
        ((0.1, 0.2, 0.15), "sorted_values must be sorted ascending", "ORDER BY the column (or sort it)"),
        (
            (0.1, 1.5),
            "sorted_values must lie within [lower, upper]",
            "clamp the column with GREATEST(lower, LEAST(upper, x)) before the quantile",
        ),
        (
            (-0.5, 0.5),
            "sorted_values must lie within [lower, upper]",
            "clamp the column with GREATEST(lower, LEAST(upper, x)) before the quantile",
        ),
        ((math.nan,), "sorted_values must not contain NaN", "filter out NULL/NaN rows before the quantile"),
        (("x",), "sorted_values must be a sequence of numbers", "pass the clamped column as floats"),
        (
            [[0.1], [0.2]],
            "sorted_values must be one-dimensional, got 2 dimensions",
            "pass one column of values",
        ),
        (0.5, "sorted_values must be one-dimensional, got 0 dimensions", "pass one column of values"),
    ],
)
def test_quantile_value_refusals_are_exact(values: object, message: str, hint: str) -> None:
    error = refusal(lambda: dp_quantile(values, q=0.5, lower=0.0, upper=1.0, epsilon=1.0, rng=rng()))  # type: ignore[arg-type]
    assert (error.message, error.hint) == (message, hint)


def test_rank_error_bound_refusals_and_defaults() -> None:
    assert quantile_rank_error_bound(epsilon=2.0, grid_size=9, confidence=0.5) == pytest.approx(
        math.log(10 / 0.5), rel=1e-12
    )
    for arguments, message, hint in [
        ({"epsilon": 0.0}, "epsilon must be a finite number greater than 0, got 0.0", EPSILON_HINT),
        (
            {"max_contributions": 0},
            "max_contributions must be a whole number >= 1, got 0",
            "rows kept per privacy unit, e.g. 1",
        ),
        ({"grid_size": 0}, "grid_size must be a whole number >= 1, got 0", "use e.g. the default 1000"),
        (
            {"confidence": 0.0},
            "confidence must be strictly between 0 and 1, got 0.0",
            "use e.g. confidence=0.95",
        ),
        (
            {"confidence": 1.0},
            "confidence must be strictly between 0 and 1, got 1.0",
            "use e.g. confidence=0.95",
        ),
    ]:
        parameters: dict[str, object] = {"epsilon": 1.0, **arguments}
        error = refusal(lambda parameters=parameters: quantile_rank_error_bound(**parameters))  # type: ignore[arg-type]
        assert (error.message, error.hint) == (message, hint)


def test_quantile_grid_refusals_are_exact() -> None:
    error = refusal(lambda: quantile_grid(lower=0.0, upper=1.0, grid_size=0))
    assert (error.message, error.hint) == (
        "grid_size must be a whole number >= 1, got 0",
        "use e.g. the default 1000",
    )
    error = refusal(lambda: quantile_grid(lower=2.0, upper=1.0))
    assert error.message == "lower must be less than upper, got lower=2.0, upper=1.0"
    assert list(quantile_grid(lower=-1.0, upper=1.0, grid_size=2)) == [-1.0, 0.0, 1.0]
    assert len(quantile_grid(lower=0.0, upper=1.0)) == 1001


# --- the contribution bound ------------------------------------------------------------------------------------


def test_candidates_refuse_a_cap_below_one_exactly() -> None:
    error = refusal(lambda: bound_candidates(0))
    assert (error.message, error.hint) == ("the contribution cap must be at least 1, got 0", "use e.g. 1000")
    assert bound_candidates(2) == [1, 2]
    assert bound_candidates(3) == [1, 2, 3]
    assert bound_candidates(100) == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 100]
    # a bound is a row count: ints, never 3.0 (dp_contribution_bound returns one of them as L)
    assert all(type(candidate) is int for candidate in bound_candidates(1000))


def test_nearest_candidate_is_nearest_in_ratio_and_the_smaller_on_a_tie() -> None:
    assert nearest_candidate([1, 2, 3, 4, 6, 8], 5) == 4  # 6/5 < 5/4
    assert nearest_candidate([2, 8], 4) == 0  # 4/2 = 8/4: the smaller
    assert nearest_candidate([1, 100], 9) == 0  # 9/1 < 100/9
    assert nearest_candidate([1, 100], 11) == 1


def test_scores_accept_a_target_of_zero_and_hints_at_both_ends() -> None:
    """target 0: no one may keep more rows, so only the candidates covering the largest count score 0."""
    people = {3: 2, 5: 1}
    assert bound_scores(people, cap=8, epsilon=1.0, target=0) == [
        -3 - 0,
        -3 - 1,
        -1 - 2,
        -1 - 3,
        0 - 4,
        0 - 5,
    ]
    assert bound_scores(people, cap=8, epsilon=1.0, target=0, hint=1)[0] == -3
    assert bound_scores(people, cap=8, epsilon=1.0, target=0, hint=8)[-1] == 0


def test_scores_penalise_each_step_from_the_anchor_by_half_over_epsilon_ranks() -> None:
    """⌈0.5/ε⌉ per step: 1 at ε = 1, 2 at ε = 0.3, 5 at ε = 0.1; no people: the prior alone (with target 0)."""
    assert bound_scores({}, cap=8, epsilon=1.0, target=0) == [0, -1, -2, -3, -4, -5]
    assert bound_scores({}, cap=8, epsilon=0.3, target=0) == [0, -2, -4, -6, -8, -10]
    assert bound_scores({}, cap=8, epsilon=0.1, target=0, hint=3) == [-10, -5, 0, -5, -10, -15]


def test_score_counts_people_strictly_above_each_candidate() -> None:
    """Two people with exactly 4 rows and C = 1: candidate 3 has both above it (A = 2, one too many), 4 has
    none (A = 0 and the previous A = 2: C - A_prev = -1, no gap); so 4 scores 0 + prior."""
    scores = bound_scores({4: 2}, cap=6, epsilon=1.0, target=1)  # candidates 1, 2, 3, 4, 6
    assert scores == [-1 - 0, -1 - 1, -1 - 2, 0 - 3, -1 - 4]


def test_bound_scores_refusals_are_exact() -> None:
    error = refusal(lambda: bound_scores({1: 1}, cap=10, epsilon=1.0, target=-1))
    assert (error.message, error.hint) == ("target must be >= 0 people, got -1", "use bound_target()")
    for hint in (0, 11):
        error = refusal(lambda hint=hint: bound_scores({1: 1}, cap=10, epsilon=1.0, target=1, hint=hint))
        assert error.message == f"the contribution hint must be between 1 and the cap 10, got {hint}"
        assert error.hint == "declare contribution_hint within [1, contribution_cap]"
    for epsilon in (0.0, -1.0, math.inf, math.nan):
        error = refusal(lambda epsilon=epsilon: bound_scores({1: 1}, cap=10, epsilon=epsilon, target=1))
        assert (error.message, error.hint) == (
            f"epsilon must be a finite number > 0, got {epsilon!r}",
            "e.g. epsilon=0.1",
        )


def test_bound_target_rounds_cells_over_epsilon_and_refuses_no_cells() -> None:
    assert bound_target(cells=5, epsilon_per_quantity=2.0) == 2  # 2.5 rounds to even
    assert bound_target(cells=7, epsilon_per_quantity=2.0) == 4  # 3.5 rounds to even
    assert bound_target(cells=1, epsilon_per_quantity=0.3) == 3
    error = refusal(lambda: bound_target(cells=0, epsilon_per_quantity=1.0))
    assert (error.message, error.hint) == ("cells must be >= 1, got 0", "count the released group cells")


def test_selection_share_refuses_a_bad_epsilon_and_rounds_to_hundredths() -> None:
    assert selection_share(0.3) == Fraction(18, 100)  # 0.1/√0.3 = 0.1826
    assert selection_share(0.7) == Fraction(12, 100)  # 0.1195
    error = refusal(lambda: selection_share(0.0))
    assert error.message == "epsilon must be a finite number > 0, got 0.0"


def test_the_bound_selection_has_sensitivity_one() -> None:
    """Scores (prior only, no people, ε = 2): candidate 1 scores 0, candidate 2 scores -1 (⌈0.5/2⌉ = 1). With
    sensitivity 1, candidate 2 accepts with exp(-2·1/2) = e^-1 and leads the walk half the time: P = e^-1/2
    = 0.184 (with sensitivity 2: e^-0.5/2 = 0.303). 10 000 draws, 4.5 standard errors (±0.017)."""
    draws = 10_000
    chosen = [
        dp_contribution_bound({}, cap=2, epsilon=2.0, rng=random.Random(s), target=0) for s in range(draws)
    ]
    p = math.exp(-1) / 2
    assert abs(chosen.count(2) / draws - p) <= 4.5 * math.sqrt(p * (1 - p) / draws)


def test_histogram_prefix_sums_do_not_overflow() -> None:
    """Weighted counts can exceed int64 when summed: four cells of 2**62 total 2**64. The median's target
    rank 2**63 is the middle grid point's count exactly; every other point is 2**62 ranks off, so it is the
    answer at any seed (an int64 cumulative sum would wrap to negative counts and pick an end)."""
    counts = [2**62] * 4
    for seed in range(10):
        median = dp_quantile_from_histogram(
            counts, q=0.5, lower=0.0, upper=1.0, epsilon=1.0, sensitivity=1, rng=random.Random(seed)
        )
        assert median == 0.5


def test_histogram_min_counts_no_values_below_the_lower_bound() -> None:
    """q = 0 over counts (0, 5, 5) on the grid 0, 1/3, 2/3, 1: #{x < y} is 0 at both 0 and 1/3 (the first
    cell is empty), so both are best and the others are ≥ 5 ranks off; at ε = 50 (gap·ε/2 ≥ 125) both best
    points appear over 40 seeds (each with probability 1/2 per draw) and nothing else does."""
    answers = {
        dp_quantile_from_histogram(
            [0, 5, 5], q=0.0, lower=0.0, upper=1.0, epsilon=50.0, sensitivity=1, rng=random.Random(seed)
        )
        for seed in range(40)
    }
    assert answers == {0.0, 1 / 3}
