"""Tree encodings against the spec's test vector (TV-SC-1) and against brute force over the tree."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mechanisms.errors import MechanismError
from mechanisms.secure import node_label, point_enc, range_enc


def covered_leaves(node: tuple[int, int]) -> range:
    layer, position = node
    return range((position - 1) * 2**layer + 1, position * 2**layer + 1)


def brute_force_range_enc(first: int, last: int, bit_length: int) -> set[tuple[int, int]]:
    """eq. 8.1 literally: nodes of cover(R) whose parent is not in cover(R)."""
    wanted = set(range(first, last + 1))
    cover = {
        (layer, position)
        for layer in range(bit_length + 1)
        for position in range(1, 2 ** (bit_length - layer) + 1)
        if set(covered_leaves((layer, position))) <= wanted
    }
    return {(layer, position) for layer, position in cover if (layer + 1, (position + 1) // 2) not in cover}


def test_point_encoding_of_leaf_6_matches_tv_sc_1() -> None:
    assert point_enc(6, 3) == ((0, 6), (1, 3), (2, 2), (3, 1))


def test_range_encodings_match_tv_sc_1() -> None:
    assert range_enc(4, 8, 3) == ((0, 4), (2, 2))
    assert range_enc(1, 3, 3) == ((1, 1), (0, 3))


def test_empty_range_has_no_nodes() -> None:
    assert range_enc(1, 0, 3) == ()


def test_whole_range_is_the_root() -> None:
    assert range_enc(1, 8, 3) == ((3, 1),)


@pytest.mark.parametrize("bit_length", [1, 2, 3, 4])
def test_range_encoding_equals_brute_force_for_every_range(bit_length: int) -> None:
    n = 2**bit_length
    for first in range(1, n + 1):
        for last in range(first, n + 1):
            assert set(range_enc(first, last, bit_length)) == brute_force_range_enc(first, last, bit_length)


@pytest.mark.parametrize("bit_length", [1, 3, 5])
def test_point_encoding_is_every_ancestor(bit_length: int) -> None:
    for leaf in range(1, 2**bit_length + 1):
        nodes = point_enc(leaf, bit_length)
        assert [layer for layer, _ in nodes] == list(range(bit_length + 1))
        assert all(leaf in covered_leaves(node) for node in nodes)


@given(
    bit_length=st.integers(1, 12),
    data=st.data(),
)
def test_prefix_and_suffix_encodings_meet_a_point_once_iff_it_is_inside(
    bit_length: int, data: st.DataObject
) -> None:
    n = 2**bit_length
    leaf = data.draw(st.integers(1, n))
    bound = data.draw(st.integers(1, n))
    for first, last in ((1, bound), (bound, n)):
        encoding = range_enc(first, last, bit_length)
        layers = [layer for layer, _ in encoding]
        assert len(layers) == len(set(layers))  # Lemma 8.2
        meeting = set(encoding) & set(point_enc(leaf, bit_length))
        assert len(meeting) == int(first <= leaf <= last)  # Corollary 8.1


def test_node_labels_are_injective() -> None:
    labels = {
        node_label((layer, position), 4) for layer in range(5) for position in range(1, 2 ** (4 - layer) + 1)
    }
    assert len(labels) == 2**5 - 1


@pytest.mark.parametrize("leaf", [0, 9, -1])
def test_rejects_leaf_outside_the_tree(leaf: int) -> None:
    with pytest.raises(MechanismError, match="outside"):
        point_enc(leaf, 3)


def test_rejects_range_outside_the_tree() -> None:
    with pytest.raises(MechanismError, match="outside"):
        range_enc(2, 9, 3)
