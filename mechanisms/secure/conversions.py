"""Conversions between data states ([D] §2.3.3 and §3.2): plain, shared (SS), encrypted (SE).

Alice always holds the Paillier key; "SE" means Bob holds E(z) under Alice's key.

- Conversion 1 (PN → SS): :func:`split_plaintext`, Alice keeps x^A and sends x^B = x − x^A mod N.
- Conversion 2 (SS → PN): :func:`combine_shares`, one party sends its share to the other.
- Conversion 3 (SS → SE): :func:`encrypt_share` (Alice) and :func:`complete_encryption` (Bob).
- Conversion 4 (SE → SS): :func:`mask_ciphertext` (Bob) and :func:`unmask` (Alice), additive mod N as in
  [D] or XOR (spec §8's variant, Type 1's definition of its output).
- Conversion 5 (Type 3 ⇒ Type 2, Veugen 2014): :class:`Conversion5Alice`/:class:`Conversion5Bob` turn
  E(x), E(y) at Bob into E([x >= y]) at Bob (SE-SE-SE) with one Type 3 comparison of ℓ-bit values.

Conversion 5 rests on Lemma 3.2, ``(a + b) div n = a div n + b div n + β`` with β the carry of the low
parts ``β = [(a + b) mod n < b mod n] = 1 − [x' >= y']`` for x' = (a + b) mod n, y' = b mod n. With
``a = n + x − y ∈ [1, 2n − 1]``, ``δ = [x >= y] = a div n``. Bob masks a with ``b < 2^(ℓ+1+κ)`` — the
spec's bounded option — so ``a + b`` never wraps mod N (given N >= 2^(ℓ+2+κ)) and hides a within 2^−κ.
"""

from __future__ import annotations

from mechanisms.errors import SecureProtocolError
from mechanisms.random_source import RandomSource
from mechanisms.secure.messages import EncryptedQuotient, EncryptedShare, MaskedDifference, MaskedResult
from mechanisms.secure.paillier import (
    Encryptor,
    PrivateKey,
    PublicKey,
    RandomnessPool,
    check_ciphertext,
    decrypt,
)
from mechanisms.secure.parameters import ComparisonParameters, OutputSharing
from mechanisms.secure.party import Program, expect
from mechanisms.secure.protocols import type3_alice, type3_bob
from mechanisms.secure.sides import Evaluator, KeyHolder


def split_plaintext(value: int, modulus: int, rng: RandomSource) -> tuple[int, int]:
    """Conversion 1: (x^A, x^B) with x^A uniform in Z_N and x^A + x^B ≡ x (mod N)."""
    share_a = rng.randrange(modulus)
    return share_a, (value - share_a) % modulus


def combine_shares(share_a: int, share_b: int, *, sharing: OutputSharing, modulus: int) -> int:
    """Conversion 2: the value from both shares (δ^A ⊕ δ^B, or δ^A + δ^B mod N)."""
    if sharing == "xor":
        return share_a ^ share_b
    return (share_a + share_b) % modulus


def encrypt_share(encryptor: Encryptor, share_a: int) -> EncryptedShare:
    """Conversion 3, Alice: a fresh E(x^A)."""
    return EncryptedShare(encryptor.encrypt(share_a))


def complete_encryption(encryptor: Encryptor, message: EncryptedShare, share_b: int) -> int:
    """Conversion 3, Bob: E(x) = E(x^A) ⊕ x^B (adding the plain share is cheaper than encrypting it)."""
    return encryptor.add_plain(encryptor.check(message.ciphertext), share_b)


def mask_ciphertext(
    encryptor: Encryptor, ciphertext: int, *, sharing: OutputSharing, rng: RandomSource
) -> tuple[MaskedResult, int]:
    """Conversion 4, Bob: the re-randomized message for Alice and Bob's own share δ^B.

    ``xor`` requires the plaintext to be a bit: E(δ ⊕ δ^B) with δ^B ∈ {0, 1}; ``additive``: E(δ − δ^B) with
    δ^B uniform in Z_N.
    """
    if sharing == "xor":
        share_b = rng.randrange(2)
        masked = encryptor.xor_bit(ciphertext, share_b)
    else:
        share_b = rng.randrange(encryptor.modulus)
        masked = encryptor.add_plain(ciphertext, -share_b)
    return MaskedResult(encryptor.rerandomize(masked)), share_b


def unmask(private_key: PrivateKey, message: MaskedResult, *, sharing: OutputSharing) -> int:
    """Conversion 4, Alice: her share δ^A; an XOR share outside {0, 1} means the peer deviated."""
    share_a = decrypt(private_key, check_ciphertext(private_key.public_key, message.ciphertext))
    if sharing == "xor" and share_a > 1:
        raise SecureProtocolError("the XOR output share is not a bit: the peer deviated; abort")
    return share_a


def conversion5_alice(
    encryptor: Encryptor, private_key: PrivateKey, params: ComparisonParameters
) -> Program[None]:
    """Conversion 5, Alice: decrypt a + b, send E((a + b) div n), run Type 3 on x' = (a + b) mod n."""
    masked = yield from expect(MaskedDifference)
    total = decrypt(private_key, encryptor.check(masked.ciphertext))
    if total >= 2 * params.leaves + params.mask_bound:
        raise SecureProtocolError("the masked difference exceeds its bound: the peer deviated; abort")
    n = params.leaves
    yield EncryptedQuotient(encryptor.encrypt(total // n))
    yield from type3_alice(encryptor, private_key, total % n + 1, bit_length=params.bit_length)


def conversion5_bob(
    encryptor: Encryptor, enc_x: int, enc_y: int, params: ComparisonParameters, rng: RandomSource
) -> Program[int]:
    """Conversion 5, Bob: from E(x), E(y) to E([x >= y]), which Bob keeps."""
    n = params.leaves
    mask = rng.randrange(params.mask_bound)
    difference = encryptor.add(enc_x, encryptor.negate(enc_y))
    yield MaskedDifference(encryptor.rerandomize(encryptor.add_plain(difference, n + mask)))
    quotient = yield from expect(EncryptedQuotient)
    low_at_least = yield from type3_bob(encryptor, mask % n + 1, bit_length=params.bit_length, rng=rng)
    # δ = (a+b) div n − b div n − β and β = 1 − [x' >= y'].
    return encryptor.add_plain(
        encryptor.add(encryptor.check(quotient.ciphertext), low_at_least), -(mask // n) - 1
    )


class Conversion5Alice(KeyHolder[None]):
    """Conversion 5 as a protocol (SE-SE-SE, [D]'s Type 2), Alice's side: she only decrypts; no output."""

    def _run(self) -> Program[None]:
        yield from conversion5_alice(self._encryptor, self._private, self._params)


class Conversion5Bob(Evaluator[int]):
    """Conversion 5 as a protocol, Bob's side: from E(x), E(y) under Alice's key, outputs E([x >= y]).

    The caller guarantees x, y ∈ [0, 2^ℓ); nobody can check that on ciphertexts.
    """

    def __init__(
        self,
        public_key: PublicKey,
        enc_x: int,
        enc_y: int,
        params: ComparisonParameters,
        *,
        pool: RandomnessPool | None = None,
        rng: RandomSource | None = None,
    ) -> None:
        super().__init__(public_key, params, pool=pool, rng=rng)
        self._enc_x = self._encryptor.check(enc_x)
        self._enc_y = self._encryptor.check(enc_y)

    def _run(self) -> Program[int]:
        return (
            yield from conversion5_bob(self._encryptor, self._enc_x, self._enc_y, self._params, self._rng)
        )
