"""Optimal global recoding: the Incognito slide example, suppression, l-diversity and t-closeness
constraints, and exactness against a brute-force evaluation of every lattice node."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from anonymizers.diversity import DiversityModel
from anonymizers.errors import AnonymizationError, InfeasibleError
from anonymizers.frequency import FrequencySet, frequency_set
from anonymizers.global_recoding import GlobalRecodingResult, PrivacyModel, anonymize, search
from anonymizers.hierarchy import Hierarchy, interval_hierarchy, suppression_hierarchy
from anonymizers.metrics import metric_value
from anonymizers.source import TableSource


def source_of(tmp_path: Path, frame: pd.DataFrame) -> TableSource:
    path = tmp_path / "data.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.register("frame", frame)
        connection.execute("CREATE TABLE t AS SELECT * FROM frame")
    return TableSource.duckdb_file(path, "t")


# TV-K-2 (spec k-anonymity-algorithms.md §4): the Incognito slide example.
INCOGNITO = pd.DataFrame(
    {
        "sex": ["M", "M", "M", "M", "F", "F"],
        "age": [25, 29, 38, 31, 25, 28],
        "zip": ["354-0025", "354-0025", "354-0038", "354-0019", "354-0045", "354-0031"],
    }
)


def incognito_hierarchies() -> list[Hierarchy]:
    zips = tuple(sorted(set(INCOGNITO["zip"])))
    return [
        suppression_hierarchy("sex", INCOGNITO["sex"]),
        interval_hierarchy("age", INCOGNITO["age"].tolist(), [10]),
        Hierarchy("zip", (zips, tuple(z[:3] for z in zips), ("*",) * len(zips))),
    ]


def test_incognito_slide_example_chooses_s0_a1_z1(tmp_path: Path) -> None:
    with source_of(tmp_path, INCOGNITO) as source:
        result = anonymize(source, ["sex", "age", "zip"], incognito_hierarchies(), PrivacyModel(k=2))
    assert result.level_map == {"sex": 0, "age": 1, "zip": 1}
    assert result.suppressed_records == 0
    assert result.class_sizes == {2: 3}  # (M,20-29,354), (M,30-39,354), (F,20-29,354)
    assert result.achieved["k"] == 2


def one_column(values: list[int], *, sensitive: list[str] | None = None) -> FrequencySet:
    """A frequency set of one numeric QI (leaf → decade → *) and optionally a sensitive column."""
    hierarchy = interval_hierarchy("age", values, [10])
    frame = pd.DataFrame({"age": [str(v) for v in values], "s": sensitive or ["x"] * len(values)})
    grouped = frame.groupby(["age", "s"]).size().reset_index()
    stated = tuple(sorted(set(frame["s"])))
    return FrequencySet(
        (hierarchy,),
        (0,),
        hierarchy.leaf_codes(grouped["age"]).reshape(-1, 1),
        grouped[0].to_numpy(np.int64),
        np.array([stated.index(s) for s in grouped["s"]], dtype=np.int32) if sensitive else None,
        stated if sensitive else (),
    )


AGES = [21, 22, 23, 24, 30, 31, 32, 33, 90]  # the 90-year-old is the outlier of §2


def test_without_suppression_the_outlier_forces_full_generalization() -> None:
    result = search(one_column(AGES), ["age"], PrivacyModel(k=2))
    assert result.levels == (2,)
    assert result.metrics["loss"] == pytest.approx(1.0)


def test_suppressing_the_outlier_keeps_decades() -> None:
    result = search(one_column(AGES), ["age"], PrivacyModel(k=2), suppression_limit=0.12)
    assert result.levels == (1,)
    assert result.suppressed_records == 1
    assert result.class_sizes == {4: 2}
    # Loss by hand: S = 8·(4/9) + 1 (suppressed) = 41/9; (S − 9/9)/(9 − 9/9) = 4/9
    assert result.metrics["loss"] == pytest.approx(4 / 9)


def test_suppression_limit_is_a_floor_of_records() -> None:
    """0.11 · 9 = 0.99 records: not even the one outlier may go."""
    result = search(one_column(AGES), ["age"], PrivacyModel(k=2), suppression_limit=0.11)
    assert result.levels == (2,)


ZIPS_DISEASES = {"zip": ["1301", "1301", "1302", "1302"], "disease": ["flu", "flu", "cancer", "flu"]}


def zip_frequency() -> FrequencySet:
    leaves = ("1301", "1302")
    hierarchy = Hierarchy("zip", (leaves, ("130*", "130*"), ("*", "*")))
    return FrequencySet(
        (hierarchy,),
        (0,),
        np.array([[0], [1], [1]], dtype=np.int32),
        np.array([2, 1, 1]),
        np.array([1, 0, 1], dtype=np.int32),
        ("cancer", "flu"),
    )


def test_distinct_l_diversity_generalizes_the_homogeneous_class() -> None:
    model = PrivacyModel(k=1, diversity=DiversityModel(l=2))
    result = search(zip_frequency(), ["zip"], model)
    assert result.levels == (1,)  # 1301 has only flu; 130* has flu and cancer
    assert result.achieved["distinct_l"] == 2


def test_l_diversity_may_suppress_the_homogeneous_class_instead() -> None:
    model = PrivacyModel(k=1, diversity=DiversityModel(l=2))
    result = search(zip_frequency(), ["zip"], model, suppression_limit=0.5)
    assert result.levels == (0,)
    assert result.suppressed_records == 2  # loss 0.5 < 1 of generalizing to 130*
    assert result.metrics["loss"] == pytest.approx(0.5)


@pytest.mark.parametrize(("t", "level"), [(0.2, 1), (0.3, 0)])
def test_t_closeness_threshold_decides_the_level(t: float, level: int) -> None:
    """Overall (cancer, flu) = (1/4, 3/4); both zip classes are 1/4 away (EMD, equal distance)."""
    result = search(zip_frequency(), ["zip"], PrivacyModel(k=1, diversity=DiversityModel(t=t)))
    assert result.levels == (level,)
    assert result.achieved["t"] <= t


def test_infeasible_model_is_refused_with_a_hint() -> None:
    with pytest.raises(InfeasibleError, match="no generalization") as caught:
        search(zip_frequency(), ["zip"], PrivacyModel(k=1, diversity=DiversityModel(l=3)))
    assert caught.value.hint is not None and "suppression limit" in caught.value.hint


def test_unknown_metric_is_refused() -> None:
    with pytest.raises(AnonymizationError, match="unknown metric 'entropy'"):
        search(one_column(AGES), ["age"], PrivacyModel(k=2), metric="entropy")


def test_diversity_without_sensitive_column_is_refused(tmp_path: Path) -> None:
    with source_of(tmp_path, INCOGNITO) as source, pytest.raises(AnonymizationError, match="sensitive"):
        anonymize(
            source, ["sex"], incognito_hierarchies()[:1], PrivacyModel(k=1, diversity=DiversityModel(l=2))
        )


def test_progress_reaches_the_lattice_size() -> None:
    calls: list[tuple[int, int]] = []
    search(
        one_column(AGES), ["age"], PrivacyModel(k=2), progress=lambda done, total: calls.append((done, total))
    )
    assert calls[-1] == (3, 3)
    assert all(done <= total for done, total in calls)


def random_table(seed: int) -> tuple[pd.DataFrame, list[Hierarchy]]:
    rng = np.random.default_rng(seed)
    rows = 400
    frame = pd.DataFrame(
        {
            "age": rng.integers(18, 70, rows),
            "sex": rng.choice(["F", "M"], rows),
            "zip": rng.choice([f"{z:03d}" for z in range(9)], rows),
            "disease": rng.choice(["flu", "cancer", "cold"], rows, p=[0.6, 0.3, 0.1]),
        }
    )
    zips = tuple(sorted(set(frame["zip"])))
    tree = [
        interval_hierarchy("age", frame["age"].tolist(), [5, 10, 20]),
        suppression_hierarchy("sex", frame["sex"]),
        Hierarchy("zip", (zips, tuple(z[:2] for z in zips), tuple(z[:1] for z in zips), ("*",) * len(zips))),
    ]
    return frame, tree


def brute_force(frequency: FrequencySet, model: PrivacyModel, limit: float, metric: str) -> float:
    """The least metric value over every node that meets the model within the limit."""
    total = frequency.total
    overall = frequency.sensitive_totals()
    overall = overall / overall.sum() if overall is not None else None
    best = np.inf
    for levels in itertools.product(*(range(h.height + 1) for h in frequency.hierarchies)):
        table = frequency.rollup(levels)
        full, _ = model.outliers(table, overall)
        if table.counts[full].sum() <= np.floor(limit * total + 1e-9):
            best = min(best, metric_value(metric, table, full, frequency.hierarchies, total))
    return best


CASES = [
    (PrivacyModel(k=5), 0.0, "loss"),
    (PrivacyModel(k=5), 0.05, "loss"),
    (PrivacyModel(k=10), 0.1, "gcp"),
    (PrivacyModel(k=3), 0.05, "discernibility"),
    (PrivacyModel(k=4), 0.02, "precision"),
    (PrivacyModel(k=2, diversity=DiversityModel(l=2)), 0.05, "loss"),
    (PrivacyModel(k=2, diversity=DiversityModel(l=1.8, variant="entropy")), 0.05, "loss"),
    (PrivacyModel(k=2, diversity=DiversityModel(l=2, variant="recursive", c=3)), 0.05, "loss"),
    (PrivacyModel(k=1, diversity=DiversityModel(t=0.15)), 0.05, "loss"),
    (PrivacyModel(k=1, diversity=DiversityModel(t=0.1, distance="ordered")), 0.0, "loss"),
]


@pytest.mark.parametrize(("model", "limit", "metric"), CASES)
def test_search_finds_the_brute_force_optimum(
    tmp_path: Path, model: PrivacyModel, limit: float, metric: str
) -> None:
    frame, tree = random_table(seed=3)
    with source_of(tmp_path, frame) as source:
        frequency = frequency_set(source, ["age", "sex", "zip"], tree, sensitive="disease")
    assert isinstance(frequency, FrequencySet)
    result = search(frequency, ["age", "sex", "zip"], model, suppression_limit=limit, metric=metric)
    assert result.metrics[metric] == pytest.approx(brute_force(frequency, model, limit, metric), rel=1e-12)
    assert result.suppressed_records <= limit * frequency.total
    assert min(result.class_sizes) >= model.k


def test_report_is_json_ready(tmp_path: Path) -> None:
    with source_of(tmp_path, INCOGNITO) as source:
        result = anonymize(source, ["sex", "age", "zip"], incognito_hierarchies(), PrivacyModel(k=2))
    assert isinstance(result, GlobalRecodingResult)
    report = json.loads(json.dumps(result.to_report()))
    assert report["levels"] == {"sex": 0, "age": 1, "zip": 1}
    assert report["class_sizes"] == {"2": 3}
    assert report["search"]["nodes_total"] == 2 * 3 * 3
