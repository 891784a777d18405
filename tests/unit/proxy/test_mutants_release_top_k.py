"""Top-k by DP selection (release/top_k.py): the monotone permute-and-flip acceptance, keys absent
from the scores, the τ gate's handling of a NULL count and its strict comparison, and what ``veil
explain`` and a NOTICE say about the selection. Found open by ``make mutants`` (docs/testing.md)."""

from __future__ import annotations

import dataclasses
import math
import random
from decimal import Decimal
from pathlib import Path

import pytest

from proxy.config import DatasetPolicy, parse_config
from proxy.release import top_k as top_k_module
from proxy.release.top_k import TopKPlan, TopKSelection, release_top_k
from tests.unit.proxy.test_top_k import DISTINCT, PARTITIONED, POLICY, plan_of

FROM_THE_DATA = "SELECT item, COUNT(DISTINCT user_id) AS n FROM buys GROUP BY item ORDER BY n DESC LIMIT 4"


@pytest.fixture
def shop() -> DatasetPolicy:
    policy = parse_config(POLICY, path=Path("/nonexistent/veil.toml")).dataset("shop")
    assert policy is not None
    return policy


def top_k_plan(sql: str, dataset: DatasetPolicy, **options: object) -> TopKPlan:
    plan, _ = plan_of(sql, dataset, **options)
    assert isinstance(plan, TopKPlan)
    return plan


def test_the_selection_accepts_with_the_monotone_probability(shop: DatasetPolicy) -> None:
    """Top-1 of the 6 genres at ε = 1 (selection ε₂ = 0.5, one round), "a" 4 people ahead of five keys
    nobody has. Permute-and-flip visits the keys in a random order and accepts a key whose score is g
    below the best with probability q = exp(−ε₂·g/Δ) for counts (monotone; exp(−ε₂·g/(2Δ)) without):
    "a" is chosen with probability (1 − (1 − q)⁶)/(6q): 0.717 with q = e⁻², 0.424 with q = e⁻¹.
    1,000 seeded draws: the binomial s.d. of the share is at most 0.0143, and the test allows 5 s.d."""
    plan = top_k_plan(DISTINCT.format(k=1), shop, epsilon=1.0)
    assert plan.selection is not None and plan.selection.epsilon == 0.5
    rng = random.Random(20261127)
    draws = 1000
    chosen = [release_top_k(plan, [("a", 4)], rng=rng).rows[0][0] for _ in range(draws)]
    q = math.exp(-0.5 * 4)
    expected = (1 - (1 - q) ** 6) / (6 * q)
    assert chosen.count("a") / draws == pytest.approx(expected, abs=5 * 0.0143)


def test_keys_absent_from_the_scores_have_no_people(shop: DatasetPolicy) -> None:
    """A public key nobody has is not in the engine's scores: its count is 0 (at ε = 400 the discrete
    Laplace noise of scale 2/200 is 0 except with probability about 2·e⁻¹⁰⁰)."""
    plan = top_k_plan(DISTINCT.format(k=2), shop, epsilon=400.0)
    table = release_top_k(plan, [("b", 90)], rng=random.Random(3))
    assert table.rows[0] == ("b", 90)
    (other,) = table.rows[1:]
    assert other[0] in {"a", "c", "d", "e", "f"} and other[1] == 0


@pytest.fixture
def noiseless_gate(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """The gate's Laplace draw replaced by 0 noise, to pin what it is compared with; records its calls."""
    calls: list[dict[str, object]] = []

    def no_noise(value: float, **arguments: object) -> float:
        calls.append({"value": value, **arguments})
        return value

    monkeypatch.setattr(top_k_module, "laplace_mechanism", no_noise)
    return calls


def test_a_key_is_a_candidate_only_if_its_noisy_people_count_exceeds_tau(
    shop: DatasetPolicy, noiseless_gate: list[dict[str, object]]
) -> None:
    """Strictly above τ (docs/privacy.md): a count equal to τ stays hidden; a NULL count is 0 people."""
    plan = dataclasses.replace(top_k_plan(FROM_THE_DATA, shop, epsilon=0.9, delta=1e-6), threshold=5.0)
    assert plan.gate is not None
    gate_rows = [("at_tau", 5), ("above", 6), ("null", None), ("none", 0)]
    table = release_top_k(plan, [("above", 6), ("at_tau", 5)], rng=random.Random(1), gate_rows=gate_rows)
    assert [row[0] for row in table.rows] == ["above"]
    assert [call["value"] for call in noiseless_gate] == [5.0, 6.0, 0.0, 0.0]
    assert {(call["sensitivity"], call["epsilon"]) for call in noiseless_gate} == {
        (plan.gate.sensitivity, plan.gate.epsilon)
    }


def test_a_null_people_count_is_zero_people_below_a_small_tau(
    shop: DatasetPolicy, noiseless_gate: list[dict[str, object]]
) -> None:
    """τ = 0.5: a key with one person passes, a key whose count is NULL (nobody) does not."""
    plan = dataclasses.replace(top_k_plan(FROM_THE_DATA, shop, epsilon=0.9, delta=1e-6), threshold=0.5)
    table = release_top_k(plan, [("one", 1)], rng=random.Random(1), gate_rows=[("null", None), ("one", 1)])
    assert [row[0] for row in table.rows] == ["one"]


def test_explain_says_the_selection_is_per_partition(shop: DatasetPolicy) -> None:
    plan = top_k_plan(PARTITIONED, shop, epsilon=1.0)
    assert plan.describe() == (
        "ε=1 (top-2 selection per partition: exponential mechanism, 2 rounds at ε=0.25, ε=0.5; "
        "count(DISTINCT user_id) of the selected keys ε=0.5)"
    )


def test_explain_shows_delta_and_the_gate_for_keys_from_the_data(shop: DatasetPolicy) -> None:
    plan = top_k_plan(FROM_THE_DATA, shop, epsilon=0.9, delta=1e-6)
    assert plan.threshold is not None
    assert plan.describe() == (
        f"ε=0.9, δ=1e-06 (candidate keys: number of people above τ={plan.threshold:.4g} ε=0.3; "
        "top-4 selection: exponential mechanism, 4 rounds at ε=0.075, ε=0.3; "
        "count(DISTINCT user_id) of the selected keys ε=0.3)"
    )


@pytest.mark.parametrize("confidence", [0.5, 0.95, 0.99])
def test_the_score_gap_is_at_the_confidence_asked(confidence: float) -> None:
    """G = (k·Δ/ε)·(ln(candidates) + ln(k·outputs/(1 − confidence))), monotone (mechanisms/top_k.py);
    keys from the data are counted as 10⁶ candidates."""
    selection = TopKSelection(k=4, epsilon=0.3, candidates=None, partitions=None)
    expected = (4 / 0.3) * (math.log(1_000_000) + math.log(4 / (1 - confidence)))
    assert selection.score_gap(confidence) == pytest.approx(expected, rel=1e-12)


def test_each_partition_gets_its_own_top_k(shop: DatasetPolicy) -> None:
    """Top-2 genres per region: two keys from each region, each the best of its own region (at ε = 400
    the selection and the counts are exact but with probability about e⁻⁹⁰). Scores come as PostgreSQL's
    NUMERIC (Decimal) as well as integers."""
    plan = top_k_plan(PARTITIONED, shop, epsilon=400.0)
    scores = [
        ("east", "a", 50),
        ("east", "b", Decimal(40)),
        ("east", "c", 30),
        ("west", "d", Decimal(20)),
        ("west", "e", 10),
        ("west", "f", 5),
    ]
    table = release_top_k(plan, scores, rng=random.Random(8))
    assert sorted(table.rows) == [("east", "a", 50), ("east", "b", 40), ("west", "d", 20), ("west", "e", 10)]
