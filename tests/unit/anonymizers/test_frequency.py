"""Frequency sets: the engine's GROUP BY and the numpy rollups agree with pandas on the same rows."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from anonymizers.errors import HierarchyError
from anonymizers.frequency import EngineFrequency, FrequencySet, combined_keys, frequency_set, ordered_values
from anonymizers.hierarchy import Hierarchy, interval_hierarchy, suppression_hierarchy
from anonymizers.source import TableSource

ROWS = 600


def people(seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(17, 60, ROWS),
            "sex": rng.choice(["F", "M"], ROWS),
            "zip": rng.choice([f"1{z:04d}" for z in range(12)], ROWS),
            "disease": rng.choice(["flu", "cancer", "cold", "hiv"], ROWS, p=[0.5, 0.2, 0.2, 0.1]),
        }
    )


def zip_hierarchy(values: list[str]) -> Hierarchy:
    leaves = tuple(sorted(set(values)))
    return Hierarchy(
        "zip",
        (
            leaves,
            tuple(v[:4] + "*" for v in leaves),
            tuple(v[:3] + "**" for v in leaves),
            ("*",) * len(leaves),
        ),
    )


def hierarchies(frame: pd.DataFrame) -> list[Hierarchy]:
    return [
        interval_hierarchy("age", frame["age"].tolist(), [5, 10, 20]),
        suppression_hierarchy("sex", frame["sex"].tolist()),
        zip_hierarchy(frame["zip"].tolist()),
    ]


def source_of(tmp_path: Path, frame: pd.DataFrame) -> TableSource:
    path = tmp_path / "people.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.register("frame", frame)
        connection.execute("CREATE TABLE people AS SELECT * FROM frame")
    return TableSource.duckdb_file(path, "people")


def pandas_classes(frame: pd.DataFrame, tree: list[Hierarchy], levels: tuple[int, ...]) -> pd.Series:
    """The reference: generalize every row in pandas, then group and count."""
    generalized = pd.DataFrame(
        {
            h.attribute: frame[h.attribute].astype(str).map(h.mapping(level))
            for h, level in zip(tree, levels, strict=True)
        }
    )
    return generalized.groupby(list(generalized.columns)).size()


def engine_classes(frequency: FrequencySet | EngineFrequency, levels: tuple[int, ...]) -> pd.Series:
    table = frequency.rollup(levels)
    index = pd.MultiIndex.from_arrays(
        [
            [h.label_names[level][code] for code in table.labels[:, d]]
            for d, (h, level) in enumerate(zip(frequency.hierarchies, levels, strict=True))
        ],
        names=[h.attribute for h in frequency.hierarchies],
    )
    return pd.Series(table.counts, index=index).sort_index()


NODES = [(0, 0, 0), (1, 0, 2), (2, 1, 1), (3, 0, 0), (4, 1, 3), (0, 1, 3)]


@pytest.mark.parametrize("levels", NODES)
def test_duckdb_frequency_set_rolls_up_like_pandas(tmp_path: Path, levels: tuple[int, ...]) -> None:
    frame = people()
    tree = hierarchies(frame)
    with source_of(tmp_path, frame) as source:
        frequency = frequency_set(source, ["age", "sex", "zip"], tree)
    assert isinstance(frequency, FrequencySet)
    assert frequency.total == ROWS
    expected = pandas_classes(frame, tree, levels)
    assert engine_classes(frequency, levels).to_dict() == expected.to_dict()


def test_too_large_base_computes_nodes_in_the_engine(tmp_path: Path) -> None:
    frame = people()
    tree = hierarchies(frame)
    with source_of(tmp_path, frame) as source:
        frequency = frequency_set(source, ["age", "sex", "zip"], tree, max_base_classes=10)
        assert isinstance(frequency, EngineFrequency)
        assert frequency.total == ROWS
        for levels in NODES:
            assert (
                engine_classes(frequency, levels).to_dict() == pandas_classes(frame, tree, levels).to_dict()
            )
        assert frequency.marginal(1).sum() == ROWS


def test_sensitive_counts_per_class_match_pandas(tmp_path: Path) -> None:
    frame = people()
    tree = hierarchies(frame)
    with source_of(tmp_path, frame) as source:
        frequency = frequency_set(source, ["age", "sex", "zip"], tree, sensitive="disease")
    assert frequency.sensitive_values == ("cancer", "cold", "flu", "hiv")
    table = frequency.rollup((4, 1, 2))  # age *, sex *: classes by 3-digit zip
    zips = [tree[2].label_names[2][code] for code in table.labels[:, 2]]
    reference = pd.crosstab(frame["zip"].str[:3] + "**", frame["disease"])
    for zip_label, row in zip(zips, table.sensitive, strict=True):
        assert row.tolist() == reference.loc[zip_label, list(frequency.sensitive_values)].tolist()
    assert frequency.sensitive_totals().tolist() == [
        int((frame["disease"] == v).sum()) for v in frequency.sensitive_values
    ]


def test_value_missing_from_hierarchy_is_named(tmp_path: Path) -> None:
    frame = people()
    tree = hierarchies(frame)
    tree[1] = suppression_hierarchy("sex", ["F"])  # "M" is not covered
    with source_of(tmp_path, frame) as source, pytest.raises(HierarchyError, match="value 'M' of sex"):
        frequency_set(source, ["age", "sex", "zip"], tree)


def test_null_values_are_refused_with_a_hint(tmp_path: Path) -> None:
    frame = people()
    frame["sex"] = frame["sex"].astype(object)
    frame.loc[3, "sex"] = None
    tree = hierarchies(people())
    with source_of(tmp_path, frame) as source, pytest.raises(HierarchyError, match="NULL") as caught:
        frequency_set(source, ["age", "sex", "zip"], tree)
    assert caught.value.hint is not None


def test_rollup_refuses_a_more_specific_node() -> None:
    tree = [suppression_hierarchy("sex", ["F", "M"])]
    frequency = FrequencySet(tuple(tree), (1,), np.zeros((1, 1), np.int32), np.array([2]))
    with pytest.raises(ValueError, match="more specific"):
        frequency.rollup((0,))


def test_combined_keys_renumber_instead_of_overflowing() -> None:
    rng = np.random.default_rng(1)
    columns = [rng.integers(0, 1 << 20, 50).astype(np.int32) for _ in range(4)]  # 2**80 combinations
    keys, span = combined_keys(columns, [1 << 20] * 4)
    assert span == 1 << 62  # not decodable: callers must hash
    tuples = list(zip(*(c.tolist() for c in columns), strict=True))
    for i in range(50):
        for j in range(50):
            assert (keys[i] == keys[j]) == (tuples[i] == tuples[j])


def test_numeric_sensitive_values_are_ordered_numerically() -> None:
    assert ordered_values(["10", "9", "100"]) == ("9", "10", "100")
    assert ordered_values(["b", "a"]) == ("a", "b")
