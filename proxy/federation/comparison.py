"""Many Type 1 comparisons over one peer link, in lockstep: every flight of the protocol carries the
messages of all cells at once, so a 50-cell count costs the protocol's 6 flights, not 300.

The asking site is Alice (it holds the Paillier key pair); the answering site is Bob. Both keep randomness
pools (r^N mod N²) that a background thread refills after every query, so that the online phase of the next
query finds them full (the "offline phase" of the dissertation's Table 8.1).

Inputs: each site's noisy count of a cell, rounded and clamped to [0, 2^(ℓ−1) − 1] with ℓ = bitlength(k) + 1.
Clamping changes no decision: a clamped count alone already reaches 2^(ℓ−1) − 1 ≥ k, and two clamped counts
sum below 2^ℓ, the protocol's input range. x = x_A + x_B is shared as (x_A, x_B), y = k as (k, 0).
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Sequence

from mechanisms.secure import (
    ComparisonParameters,
    KeyPair,
    Party,
    RandomnessPool,
    Type1Alice,
    Type1Bob,
    decode_message,
    generate_keypair,
    public_key_from_modulus,
    type1_pool_demand,
)
from proxy.federation.link import PeerLink

KAPPA = 40  # statistical security of the masks (spec: N ≥ 2^(ℓ+2+κ))
POOL_COMPARISONS = 64  # comparisons' worth of randomness kept ready per pool


def bit_length_for(threshold: int) -> int:
    """ℓ such that counts clamped to 2^(ℓ−1) − 1 ≥ k decide x_A + x_B ≥ k exactly."""
    return threshold.bit_length() + 1


def comparison_input(noisy: float, bit_length: int) -> int:
    """A noisy count as the protocol's input: rounded, clamped to [0, 2^(ℓ−1) − 1] (post-processing)."""
    return min(max(round(noisy), 0), (1 << (bit_length - 1)) - 1)


def parameters(bit_length: int, key_bits: int) -> ComparisonParameters:
    return ComparisonParameters(
        bit_length, kappa=KAPPA, output_sharing="xor", minimum_key_bits=min(key_bits, 1024)
    )


class RefilledPool:
    """A randomness pool for one public key, refilled to ``target`` values by a background thread."""

    def __init__(self, pool: RandomnessPool, per_comparison: int) -> None:
        self.pool = pool
        self.target = per_comparison * POOL_COMPARISONS
        self._filling = threading.Lock()

    def refill_later(self) -> None:
        threading.Thread(target=self._refill, name="veil-federation-pool", daemon=True).start()

    def _refill(self) -> None:
        if not self._filling.acquire(blocking=False):
            return  # a refill is running already
        try:
            while len(self.pool) < self.target:
                self.pool.fill(min(16, self.target - len(self.pool)))
        finally:
            self._filling.release()


class AliceKeys:
    """The asking site's key pair for one federation (generated once, in the background) and its pool."""

    def __init__(self, key_bits: int, bit_length: int) -> None:
        self.key_bits, self.bit_length = key_bits, bit_length
        self._ready = threading.Event()
        self._keypair: KeyPair | None = None
        self._pool: RefilledPool | None = None
        threading.Thread(target=self._generate, name="veil-federation-keys", daemon=True).start()

    def _generate(self) -> None:
        self._keypair = generate_keypair(self.key_bits)
        alice_demand, _ = type1_pool_demand(self.bit_length)
        self._pool = RefilledPool(RandomnessPool(self._keypair.public), alice_demand)
        self._ready.set()
        self._pool.refill_later()

    def get(self, timeout_s: float) -> tuple[KeyPair, RefilledPool]:
        if not self._ready.wait(timeout_s) or self._keypair is None or self._pool is None:
            raise TimeoutError("the federation's Paillier key is not ready yet")
        return self._keypair, self._pool


class BobPools:
    """The answering site's pools, one per modulus it has been asked under (the asker's key is long-lived)."""

    def __init__(self) -> None:
        self._pools: dict[int, RefilledPool] = {}
        self._lock = threading.Lock()

    def for_modulus(self, modulus: int, bit_length: int) -> RefilledPool:
        with self._lock:
            if modulus not in self._pools:
                _, bob_demand = type1_pool_demand(bit_length)
                self._pools[modulus] = RefilledPool(
                    RandomnessPool(public_key_from_modulus(modulus)), bob_demand
                )
            return self._pools[modulus]


def alice_compare(
    link: PeerLink,
    keypair: KeyPair,
    pool: RefilledPool,
    counts: Sequence[int],
    threshold: int,
    bit_length: int,
) -> list[int]:
    """Alice's shares δ^A of [x_A + x_B ≥ k] for every cell (``counts`` are her clamped inputs)."""
    params = parameters(bit_length, keypair.public.n.bit_length())
    parties = [Type1Alice(keypair, x, threshold, params, pool=pool.pool) for x in counts]
    shares = lockstep(link, parties, speaks_first=True)
    pool.refill_later()
    return shares


def bob_compare(
    link: PeerLink, modulus: int, pool: RefilledPool, counts: Sequence[int], bit_length: int
) -> list[int]:
    """Bob's shares δ^B (``counts`` are his clamped inputs; his share of y = k is 0)."""
    public = public_key_from_modulus(modulus)
    params = parameters(bit_length, modulus.bit_length())
    parties = [Type1Bob(public, x, 0, params, pool=pool.pool) for x in counts]
    shares = lockstep(link, parties, speaks_first=False)
    pool.refill_later()
    return shares


def lockstep(link: PeerLink, parties: Sequence[Party[int]], *, speaks_first: bool) -> list[int]:
    """Run every party's protocol at once: each flight is one frame holding every party's messages."""
    outgoing = [list(party.start()) for party in parties]
    if speaks_first:
        link.send(_encode(outgoing))
    while not all(party.done for party in parties):
        incoming = _decode(link.receive(), len(parties))
        outgoing = [
            [reply for message in messages for reply in party.receive(message)]
            for party, messages in zip(parties, incoming, strict=True)
        ]
        if any(outgoing):
            link.send(_encode(outgoing))
    return [int(party.output) for party in parties]


def _encode(batches: list[list[object]]) -> bytes:
    parts = [struct.pack(">I", len(batches))]
    for messages in batches:
        parts.append(struct.pack(">I", len(messages)))
        for message in messages:
            data = message.to_bytes()  # type: ignore[attr-defined]
            parts += [struct.pack(">I", len(data)), data]
    return b"".join(parts)


def _decode(frame: bytes, parties: int) -> list[list[object]]:
    view, offset = memoryview(frame), 0

    def number() -> int:
        nonlocal offset
        (value,) = struct.unpack_from(">I", view, offset)
        offset += 4
        return int(value)

    if number() != parties:
        raise ValueError("the peer's flight is for another number of cells")
    batches = []
    for _ in range(parties):
        messages = []
        for _ in range(number()):
            length = number()
            messages.append(decode_message(bytes(view[offset : offset + length])))
            offset += length
        batches.append(messages)
    if offset != len(frame):
        raise ValueError("trailing bytes in the peer's flight")
    return batches
