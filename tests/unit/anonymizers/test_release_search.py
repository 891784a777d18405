"""Risk-targeted release: the grids, the choice, and the monotone k-anonymity search against a brute-force
evaluation of every grid point."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import duckdb
import numpy as np
import pandas as pd
import pytest

from anonymizers.errors import AnonymizationError, InfeasibleError
from anonymizers.frequency import FrequencySet, frequency_set
from anonymizers.global_recoding import GlobalRecodingResult, PrivacyModel, search
from anonymizers.hierarchy import Hierarchy, interval_hierarchy, suppression_hierarchy
from anonymizers.release_search import (
    Candidate,
    Target,
    choose,
    combine_frontier,
    combine_grid,
    k_grid,
    kanon_frontier,
    suppression_grid,
)
from anonymizers.risk.pipeline import AttributePipeline, Generalize, Laplace, Pipeline, Randomize, Sample
from anonymizers.source import TableSource

QIS = ["age", "sex", "zip"]
ZIPS = ("10115", "10117", "10119", "20095", "20097")


def people(rows: int = 600, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 80, rows),
            "sex": rng.choice(["F", "M"], rows),
            "zip": rng.choice(ZIPS, rows, p=[0.4, 0.3, 0.2, 0.07, 0.03]),
        }
    )


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FrequencySet]:
    frame = people()
    path = tmp_path_factory.mktemp("search") / "people.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.register("frame", frame)
        connection.execute("CREATE TABLE t AS SELECT * FROM frame")
    hierarchies = [
        interval_hierarchy("age", list(range(18, 80)), [5, 10, 20, 40]),
        suppression_hierarchy("sex", ["F", "M"]),
        Hierarchy(
            "zip", (ZIPS, tuple(z[:3] + "xx" for z in ZIPS), tuple(z[0] + "xxxx" for z in ZIPS), ("*",) * 5)
        ),
    ]
    with TableSource.duckdb_file(path, "t") as source:
        provided = frequency_set(source, QIS, hierarchies)
    assert isinstance(provided, FrequencySet)
    yield provided


def brute_force(
    provider: FrequencySet, target: Target, k_min: int, limit: float
) -> tuple[float, float] | None:
    """(loss, risk) of the best grid point under the target, every point of the full grid evaluated and
    its risk computed from the released class sizes here, not by the module."""
    best = None
    for k, s in itertools.product(k_grid(k_min, provider.total, target), suppression_grid(limit)):
        try:
            result = search(provider, QIS, PrivacyModel(k=k), suppression_limit=s)
        except InfeasibleError:
            continue
        risk = _risk(target, result)
        if risk <= target.max_risk and (best is None or (result.metrics["loss"], risk) < best):
            best = (result.metrics["loss"], risk)
    return best


def _risk(target: Target, result: GlobalRecodingResult) -> float:
    sizes = result.classes.counts[~result.suppressed]
    if target.measure == "marketer":
        return len(sizes) / sizes.sum()
    return 1.0 / sizes.min()


@pytest.mark.parametrize(
    ("max_risk", "measure", "limit"),
    [(0.5, "simulated", 0.0), (0.2, "simulated", 0.05), (0.05, "prosecutor", 0.1), (0.02, "marketer", 0.02),
     (0.12, "prosecutor", 0.2)],
)  # fmt: skip
def test_search_picks_the_least_loss_grid_point_under_the_target(
    provider: FrequencySet, max_risk: float, measure: str, limit: float
) -> None:
    target = Target(max_risk, measure)
    frontier, result = kanon_frontier(provider, QIS, target, model=PrivacyModel(k=2), suppression_limit=limit)
    expected = brute_force(provider, target, 2, limit)
    assert expected is not None and result is not None and frontier.chosen is not None
    chosen = frontier.candidates[frontier.chosen]
    assert (chosen.loss, chosen.risk) == pytest.approx(expected)
    assert result.metrics["loss"] == pytest.approx(chosen.loss)
    assert _risk(target, result) == pytest.approx(chosen.risk) and chosen.risk <= max_risk


def test_each_walk_stops_at_the_first_k_that_meets_the_target(provider: FrequencySet) -> None:
    target = Target(0.1)
    frontier, _ = kanon_frontier(provider, QIS, target, model=PrivacyModel(k=2), suppression_limit=0.05)
    for limit in suppression_grid(0.05):
        walk = [c for c in frontier.candidates if c.parameters["suppression_limit"] == limit]
        assert [c.meets(0.1) for c in walk] == [False] * (len(walk) - 1) + [True]
        assert [c.loss for c in walk] == sorted(c.loss for c in walk)  # the loss never falls as k rises


def test_unreachable_target_chooses_nothing_and_names_the_lowest_risk(provider: FrequencySet) -> None:
    frontier, result = kanon_frontier(
        provider, QIS, Target(1e-4), model=PrivacyModel(k=2), suppression_limit=0
    )
    assert result is None and frontier.chosen is None
    lowest = frontier.lowest_risk()
    assert lowest is not None and lowest.risk == pytest.approx(1 / 600)  # every record in one class
    message = frontier.refusal("raise it").message
    assert message.startswith(
        "no release meets --max-risk 0.0001: the lowest simulated risk reached is 0.00166667"
    )
    assert "k=500, suppression_limit=0" in message and "nothing was written" in message


def test_k_grid_walks_the_1_2_5_series_and_adds_the_k_that_guarantees_the_target() -> None:
    assert k_grid(2, 1000, Target(0.04)) == [2, 5, 10, 20, 25, 50, 100, 200, 500, 1000]
    assert k_grid(3, 60, Target(0.5, "marketer")) == [3, 5, 10, 20, 50]
    assert k_grid(2, 1000, Target(0.05, "journalist", sampling_fraction=0.5)) == [
        2,
        5,
        10,
        20,
        50,
        100,
        200,
        500,
        1000,
    ]


def test_suppression_grid_stops_at_the_limit() -> None:
    assert suppression_grid(0.0) == [0.0]
    assert suppression_grid(0.05) == [0.0, 0.01, 0.02, 0.05]
    assert suppression_grid(0.03) == [0.0, 0.01, 0.02, 0.03]


def test_journalist_target_needs_the_sampling_fraction() -> None:
    with pytest.raises(AnonymizationError, match="needs --sampling-fraction"):
        Target(0.1, "journalist")


def test_ties_in_loss_go_to_the_lower_risk_then_to_the_first_explored() -> None:
    candidates = [Candidate({"a": 1}, 0.2, 0.3), Candidate({"a": 2}, 0.1, 0.3), Candidate({"a": 3}, 0.1, 0.3),
                  Candidate({"a": 4}, 0.5, 0.1), Candidate({"a": 5}, None, None)]  # fmt: skip
    assert choose(candidates, 0.25) == 1
    assert choose(candidates, 0.05) is None


AGES = interval_hierarchy("age", list(range(18, 80)), [10])
SEX = suppression_hierarchy("sex", ["F", "M"])


def noisy_pipeline(sample: float | None) -> Pipeline:
    return Pipeline(
        (
            AttributePipeline("age", (Laplace(epsilon=1.0, lower=18, upper=79),)),
            AttributePipeline("sex", (Randomize(epsilon=2.0, hierarchy=SEX),)),
            AttributePipeline("zip", ()),
        ),
        None if sample is None else Sample(sample),
    )


def test_combine_grid_scales_every_noise_step_and_lowers_the_sampling_rate() -> None:
    grid = combine_grid(noisy_pipeline(0.8))
    assert [p["sample_rate"] for p, _ in grid] == [0.8] * 4 + [0.7] * 4 + [0.5] * 4
    assert [p["epsilon"]["age"] for p, _ in grid[:4]] == [1.0, 0.5, 0.25, 0.125]
    assert grid[3][0]["epsilon"]["sex"] == 0.25
    scaled = grid[5][1]
    assert scaled.sample == Sample(0.7)
    assert [s.epsilon for a in scaled.attributes for s in a.steps] == [0.5, 1.0]


def test_combine_grid_without_noise_or_sampling_searches_the_sampling_rate_only() -> None:
    pipeline = Pipeline((AttributePipeline("age", (Generalize(AGES, 1),)),))
    grid = combine_grid(pipeline)
    assert [p for p, _ in grid] == [{"sample_rate": r} for r in (1.0, 0.9, 0.7, 0.5)]
    assert grid[0][1].sample is None and grid[0][1].attributes == pipeline.attributes


def test_combine_search_returns_the_very_draw_it_measured() -> None:
    grid = combine_grid(noisy_pipeline(None))
    draws = iter(range(len(grid)))
    measured = {}

    def evaluate(pipeline: Pipeline) -> tuple[object, float, float]:
        draw = next(draws)
        measured[draw] = pipeline
        return f"draw {draw}", 0.3 - 0.015 * draw, 0.1 + 0.05 * draw  # risk falls, loss rises

    frontier, release, pipeline = combine_frontier(grid, Target(0.2), evaluate)
    assert frontier.chosen == 7 and release == "draw 7" and pipeline is measured[7]
    assert [c.meets(0.2) for c in frontier.candidates].index(True) == 7
