"""NCP/GCP on hand-computed cases, for local recodings (partition) and global recodings (labels)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anonymizers.errors import AnonymizationError, HierarchyError
from anonymizers.gcp import (
    categorical_ncp,
    gcp,
    labelled_gcp,
    lca_coverage,
    numeric_ncp,
    partition_gcp,
    tree_positions,
)
from anonymizers.hierarchy import Hierarchy

# Leaves listed with siblings apart (as in ARX's education file) to exercise the tree order.
CITY = Hierarchy(
    "city",
    (
        ("Tokyo", "Kyoto", "Saitama", "Osaka", "Okinawa"),
        ("Kanto", "Kansai", "Kanto", "Kansai", "Kyushu"),
        ("*",) * 5,
    ),
)


def test_numeric_ncp_is_width_over_table_range() -> None:
    assert numeric_ncp(np.array([23.0, 45.0]), np.array([25.0, 52.0]), domain_low=23, domain_high=52) == (
        pytest.approx([2 / 29, 7 / 29])
    )


def test_numeric_ncp_of_a_constant_attribute_is_zero() -> None:
    assert numeric_ncp(np.array([5.0]), np.array([5.0]), domain_low=5, domain_high=5).tolist() == [0.0]


def test_categorical_ncp_is_zero_for_a_leaf_and_one_for_the_root() -> None:
    assert categorical_ncp(np.array([1, 3, 5]), domain_size=5).tolist() == [0.0, 0.5, 1.0]


def test_gcp_weights_classes_by_size_and_counts_suppressed_rows_as_one() -> None:
    ncp = np.array([[0.5, 0.0], [0.0, 1.0]])
    # (2·0.5 + 3·1 + 1 suppressed row · 2 attributes) / (6 rows · 2 attributes)
    assert gcp(np.array([2, 3]), ncp, suppressed=1) == pytest.approx(6 / 12)


def test_tree_positions_make_every_subtree_a_run() -> None:
    positions = tree_positions(CITY)
    kanto = sorted(positions[[CITY.leaf_index("Tokyo"), CITY.leaf_index("Saitama")]])
    kansai = sorted(positions[[CITY.leaf_index("Kyoto"), CITY.leaf_index("Osaka")]])
    assert kanto[1] - kanto[0] == 1
    assert kansai[1] - kansai[0] == 1


def test_lca_coverage_of_leaf_pairs() -> None:
    first = np.array([CITY.leaf_index(v) for v in ("Tokyo", "Tokyo", "Kyoto")])
    last = np.array([CITY.leaf_index(v) for v in ("Tokyo", "Saitama", "Okinawa")])
    level, covered = lca_coverage(CITY, first, last)
    assert level.tolist() == [0, 1, 2]
    assert covered.tolist() == [1, 2, 5]


def test_partition_gcp_of_the_mondrian_worked_example() -> None:
    frame = pd.DataFrame({"age": [23, 25, 31, 33, 45, 47, 52], "income": [300, 320, 400, 380, 500, 520, 480]})
    score, per_attribute = partition_gcp(frame, np.array([0, 0, 1, 1, 2, 2, 2]), ["age", "income"], {})
    # age: (2·2 + 2·2 + 3·7)/29/7 = 1/7; income: (2·20 + 2·20 + 3·40)/220/7 = 200/1540
    assert per_attribute == {"age": pytest.approx(1 / 7), "income": pytest.approx(200 / 1540)}
    assert score == pytest.approx((1 / 7 + 200 / 1540) / 2)


def test_partition_gcp_measures_categorical_classes_by_their_lca_or_their_values() -> None:
    frame = pd.DataFrame({"city": ["Tokyo", "Saitama", "Tokyo", "Kyoto", "Okinawa"]})
    classes = np.array([0, 0, 0, 1, 1])
    lca, _ = partition_gcp(frame, classes, ["city"], {"city": CITY})
    as_set, _ = partition_gcp(frame, classes, ["city"], {"city": CITY}, categorical="set")
    # class 0 under Kanto (2 leaves) → 1/4; class 1 under * (5 leaves) → 1; as sets: 2 and 2 values → 1/4
    assert lca == pytest.approx((3 * 0.25 + 2 * 1.0) / 5)
    assert as_set == pytest.approx(0.25)


def test_partition_gcp_counts_suppressed_rows_as_fully_generalized() -> None:
    frame = pd.DataFrame({"age": [20, 20, 40, 90]})
    score, _ = partition_gcp(frame, np.array([0, 0, 0, 0]), ["age"], {}, suppressed=np.array([0, 0, 1, 1]))
    # the kept class {20, 20} has NCP 0; two suppressed rows count 1 each; range stays 20..90
    assert score == pytest.approx(2 / 4)


def test_labelled_gcp_of_a_global_recoding() -> None:
    released = pd.DataFrame(
        {"city": ["Kanto", "Kanto", "*", "Okinawa"], "age": ["20-29", "20-29", "*", "30"]}
    )
    age = Hierarchy("age", (("20", "25", "29", "30"), ("20-29", "20-29", "20-29", "30"), ("*",) * 4))
    score, per_attribute = labelled_gcp(
        released, ["city", "age"], {"city": CITY, "age": age}, numeric_domains={"age": (20, 30)}, suppressed=1
    )
    # city: Kanto 1/4 ×2, * 1, Okinawa 0, one removed row 1 → 2.5/5; age: 20-29 → 9/10 ×2, * 1, 30 → 0, +1
    assert per_attribute == {"city": pytest.approx(2.5 / 5), "age": pytest.approx((1.8 + 2) / 5)}
    assert score == pytest.approx((2.5 / 5 + 3.8 / 5) / 2)


def test_labelled_and_partition_gcp_agree_when_labels_are_the_classes_lcas() -> None:
    original = pd.DataFrame({"city": ["Tokyo", "Saitama", "Kyoto", "Osaka", "Okinawa", "Tokyo"]})
    released = pd.DataFrame({"city": ["Kanto", "Kanto", "Kansai", "Kansai", "*", "*"]})
    by_labels, _ = labelled_gcp(released, ["city"], {"city": CITY})
    by_classes, _ = partition_gcp(original, np.array([0, 0, 1, 1, 2, 2]), ["city"], {"city": CITY})
    assert by_labels == pytest.approx(by_classes)


def test_labelled_gcp_refuses_a_value_that_is_no_label() -> None:
    with pytest.raises(HierarchyError, match="'Hokkaido' of city is no label"):
        labelled_gcp(pd.DataFrame({"city": ["Hokkaido"]}), ["city"], {"city": CITY})


def test_partition_gcp_refuses_text_without_a_hierarchy() -> None:
    with pytest.raises(AnonymizationError, match="city is not numeric") as raised:
        partition_gcp(pd.DataFrame({"city": ["Tokyo"]}), np.array([0]), ["city"], {})
    assert raised.value.hint == "give city a hierarchy to treat it as categorical"
