"""Algorithm 2: answers known by construction, the ch. 4 worked example, and a brute-force reference."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from anonymizers.errors import AnonymizationError
from anonymizers.hierarchy import Hierarchy, interval_hierarchy, value_text
from anonymizers.risk import counting
from anonymizers.risk.attack import candidate_sizes, simulate_attack
from anonymizers.risk.pipeline import AttributePipeline, Generalize, Laplace, Pipeline, Randomize, Sample
from anonymizers.risk.simulators import PerturbationSimulator, laplace_matrix

COLOUR = Hierarchy("colour", (("red", "pink", "blue", "navy"), ("warm", "warm", "cool", "cool"), ("*",) * 4))


def _k_anonymous(k: int) -> tuple[pd.DataFrame, pd.DataFrame, Pipeline]:
    """Classes (age band × colour group) of k, k+1, k+2 and 2k records, values varied inside each class."""
    ages = np.repeat([23, 37, 24, 61, 52, 66], [k, k + 1, 1, k + 1, k, k])
    colours = np.repeat(["red", "blue", "navy", "pink", "navy", "blue"], [k, k + 1, 1, k + 1, k, k])
    original = pd.DataFrame({"age": ages.astype(str), "colour": colours})
    age_h = interval_hierarchy("age", range(0, 100), [50])
    pipeline = Pipeline(
        (
            AttributePipeline("age", (Generalize(age_h, 1),)),
            AttributePipeline("colour", (Generalize(COLOUR, 1),)),
        )
    )
    released = pd.DataFrame(
        {
            "age": [age_h.generalize(a, 1) for a in original["age"]],
            "colour": [COLOUR.generalize(c, 1) for c in original["colour"]],
            "row_id": np.arange(len(original)),
        }
    ).sample(frac=1.0, random_state=3)
    return original, released, pipeline


@pytest.mark.parametrize("k", [2, 3, 5])
def test_k_anonymized_table_scores_one_over_k(k: int) -> None:
    original, released, pipeline = _k_anonymous(k)
    result = simulate_attack(original, released, pipeline)
    assert result.n_q == k and result.risk == pytest.approx(1 / k)
    assert result.records_at_risk_zero == 0


def test_a_star_row_is_no_candidate_for_records_whose_class_is_published() -> None:
    """Record suppression is not generalization to the root: an attacker who sees the target's class
    published rules the `*` rows out (test_suppressed_rows.py has the ARX-style release)."""
    original, released, pipeline = _k_anonymous(3)
    released.loc[released["row_id"] == 0, ["age", "colour"]] = "*"
    result = simulate_attack(original, released, pipeline)
    # the suppressed row's class keeps 2 published rows: their candidates; record 0's attack fails
    assert sorted(set(result.sizes[~np.isnan(result.sizes)].tolist())) == [2, 4, 5, 6]
    assert math.isnan(result.sizes[0]) and result.n_q == 2


def test_l_diverse_table_scores_one_over_l_for_the_revealing_adversary() -> None:
    original, released, pipeline = _k_anonymous(4)
    diagnosis = np.array(["flu", "cold", "asthma"])[np.arange(len(original)) % 3]
    diagnosis[4:10] = np.tile(["flu", "cold"], 3)  # class (0-49, cool) holds only two distinct values
    original["diagnosis"] = diagnosis
    released = released.assign(diagnosis=diagnosis[released["row_id"]])
    result = simulate_attack(original, released, pipeline, sensitive="diagnosis")
    assert result.n_s == 2 and result.revealing_risk == 0.5
    assert result.probabilistic_revealing_risk == pytest.approx(0.5)


def test_revealing_example_of_section_one() -> None:
    """C_i[SI] = {X, X, X, Y, Z}, true X: 1/3 by Def 4.5, 3/5 by the probabilistic variant."""
    original = pd.DataFrame({"colour": ["red", "pink", "red", "pink", "red"], "si": list("XXXYZ")})
    released = pd.DataFrame({"colour": ["warm"] * 5, "si": list("XXXYZ"), "row_id": range(5)})
    pipeline = Pipeline((AttributePipeline("colour", (Generalize(COLOUR, 1),)),))
    result = simulate_attack(original, released, pipeline, sensitive="si")
    assert result.n_s == 3 and result.revealing_risk == pytest.approx(1 / 3)
    assert result.probabilistic_revealing_risk == pytest.approx(3 / 5)


def test_worked_example_of_chapter_four() -> None:
    """[D] Tables 4.1–4.3 for r_1: C^H = {r2, r4}, C^L = {r1, r7}, r_1^1 ∈ C^L, α = 0.8, k = 2 → n_q = 5."""
    sizes = candidate_sizes(
        np.array([2]), np.array([4]), np.array([False]), np.array([True]), sampling_rate=0.8, outlier_k=2
    )
    assert sizes.tolist() == [5.0]


def test_outlier_keeps_its_count_when_few_candidates_remain() -> None:
    """Erratum of §3.3: only N_i > T' = k·α divides by α; N_1 = 1 <= 1.6 is an outlier and stays 1."""
    sizes = candidate_sizes(
        np.array([1, 2]), np.array([1, 2]), np.array([True, True]), np.array([True, True]), sampling_rate=0.8
    )
    assert sizes.tolist() == [1.0, 2.5]


def _sampled_outlier() -> tuple[pd.DataFrame, pd.DataFrame, Pipeline]:
    """Forty people aged 30–39 and one aged 85; ages published with Laplace noise (ε = 1, unit 1) and
    sampled at α = 0.8. The release is the most likely draw (no noise); the 85-year-old is sampled."""
    original = pd.DataFrame({"age": np.append(np.repeat(np.arange(30, 40), 4), 85)})
    pipeline = Pipeline((AttributePipeline("age", (Laplace(1.0, lower=17, upper=90),)),), Sample(0.8))
    kept = np.append(np.arange(40)[np.arange(40) % 5 != 0], 40)
    return original, original.iloc[kept].assign(row_id=kept), pipeline


def test_a_sampled_outlier_stays_at_risk_by_default() -> None:
    """Issue 12: with the low-confidence region = the whole support, N_i was the whole release for every
    noised record, so nobody was an outlier and the 85-year-old scored 1/α = 1.25 instead of 1."""
    original, released, pipeline = _sampled_outlier()
    result = simulate_attack(original, released, pipeline)
    assert result.sizes[40] == 1.0 and result.n_q == 1.0 and result.risk == 1.0
    assert np.nanmin(result.sizes[:40]) > 1 / 0.8  # the crowd is not made of outliers: divided by α
    support = simulate_attack(original, released, pipeline, low_threshold=1.0)
    assert support.sizes[40] == pytest.approx(1 / 0.8)  # what the whole support understates
    assert result.low_threshold == pytest.approx(0.99)  # 1 − (1 − T)², reported


def test_record_outside_its_candidates_has_risk_zero() -> None:
    sizes = candidate_sizes(
        np.array([3]), np.array([7]), np.array([False]), np.array([False]), sampling_rate=None
    )
    assert math.isnan(sizes[0])


def test_rejects_duplicate_row_ids() -> None:
    original, released, pipeline = _k_anonymous(2)
    released["row_id"] = 0
    with pytest.raises(AnonymizationError, match="distinct row positions"):
        simulate_attack(original, released, pipeline)


# --- brute-force reference -------------------------------------------------------------------------------


def _run_pipeline(original: pd.DataFrame, pipeline: Pipeline, rng: np.random.Generator) -> pd.DataFrame:
    """Apply the pipeline by drawing each value from the simulator's own published distribution."""
    released = {}
    for attribute in pipeline.attributes:
        values = original[attribute.attribute].to_numpy()
        if attribute.perturbed:
            simulator = PerturbationSimulator(attribute)
            rows = simulator.distribution[simulator.input_codes(values)]
            picks = (rows.cumsum(axis=1) > rng.random(len(values))[:, None]).argmax(axis=1)
            released[attribute.attribute] = np.array(simulator.output_labels, dtype=object)[picks]
        else:
            step = attribute.steps[0]
            released[attribute.attribute] = [step.hierarchy.generalize(str(v), step.level) for v in values]
    table = pd.DataFrame(released).assign(row_id=np.arange(len(original)), si=original["si"].to_numpy())
    if pipeline.sample is not None:
        table = table[rng.random(len(table)) < pipeline.sample.rate]
    return table.reset_index(drop=True)


def _brute_force(
    original: pd.DataFrame, released: pd.DataFrame, pipeline: Pipeline, threshold: float, low: float, k: float
) -> tuple[list[float], float, float]:
    """Algorithm 2 record by record, pair by pair, as printed (corrected) in the spec."""
    p = sum(a.perturbed for a in pipeline.attributes)
    sims = {a.attribute: PerturbationSimulator(a) for a in pipeline.attributes if a.perturbed}
    regions = {name: (s.region(threshold ** (1 / p)), s.region(low ** (1 / p))) for name, s in sims.items()}

    checks = []  # per attribute: (high, union) acceptance as n_0 × n_1 matrices, filled pair by pair
    for attribute in pipeline.attributes:
        name = attribute.attribute
        high = np.zeros((len(original), len(released)), dtype=bool)
        union = high.copy()
        for i, v in enumerate(original[name].tolist()):
            for r, out in enumerate(released[name].tolist()):
                if name in sims:
                    a, b = sims[name].input_codes([v])[0], sims[name].output_codes([out])[0]
                    high[i, r] = b >= 0 and regions[name][0][a, b]
                    union[i, r] = b >= 0 and regions[name][1][a, b]
                else:
                    high[i, r] = union[i, r] = str(out) in attribute.steps[0].hierarchy.ancestors(str(v))
        checks.append((high, union))

    def where(i: int, r: int) -> tuple[bool, bool]:
        return all(h[i, r] for h, _ in checks), all(u[i, r] for _, u in checks)

    sizes, distinct, share = [], [], []
    alpha = pipeline.sample.rate if pipeline.sample else None
    for i in range(len(original)):
        mine = np.flatnonzero(released["row_id"].to_numpy() == i)
        flags = [where(i, r) for r in range(len(released))]
        ch = [r for r, (h, _) in enumerate(flags) if h]
        cu = [r for r, (_, u) in enumerate(flags) if u]
        if len(mine) == 0 or mine[0] not in cu:
            continue
        chosen = ch if mine[0] in ch else cu
        size = float(len(chosen))
        if alpha is not None and len(cu) > k * alpha:
            size /= alpha
        sizes.append(size)
        si = released["si"].to_numpy()[chosen]
        distinct.append(len(set(si)))
        share.append(float(np.mean(si == original["si"].iloc[i])))
    return sizes, float(min(distinct)), float(max(share))


def _random_case(seed: int) -> tuple[pd.DataFrame, Pipeline]:
    rng = np.random.default_rng(seed)
    n = 60
    grid = interval_hierarchy("age", range(20, 41), [4, 8])
    original = pd.DataFrame(
        {
            "age": rng.integers(20, 41, n),
            "score": rng.integers(0, 8, n),
            "colour": np.array(COLOUR.leaves)[rng.integers(0, 4, n)],
            "hue": np.array(COLOUR.leaves)[rng.integers(0, 4, n)],
            "si": np.array(list("abc"))[rng.integers(0, 3, n)],
        }
    )
    attributes = [
        AttributePipeline("age", (Laplace(0.6, lower=20, upper=40), Generalize(grid, 1))),
        AttributePipeline("score", (Laplace(0.8, lower=0, upper=7, law="rounded"),)),
        AttributePipeline("colour", (Generalize(COLOUR, 1),)),
        AttributePipeline("hue", (Randomize(1.5, COLOUR),)),
    ]
    chosen = tuple(attributes[j] for j in sorted(rng.choice(4, size=int(rng.integers(2, 5)), replace=False)))
    if not any(a.perturbed for a in chosen):
        chosen = (*chosen, attributes[1])
    return original, Pipeline(chosen, Sample(float(rng.choice([0.6, 0.9]))) if seed % 3 else None)


@pytest.mark.parametrize("seed", range(8))
def test_vectorized_attack_agrees_with_brute_force(seed: int) -> None:
    original, pipeline = _random_case(seed)
    released = _run_pipeline(original, pipeline, np.random.default_rng(100 + seed))
    low = 0.99 if seed % 2 else 1.0
    result = simulate_attack(original, released, pipeline, sensitive="si", low_threshold=low)
    sizes, n_s, share = _brute_force(original, released, pipeline, 0.9, low, 2.0)
    assert sorted(result.sizes[~np.isnan(result.sizes)].tolist()) == pytest.approx(sorted(sizes))
    assert result.n_s == n_s and result.probabilistic_revealing_risk == pytest.approx(share)
    assert result.records_at_risk_zero == len(original) - len(sizes)


def test_numeric_labels_of_the_grid_match_hierarchy_leaves() -> None:
    step = Laplace(1.0, lower=17, upper=20)
    assert [value_text(17 + i) for i in range(step.grid_size)] == ["17", "18", "19", "20"]
    assert laplace_matrix(step).shape == (4, 4)


@pytest.mark.parametrize("seed", range(3))
def test_counting_in_chunks_agrees_and_reports_progress_in_records(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Profiles are counted in chunks (memory, and a progress bar between them): a chunk per few joined
    rows gives the same counts as one chunk, and progress rises to every record."""
    original, pipeline = _random_case(seed)
    released = _run_pipeline(original, pipeline, np.random.default_rng(200 + seed))
    whole = simulate_attack(original, released, pipeline, sensitive="si")
    monkeypatch.setattr(counting, "CHUNK_ROWS", 3)
    calls: list[tuple[int, int]] = []
    chunked = simulate_attack(
        original, released, pipeline, sensitive="si", progress=lambda done, total: calls.append((done, total))
    )
    np.testing.assert_array_equal(chunked.sizes, whole.sizes)
    assert (chunked.n_s, chunked.probabilistic_revealing_risk) == (
        whole.n_s,
        whole.probabilistic_revealing_risk,
    )
    done = [d for d, _ in calls]
    assert len(calls) > 8 and done == sorted(done) and calls[-1] == (len(original), len(original))
