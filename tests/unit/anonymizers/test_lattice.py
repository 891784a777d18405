"""The generalization lattice: every node once, indexed by mixed radix, up- and down-sets as masks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from anonymizers.errors import AnonymizationError
from anonymizers.lattice import Lattice


def test_enumerates_every_node_once_in_lexicographic_order() -> None:
    lattice = Lattice([1, 2, 2])
    assert lattice.size == 2 * 3 * 3
    assert [tuple(node) for node in lattice.nodes] == list(itertools.product(range(2), range(3), range(3)))


def test_index_finds_the_row_of_a_node() -> None:
    lattice = Lattice([1, 2, 2])
    for row, node in enumerate(lattice.nodes):
        assert lattice.index(node) == row


def test_specializations_are_the_component_wise_lower_nodes() -> None:
    lattice = Lattice([1, 2, 2])
    mask = lattice.specializations((0, 1, 1))
    assert {tuple(n) for n in lattice.nodes[mask]} == {(0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1)}


def test_generalizations_are_the_component_wise_higher_nodes() -> None:
    lattice = Lattice([1, 2, 2])
    mask = lattice.generalizations((1, 2, 1))
    assert {tuple(n) for n in lattice.nodes[mask]} == {(1, 2, 1), (1, 2, 2)}
    assert np.count_nonzero(lattice.generalizations((0, 0, 0))) == lattice.size


def test_refuses_a_lattice_too_large_to_search() -> None:
    with pytest.raises(AnonymizationError, match="nodes") as caught:
        Lattice([9] * 8)  # 10**8 nodes
    assert caught.value.hint is not None and "mondrian" in caught.value.hint
