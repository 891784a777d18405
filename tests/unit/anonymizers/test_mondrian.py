"""Mondrian: the spec's worked examples (TV-K-1, TV-K-3, TV-K-4), recodings, the allowable hook, errors,
and properties over generated tables."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizers.errors import AnonymizationError, HierarchyError, InfeasibleError
from anonymizers.gcp import lca_coverage, partition_gcp, tree_positions
from anonymizers.hierarchy import Hierarchy
from anonymizers.mondrian import MondrianResult, mondrian

TV_K_4 = pd.DataFrame({"age": [23, 25, 31, 33, 45, 47, 52], "income": [300, 320, 400, 380, 500, 520, 480]})
GENDER = Hierarchy("gender", (("M", "F"), ("*", "*")))
ADDRESS = Hierarchy(
    "address",
    (
        ("Tokyo", "Saitama", "Kyoto", "Osaka", "Okinawa"),
        ("Kanto", "Kanto", "Kansai", "Kansai", "Kyushu"),
        ("*",) * 5,
    ),
)
# Two subtrees whose leaves are interleaved in the file: the tree order must still keep them together.
LETTERS = Hierarchy("letter", (("a", "c", "b", "d"), ("X", "Y", "X", "Y"), ("*",) * 4))


def recoded_rows(table: pd.DataFrame, columns: list[str]) -> list[tuple[object, ...]]:
    return [tuple(row) for row in table[columns].itertuples(index=False)]


def test_worked_example_tv_k_4_publishes_class_means() -> None:
    result = mondrian(TV_K_4, ["age", "income"], k=2)
    assert (
        recoded_rows(result.table, ["age", "income"]) == [(24, 310)] * 2 + [(32, 390)] * 2 + [(48, 500)] * 3
    )
    assert [part.tolist() for part in result.partition] == [[0, 1], [2, 3], [4, 5, 6]]


def test_worked_example_tv_k_3_final_group_is_recoded_to_its_means() -> None:
    group = pd.DataFrame({"age": [45, 47, 52], "income": [500, 520, 480]})
    result = mondrian(group, ["age", "income"], k=2)
    assert recoded_rows(result.table, ["age", "income"]) == [(48, 500)] * 3


def test_worked_example_tv_k_1_mean_of_36_and_38_is_37() -> None:
    # Table 2.1 without record 5 (suppressed in Table 2.2); the erratum: the printed 36 must be 37.
    records = pd.DataFrame(
        {
            "age": [18, 22, 36, 38],
            "gender": ["M", "M", "F", "M"],
            "address": ["Tokyo", "Saitama", "Kyoto", "Osaka"],
            "disease": ["AIDS", "AIDS", "Diabetes", "Heart disease"],
        }
    )
    result = mondrian(
        records, ["age", "gender", "address"], k=2, hierarchies={"gender": GENDER, "address": ADDRESS}
    )
    assert recoded_rows(result.table, ["age", "gender", "address", "disease"]) == [
        (20, "M", "Kanto", "AIDS"),
        (20, "M", "Kanto", "AIDS"),
        (37, "*", "Kansai", "Diabetes"),
        (37, "*", "Kansai", "Heart disease"),
    ]


def test_range_recoding_publishes_min_and_max() -> None:
    result = mondrian(TV_K_4, ["age", "income"], k=2, recoding="range")
    assert result.table["age"].tolist() == ["[23-25]"] * 2 + ["[31-33]"] * 2 + ["[45-52]"] * 3
    assert result.table["income"].tolist() == ["[300-320]"] * 2 + ["[380-400]"] * 2 + ["[480-520]"] * 3


def test_median_recoding_publishes_the_lower_median_in_the_column_type() -> None:
    result = mondrian(TV_K_4, ["age", "income"], k=2, recoding="median")
    assert result.table["age"].tolist() == [23, 23, 31, 31, 47, 47, 47]
    assert result.table["income"].dtype == TV_K_4["income"].dtype


def test_categorical_split_follows_the_hierarchy_children() -> None:
    # In file order a, c, b, d the lower median would split {a, c} | {b, d} and publish * on both sides.
    frame = pd.DataFrame({"letter": ["a", "c", "b", "d", "a", "c", "b", "d"]})
    result = mondrian(frame, ["letter"], k=3, hierarchies={"letter": LETTERS})
    assert result.table["letter"].tolist() == ["X", "Y", "X", "Y", "X", "Y", "X", "Y"]
    assert result.summary.gcp == pytest.approx(1 / 3)  # every class under a 2-leaf label: (2 − 1)/(4 − 1)


def test_set_labels_publish_the_values_a_class_holds_and_cost_less() -> None:
    wide = Hierarchy("letter", (("a", "b", "c", "d"), ("X", "X", "X", "Y"), ("*",) * 4))
    frame = pd.DataFrame({"letter": ["a", "b", "d", "a", "d", "b", "d", "d"]})
    lca = mondrian(frame, ["letter"], k=4, hierarchies={"letter": wide})
    sets = mondrian(frame, ["letter"], k=4, hierarchies={"letter": wide}, categorical="set")
    assert sets.table["letter"].tolist() == ["{a,b}", "{a,b}", "d", "{a,b}", "d", "{a,b}", "d", "d"]
    assert lca.table["letter"].tolist() == ["X", "X", "d", "X", "d", "X", "d", "d"]
    # half the rows under a 3-leaf label (2/3) or a 2-value set (1/3); the d rows cost nothing
    assert lca.summary.gcp == pytest.approx(1 / 3) and sets.summary.gcp == pytest.approx(1 / 6)


def test_leaf_label_when_a_class_holds_one_value() -> None:
    frame = pd.DataFrame({"letter": ["a", "a", "b", "b"], "n": [1, 2, 3, 4]})
    result = mondrian(frame, ["letter", "n"], k=2, hierarchies={"letter": LETTERS})
    assert result.table["letter"].tolist() == ["a", "a", "b", "b"]


def test_allowable_hook_blocks_a_cut_that_makes_a_side_homogeneous() -> None:
    frame = pd.DataFrame({"age": [1, 2, 3, 4], "zip": [10, 20, 10, 20], "disease": ["a", "a", "b", "b"]})
    disease = frame["disease"].to_numpy()

    def distinct_2(rows: np.ndarray) -> bool:
        return len(set(disease[rows])) >= 2

    free = mondrian(frame, ["age", "zip"], k=2)
    diverse = mondrian(frame, ["age", "zip"], k=2, allowable=distinct_2)
    assert [part.tolist() for part in free.partition] == [[0, 1], [2, 3]]  # age first: homogeneous sides
    assert [part.tolist() for part in diverse.partition] == [[0, 2], [1, 3]]  # falls back to zip


def test_allowable_hook_that_refuses_every_cut_leaves_one_class() -> None:
    result = mondrian(TV_K_4, ["age", "income"], k=2, allowable=lambda rows: len(rows) == len(TV_K_4))
    assert result.summary.classes == 1


def test_allowable_hook_refusing_the_whole_table_is_infeasible() -> None:
    with pytest.raises(InfeasibleError, match="whole table does not meet the allowable constraint"):
        mondrian(TV_K_4, ["age"], k=2, allowable=lambda rows: False)


def test_strict_keeps_ties_together_and_relaxed_splits_them() -> None:
    frame = pd.DataFrame({"age": [1, 1, 1, 1, 1, 2]})
    assert mondrian(frame, ["age"], k=2).summary.class_sizes == {6: 1}
    assert mondrian(frame, ["age"], k=2, relaxed=True).summary.class_sizes == {3: 2}


def test_other_columns_pass_through_and_rows_keep_their_order() -> None:
    frame = TV_K_4.assign(name=list("abcdefg")).iloc[::-1]
    result = mondrian(frame, ["age", "income"], k=2)
    assert result.table.index.tolist() == frame.index.tolist()
    assert result.table["name"].tolist() == list("gfedcba")
    assert result.table["equivalence_class"].nunique() == 3


def test_summary_reports_histogram_and_the_partition_gcp() -> None:
    result = mondrian(TV_K_4, ["age", "income"], k=2)
    classes = result.table["equivalence_class"].to_numpy()
    assert result.summary.class_sizes == {2: 2, 3: 1}
    assert result.summary.gcp == pytest.approx(partition_gcp(TV_K_4, classes, ["age", "income"], {})[0])


def test_boxes_published_under_the_same_labels_are_one_class() -> None:
    """Issue 12: a cut between two children of the lowest common ancestor leaves both sides under that
    ancestor, so two boxes can publish identical rows (ARX's Adult, k = 5: 3,796 boxes, 3,792 distinct
    published rows). The attacker sees one class; the boxes stay the partition."""
    jobs = Hierarchy("job", (("a", "b", "c", "d"), ("*",) * 4))
    frame = pd.DataFrame({"age": [30] * 6, "job": ["a", "a", "b", "c", "d", "d"]})
    result = mondrian(frame, ["age", "job"], k=3, hierarchies={"job": jobs}, recoding="range")
    assert [part.tolist() for part in result.partition] == [[0, 1, 2], [3, 4, 5]]
    assert recoded_rows(result.table, ["age", "job"]) == [("[30-30]", "*")] * 6
    assert result.summary.boxes == 2 and result.summary.classes == 1
    assert result.summary.class_sizes == {6: 1}
    assert [rows.tolist() for rows in result.classes] == [[0, 1, 2, 3, 4, 5]]


def test_accepts_numpy_columns() -> None:
    result = mondrian(
        {"age": TV_K_4["age"].to_numpy(), "income": TV_K_4["income"].to_numpy()}, ["age", "income"], k=2
    )
    assert result.summary.classes == 3


def test_refuses_fewer_rows_than_k() -> None:
    with pytest.raises(InfeasibleError, match="7 rows, fewer than k = 8"):
        mondrian(TV_K_4, ["age"], k=8)


def test_refuses_text_quasi_identifier_without_hierarchy() -> None:
    with pytest.raises(AnonymizationError, match="quasi-identifier gender is not numeric"):
        mondrian(pd.DataFrame({"gender": ["M", "F"]}), ["gender"], k=1)


def test_refuses_a_value_missing_from_the_hierarchy() -> None:
    with pytest.raises(HierarchyError, match="value 'X' of gender is not in its hierarchy"):
        mondrian(pd.DataFrame({"gender": ["M", "X"]}), ["gender"], k=1, hierarchies={"gender": GENDER})


def test_refuses_an_unknown_recoding() -> None:
    with pytest.raises(AnonymizationError, match="unknown recoding 'mode'"):
        mondrian(TV_K_4, ["age"], k=2, recoding="mode")  # type: ignore[arg-type]


# --- properties -----------------------------------------------------------------------------------------

LETTER_VALUES = st.sampled_from(LETTERS.leaves)


@st.composite
def tables(draw: st.DrawFn, *, distinct_first: bool = False) -> tuple[pd.DataFrame, int]:
    """Up to 60 rows: two small-range integer QIs (many ties) and a categorical QI; ``distinct_first``
    makes the first QI a permutation (no ties)."""
    rows = draw(st.integers(min_value=1, max_value=60))
    k = draw(st.integers(min_value=1, max_value=rows))
    small = st.lists(st.integers(min_value=0, max_value=6), min_size=rows, max_size=rows)
    first = draw(st.permutations(list(range(rows)))) if distinct_first else draw(small)
    frame = pd.DataFrame(
        {
            "a": first,
            "b": draw(small),
            "letter": draw(st.lists(LETTER_VALUES, min_size=rows, max_size=rows)),
        }
    )
    return frame, k


def run(frame: pd.DataFrame, k: int, *, relaxed: bool = False) -> MondrianResult:
    return mondrian(frame, ["a", "b", "letter"], k=k, hierarchies={"letter": LETTERS}, relaxed=relaxed)


@settings(max_examples=60, deadline=None)
@given(tables(), st.booleans())
def test_every_class_has_at_least_k_rows_and_one_published_value_per_qi(
    case: tuple[pd.DataFrame, int], relaxed: bool
) -> None:
    frame, k = case
    result = run(frame, k, relaxed=relaxed)
    sizes = [len(part) for part in result.partition]
    assert len(result.table) == len(frame)
    assert min(sizes) >= k
    assert sorted(np.concatenate(result.partition).tolist()) == list(range(len(frame)))
    published = result.table.groupby("equivalence_class")[["a", "b", "letter"]].nunique()
    assert (published == 1).all().all()
    for class_id, part in enumerate(result.partition):
        assert (result.table["equivalence_class"].to_numpy()[part] == class_id).all()


@settings(max_examples=40, deadline=None)
@given(tables(distinct_first=True))
def test_strict_classes_have_fewer_than_2k_rows_when_a_qi_has_no_ties(case: tuple[pd.DataFrame, int]) -> None:
    # A group of ≥ 2k rows can always be cut at the lower median of a tie-free attribute.
    frame, k = case
    assert max(len(part) for part in run(frame, k).partition) <= 2 * k - 1


@settings(max_examples=40, deadline=None)
@given(tables())
def test_strict_class_of_2k_rows_or_more_has_no_valid_numeric_median_cut(
    case: tuple[pd.DataFrame, int],
) -> None:
    frame, k = case
    for part in run(frame, k).partition:
        if len(part) < 2 * k:
            continue
        for column in ("a", "b"):
            values = np.sort(frame[column].to_numpy()[part])
            left = int((values <= values[(len(values) + 1) // 2 - 1]).sum())
            assert left < k or len(values) - left < k


@settings(max_examples=40, deadline=None)
@given(tables())
def test_relaxed_classes_of_2k_rows_or_more_are_identical_on_every_qi(case: tuple[pd.DataFrame, int]) -> None:
    frame, k = case
    for part in run(frame, k, relaxed=True).partition:
        if len(part) >= 2 * k:
            assert (frame.iloc[part][["a", "b", "letter"]].nunique() == 1).all()


# --- the partition against a recursive reference --------------------------------------------------------


def reference_boxes(
    frame: pd.DataFrame,
    qis: list[str],
    trees: dict[str, Hierarchy],
    k: int,
    *,
    relaxed: bool = False,
    allowable: Callable[[np.ndarray], bool] | None = None,
) -> list[list[int]]:
    """Mondrian as the module docstring states it, one group at a time by recursion on row lists — the
    plain reading of the rules that the vectorized rounds on codes must reproduce, box for box and in the
    same order (left side first, as boxes are numbered)."""
    ranks, widths, cuts = {}, {}, {}
    for q in qis:
        if q in trees:
            tree = trees[q]
            positions = tree_positions(tree)
            leaf_at = np.argsort(positions)
            ranks[q] = positions[[tree.leaf_index(str(v)) for v in frame[q]]]
            codes = np.stack(tree.codes)

            def lca(
                rows: list[int], q: str = q, tree: Hierarchy = tree, leaf_at: np.ndarray = leaf_at
            ) -> int:
                first, last = leaf_at[min(ranks[q][rows])], leaf_at[max(ranks[q][rows])]
                return int(lca_coverage(tree, np.array([first]), np.array([last]))[0][0])

            def tree_width(rows: list[int], q: str = q, tree: Hierarchy = tree) -> float:
                covered = np.stack(tree.coverage)[
                    lca(rows, q), np.argsort(tree_positions(tree))[ranks[q][rows[0]]]
                ]
                return (covered - 1) / (len(tree.leaves) - 1)

            def tree_cut(
                ordered: list[int], q: str = q, codes: np.ndarray = codes, leaf_at: np.ndarray = leaf_at
            ) -> int:
                level = max(lca(ordered, q) - 1, 0)
                child = [codes[level, leaf_at[ranks[q][r]]] for r in ordered]
                n = len(ordered)
                candidates = [i for i in range(1, n) if child[i] != child[i - 1] and min(i, n - i) >= k]
                if candidates:
                    return min(candidates, key=lambda i: (abs(2 * i - n), i))
                return n // 2 if relaxed else 0

            widths[q], cuts[q] = tree_width, tree_cut
        else:
            values = frame[q].to_numpy(dtype=float)
            distinct = np.unique(values)
            ranks[q] = np.searchsorted(distinct, values)
            span = distinct[-1] - distinct[0]

            def numeric_width(
                rows: list[int], q: str = q, distinct: np.ndarray = distinct, span: float = span
            ) -> float:
                return (
                    0.0
                    if span <= 0
                    else (distinct[max(ranks[q][rows])] - distinct[min(ranks[q][rows])]) / span
                )

            def numeric_cut(ordered: list[int], q: str = q) -> int:
                if relaxed:
                    return len(ordered) // 2
                median = ranks[q][ordered[(len(ordered) + 1) // 2 - 1]]
                return sum(1 for r in ordered if ranks[q][r] <= median)

            widths[q], cuts[q] = numeric_width, numeric_cut

    def split(rows: list[int]) -> list[list[int]]:
        if len(rows) < 2 * k:
            return [rows]
        width = {q: widths[q](rows) for q in qis}
        for q in sorted(qis, key=lambda q: -width[q]):  # stable: ties in column order
            if width[q] <= 0:
                break
            ordered = sorted(rows, key=lambda r: ranks[q][r])  # stable: ties keep their order
            left = cuts[q](ordered)
            sides = ordered[:left], ordered[left:]
            if min(left, len(rows) - left) >= k and (
                allowable is None or all(allowable(np.array(side)) for side in sides)
            ):
                return split(sides[0]) + split(sides[1])
        return [rows]

    return [sorted(box) for box in split(list(range(len(frame))))]


@settings(max_examples=80, deadline=None)
@given(tables(), st.booleans(), st.booleans())
def test_partition_is_the_recursive_references_box_for_box(
    case: tuple[pd.DataFrame, int], relaxed: bool, diverse: bool
) -> None:
    """The rounds on integer codes (one byte per row and QI here) cut exactly where the plain recursion
    cuts, and number the boxes in its order: the code path keeps the partition of the row-by-row rules."""
    frame, k = case
    parity = frame["b"].to_numpy() % 2

    def two_parities(rows: np.ndarray) -> bool:
        return len(set(parity[rows])) == 2

    allowable = two_parities if diverse and two_parities(np.arange(len(frame))) else None
    result = mondrian(
        frame,
        ["a", "b", "letter"],
        k=k,
        hierarchies={"letter": LETTERS},
        relaxed=relaxed,
        allowable=allowable,
    )
    expected = reference_boxes(
        frame, ["a", "b", "letter"], {"letter": LETTERS}, k, relaxed=relaxed, allowable=allowable
    )
    assert [part.tolist() for part in result.partition] == expected
    assert result.table["equivalence_class"].tolist() == [
        next(b for b, box in enumerate(expected) if row in box) for row in range(len(frame))
    ]
