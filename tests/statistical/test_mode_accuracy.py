"""MODE accuracy against its utility theorem: a clear majority is found as often as the bound promises.

2,000 donors (tests/unit/proxy/donors_fixture.py), blood O for 60%, A and B for 20% each, 2 visits each
(L = 2). The engine computes the weighted histogram once; 200 seeded releases then choose from it.

The tolerance comes from the mechanism, not from tuning: the released value's count falls more than G
rows below the mode's with probability at most β, where G = (L/ε)·ln(|values|/β)
(:func:`mechanisms.mode.mode_count_gap_bound`). A wrong answer here is a count gap of at least the true
gap g (O's rows minus B's), so P(wrong) <= p = |values|·exp(−ε·g/L). The number of wrong draws is then
stochastically below Binomial(200, p); the test allows the smallest w with P(Binomial(200, p) > w) <= 1e-6,
and that allowance must itself keep the mode right in at least 95% of the draws.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import duckdb
import pytest

from mechanisms.mode import mode_count_gap_bound
from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import PrivateQuery, classify
from proxy.query.planning import collect_histograms, prepare_release
from proxy.release.apply import release
from tests.unit.proxy.donors_fixture import donors_policy, duckdb_donors

pytestmark = pytest.mark.slow

DRAWS = 200
FAILURE = 1e-6  # the chance that this test fails although the mechanism keeps its promise


def allowed_wrong(p: float, draws: int = DRAWS) -> int:
    """The smallest w with P(Binomial(draws, p) > w) <= FAILURE."""
    tail = 1.0
    for w in range(draws + 1):
        tail -= math.comb(draws, w) * p**w * (1 - p) ** (draws - w)
        if tail <= FAILURE:
            return w
    return draws


@pytest.mark.parametrize("epsilon", [1.0, 0.01])
def test_a_clear_majority_is_the_mode_as_often_as_the_bound_promises(tmp_path: Path, epsilon: float) -> None:
    dataset = donors_policy(tmp_path)
    statement = classify(
        parse_statements("SELECT MODE() WITHIN GROUP (ORDER BY blood) FROM donors")[0], dataset
    )
    assert isinstance(statement, PrivateQuery)
    plan, _ = prepare_release(statement.shape, epsilon=epsilon, dialect="duckdb")
    with duckdb.connect(str(duckdb_donors(tmp_path)), read_only=True) as connection:
        histograms = collect_histograms(
            plan, execute=lambda sql: ([], connection.execute(sql).fetchall()), dialect="duckdb"
        )
    counts = histograms["mode(blood)"][()]
    weight = plan.measurements[0].weight
    gap = (counts[2] - max(counts[:2])) / weight  # O's rows minus the runner-up's: 2,400 − 802
    assert mode_count_gap_bound(epsilon=epsilon, max_contributions=2, candidates=3) < gap, "right at 95%"
    p = 3 * math.exp(-epsilon * gap / 2)  # solves G = (L/ε)·ln(|values|/β) = gap for β
    tolerance = allowed_wrong(p)
    assert tolerance <= DRAWS * 0.05, "the bound itself promises the right mode in >= 95% of draws"
    answers = [
        release(plan, [], rng=random.Random(seed), histograms=histograms).rows[0][0] for seed in range(DRAWS)
    ]
    assert sum(answer != "O" for answer in answers) <= tolerance
