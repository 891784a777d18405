"""Generalization hierarchies: ARX files, intervals, dates, suppression, and the questions the algorithms ask."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import numpy as np
import pytest

from anonymizers.errors import HierarchyError
from anonymizers.hierarchy import (
    Hierarchy,
    auto_widths,
    date_hierarchy,
    hierarchy_from_spec,
    interval_hierarchy,
    load_arx_hierarchy,
    suppression_hierarchy,
)

SPORTS = (
    "baseball;ballgame;sports;*\nfootball;ballgame;sports;*\nswimming;water;sports;*\nchess;board;games;*\n"
)


@pytest.fixture
def sports(tmp_path: Path) -> Hierarchy:
    path = tmp_path / "sports.csv"
    path.write_text(SPORTS)
    return load_arx_hierarchy(path, "hobby")


def test_arx_file_levels_and_generalization(sports: Hierarchy) -> None:
    assert sports.height == 3
    assert sports.leaves == ("baseball", "football", "swimming", "chess")
    assert sports.generalize("football", 1) == "ballgame"
    assert sports.ancestors("baseball") == ("baseball", "ballgame", "sports", "*")
    assert sports.mapping(2) == {
        "baseball": "sports",
        "football": "sports",
        "swimming": "sports",
        "chess": "games",
    }


def test_tree_distance_counts_edges_through_the_lowest_common_ancestor(sports: Hierarchy) -> None:
    assert sports.distance("baseball", "baseball") == 0
    assert sports.distance("baseball", "football") == 2
    assert sports.distance("baseball", "swimming") == 4
    assert sports.distance("baseball", "chess") == 6
    assert sports.distances[0, 3] == 6 and sports.distances[1, 0] == 2
    assert np.array_equal(sports.distances, sports.distances.T)


def test_coverage_is_the_number_of_leaves_under_each_label(sports: Hierarchy) -> None:
    assert sports.coverage[0].tolist() == [1, 1, 1, 1]
    assert sports.coverage[1].tolist() == [2, 2, 1, 1]
    assert sports.coverage[2].tolist() == [3, 3, 3, 1]
    assert sports.coverage[3].tolist() == [4, 4, 4, 4]
    assert sports.label_coverage[1].tolist() == [2, 1, 1]  # ballgame, water, board


def test_codes_number_labels_per_level(sports: Hierarchy) -> None:
    assert sports.codes[1].tolist() == [0, 0, 1, 2]
    assert sports.label_names[1] == ("ballgame", "water", "board")
    assert sports.leaf_codes(["chess", "baseball"]).tolist() == [3, 0]


def test_unknown_value_names_the_attribute(sports: Hierarchy) -> None:
    with pytest.raises(HierarchyError, match="'golf' of hobby is not in its hierarchy"):
        sports.leaf_codes(["golf"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a;x;*\nb;y\n", "same number"),
        ("a;x;*\na;y;*\n", "appears twice"),
        ("a;x;*\nb;x;top\n", "must be `\\*`"),
        ("a;x;g;*\nb;x;h;*\n", "two parents"),
        ("", "empty"),
    ],
)
def test_malformed_files_are_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(HierarchyError, match=message):
        load_arx_hierarchy(path, "col")


def test_missing_file_is_a_hierarchy_error(tmp_path: Path) -> None:
    with pytest.raises(HierarchyError, match="cannot read"):
        load_arx_hierarchy(tmp_path / "absent.csv", "col")


def test_integer_intervals_use_arx_labels_and_top_coding() -> None:
    ages = interval_hierarchy("age", [17, 23, 39, 85], [5, 10], top=80)
    assert ages.leaves == ("17", "23", "39", "85")
    assert ages.labels[1] == ("15-19", "20-24", "35-39", ">=80")
    assert ages.labels[2] == ("10-19", "20-29", "30-39", ">=80")
    assert ages.labels[3] == ("*", "*", "*", "*")


def test_real_intervals_are_half_open_and_bottom_coded() -> None:
    incomes = interval_hierarchy("income", [0.5, 12.25, 30.0], [10], bottom=1)
    assert incomes.labels[1] == ("<=1", "[10, 20)", "[30, 40)")


def test_widths_must_nest() -> None:
    with pytest.raises(HierarchyError, match="multiple of the one before"):
        interval_hierarchy("age", [1, 2], [5, 7])


def test_dates_generalize_to_month_then_year() -> None:
    days = date_hierarchy("visit", [date(2024, 1, 31), date(2024, 2, 1)])
    assert days.labels == (("2024-01-31", "2024-02-01"), ("2024-01", "2024-02"), ("2024", "2024"), ("*", "*"))


def test_suppression_hierarchy_has_two_levels() -> None:
    assert suppression_hierarchy("zip", ["b", "a", "b"]).labels == (("a", "b"), ("*", "*"))


def test_auto_widths_start_round_and_double_until_one_interval_remains() -> None:
    assert auto_widths(list(range(17, 91))) == (5, 10, 20, 40, 80)
    assert auto_widths([3, 3]) == (1.0,)


@pytest.mark.parametrize(
    ("spec", "values", "height", "first_level"),
    [
        (None, [17, 90], 6, ("15-19", "90-94")),
        (None, ["x", "y"], 1, ("*", "*")),
        (None, [date(2020, 5, 1)], 3, ("2020-05",)),
        ("suppress", [1, 2], 1, ("*", "*")),
        ("interval:10,20;top=80", [17, 90], 3, ("10-19", ">=80")),
        ("date", ["2020-05-01"], 3, ("2020-05",)),
    ],
)
def test_specs_build_the_named_hierarchy(
    spec: str | None, values: list[object], height: int, first_level: tuple[str, ...]
) -> None:
    built = hierarchy_from_spec("col", spec, values)
    assert built.height == height
    assert built.labels[1] == first_level


def test_bad_interval_spec_says_how_to_write_it() -> None:
    with pytest.raises(HierarchyError, match="cannot read the interval hierarchy") as caught:
        hierarchy_from_spec("age", "interval:five", [1])
    assert "interval:5,10,20" in (caught.value.hint or "")
