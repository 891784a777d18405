"""Tree encodings of points and ranges ([D] §8.1.2, after Lin and Tzeng's 0/1-encodings).

``T_n`` is the complete binary tree over leaves 1..n, n = 2^ℓ. Node ``(i, j)`` sits on layer i (leaves 0,
root ℓ) at position j (from 1, left to right) and covers leaves ``[(j − 1)·2^i + 1, j·2^i]``. A value v in
[0, n) is leaf ``v + 1``. ``pointEnc(x)`` is the path from leaf x to the root, one node per layer (Lemma 8.3,
layers 0..ℓ — eq. 8.3 prints 1..ℓ); ``rangeEnc(R)`` are the maximal nodes whose leaves all lie in R (eq. 8.1).
x ∈ R exactly when the two sets share a node (Lemma 8.4), and for prefixes and suffixes rangeEnc has at most
one node per layer (Lemma 8.2), so membership reduces to one equality test per layer — Protocols 1 and 2.
"""

from __future__ import annotations

from mechanisms.errors import MechanismError

Node = tuple[int, int]
"""(layer i, position j)."""


def point_enc(leaf: int, bit_length: int) -> tuple[Node, ...]:
    """pointEnc(leaf): the ancestors of ``leaf`` including itself, ordered by layer 0..ℓ.

    >>> point_enc(6, 3)
    ((0, 6), (1, 3), (2, 2), (3, 1))
    """
    _check_leaf(leaf, bit_length)
    return tuple((layer, ((leaf - 1) >> layer) + 1) for layer in range(bit_length + 1))


def range_enc(first: int, last: int, bit_length: int) -> tuple[Node, ...]:
    """rangeEnc([first, last]): the maximal tree nodes inside the range, left to right; () if first > last.

    Greedy from the left: at each step take the largest aligned block that still fits (the standard
    canonical decomposition, which equals eq. 8.1's "nodes of the cover whose parent is not in the cover").

    >>> range_enc(4, 8, 3)
    ((0, 4), (2, 2))
    """
    if first > last:
        return ()
    _check_leaf(first, bit_length)
    _check_leaf(last, bit_length)
    nodes: list[Node] = []
    start = first - 1
    while start < last:
        layer = _largest_aligned_layer(start, last, bit_length)
        nodes.append((layer, (start >> layer) + 1))
        start += 1 << layer
    return tuple(nodes)


def node_label(node: Node, bit_length: int) -> int:
    """H(i, j) = i·2^(ℓ+1) + j: injective on labels ([D] asks for a bijection or a collision-resistant hash).

    Protocols only ever compare labels of the same layer, so their difference is j − j' and never wraps.
    """
    layer, position = node
    return (layer << (bit_length + 1)) + position


def _largest_aligned_layer(start: int, last: int, bit_length: int) -> int:
    layer = (start & -start).bit_length() - 1 if start else bit_length
    while start + (1 << layer) > last:
        layer -= 1
    return layer


def _check_leaf(leaf: int, bit_length: int) -> None:
    if isinstance(leaf, bool) or not isinstance(leaf, int) or not 1 <= leaf <= 1 << bit_length:
        raise MechanismError(
            f"leaf {leaf!r} is outside [1, 2^{bit_length}]",
            hint="leaves are numbered from 1; a value v in [0, 2^ℓ) is leaf v + 1",
        )
