"""Permute-and-flip exponential mechanism: spec TV-EXP-1, exact distribution, utility theorem, validation."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget.loss import PrivacyLoss
from mechanisms.errors import MechanismError
from mechanisms.exponential import (
    exponential_error_bound,
    exponential_mechanism,
    exponential_privacy_loss,
)

SEED = 4242


def permute_and_flip_probabilities(scores: list[float], *, epsilon: float, sensitivity: float) -> list[float]:
    """The exact release probabilities of permute-and-flip, by enumerating every visiting order.

    With p_r = exp(-ε·(u* - u_r)/(2Δ)): in a given order, candidate r is released iff every candidate
    before it rejected (probability Π(1 - p_s)) and r accepts (p_r). Average over the n! equally likely
    orders. Only for small n.
    """
    best = max(scores)
    accept = [math.exp(-epsilon * (best - score) / (2 * sensitivity)) for score in scores]
    released = [0.0] * len(scores)
    orders = math.factorial(len(scores))
    for order in itertools.permutations(range(len(scores))):
        survive = 1.0 / orders
        for candidate in order:
            released[candidate] += survive * accept[candidate]
            survive *= 1 - accept[candidate]
    return released


def frequencies(
    scores: list[int] | list[Fraction], *, draws: int, epsilon: float, sensitivity: float | Fraction
):
    rng = random.Random(SEED)
    counts = [0] * len(scores)
    for _ in range(draws):
        counts[exponential_mechanism(scores, sensitivity=sensitivity, epsilon=epsilon, rng=rng)] += 1
    return counts


def chi_square(counts: list[int], probabilities: list[float]) -> float:
    total = sum(counts)
    return sum((count - total * p) ** 2 / (total * p) for count, p in zip(counts, probabilities, strict=True))


# --- spec TV-EXP-1 ------------------------------------------------------------------------------------------

TV_EXP_1 = [40_000, 39_912, 10_044, 10_044]


def test_tv_exp_1_exponential_mechanism_probability_from_the_spec() -> None:
    # The spec's number is for the exponential mechanism: weights exp(0.05·u) relative to C1 are
    # 1, e^-4.4, e^-1497.8, e^-1497.8, so P[C2] = e^-4.4/(1 + e^-4.4) = 0.012128.
    weights = [math.exp(0.1 * (u - TV_EXP_1[0]) / 2) for u in TV_EXP_1]
    assert round(weights[1] / math.fsum(weights), 6) == 0.012128


def test_tv_exp_1_permute_and_flip_releases_c2_with_its_exact_probability() -> None:
    # Permute-and-flip accepts C1 always, C2 with p = e^-4.4 = 0.0122773, C3/C4 with e^-1497.8 ≈ 0. C2 is
    # released iff it is visited before C1 (probability 1/2; C3 and C4 reject whenever visited) and
    # accepts: P[C2] = e^-4.4/2 = 0.0061387 (half the exponential mechanism's 0.012128).
    expected = permute_and_flip_probabilities(TV_EXP_1, epsilon=0.1, sensitivity=1)
    assert expected[1] == pytest.approx(math.exp(-4.4) / 2, rel=1e-12)
    assert round(expected[1], 7) == 0.0061387
    # 40 000 draws: binomial standard error sqrt(p(1-p)/n) = 0.00039; allow 4 (±0.0016). The exponential
    # mechanism's 0.01213 is 15 standard errors away, so this tells the two mechanisms apart.
    draws = 40_000
    counts = frequencies(TV_EXP_1, draws=draws, epsilon=0.1, sensitivity=1)
    observed = counts[1] / draws
    assert abs(observed - expected[1]) <= 4 * math.sqrt(expected[1] * (1 - expected[1]) / draws)
    assert counts[2] == counts[3] == 0
    # The spec's utility statement: the released count is >= 39 912.27 (so C1) with probability >= 95%.
    assert counts[0] / draws >= 0.95


def test_tv_exp_1_utility_bound_from_the_spec() -> None:
    bound = exponential_error_bound(sensitivity=1, epsilon=0.1, candidates=4, confidence=1 - math.exp(-3))
    assert round(40_000 - bound, 2) == 39_912.27


# --- exactness ----------------------------------------------------------------------------------------------


def test_three_candidates_follow_the_exact_permute_and_flip_distribution() -> None:
    # Scores (2, 1, 0), ε = 1, Δ = 1: p = (1, e^-0.5, e^-1); exact probabilities (0.5872, 0.2661, 0.1468),
    # where the exponential mechanism would give (0.5065, 0.3072, 0.1863). Pearson's statistic over 3 cells
    # is approximately chi-square with 2 degrees of freedom, P(χ²₂ > x) = exp(-x/2): the threshold 25 is
    # exceeded by chance with probability 3.7e-6. Against the exponential mechanism's probabilities the
    # statistic would be about 30 000·Σ(p - q)²/q ≈ 1100.
    scores = [2, 1, 0]
    expected = permute_and_flip_probabilities(scores, epsilon=1.0, sensitivity=1)
    counts = frequencies(scores, draws=30_000, epsilon=1.0, sensitivity=1)
    assert chi_square(counts, expected) < 25
    weights = [math.exp(score / 2) for score in scores]
    assert chi_square(counts, [w / sum(weights) for w in weights]) > 200


def test_fraction_scores_give_the_same_distribution_as_scaled_integers() -> None:
    # (1, 1/2, 0) with Δ = 1/2 is the same mechanism as (2, 1, 0) with Δ = 1; same test as above on
    # 10 000 draws (threshold 25, false alarm 3.7e-6).
    expected = permute_and_flip_probabilities([2, 1, 0], epsilon=1.0, sensitivity=1)
    scores = [Fraction(1), Fraction(1, 2), Fraction(0)]
    counts = frequencies(scores, draws=10_000, epsilon=1.0, sensitivity=Fraction(1, 2))
    assert chi_square(counts, expected) < 25


def test_same_seed_gives_same_choices() -> None:
    scores = list(range(50))
    assert frequencies(scores, draws=200, epsilon=0.3, sensitivity=1) == frequencies(
        scores, draws=200, epsilon=0.3, sensitivity=1
    )


def test_equal_scores_are_chosen_uniformly() -> None:
    # 5 equal scores: every candidate accepts, the first visited is uniform. 10 000 draws, chi-square with
    # 4 degrees of freedom; P(χ²₄ > 30) = 5e-6.
    counts = frequencies([7] * 5, draws=10_000, epsilon=1.0, sensitivity=1)
    assert chi_square(counts, [0.2] * 5) < 30


# --- utility ------------------------------------------------------------------------------------------------


def test_utility_theorem_holds_empirically() -> None:
    # 200 candidates with scores 0, -1, ..., -199 (one top candidate), ε = 0.5, Δ = 1. The theorem:
    # P[u(released) <= -(2Δ/ε)(ln 200 + t)] <= e^-t. 4000 draws; for each t the empirical tail fraction may
    # exceed e^-t by at most 4 binomial standard errors sqrt(e^-t(1 - e^-t)/4000) (<= 0.031).
    scores = [-i for i in range(200)]
    draws = 4000
    counts = frequencies(scores, draws=draws, epsilon=0.5, sensitivity=1)
    for t in (0.5, 1.0, 2.0, 3.0):
        threshold = -(2 / 0.5) * (math.log(200) + t)
        tail = sum(count for index, count in enumerate(counts) if scores[index] <= threshold) / draws
        p = math.exp(-t)
        assert tail <= p + 4 * math.sqrt(p * (1 - p) / draws)


def test_error_bound_formula() -> None:
    assert exponential_error_bound(sensitivity=2, epsilon=0.5, candidates=100, top=4) == pytest.approx(
        (4 / 0.5) * (math.log(25) + math.log(20)), rel=1e-12
    )


# --- cost ---------------------------------------------------------------------------------------------------


class CountingSource:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.calls = 0

    def randrange(self, stop: int, /) -> int:
        self.calls += 1
        return self.rng.randrange(stop)


def test_a_single_winner_among_100_000_candidates_costs_about_one_call_per_visit() -> None:
    # Worst case: one candidate far above the rest is found after (n + 1)/2 visits on average; each visit
    # makes one randrange call, plus a few extra for the ~1/e of exp(-1) coins that do not reject at once.
    # Measured ≈ 1.15 calls per visit; over 5 runs the mean number of visits is n/2 ± 4·n/sqrt(12·5),
    # so 3·n calls in total is a generous ceiling that still catches an accidental O(n) coin per visit.
    n = 100_000
    scores = [0] * (n - 1) + [10**9]
    source = CountingSource(random.Random(SEED))
    for _ in range(5):
        assert exponential_mechanism(scores, sensitivity=1, epsilon=1.0, rng=source) == n - 1
    assert source.calls <= 3 * n


def test_one_candidate_is_always_chosen() -> None:
    assert exponential_mechanism([-(10**12)], sensitivity=1, epsilon=1.0, rng=random.Random(SEED)) == 0


# --- properties ---------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    scores=st.lists(st.integers(min_value=-(10**9), max_value=10**9), min_size=1, max_size=40),
    epsilon=st.floats(min_value=1e-3, max_value=50),
    sensitivity=st.integers(min_value=1, max_value=1000),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_returns_a_valid_index_and_never_a_hopeless_candidate(
    scores: list[int], epsilon: float, sensitivity: int, seed: int
) -> None:
    # A candidate whose acceptance probability is below e^-700 (≈ 1e-304) is never released in practice:
    # over these examples the chance of seeing one is below 40·60·e^-700.
    index = exponential_mechanism(scores, sensitivity=sensitivity, epsilon=epsilon, rng=random.Random(seed))
    assert type(index) is int
    assert 0 <= index < len(scores)
    assert epsilon * (max(scores) - scores[index]) / (2 * sensitivity) < 700


@settings(max_examples=30, deadline=None)
@given(
    scores=st.lists(
        st.fractions(min_value=-1000, max_value=1000, max_denominator=50), min_size=1, max_size=20
    ),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_fraction_scores_return_a_valid_index(scores: list[Fraction], seed: int) -> None:
    index = exponential_mechanism(scores, sensitivity=Fraction(1, 3), epsilon=1.0, rng=random.Random(seed))
    assert 0 <= index < len(scores)


def test_numpy_integer_scores_are_accepted() -> None:
    np = pytest.importorskip("numpy")
    scores = np.array([3, 1, 2], dtype=np.int64)
    assert exponential_mechanism(scores, sensitivity=1, epsilon=1.0, rng=random.Random(SEED)) in {0, 1, 2}


# --- privacy map and validation -----------------------------------------------------------------------------


def test_privacy_loss_is_epsilon_pure() -> None:
    assert exponential_privacy_loss(epsilon=0.25) == PrivacyLoss(0.25, 0.0)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 0.5, True, None, "3"])
def test_rejects_scores_that_are_not_exact_numbers(bad: object) -> None:
    with pytest.raises(MechanismError, match=r"scores must be integers or fractions\.Fraction") as caught:
        exponential_mechanism([1, bad, 2], sensitivity=1, epsilon=1.0, rng=random.Random(SEED))  # type: ignore[list-item]
    assert caught.value.hint is not None


def test_rejects_an_empty_candidate_set() -> None:
    with pytest.raises(MechanismError, match="non-empty sequence"):
        exponential_mechanism([], sensitivity=1, epsilon=1.0, rng=random.Random(SEED))


@pytest.mark.parametrize("epsilon", [0.0, -1.0, math.inf, math.nan, True])
def test_rejects_a_bad_epsilon(epsilon: float) -> None:
    with pytest.raises(MechanismError, match="epsilon must be a finite number greater than 0"):
        exponential_mechanism([1, 2], sensitivity=1, epsilon=epsilon, rng=random.Random(SEED))
    with pytest.raises(MechanismError, match="epsilon must be a finite number greater than 0"):
        exponential_privacy_loss(epsilon=epsilon)


@pytest.mark.parametrize("sensitivity", [0, -1, math.inf, math.nan, Fraction(0)])
def test_rejects_a_bad_sensitivity(sensitivity: float) -> None:
    with pytest.raises(MechanismError, match="sensitivity must be a finite number greater than 0"):
        exponential_mechanism([1, 2], sensitivity=sensitivity, epsilon=1.0, rng=random.Random(SEED))


def test_error_bound_validates_its_counts() -> None:
    with pytest.raises(MechanismError, match="candidates must be a whole number >= 1"):
        exponential_error_bound(sensitivity=1, epsilon=1.0, candidates=0)
    with pytest.raises(MechanismError, match="cannot exceed candidates"):
        exponential_error_bound(sensitivity=1, epsilon=1.0, candidates=3, top=4)
    with pytest.raises(MechanismError, match="confidence must be strictly between 0 and 1"):
        exponential_error_bound(sensitivity=1, epsilon=1.0, candidates=3, confidence=1.0)


# --- monotone scores (MODE) ----------------------------------------------------------------------------------


def test_monotone_selection_drops_the_factor_two() -> None:
    # Scores (10, 0), Δ = 10, ε = 1: the loser accepts with e^-1 (not e^-1/2) and is released iff it is
    # visited first: P = e^-1/2 = 0.18394 (the general case: e^-0.5/2 = 0.30327). 20 000 draws: standard
    # error 0.0027; allow 4 (±0.011), far from 0.303.
    rng = random.Random(SEED)
    draws = 20_000
    losers = sum(
        exponential_mechanism([10, 0], sensitivity=10, epsilon=1.0, rng=rng, monotone=True)
        for _ in range(draws)
    )
    assert abs(losers / draws - math.exp(-1) / 2) <= 4 * math.sqrt(0.184 * 0.816 / draws)


def monotone_probabilities(scores: list[int], *, epsilon: float, sensitivity: float) -> list[float]:
    """Exact monotone permute-and-flip probabilities: acceptance exp(-ε·gap/Δ), every order enumerated."""
    return permute_and_flip_probabilities(scores, epsilon=2 * epsilon, sensitivity=sensitivity)


@given(
    st.lists(st.integers(min_value=0, max_value=30), min_size=2, max_size=4),
    st.lists(st.integers(min_value=0, max_value=10), min_size=4, max_size=4),
)
def test_monotone_selection_is_epsilon_dp_for_one_added_unit(scores: list[int], added: list[int]) -> None:
    # A unit adds at most Δ = 10 to each score (all in the same direction); every release probability
    # changes by at most a factor e^ε, both ways (the report-noisy-max argument of the module docstring).
    neighbour = [score + extra for score, extra in zip(scores, added, strict=False)]
    before = monotone_probabilities(scores, epsilon=1.0, sensitivity=10)
    after = monotone_probabilities(neighbour, epsilon=1.0, sensitivity=10)
    for p, q in zip(before, after, strict=True):
        assert p <= math.e * q * (1 + 1e-9) and q <= math.e * p * (1 + 1e-9)


def test_monotone_error_bound_is_half_the_general_one() -> None:
    general = exponential_error_bound(sensitivity=2, epsilon=0.5, candidates=100, top=4)
    monotone = exponential_error_bound(sensitivity=2, epsilon=0.5, candidates=100, top=4, monotone=True)
    assert monotone == pytest.approx(general / 2, rel=1e-12)
