"""The Type 1 protocol (SS-SS-SS) of [D] §8.1.4, as corrected in the spec (§8).

Inputs: x and y in [0, 2^ℓ), each additively shared mod Alice's Paillier modulus N (Alice holds x^A, y^A
and the key; Bob holds x^B, y^B and the public key). Output: shares of δ = [x >= y] — XOR shares in {0, 1}
by default (Type 1's definition), or additive shares mod N.

1. Conversion 3 for x and y (the text says Conversion 1 and Table 8.2 Conversion 2: erratum 1).
2. Conversion 5, whose Type 3 subroutine is Protocol 2 with the root removed; Bob computes
   E(δ') = E(s^A) ⊗ (1 − 2s^B) ⊕ s^B from Alice's step-3 message (the spec's verified optimization, which
   skips Protocol 2's steps 4–5 and a Conversion 3).
3. Conversion 4 (XOR or additive).

Flights: A→B E(x^A), E(y^A) | B→A E(a + b) | A→B E((a + b) div n), E(H(i, b_i))_{i<ℓ} | B→A V_0..V_{ℓ−1} |
A→B E(s^A) | B→A E(δ ⊕ δ^B): 6 flights, 8 messages, 2ℓ + 6 ciphertexts (ℓ + 4 from Alice, ℓ + 2 from Bob).
Every ciphertext Bob sends is re-randomized or fresh; every one Alice sends is a fresh encryption.
"""

from __future__ import annotations

from mechanisms.random_source import RandomSource
from mechanisms.secure.conversions import (
    complete_encryption,
    conversion5_alice,
    conversion5_bob,
    encrypt_share,
    mask_ciphertext,
    unmask,
)
from mechanisms.secure.messages import EncryptedShare, MaskedResult
from mechanisms.secure.paillier import KeyPair, PublicKey, RandomnessPool
from mechanisms.secure.parameters import ComparisonParameters, check_share
from mechanisms.secure.party import Program, expect
from mechanisms.secure.sides import Evaluator, KeyHolder


def type1_ciphertexts(bit_length: int) -> int:
    """Ciphertexts exchanged by one optimized Type 1 comparison: 2ℓ + 6 (2ℓ + 8 without the optimization)."""
    return 2 * bit_length + 6


def type1_pool_demand(bit_length: int) -> tuple[int, int]:
    """r^N values (Alice's, Bob's) one comparison consumes: fill pools with multiples of these offline.

    Each ciphertext a party sends costs exactly one pooled value (a fresh encryption or a re-randomization).
    """
    return bit_length + 4, bit_length + 2


class Type1Alice(KeyHolder[int]):
    """Alice: holds the key pair and the shares x^A, y^A; outputs δ^A."""

    def __init__(
        self,
        keypair: KeyPair,
        x_share: int,
        y_share: int,
        params: ComparisonParameters,
        *,
        pool: RandomnessPool | None = None,
    ) -> None:
        super().__init__(keypair, params, pool=pool)
        check_share(x_share, keypair.public.n, "x_share")
        check_share(y_share, keypair.public.n, "y_share")
        self._shares = (x_share, y_share)

    def _run(self) -> Program[int]:
        encryptor = self._encryptor
        yield encrypt_share(encryptor, self._shares[0])
        yield encrypt_share(encryptor, self._shares[1])
        yield from conversion5_alice(encryptor, self._private, self._params)
        masked = yield from expect(MaskedResult)
        return unmask(self._private, masked, sharing=self._params.output_sharing)


class Type1Bob(Evaluator[int]):
    """Bob: holds Alice's public key and the shares x^B, y^B; outputs δ^B."""

    def __init__(
        self,
        public_key: PublicKey,
        x_share: int,
        y_share: int,
        params: ComparisonParameters,
        *,
        pool: RandomnessPool | None = None,
        rng: RandomSource | None = None,
    ) -> None:
        super().__init__(public_key, params, pool=pool, rng=rng)
        check_share(x_share, public_key.n, "x_share")
        check_share(y_share, public_key.n, "y_share")
        self._shares = (x_share, y_share)

    def _run(self) -> Program[int]:
        encryptor, rng = self._encryptor, self._rng
        enc_x = complete_encryption(encryptor, (yield from expect(EncryptedShare)), self._shares[0])
        enc_y = complete_encryption(encryptor, (yield from expect(EncryptedShare)), self._shares[1])
        enc_delta = yield from conversion5_bob(encryptor, enc_x, enc_y, self._params, rng)
        masked, share_b = mask_ciphertext(encryptor, enc_delta, sharing=self._params.output_sharing, rng=rng)
        yield masked
        return share_b
