"""The statistics of the timing-probe bench (tests/bench/distinguisher.py)."""

from __future__ import annotations

import math
import random

import pytest

from tests.bench.distinguisher import clopper_pearson, distinguish


def test_clopper_pearson_matches_known_intervals() -> None:
    # 0 of 10: [0, 1 − 0.025^(1/10)]; 10 of 10: [0.025^(1/10), 1] (closed forms at the ends)
    assert clopper_pearson(0, 10) == (0.0, pytest.approx(1 - 0.025 ** (1 / 10)))
    assert clopper_pearson(10, 10) == (pytest.approx(0.025 ** (1 / 10)), 1.0)
    low, high = clopper_pearson(50, 100)
    assert low == pytest.approx(0.3983, abs=1e-4) and high == pytest.approx(0.6017, abs=1e-4)


def test_identical_distributions_give_no_bound() -> None:
    rng = random.Random(1)
    same = [rng.gauss(10, 1) for _ in range(400)]
    other = [rng.gauss(10, 1) for _ in range(400)]
    result = distinguish(same, other, seed=2)
    assert result.epsilon_lower_bound == 0.0
    assert abs(result.advantage) < 0.15  # 3.5 standard errors of a difference of two proportions at n = 200


def test_separated_distributions_are_told_apart() -> None:
    rng = random.Random(3)
    slow = [rng.gauss(20, 1) for _ in range(400)]
    fast = [rng.gauss(10, 1) for _ in range(400)]
    result = distinguish(slow, fast, seed=4)
    assert result.advantage == 1.0 and result.above_means_present
    # 200 of 200 against 0 of 200: ln(0.025^(1/200) / (1 − 0.025^(1/200))) = ln(0.9817 / 0.0183)
    expected = math.log(0.025 ** (1 / 200) / (1 - 0.025 ** (1 / 200)))
    assert result.epsilon_lower_bound == pytest.approx(expected)
