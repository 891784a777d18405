"""Laplace mechanism details the other suites leave loose: the τ-thresholding tails (exact minimal m), the
float-range edge of the scale, the grid's rounding and arithmetic, and the refusals' exact messages.
Found by a mutation run of mechanisms/laplace.py (docs/testing.md)."""

from __future__ import annotations

import math
import random
import sys
from fractions import Fraction

import pytest

from mechanisms.errors import MechanismError
from mechanisms.laplace import (
    SCALE_DENOMINATOR,
    _float_at_least,
    _round_up,
    discrete_laplace_mechanism,
    discrete_laplace_upper_tail,
    laplace_error_bound,
    laplace_grid_step,
    laplace_mechanism,
    laplace_noise_scale,
    laplace_privacy_loss,
    laplace_upper_tail,
)

SAFETY = 1e-9  # the module's relative slack: m is the smallest with P[K >= m] <= probability·(1 - 1e-9)


def log_tail(scale: Fraction, m: int) -> float:
    """log P[K >= m] = -m/s - ln(1 + p), K discrete Laplace of scale s, p = exp(-1/s), m >= 1."""
    s = float(scale)
    return -m / s - math.log1p(math.exp(-1 / s))


def assert_smallest_safe_point(scale: Fraction, m: int, probability: float) -> None:
    """m is the smallest m >= 1 with P[K >= m] <= probability (less the module's relative slack): the tail
    decreases in m, so it is enough that m is safe and m - 1 is not (or m = 1)."""
    limit = math.log(probability) + math.log1p(-SAFETY)
    assert m >= 1
    assert log_tail(scale, m) <= limit
    if m > 1:
        assert log_tail(scale, m - 1) > limit


def grid_scale(sensitivity: float, epsilon: float) -> tuple[Fraction, Fraction]:
    step = Fraction(laplace_grid_step(sensitivity=sensitivity, epsilon=epsilon))
    scale = (Fraction(sensitivity) + step) / (step * Fraction(epsilon))
    return step, Fraction(math.ceil(scale * SCALE_DENOMINATOR), SCALE_DENOMINATOR)


# (sensitivity, epsilon, probability): m = 1 (a large probability at a small scale), a few units, many
# units, a scale that is not a multiple of 1/2**32 (1/3), and a large ε where the discrete tail matters.
TAIL_CASES = [
    (1.0, 4.0, 0.2),
    (1.0, 1.0, 0.05),
    (1.0, 0.1, 1e-6),
    (1.0, 3.0, 1e-4),
    (2.0, 0.5, 1e-3),
    (1.0, 13.125, 1e-6),
    (7.0, 0.01, 1e-9),
]


@pytest.mark.parametrize(("sensitivity", "epsilon", "probability"), TAIL_CASES)
def test_discrete_upper_tail_is_the_smallest_safe_point(
    sensitivity: float, epsilon: float, probability: float
) -> None:
    """t = m - 1 for the smallest m with P[K >= m] <= probability, on the scale the mechanism uses (rounded
    up to 1/2**32): a larger t hides more keys than needed, a smaller one releases a single person's key."""
    scale = _round_up(Fraction(sensitivity) / Fraction(epsilon))
    tail = discrete_laplace_upper_tail(sensitivity=sensitivity, epsilon=epsilon, probability=probability)
    assert type(tail) is float and tail == int(tail)
    # P[value + K > value + t] = P[K >= t + 1] <= probability, and t is minimal
    assert_smallest_safe_point(scale, int(tail) + 1, probability)


def test_a_large_probability_needs_no_margin_at_all() -> None:
    # scale 1/4: P[K >= 1] = p/(1 + p) with p = e^-4, 0.018 <= 0.2, so m = 1 and t = 0
    assert discrete_laplace_upper_tail(sensitivity=1.0, epsilon=4.0, probability=0.2) == 0.0


@pytest.mark.parametrize(("sensitivity", "epsilon", "probability"), TAIL_CASES)
def test_grid_upper_tail_is_half_a_step_below_the_grid_units_point(
    sensitivity: float, epsilon: float, probability: float
) -> None:
    """The grid output is γ·(round(v/γ) + K) <= v + γ/2 + γ·K, so t = γ·(m - 1/2) for the grid-unit scale
    (Δ + γ)/(γ·ε) rounded up."""
    step, scale = grid_scale(sensitivity, epsilon)
    tail = laplace_upper_tail(sensitivity=sensitivity, epsilon=epsilon, probability=probability)
    assert type(tail) is float
    m = Fraction(tail) / step + Fraction(1, 2)
    assert m.denominator == 1
    assert_smallest_safe_point(scale, int(m), probability)
    # about the continuous quantile (Δ/ε)·ln(1/(2·probability)), within a grid step and the 2**-20 widening
    continuous = sensitivity / epsilon * math.log(1 / (2 * probability))
    if continuous > 0:
        assert abs(tail - continuous) <= sensitivity / epsilon * 1e-5 + 2 * float(step) + continuous * 1e-5


# Probabilities at the float edges of the starting guess ⌈-(log(probability) + ln(1 + p))·s⌉ (found by a search
# over adjacent floats): the guess is one too high, one too low, or the tail equals the limit exactly.
FLOAT_EDGE_CASES = [
    pytest.param(4.0, 0.34097728429818025, 1.0, id="guess-one-high"),
    pytest.param(10.0, 0.2881146870837444, 5.0, id="guess-one-high-at-scale-10"),
    pytest.param(5.0, 0.45016600313768806, 0.0, id="guess-2-for-m-1"),
    pytest.param(2.0, 0.08424070997571619, 4.0, id="guess-one-low"),
    pytest.param(2.0, 0.05109457339623175, 5.0, id="guess-one-low-again"),
    pytest.param(1.0, 0.2689414216389366, 0.0, id="tail-equal-to-the-limit"),
    pytest.param(1.0, 0.036397263471562746, 2.0, id="tail-equal-to-the-limit-at-m-3"),
]


@pytest.mark.parametrize(("sensitivity", "probability", "expected"), FLOAT_EDGE_CASES)
def test_the_tail_point_is_exact_where_the_float_guess_is_off(
    sensitivity: float, probability: float, expected: float
) -> None:
    """The walk from the guess corrects it both ways, and a tail equal to the limit counts as safe
    (P[K >= m] <= probability): t is the smallest safe m minus 1 in every case (ε = 1, so the scale is Δ)."""
    tail = discrete_laplace_upper_tail(sensitivity=sensitivity, epsilon=1.0, probability=probability)
    assert tail == expected
    assert_smallest_safe_point(Fraction(sensitivity), int(tail) + 1, probability)


def test_huge_scales_find_the_tail_point_without_walking_to_it() -> None:
    """At scale 10^9 the tail point is about 1.4·10^10 units: the starting guess is the continuous
    quantile, so only a few steps are walked (a wrong guess would walk for ever)."""
    scale = _round_up(Fraction(10**6) / Fraction(0.001))
    tail = discrete_laplace_upper_tail(sensitivity=1e6, epsilon=0.001, probability=1e-6)
    s = float(scale)
    expected = math.ceil(-(math.log(1e-6) + math.log1p(-SAFETY) + math.log1p(math.exp(-1 / s))) * s)
    assert abs(tail - (expected - 1)) <= 1
    assert_smallest_safe_point(scale, int(tail) + 1, 1e-6)
    grid = laplace_upper_tail(sensitivity=1e6, epsilon=0.001, probability=1e-6)
    assert grid == pytest.approx(1e9 * math.log(1 / 2e-6), rel=1e-5)


def test_the_tail_shrinks_as_the_probability_grows() -> None:
    tails = [
        discrete_laplace_upper_tail(sensitivity=1.0, epsilon=0.5, probability=p) for p in (1e-9, 1e-6, 1e-3)
    ]
    assert tails[0] > tails[1] > tails[2] > 0


@pytest.mark.parametrize("probability", [0.0, 1.0, -0.5, 1.5, math.nan])
def test_tails_refuse_a_probability_outside_0_1(probability: float) -> None:
    for tail in (discrete_laplace_upper_tail, laplace_upper_tail):
        with pytest.raises(MechanismError) as refused:
            tail(sensitivity=1.0, epsilon=1.0, probability=probability)
        assert refused.value.message == f"probability must be strictly between 0 and 1, got {probability!r}"
        assert refused.value.hint == (
            "pass the share of delta the tail may exceed, e.g. delta / max_contributions"
        )


def test_tails_accept_probabilities_just_inside_0_1() -> None:
    tiny = discrete_laplace_upper_tail(sensitivity=1.0, epsilon=1.0, probability=1e-300)
    assert tiny == pytest.approx(-math.log(1e-300) - math.log1p(math.exp(-1)), abs=1.0)
    assert discrete_laplace_upper_tail(sensitivity=1.0, epsilon=1.0, probability=0.999) == 0.0


# --- the scale: the float range, rounding up -----------------------------------------------------------------


def test_a_scale_of_exactly_the_largest_float_is_allowed() -> None:
    """The refusal is for a scale *above* the largest float; the largest itself is representable."""
    largest = sys.float_info.max
    assert laplace_noise_scale(sensitivity=largest, epsilon=1.0) == largest
    with pytest.raises(MechanismError) as refused:
        laplace_noise_scale(sensitivity=largest, epsilon=0.5)
    assert refused.value.message == (
        f"noise scale sensitivity/epsilon = {largest!r}/0.5 is too large for a float"
    )
    assert refused.value.hint == (
        "use a larger epsilon or tighter lower/upper bounds; this much noise would hide any answer"
    )


@pytest.mark.parametrize(
    ("sensitivity", "epsilon"), [(1.0, 3.0), (1.0, 0.1), (2.0, 7.0), (5.0, 1.0), (1e-3, 3.0), (0.1, 0.3)]
)
def test_noise_scale_is_the_smallest_float_at_or_above_the_ratio(sensitivity: float, epsilon: float) -> None:
    exact = Fraction(sensitivity) / Fraction(epsilon)
    scale = laplace_noise_scale(sensitivity=sensitivity, epsilon=epsilon)
    assert Fraction(scale) >= exact
    assert Fraction(math.nextafter(scale, 0.0)) < exact


def test_float_at_least_keeps_exact_floats_and_rounds_others_up() -> None:
    assert _float_at_least(Fraction(5, 2)) == 2.5
    assert _float_at_least(Fraction(-3)) == -3.0
    third = _float_at_least(Fraction(1, 3))
    assert Fraction(third) > Fraction(1, 3) and Fraction(math.nextafter(third, 0)) < Fraction(1, 3)
    # float(1/10) rounds up already: it is kept
    assert _float_at_least(Fraction(1, 10)) == 0.1


def test_privacy_loss_rounds_the_ratio_up_not_the_inputs() -> None:
    # Δ/R = 3/7: float(3/7) is below the exact ratio, so the charge is the next float
    loss = laplace_privacy_loss(sensitivity=3.0, noise_scale=7.0)
    assert Fraction(loss.epsilon) >= Fraction(3, 7)
    assert Fraction(math.nextafter(loss.epsilon, 0)) < Fraction(3, 7)
    assert loss.delta == 0.0


@pytest.mark.parametrize(
    "scale", [Fraction(1, 3), Fraction(10), Fraction(1, 2**40), Fraction(2**33 + 1, 2**33), Fraction(7, 5)]
)
def test_round_up_is_the_least_multiple_of_the_denominator_above(scale: Fraction) -> None:
    rounded = _round_up(scale)
    assert (rounded * SCALE_DENOMINATOR).denominator == 1
    assert scale <= rounded < scale + Fraction(1, SCALE_DENOMINATOR)


# --- the discrete mechanism's scale, seen through a recording source ----------------------------------------


class Recorder:
    """Forwards to a seeded Random and records every stop asked for (the sampler's integers)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.stops: list[int] = []

    def randrange(self, stop: int, /) -> int:
        self.stops.append(stop)
        return self.rng.randrange(stop)


@pytest.mark.parametrize(("sensitivity", "epsilon"), [(1.0, 3.0), (2.0, 0.5), (3.0, 1.0)])
def test_discrete_mechanism_samples_at_the_rounded_up_scale(sensitivity: float, epsilon: float) -> None:
    """The first randrange of the sampler is randrange(t) for the scale t/s in lowest terms: the scale is
    Δ/ε rounded up to 1/2**32, not Δ/ε itself nor its inverse."""
    scale = _round_up(Fraction(sensitivity) / Fraction(epsilon))
    source = Recorder(1)
    discrete_laplace_mechanism(10, sensitivity=sensitivity, epsilon=epsilon, rng=source)
    assert source.stops[0] == scale.numerator


def test_grid_mechanism_samples_at_the_widened_grid_scale() -> None:
    _step, scale = grid_scale(1.0, 3.0)
    source = Recorder(2)
    laplace_mechanism(0.25, sensitivity=1.0, epsilon=3.0, rng=source)
    assert source.stops[0] == scale.numerator


def test_discrete_mechanism_adds_the_noise_to_the_value() -> None:
    """Same seed, two values: the outputs differ by exactly the difference of the values."""
    a = [
        discrete_laplace_mechanism(10, sensitivity=1.0, epsilon=0.5, rng=random.Random(s)) for s in range(30)
    ]
    b = [
        discrete_laplace_mechanism(-7, sensitivity=1.0, epsilon=0.5, rng=random.Random(s)) for s in range(30)
    ]
    assert [x - y for x, y in zip(a, b, strict=True)] == [17] * 30
    assert len(set(a)) > 3  # noise is there


def test_discrete_mechanism_is_the_value_plus_the_samplers_draw() -> None:
    """value + K with K the discrete Laplace draw at the rounded-up scale (same seed, same draw)."""
    from mechanisms.discrete_laplace import sample_discrete_laplace

    scale = _round_up(Fraction(3) / Fraction(0.7))
    noises = [sample_discrete_laplace(scale, rng=random.Random(seed)) for seed in range(20)]
    outputs = [
        discrete_laplace_mechanism(100, sensitivity=3.0, epsilon=0.7, rng=random.Random(seed))
        for seed in range(20)
    ]
    assert outputs == [100 + noise for noise in noises]
    assert any(noise > 0 for noise in noises) and any(noise < 0 for noise in noises)


def test_discrete_mechanism_accepts_numpy_like_integrals_and_refuses_bools() -> None:
    np = pytest.importorskip("numpy")
    assert (
        type(discrete_laplace_mechanism(np.int64(5), sensitivity=1.0, epsilon=1.0, rng=random.Random(0)))
        is int
    )
    with pytest.raises(MechanismError) as refused:
        discrete_laplace_mechanism(True, sensitivity=1.0, epsilon=1.0, rng=random.Random(0))
    assert refused.value.message == "value must be an int for the discrete Laplace mechanism, got bool True"


def test_grid_mechanism_snaps_the_value_to_the_nearest_grid_point() -> None:
    """With the same seed the noise (in grid units) is the same, so the outputs for two values differ by
    the difference of their nearest grid points (0.25 is a grid point; 0.3 or 0.7 of a step is not)."""
    step = laplace_grid_step(sensitivity=1.0, epsilon=1.0)

    def shifted(steps: float) -> Fraction:
        output = laplace_mechanism(0.25 + steps * step, sensitivity=1.0, epsilon=1.0, rng=random.Random(3))
        base = laplace_mechanism(0.25, sensitivity=1.0, epsilon=1.0, rng=random.Random(3))
        return (Fraction(output) - Fraction(base)) / Fraction(step)

    assert shifted(5.3) == 5
    assert shifted(5.7) == 6  # to nearest, not down
    assert shifted(-5.3) == -5
    assert shifted(-5.7) == -6  # to nearest, not towards zero


def test_grid_mechanism_scales_the_noise_by_the_step() -> None:
    """The output minus the snapped value is an integer number of steps, and the integer is the discrete
    Laplace draw at the grid scale (same seed, same draw)."""
    from mechanisms.discrete_laplace import sample_discrete_laplace

    step, scale = grid_scale(2.0, 0.5)
    for seed in range(20):
        noise = sample_discrete_laplace(scale, rng=random.Random(seed))
        output = laplace_mechanism(0.0, sensitivity=2.0, epsilon=0.5, rng=random.Random(seed))
        assert Fraction(output) == noise * step


# --- error bound: messages and arithmetic --------------------------------------------------------------------


def test_error_bound_is_the_scale_times_log_outputs_over_one_minus_confidence() -> None:
    for sensitivity, epsilon, confidence, outputs in [
        (3.0, 0.7, 0.9, 1),
        (1.0, 2.0, 0.5, 7),
        (0.5, 1.0, 0.99, 3),
    ]:
        expected = sensitivity / epsilon * math.log(outputs / (1 - confidence))
        bound = laplace_error_bound(
            sensitivity=sensitivity, epsilon=epsilon, confidence=confidence, outputs=outputs
        )
        assert bound == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("outputs", [0, -3, 2.5, True])
def test_error_bound_refuses_a_bad_output_count_with_its_hint(outputs: object) -> None:
    with pytest.raises(MechanismError) as refused:
        laplace_error_bound(sensitivity=1.0, epsilon=1.0, outputs=outputs)  # type: ignore[arg-type]
    assert refused.value.message == f"outputs must be a whole number >= 1, got {outputs!r}"
    assert refused.value.hint == "count the noisy values released"


def test_error_bound_accepts_one_output_and_numpy_counts() -> None:
    np = pytest.importorskip("numpy")
    assert laplace_error_bound(sensitivity=1.0, epsilon=1.0, outputs=np.int64(2)) == pytest.approx(
        math.log(2 / 0.05), rel=1e-12
    )


@pytest.mark.parametrize("confidence", [0.0, 1.0, -0.1])
def test_error_bound_refuses_a_bad_confidence_with_its_value(confidence: float) -> None:
    with pytest.raises(MechanismError) as refused:
        laplace_error_bound(sensitivity=1.0, epsilon=1.0, confidence=confidence)
    assert refused.value.message == f"confidence must be strictly between 0 and 1, got {confidence!r}"
    assert refused.value.hint == "use e.g. confidence=0.95"


# --- refusals: exact names, values and hints -----------------------------------------------------------------


def test_refusals_name_the_argument_quote_the_value_and_say_the_fix() -> None:
    rng = random.Random(0)
    with pytest.raises(MechanismError) as refused:
        laplace_mechanism(1.0, sensitivity=-2.0, epsilon=1.0, rng=rng)
    assert refused.value.message == "sensitivity must be a finite number greater than 0, got -2.0"
    assert refused.value.hint == "check the column's lower/upper bounds and max_contributions"
    with pytest.raises(MechanismError) as refused:
        discrete_laplace_mechanism(1, sensitivity=1.0, epsilon=0.0, rng=rng)
    assert refused.value.message == "epsilon must be a finite number greater than 0, got 0.0"
    assert refused.value.hint == "spend a positive budget, e.g. epsilon=1.0"
    with pytest.raises(MechanismError) as refused:
        laplace_mechanism(math.inf, sensitivity=1.0, epsilon=1.0, rng=rng)
    assert refused.value.message == "value must be a finite number, got inf"
    assert refused.value.hint == (
        "clamp the aggregate's inputs to finite lower/upper bounds before adding noise"
    )
    with pytest.raises(MechanismError) as refused:
        laplace_privacy_loss(sensitivity=1.0, noise_scale=math.nan)
    assert refused.value.message == "noise_scale must be a finite number greater than 0, got nan"
    assert refused.value.hint == "noise_scale = sensitivity / epsilon"
