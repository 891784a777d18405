"""The generalization lattice of full-domain recoding: one node per vector of levels (l_1, …, l_q),
0 ≤ l_d ≤ height_d, ordered component-wise (LeFevre, DeWitt, Ramakrishnan, "Incognito", SIGMOD 2005).

Why a dense array of every node rather than a graph of objects: the search prunes whole down-sets at once
("every specialization of a failing node fails"), which is one vectorized comparison over the node array,
and lower bounds of separable metrics are computed for all nodes in one numpy expression. The lattice of
Adult's 8 ARX hierarchies has 6,480 nodes; lattices up to a few million nodes fit comfortably.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from anonymizers.errors import AnonymizationError

MAX_NODES = 20_000_000


class Lattice:
    """All nodes of the lattice of ``heights`` as rows of :attr:`nodes` (int16, lexicographic order)."""

    def __init__(self, heights: Sequence[int]) -> None:
        self.heights = tuple(int(h) for h in heights)
        size = int(np.prod([h + 1 for h in self.heights], dtype=np.float64))
        if size > MAX_NODES:
            raise AnonymizationError(
                f"the generalization lattice has {size:,} nodes, more than {MAX_NODES:,}",
                hint="use fewer quasi-identifiers or shallower hierarchies, or --algorithm mondrian",
            )
        grids = np.indices([h + 1 for h in self.heights], dtype=np.int16)
        self.nodes = grids.reshape(len(self.heights), -1).T.copy()

    @property
    def size(self) -> int:
        return len(self.nodes)

    def index(self, levels: Sequence[int]) -> int:
        """Row of ``levels`` in :attr:`nodes` (mixed radix, last QI fastest)."""
        position = 0
        for level, height in zip(levels, self.heights, strict=True):
            position = position * (height + 1) + int(level)
        return position

    def specializations(self, levels: Sequence[int]) -> np.ndarray:
        """Mask of the nodes at or below ``levels`` (component-wise ≤): the down-set."""
        return np.all(self.nodes <= np.asarray(levels, dtype=np.int16), axis=1)

    def generalizations(self, levels: Sequence[int]) -> np.ndarray:
        """Mask of the nodes at or above ``levels``: the up-set."""
        return np.all(self.nodes >= np.asarray(levels, dtype=np.int16), axis=1)
