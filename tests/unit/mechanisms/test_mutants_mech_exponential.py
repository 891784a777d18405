"""Permute-and-flip's exact coins, checked without sampling error: the exp(-1) coin enumerated over every
block, the rare paths (a fifth coin, K > 6) driven by scripted sources, and the refusals' exact texts.
Found by a mutation run of mechanisms/exponential.py (docs/testing.md)."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from mechanisms.errors import MechanismError
from mechanisms.exponential import (
    _BLOCK,
    _POOL,
    _accepts,
    _exp_minus_one,
    _permute_and_flip,
    _rate,
    exponential_error_bound,
    exponential_mechanism,
)
from tests.unit.mechanisms.test_mutants_mech_samplers import Scripted


class Refusing:
    """A RandomSource that must not be asked."""

    def randrange(self, stop: int, /) -> int:
        raise AssertionError(f"randrange({stop}) was not expected")


def digits(*draws: int) -> int:
    """The block whose mixed-radix digits (radix 2, 3, 4, 5, 6, least significant first) are ``draws``."""
    block, weight = 0, 1
    for radix, draw in zip(range(2, 7), draws, strict=False):
        assert 0 <= draw < radix
        block += draw * weight
        weight *= radix
    return block


def test_the_exp_minus_one_coin_over_every_block_is_exact() -> None:
    """K is the first k >= 2 with a non-zero digit. Of the 720 blocks, 720·(1/(k-1)! - 1/k!) have K = k:
    360 (K = 2), 240 (K = 3), 90 (K = 4), 24 (K = 5), 5 (K = 6); the coin is heads for odd K (264 blocks),
    and only block 0 (K > 6, probability 1/720) asks the source."""
    heads = sum(_exp_minus_one(block, Refusing()) for block in range(1, _BLOCK))
    assert _BLOCK == 720
    assert heads == 240 + 24
    # together with block 0's exact P(K odd | K > 6) = 6!·Σ_{j>=6} (-1)^j/j!, the coin is exactly e^-1
    tail = math.factorial(6) * math.fsum((-1) ** j / math.factorial(j) for j in range(6, 30))
    assert (heads + tail) / _BLOCK == pytest.approx(math.exp(-1), rel=1e-14)


@pytest.mark.parametrize(
    ("draws", "heads"),
    [
        ([3], True),  # K = 7 (randrange(7) != 0)
        ([0, 5], False),  # K = 8
        ([0, 0, 1], True),  # K = 9
        ([0, 0, 0, 2], False),  # K = 10
    ],
)
def test_block_zero_continues_the_coin_with_the_source(draws: list[int], heads: bool) -> None:
    source = Scripted(draws)
    assert _exp_minus_one(0, source) is heads
    assert source.stops == list(range(7, 7 + len(draws)))


@pytest.mark.parametrize(
    ("block", "heads"),
    [
        (digits(1), False),  # K = 2
        (digits(0, 1), True),  # K = 3
        (digits(0, 2), True),
        (digits(0, 0, 3), False),  # K = 4
        (digits(0, 0, 0, 4), True),  # K = 5
        (digits(0, 0, 0, 0, 5), False),  # K = 6
    ],
)
def test_each_digit_of_the_block_is_one_trial(block: int, heads: bool) -> None:
    assert _exp_minus_one(block, Refusing()) is heads


def test_four_coins_come_from_the_blocks_and_the_fifth_from_the_source() -> None:
    """A visit's draw carries four blocks (uniform below 720**4): the first four exp(-1) coins use them,
    digit by digit; a fifth coin needs a fresh block from the source (re-using the exhausted, all-zero
    blocks would make it far likelier to accept than e^-1)."""
    heads_block = digits(0, 1)  # K = 3: accepts
    blocks = sum(heads_block * _BLOCK**i for i in range(4))
    assert blocks < _POOL == _BLOCK**4
    # four coins, all heads, then the remainder coin for 0/1 (randrange(1) < 0 fails at once: heads)
    source = Scripted([0])
    assert _accepts(4, 0, 1, blocks, source) is True
    assert source.stops == [1]
    # a fifth: the source supplies a block (here K = 2: tails)
    source = Scripted([digits(1)])
    assert _accepts(5, 0, 1, blocks, source) is False
    assert source.stops == [_BLOCK]
    source = Scripted([digits(0, 2), 0])
    assert _accepts(5, 0, 1, blocks, source) is True
    assert source.stops == [_BLOCK, 1]


def test_the_blocks_are_used_least_significant_first() -> None:
    """Coin i uses block i (blocks // 720**i % 720): tails in the second block rejects at the second coin."""
    heads, tails = digits(0, 1), digits(1)
    assert _accepts(2, 0, 1, heads + tails * _BLOCK, Refusing()) is False
    assert _accepts(2, 0, 1, tails + heads * _BLOCK, Refusing()) is False
    assert _accepts(2, 0, 1, heads + heads * _BLOCK, Scripted([0])) is True
    # the third block is not looked at by two coins
    assert _accepts(2, 0, 1, heads + heads * _BLOCK + tails * _BLOCK**2, Scripted([0])) is True


def test_the_remainder_coin_is_bernoulli_exp_of_the_fraction() -> None:
    """After the whole coins, exp(-remainder/denominator) by CKS Algorithm 1: randrange(d·k) < n, k = 1, 2, …
    until it fails; heads iff the failing k is odd."""
    # remainder 1/3: first trial randrange(3) = 2 is not < 1: fails at k = 1, heads
    source = Scripted([2])
    assert _accepts(0, 1, 3, 0, source) is True
    assert source.stops == [3]
    # randrange(3) = 0 < 1 succeeds, then randrange(6) = 4 fails at k = 2: tails
    source = Scripted([0, 4])
    assert _accepts(0, 1, 3, 0, source) is False
    assert source.stops == [3, 6]


def test_a_visit_draws_one_number_for_its_position_and_its_blocks() -> None:
    """Two candidates with gaps (1, 0): the first visit's single draw u below 2·720**4 picks position
    u // 720**4 and its blocks u % 720**4. u = 0·720**4 + tails: candidate 0 (gap 1, whole coin 1) rejects at
    once, then the top candidate is found with a draw below 1·720**4."""
    rate = Fraction(1)
    tails = digits(1)
    source = Scripted([tails, 0])
    assert _permute_and_flip([1, 0], rate, source) == 1
    assert source.stops == [2 * _POOL, _POOL]
    # heads in the block: candidate 0 is accepted on its first visit (after the remainder coin of 0/1)
    source = Scripted([digits(0, 1), 0])
    assert _permute_and_flip([1, 0], rate, source) == 0
    assert source.stops == [2 * _POOL, 1]
    # position 1 first (u >= 720**4): the top candidate, whatever the blocks
    source = Scripted([_POOL + tails])
    assert _permute_and_flip([1, 0], rate, source) == 1


def test_the_visiting_order_is_a_fisher_yates_shuffle() -> None:
    """A top candidate and three that reject: each visit swaps the picked candidate into the current position.
    Offsets 1, 2, 1 visit candidate 1 (order 1 0 2 3), then 3 (order 1 3 2 0), then the top candidate 0,
    which the first swap had moved to the end."""
    gaps = [0, 5, 5, 5]
    tails = digits(1)
    source = Scripted([1 * _POOL + tails, 2 * _POOL + tails, 1 * _POOL + tails])
    assert _permute_and_flip(gaps, Fraction(1), source) == 0
    assert source.stops == [4 * _POOL, 3 * _POOL, 2 * _POOL]


def test_coins_of_equal_gaps_share_one_exact_rate() -> None:
    """gap·rate = 3/2 for both losers: whole 1 (one exp(-1) coin) and remainder 1/2; with heads in the block
    the remainder coin randrange(2) = 1 (not < 1) accepts."""
    rate = Fraction(1, 2)
    heads = digits(0, 1)
    source = Scripted([heads, 1])
    assert _permute_and_flip([3, 3, 0], rate, source) == 0
    assert source.stops == [3 * _POOL, 2]
    # the remainder coin tails (randrange(2) = 0 < 1, then randrange(4) = 1 fails at k = 2): the next visit
    # (offset 1 among the two left) is the top candidate 2
    source = Scripted([heads, 0, 1, 1 * _POOL])
    assert _permute_and_flip([3, 3, 0], rate, source) == 2
    assert source.stops == [3 * _POOL, 2, 4, 2 * _POOL]


def test_fraction_scores_are_brought_to_a_common_denominator() -> None:
    """Scores (1/2, 0) with Δ = 1/2 and ε = 1: the loser's gap is one sensitivity, so it accepts with
    e^-1/2 in the general case — no whole exp(-1) coin, a remainder coin of 1/2: randrange(2) = 1 is not
    below 1, so it fails at k = 1 and accepts."""
    source = Scripted([1 * _POOL, 1])  # visit position 1 first (candidate 1), then its coin
    index = exponential_mechanism(
        [Fraction(1, 2), Fraction(0)], sensitivity=Fraction(1, 2), epsilon=1.0, rng=source
    )
    assert index == 1
    assert source.stops == [2 * _POOL, 2]


def test_the_rate_is_epsilon_over_twice_the_sensitivity() -> None:
    assert _rate(sensitivity=3, epsilon=0.5) == Fraction(1, 12)
    assert _rate(sensitivity=3, epsilon=0.5, monotone=True) == Fraction(1, 6)
    assert _rate(sensitivity=Fraction(1, 3), epsilon=0.25) == Fraction(3, 8)


def test_integer_scores_with_a_large_gap_flip_whole_coins_first() -> None:
    """Scores (0, 10) with Δ = 1, ε = 1 (rate 1/2): the loser's γ = 5 exactly — five exp(-1) coins, the
    fast path rejecting on an odd block."""
    source = Scripted([0 * _POOL + digits(1), 0])
    assert exponential_mechanism([0, 10], sensitivity=1, epsilon=1.0, rng=source) == 1


# --- validation: exact messages ------------------------------------------------------------------------------


def test_scores_without_a_length_are_refused_as_empty() -> None:
    with pytest.raises(MechanismError) as refused:
        exponential_mechanism(iter([1, 2]), sensitivity=1, epsilon=1.0, rng=random.Random(0))  # type: ignore[arg-type]
    assert refused.value.message == "scores must be a non-empty sequence of integers or fractions.Fraction"
    assert refused.value.hint == (
        "pass one score per public candidate; the candidate set must never be empty"
    )


def test_a_float_score_is_refused_with_its_type_and_hint() -> None:
    with pytest.raises(MechanismError) as refused:
        exponential_mechanism([1, 2.0], sensitivity=1, epsilon=1.0, rng=random.Random(0))  # type: ignore[list-item]
    assert refused.value.message == "scores must be integers or fractions.Fraction, got float"
    assert refused.value.hint == (
        "round real-valued scores to integers (or exact Fractions) before selecting; "
        "a float score would bring back floating-point sampling"
    )


def test_other_rationals_are_taken_exactly() -> None:
    """A Rational that is neither int nor Fraction (here a subclass of Fraction) is converted exactly."""

    class Half(Fraction):
        pass

    source = Scripted([1 * _POOL, 1])
    assert exponential_mechanism([Half(1, 2), 0], sensitivity=Fraction(1, 2), epsilon=1.0, rng=source) == 1
    assert source.stops == [2 * _POOL, 2]


def test_a_bad_sensitivity_is_refused_with_its_hint() -> None:
    with pytest.raises(MechanismError) as refused:
        exponential_mechanism([1, 2], sensitivity=0, epsilon=1.0, rng=random.Random(0))
    assert refused.value.message == "sensitivity must be a finite number greater than 0, got 0"
    assert refused.value.hint == "the most one privacy unit can change a score, e.g. max_contributions"
    with pytest.raises(MechanismError) as refused:
        exponential_mechanism([1, 2], sensitivity=1, epsilon=-1.0, rng=random.Random(0))
    assert refused.value.message == "epsilon must be a finite number greater than 0, got -1.0"
    assert refused.value.hint == "spend a positive budget, e.g. epsilon=1.0"


@pytest.mark.parametrize(
    ("arguments", "message", "hint"),
    [
        (
            {"candidates": 0},
            "candidates must be a whole number >= 1, got 0",
            "count the candidates released from",
        ),
        (
            {"candidates": True},
            "candidates must be a whole number >= 1, got True",
            "count the candidates released from",
        ),
        (
            {"candidates": 2.0},
            "candidates must be a whole number >= 1, got 2.0",
            "count the candidates released from",
        ),
        (
            {"candidates": 3, "top": 0},
            "top must be a whole number >= 1, got 0",
            "count the candidates released from",
        ),
        (
            {"candidates": 3, "top": 4},
            "top (4) cannot exceed candidates (3)",
            "top counts the candidates that share the maximum score",
        ),
        (
            {"candidates": 3, "confidence": 0.0},
            "confidence must be strictly between 0 and 1, got 0.0",
            "use e.g. confidence=0.95",
        ),
    ],
)
def test_error_bound_refusals_are_exact(arguments: dict[str, object], message: str, hint: str) -> None:
    with pytest.raises(MechanismError) as refused:
        exponential_error_bound(sensitivity=1, epsilon=1.0, **arguments)  # type: ignore[arg-type]
    assert refused.value.message == message
    assert refused.value.hint == hint


def test_error_bound_edges() -> None:
    """top = candidates is allowed (every candidate ties: no shortfall from the candidate count)."""
    assert exponential_error_bound(sensitivity=1, epsilon=2.0, candidates=3, top=3, confidence=0.5) == (
        pytest.approx(math.log(2), rel=1e-12)
    )
    assert exponential_error_bound(sensitivity=1, epsilon=2.0, candidates=1, confidence=0.9) == pytest.approx(
        math.log(10), rel=1e-12
    )
