"""The combined de-identification runner: each step's output, sampling's hidden ids, the report."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from anonymizers.combine import combine, recode
from anonymizers.errors import AnonymizationError, HierarchyError
from anonymizers.hierarchy import ROOT, Hierarchy, interval_hierarchy
from anonymizers.risk.pipeline import (
    AttributePipeline,
    Generalize,
    Laplace,
    Pipeline,
    Randomize,
    Sample,
    coarsen,
)
from anonymizers.risk.simulators import randomize_matrix

HOBBY = Hierarchy(
    "hobby",
    (
        ("football", "baseball", "swimming", "art", "chorus"),
        ("outdoor", "outdoor", "indoor", "culture", "culture"),
        ("sports", "sports", "sports", "culture", "culture"),
        (ROOT,) * 5,
    ),
)


def people(rows: int = 200) -> pd.DataFrame:
    """``rows`` people with an id that no step touches, an age 20..69 and a hobby."""
    index = np.arange(rows)
    return pd.DataFrame(
        {
            "id": index,
            "age": 20 + index % 50,
            "hobby": np.asarray(HOBBY.leaves, dtype=object)[index % 5],
        }
    )


def one(attribute: str, *steps: Generalize | Laplace | Randomize, sample: float | None = None) -> Pipeline:
    return Pipeline((AttributePipeline(attribute, steps),), None if sample is None else Sample(sample))


def test_generalization_publishes_the_label_of_each_value() -> None:
    frame = people(5)
    released = combine(frame, one("hobby", Generalize(HOBBY, 1)), seed=1)
    assert released.table["hobby"].tolist() == ["outdoor", "outdoor", "indoor", "culture", "culture"]
    assert released.table["age"].tolist() == frame["age"].tolist()


def test_numbers_are_matched_against_leaves_as_text() -> None:
    ages = interval_hierarchy("age", range(20, 70), (10,))
    released = combine(people(3), one("age", Generalize(ages, 1)), seed=1)
    assert released.table["age"].tolist() == ["20-29", "20-29", "20-29"]


def test_laplace_noise_stays_on_the_grid_and_inside_the_domain() -> None:
    frame = pd.DataFrame({"age": [20, 21, 44, 68, 69] * 400})
    step = Laplace(0.05, lower=20, upper=69, unit=3)  # grid 20, 23, …, 68: 69 is off the grid
    noisy = combine(frame, one("age", step), seed=3).table["age"].to_numpy()
    assert noisy.dtype == np.int64
    assert set(np.unique((noisy - 20) % 3)) == {0}
    assert noisy.min() == 20 and noisy.max() == 68  # a scale of 60 reaches both clamped ends
    assert (noisy != frame["age"].to_numpy()).mean() > 0.5


def test_laplace_on_a_fractional_unit_prints_like_the_grid() -> None:
    frame = pd.DataFrame({"x": [0.3, 0.5, 0.9] * 100})
    noisy = combine(frame, one("x", Laplace(1.0, lower=0.1, upper=0.9, unit=0.2)), seed=5).table["x"]
    assert {str(v) for v in noisy} <= {"0.1", "0.3", "0.5", "0.7", "0.9"}


def test_noise_then_generalization_publishes_labels_of_noisy_values() -> None:
    ages = interval_hierarchy("age", range(0, 100), (10,))
    pipeline = one("age", Laplace(1.0, lower=0, upper=99), Generalize(ages, 1))
    labels = combine(people(), pipeline, seed=2).table["age"]
    assert set(labels) <= set(ages.labels[1]) and set(labels) > {"20-29", "60-69"}


def test_randomization_publishes_leaves_and_keeps_most_values_at_high_epsilon() -> None:
    frame = people(500)
    released = combine(frame, one("hobby", Randomize(20.0, HOBBY)), seed=4).table["hobby"]
    kept = randomize_matrix(Randomize(20.0, HOBBY)).diagonal().min()  # >= 0.98 for every leaf
    assert set(released) <= set(HOBBY.leaves)
    assert (released == frame["hobby"]).mean() >= kept - 0.05


def test_generalize_then_randomize_stays_among_the_level_cells() -> None:
    steps = (Generalize(HOBBY, 1), Randomize(0.1, coarsen(HOBBY, 1)))
    released = combine(people(), one("hobby", *steps), seed=6).table["hobby"]
    assert set(released) == {"outdoor", "indoor", "culture"}


def test_sampling_keeps_each_released_row_aligned_with_its_hidden_id() -> None:
    frame = people(1000)
    pipeline = Pipeline(
        (AttributePipeline("hobby", (Randomize(1.0, HOBBY),)), AttributePipeline("age")), Sample(0.6)
    )
    released = combine(frame, pipeline, seed=7)
    assert released.table.index.tolist() == list(range(len(released.table)))
    assert np.all(np.diff(released.row_ids) > 0)
    assert released.table["id"].tolist() == released.row_ids.tolist()
    assert released.table["age"].tolist() == frame["age"].to_numpy()[released.row_ids].tolist()
    # Bernoulli(0.6) over 1,000 rows: the count is within 5 standard deviations (≈ 77 rows) of 600
    assert abs(len(released.table) - 600) <= 5 * math.sqrt(1000 * 0.6 * 0.4)


def test_without_sampling_every_row_is_released_in_order() -> None:
    released = combine(people(50), one("hobby", Generalize(HOBBY, 2)), seed=8)
    assert released.row_ids.tolist() == list(range(50))


def test_a_seed_reproduces_the_release_and_is_reported() -> None:
    pipeline = Pipeline((AttributePipeline("age", (Laplace(0.5, lower=20, upper=69),)),), Sample(0.5))
    first, second = combine(people(), pipeline, seed=11), combine(people(), pipeline, seed=11)
    assert first.table.equals(second.table) and first.report.seed == 11
    report = json.loads(json.dumps(first.report.to_dict()))
    assert report["sample_rate"] == 0.5 and report["input_rows"] == 200
    assert report["released_rows"] == len(first.table)
    assert report["attributes"]["age"][0] == {
        "step": "laplace",
        "epsilon": 0.5,
        "scale": 2.0,
        "unit": 1.0,
        "lower": 20,
        "upper": 69,
        "law": "discrete",
    }


def test_without_a_seed_none_is_recorded() -> None:
    released = combine(people(), one("hobby", Randomize(1.0, HOBBY)))
    assert released.report.seed is None and released.report.to_dict()["seed"] is None


def test_recode_applies_only_the_generalizations() -> None:
    pipeline = Pipeline(
        (
            AttributePipeline("hobby", (Generalize(HOBBY, 1), Randomize(0.1, coarsen(HOBBY, 1)))),
            AttributePipeline("age", (Laplace(0.1, lower=20, upper=69),)),
        )
    )
    frame = people(5)
    recoded = recode(frame, pipeline)
    assert recoded["hobby"].tolist() == ["outdoor", "outdoor", "indoor", "culture", "culture"]
    assert recoded["age"].tolist() == frame["age"].tolist()


def test_exponential_mechanism_matrix_follows_the_formula() -> None:
    step = Randomize(1.5, HOBBY)  # Δ_u = 2·height = 6
    matrix = randomize_matrix(step)
    assert np.allclose(matrix.sum(axis=1), 1.0)
    distances = HOBBY.distances
    for v in range(len(HOBBY.leaves)):
        for w in range(len(HOBBY.leaves)):
            expected = math.exp(1.5 * (distances[v, v] - distances[v, w]) / (2 * 6))
            assert matrix[v, w] / matrix[v, v] == pytest.approx(expected, rel=1e-12)


def test_printed_mode_uses_exp_of_half_epsilon_times_score() -> None:
    matrix = randomize_matrix(Randomize(1.0, HOBBY, sensitivity=1.0))
    # football → baseball is 2 edges, football → art 6 edges: ratio exp(1·(−2 + 6)/2) = e²
    assert matrix[0, 1] / matrix[0, 3] == pytest.approx(math.e**2)


def test_a_value_outside_the_hierarchy_is_named() -> None:
    frame = pd.DataFrame({"hobby": ["football", "chess"]})
    with pytest.raises(HierarchyError, match="'chess' of hobby is not in its hierarchy"):
        combine(frame, one("hobby", Generalize(HOBBY, 1)), seed=1)


def test_missing_values_are_refused_with_a_fix() -> None:
    frame = pd.DataFrame({"hobby": ["football", None]})
    with pytest.raises(HierarchyError, match="missing values") as error:
        combine(frame, one("hobby", Randomize(1.0, HOBBY)), seed=1)
    assert error.value.hint is not None and "replace them" in error.value.hint


def test_laplace_refuses_text() -> None:
    frame = pd.DataFrame({"age": ["39", "old"]})
    with pytest.raises(AnonymizationError, match="needs numbers"):
        combine(frame, one("age", Laplace(1.0, lower=0, upper=99)), seed=1)


def test_a_column_missing_from_the_table_is_named() -> None:
    with pytest.raises(AnonymizationError, match="no column 'salary'"):
        combine(people(), one("salary", Laplace(1.0, lower=0, upper=10)), seed=1)
