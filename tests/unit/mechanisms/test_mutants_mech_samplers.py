"""The exact integer samplers step by step (CKS 2020, Algorithms 1-3), driven by scripted sources so that
each draw's role is pinned without sampling error, and their refusals' exact texts. Found by a mutation run
of mechanisms/discrete_laplace.py and mechanisms/discrete_gaussian.py (docs/testing.md)."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from fractions import Fraction

import pytest

from mechanisms.discrete_gaussian import sample_discrete_gaussian
from mechanisms.discrete_laplace import (
    _bernoulli_exp_at_most_one,
    _geometric_floor,
    sample_bernoulli_exp,
    sample_discrete_laplace,
)
from mechanisms.errors import MechanismError


class Scripted:
    """Returns the given draws in order (each checked to be below its stop) and records the stops asked for;
    running out fails the test (more draws than the algorithm needs)."""

    def __init__(self, draws: list[int]) -> None:
        self.draws: Iterator[int] = iter(draws)
        self.stops: list[int] = []

    def randrange(self, stop: int, /) -> int:
        self.stops.append(stop)
        value = next(self.draws)
        assert 0 <= value < stop, (value, stop)
        return value

    def exhausted(self) -> bool:
        return next(self.draws, None) is None


class Recording:
    """Forwards to a seeded Random and records the stops asked for."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.stops: list[int] = []

    def randrange(self, stop: int, /) -> int:
        self.stops.append(stop)
        return self.rng.randrange(stop)


# --- Algorithm 1: Bernoulli(exp(-γ)) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("numerator", "denominator", "draws", "heads"),
    [
        (2, 5, [3], True),  # k = 1: randrange(5) = 3 is not < 2, K = 1 (odd)
        (2, 5, [1, 7], False),  # k = 1 succeeds (1 < 2), k = 2: randrange(10) = 7 fails, K = 2
        (2, 5, [0, 1, 9], True),  # succeeds twice (0 < 2, 1 < 2), fails at k = 3 (randrange(15))
        (2, 5, [2], True),  # 2 is not < 2: the boundary draw fails
        (0, 1, [0], True),  # γ = 0: randrange(1) = 0 is not < 0, always heads
        (1, 1, [0, 1], False),  # γ = 1: k = 1 always succeeds, fails at k = 2
    ],
)
def test_bernoulli_exp_counts_successes_of_gamma_over_k(
    numerator: int, denominator: int, draws: list[int], heads: bool
) -> None:
    """Trial k is Bernoulli(γ/k) = randrange(d·k) < n; heads iff the first failure K is odd."""
    source = Scripted(draws)
    assert _bernoulli_exp_at_most_one(numerator, denominator, source) is heads
    assert source.stops == [denominator * k for k in range(1, len(draws) + 1)]


def test_bernoulli_exp_is_exact_on_every_path_of_two_trials() -> None:
    """For γ = 1/2 enumerate the first two trials' outcomes (2·4 draws): P(K = 1) = 1/2 exactly, and
    P(K = 2) = 1/2·3/4 = 3/8, as Bernoulli(γ/k) demands; K = 1 gives heads, K = 2 tails."""
    heads = tails = 0
    for first in range(2):
        for second in range(4):
            source = Scripted([first, second, 2])  # a third draw (randrange(6) = 2) ends any K >= 3
            result = _bernoulli_exp_at_most_one(1, 2, source)
            if len(source.stops) == 1:
                heads += result
            elif len(source.stops) == 2:
                tails += not result
    assert heads == 4  # the 4 (first = 1) paths stop at K = 1 with heads
    assert tails == 3  # of the 4 first = 0 paths, 3 fail at k = 2 with tails


@pytest.mark.parametrize(
    ("gamma", "draws", "heads", "stops"),
    [
        # γ = 5/2: two exp(-1) coins (randrange(1), randrange(2), ...) and then exp(-1/2)
        (Fraction(5, 2), [0, 1], False, [1, 2]),  # the first exp(-1) coin is tails (K = 2): stop at once
        (Fraction(5, 2), [0, 0, 1, 0, 0, 2, 1], True, [1, 2, 3, 1, 2, 3, 2]),  # heads, heads, then 1/2: heads
        (Fraction(5, 2), [0, 0, 1, 0, 1], False, [1, 2, 3, 1, 2]),  # heads, then tails
        (Fraction(2), [0, 0, 1, 0, 0, 1, 0], True, [1, 2, 3, 1, 2, 3, 1]),  # two heads, then exp(-0) = heads
        (Fraction(1, 3), [1], True, [3]),  # no whole part: one exp(-1/3) coin
    ],
)
def test_bernoulli_exp_splits_gamma_into_whole_coins_and_a_remainder(
    gamma: Fraction, draws: list[int], heads: bool, stops: list[int]
) -> None:
    source = Scripted(draws)
    assert sample_bernoulli_exp(gamma, rng=source) is heads
    assert source.stops == stops
    assert source.exhausted()


def test_bernoulli_exp_takes_ints_and_refuses_others_exactly() -> None:
    assert sample_bernoulli_exp(0, rng=Scripted([0])) is True
    with pytest.raises(MechanismError) as refused:
        sample_bernoulli_exp(Fraction(-1, 2), rng=random.Random(0))
    assert refused.value.message == "gamma must be >= 0, got -1/2"
    assert refused.value.hint == "exp(-gamma) is a probability only then"
    with pytest.raises(MechanismError) as refused:
        sample_bernoulli_exp(0.5, rng=random.Random(0))  # type: ignore[arg-type]
    assert refused.value.message == "gamma must be an exact Fraction or int, got float 0.5"
    assert refused.value.hint == "convert with fractions.Fraction, rounding a noise scale up, never down"
    with pytest.raises(MechanismError) as refused:
        sample_bernoulli_exp(True, rng=random.Random(0))  # type: ignore[arg-type]
    assert refused.value.message == "gamma must be an exact Fraction or int, got bool True"


# --- Algorithm 2: discrete Laplace ----------------------------------------------------------------------------


def test_geometric_floor_combines_the_fine_and_coarse_parts() -> None:
    """X = U + t·V: U = randrange(t) kept with probability exp(-U/t); V counts exp(-1) heads; the result is
    floor(X/s). t = 7, s = 2: U = 5 (kept: randrange(7) = 6 is not < 5), V = 1 (heads, then tails):
    floor((5 + 7)/2) = 6."""
    source = Scripted([5, 6, 0, 0, 2, 0, 1])
    assert _geometric_floor(7, 2, source) == 6
    assert source.stops == [7, 7, 1, 2, 3, 1, 2]
    assert source.exhausted()


def test_geometric_floor_redraws_a_rejected_fine_part() -> None:
    """A fine part U is kept with probability exp(-U/t); a rejected one is drawn again."""
    source = Scripted([5, 1, 9, 0, 3, 0, 1])
    # U = 5: randrange(7) = 1 < 5 (k = 1 succeeds), randrange(14) = 9 fails: K = 2, rejected.
    # U = 0: randrange(7) = 3 is not < 0: kept. V: randrange(1) = 0, randrange(2) = 1: tails, V = 0.
    assert _geometric_floor(7, 3, source) == 0
    assert source.stops == [7, 7, 14, 7, 7, 1, 2]
    assert source.exhausted()


def test_geometric_floor_counts_several_coarse_heads() -> None:
    # t = 1, s = 1: U = 0 always kept; V: heads (K = 3), heads (K = 3), tails (K = 2) -> 2
    source = Scripted([0, 0, 0, 0, 1, 0, 0, 1, 0, 1])
    assert _geometric_floor(1, 1, source) == 2
    assert source.stops == [1, 1, 1, 2, 3, 1, 2, 3, 1, 2]


@pytest.mark.parametrize(
    ("scale", "draws", "value"),
    [
        # t = 7, s = 2 as above (magnitude 6), then the sign draw: 1 is negative
        (Fraction(7, 2), [5, 6, 0, 0, 2, 0, 1, 1], -6),
        (Fraction(7, 2), [5, 6, 0, 0, 2, 0, 1, 0], 6),
        # scale 1: magnitude 0 with a negative sign is rejected ("negative zero"); then 0 with sign 0
        (Fraction(1), [0, 0, 0, 1, 1, 0, 0, 0, 1, 0], 0),
        # magnitude 0 with a positive sign is kept at once
        (Fraction(1), [0, 0, 0, 1, 0], 0),
        # magnitude 2 (t = 1, s = 1, two coarse heads), negative
        (Fraction(1), [0, 0, 0, 0, 1, 0, 0, 1, 0, 1, 1], -2),
    ],
)
def test_discrete_laplace_draws_a_magnitude_and_a_sign(scale: Fraction, draws: list[int], value: int) -> None:
    source = Scripted(draws)
    assert sample_discrete_laplace(scale, rng=source) == value
    assert source.exhausted()
    assert source.stops[-1] == 2  # the sign is the last draw


def test_discrete_laplace_refusals_are_exact() -> None:
    with pytest.raises(MechanismError) as refused:
        sample_discrete_laplace(Fraction(0), rng=random.Random(0))
    assert refused.value.message == "scale must be > 0, got 0"
    assert refused.value.hint == "scale = sensitivity / epsilon"
    with pytest.raises(MechanismError) as refused:
        sample_discrete_laplace(Fraction(-3, 2), rng=random.Random(0))
    assert refused.value.message == "scale must be > 0, got -3/2"
    with pytest.raises(MechanismError) as refused:
        sample_discrete_laplace(True, rng=random.Random(0))  # type: ignore[arg-type]
    assert refused.value.message == "scale must be an exact Fraction or int, got bool True"


def test_discrete_laplace_of_a_small_scale_has_the_exact_two_sided_law() -> None:
    """P(x) = (1-p)/(1+p)·p^|x| with p = e^-2 at scale 1/2: P(0) = 0.7616, P(±1) = 0.0861 each; 20 000
    draws, each cell within 4.5 binomial standard errors."""
    rng = random.Random(77)
    draws = [sample_discrete_laplace(Fraction(1, 2), rng=rng) for _ in range(20_000)]
    p = math.exp(-2)
    for x in (-2, -1, 0, 1, 2):
        probability = (1 - p) / (1 + p) * p ** abs(x)
        observed = draws.count(x) / len(draws)
        assert abs(observed - probability) <= 4.5 * math.sqrt(probability * (1 - probability) / len(draws)), x


# --- Algorithm 3: discrete Gaussian ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sigma_squared", "t"),
    [
        (Fraction(1, 4), 1),
        (Fraction(1), 2),
        (Fraction(9, 4), 2),
        (Fraction(4), 3),
        (Fraction(99, 4), 5),
        (25, 6),
    ],
)
def test_the_laplace_proposal_has_scale_floor_sigma_plus_one(sigma_squared: Fraction, t: int) -> None:
    """t = ⌊σ⌋ + 1 (σ = 1/2, 1, 3/2, 2, √24.75 ≈ 4.97, 5): the first draw of a round is the discrete
    Laplace's randrange(t) (scale t/1)."""
    for seed in range(5):
        source = Recording(random.Random(seed))
        sample_discrete_gaussian(sigma_squared, rng=source)
        assert source.stops[0] == t


def test_a_candidate_is_accepted_with_the_exact_coin() -> None:
    """σ² = 1 (t = 2): candidate Y = 0 is accepted with exp(-(|0| - σ²/t)²/(2σ²)) = exp(-1/8): the coin's
    first trial is randrange(8) < 1."""
    # Laplace: U = randrange(2) = 0, kept (randrange(2) = 1 is not < 0); V: randrange(1) = 0, randrange(2) = 1
    # (tails); sign randrange(2) = 0. Coin γ = 1/8: randrange(8) = 5 is not < 1: heads, accepted.
    source = Scripted([0, 1, 0, 1, 0, 5])
    assert sample_discrete_gaussian(Fraction(1), rng=source) == 0
    assert source.stops == [2, 2, 1, 2, 2, 8]
    assert source.exhausted()


def test_a_rejected_candidate_starts_a_new_round() -> None:
    """σ² = 1: Y = -1 has γ = (1 - 1/2)²/2 = 1/8 as well; a coin that fails at k = 2 (randrange(8) = 0 < 1,
    randrange(16) = 3) rejects it; the next round's Y = 0 is accepted."""
    laplace_minus_one = [1, 1, 0, 1, 1]  # U = 1 kept (randrange(2) = 1 not < 1), V = 0, sign negative
    laplace_zero = [0, 1, 0, 1, 0]
    source = Scripted([*laplace_minus_one, 0, 3, *laplace_zero, 7])
    assert sample_discrete_gaussian(Fraction(1), rng=source) == 0
    assert source.stops == [2, 2, 1, 2, 2, 8, 16, 2, 2, 1, 2, 2, 8]
    assert source.exhausted()


def test_the_coin_uses_the_distance_from_sigma_squared_over_t() -> None:
    """σ² = 9/4 (σ = 3/2, t = 2, σ²/t = 9/8): Y = 3 gives γ = (3 - 9/8)²/(9/2) = (15/8)²·2/9 = 25/32, a
    single coin randrange(32) < 25 at k = 1."""
    laplace_three = [
        1,
        1,
        0,
        0,
        2,
        0,
        1,
        0,
    ]  # U = 1 kept, V = 1 (heads K = 3, then tails), sign + : 1 + 2 = 3
    source = Scripted([*laplace_three, 30])
    assert sample_discrete_gaussian(Fraction(9, 4), rng=source) == 3
    assert source.stops == [2, 2, 1, 2, 3, 1, 2, 2, 32]


def test_discrete_gaussian_refusals_are_exact() -> None:
    with pytest.raises(MechanismError) as refused:
        sample_discrete_gaussian(2.5, rng=random.Random(0))  # type: ignore[arg-type]
    assert refused.value.message == "sigma_squared must be an exact Fraction or int, got float 2.5"
    assert refused.value.hint == "pass Fraction(sigma) ** 2 for a float sigma"
    with pytest.raises(MechanismError) as refused:
        sample_discrete_gaussian(Fraction(-1, 3), rng=random.Random(0))
    assert refused.value.message == "sigma_squared must be > 0, got -1/3"
    assert refused.value.hint == "calibrate sigma first"
    with pytest.raises(MechanismError) as refused:
        sample_discrete_gaussian(0, rng=random.Random(0))
    assert refused.value.message == "sigma_squared must be > 0, got 0"


def test_discrete_gaussian_of_a_small_variance_has_the_exact_law() -> None:
    """σ² = 1/4: P(x) ∝ exp(-2x²): P(0) = 0.7306, P(±1) = 0.0989 each; 20 000 draws, 4.5 standard errors."""
    rng = random.Random(78)
    draws = [sample_discrete_gaussian(Fraction(1, 4), rng=rng) for _ in range(20_000)]
    weights = {x: math.exp(-2 * x * x) for x in range(-6, 7)}
    total = math.fsum(weights.values())
    for x in (-2, -1, 0, 1, 2):
        probability = weights[x] / total
        observed = draws.count(x) / len(draws)
        assert abs(observed - probability) <= 4.5 * math.sqrt(probability * (1 - probability) / len(draws)), x
