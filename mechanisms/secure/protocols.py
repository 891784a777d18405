"""Protocols 1 and 2 of [D] §8.1.3 ([NNPC10]'s main and extended protocols) with the root removed.

Alice holds x and the Paillier key; Bob holds y. Alice encrypts H of her leaf's ancestors, Bob tests each
layer against rangeEnc of a range R ∈ {[y, n], [1, y − 1]}: ``V_i = r_i ⊗ (E(H(i, b_i)) ⊖ H(i, a_i))`` is
E(0) exactly where the two encodings meet, and a random non-zero value elsewhere (Corollary 8.1). Layers
outside rangeEnc(R) get fresh E(r_i), so Alice sees ℓ values of which one or none is 0, in random order.

Root removal ([D] §8.1.3): the root is in every pointEnc and in rangeEnc(R) only for R = [1, n]; Alice
omits it (ℓ ciphertexts instead of ℓ + 1) and Bob answers R = [1, n] with one E(0) among ℓ ciphertexts.

Protocol 1 gives δ = [x >= y] to Alice (PN-NP-PN; [D] calls it Type 5, erratum 3). Protocol 2 lets Bob
pick R by a secret coin s^B so that Alice's bit s^A = [x ∈ R] satisfies s^A ⊕ s^B = δ: with ``xor`` output
that *is* the result ([NNPC10]'s mod-2 version); with ``additive`` output steps 4–5 turn it into shares
mod N. :func:`type3_alice`/:func:`type3_bob` stop at E(δ) in Bob's hands (PN-NP-SE), the subroutine of
Conversion 5 with the optimization the spec verifies (no steps 4–5, no Conversion 3).
"""

from __future__ import annotations

from typing import TypeVar

from mechanisms.errors import SecureProtocolError
from mechanisms.random_source import RandomSource
from mechanisms.secure.encoding import node_label, point_enc, range_enc
from mechanisms.secure.messages import EncryptedBit, MaskedResult, MembershipTests, PointEncoding
from mechanisms.secure.paillier import (
    Encryptor,
    KeyPair,
    PrivateKey,
    PublicKey,
    RandomnessPool,
    check_ciphertext,
    decrypt,
    is_zero,
    random_unit,
)
from mechanisms.secure.parameters import ComparisonParameters
from mechanisms.secure.party import Program, expect, shuffled
from mechanisms.secure.sides import Evaluator, KeyHolder

T = TypeVar("T")


def encode_point(encryptor: Encryptor, leaf: int, bit_length: int) -> PointEncoding:
    """Step 1 (Alice): E(H(i, b_i)) for every layer below the root."""
    nodes = point_enc(leaf, bit_length)[:bit_length]
    return PointEncoding(tuple(encryptor.encrypt(node_label(node, bit_length)) for node in nodes))


def membership_tests(
    encryptor: Encryptor,
    point: PointEncoding,
    first: int,
    last: int,
    *,
    bit_length: int,
    rng: RandomSource,
) -> MembershipTests:
    """Step 2 (Bob): ℓ shuffled ciphertexts with exactly one E(0) iff Alice's leaf ∈ [first, last]."""
    _check_point(encryptor, point, bit_length)
    modulus = encryptor.modulus
    if first == 1 and last == 1 << bit_length:
        # R = [1, n] is the root alone, which Alice no longer sends: answer "member" directly.
        values = [encryptor.encrypt(0)]
        values += [encryptor.encrypt(random_unit(modulus, rng)) for _ in range(bit_length - 1)]
        return MembershipTests(shuffled(values, rng))
    wanted = dict(range_enc(first, last, bit_length))
    values = []
    for layer, ciphertext in enumerate(point.nodes):
        if layer in wanted:
            difference = encryptor.add_plain(ciphertext, -node_label((layer, wanted[layer]), bit_length))
            masked = encryptor.scale(difference, random_unit(modulus, rng))
            values.append(encryptor.rerandomize(masked))
        else:
            values.append(encryptor.encrypt(random_unit(modulus, rng)))
    return MembershipTests(shuffled(values, rng))


def read_membership(private_key: PrivateKey, tests: MembershipTests, *, bit_length: int) -> int:
    """Step 3 (Alice): 1 if exactly one test decrypts to 0, 0 if none; more than one means Bob cheated."""
    if len(tests.tests) != bit_length:
        raise SecureProtocolError(f"expected {bit_length} membership tests, received {len(tests.tests)}")
    zeros = sum(is_zero(private_key, check_ciphertext(private_key.public_key, c)) for c in tests.tests)
    if zeros > 1:
        raise SecureProtocolError("more than one membership test is zero: the peer deviated; abort")
    return zeros


def protocol2_alice_program(
    encryptor: Encryptor, private_key: PrivateKey, leaf: int, *, bit_length: int
) -> Program[int]:
    """Steps 1 and 3 of Protocol 2 for Alice; returns s^A (an XOR share of [x >= y])."""
    yield encode_point(encryptor, leaf, bit_length)
    tests = yield from expect(MembershipTests)
    return read_membership(private_key, tests, bit_length=bit_length)


def protocol2_bob_program(
    encryptor: Encryptor, leaf: int, *, bit_length: int, rng: RandomSource
) -> Program[int]:
    """Step 2 of Protocol 2 for Bob; returns s^B (an XOR share of [x >= y])."""
    point = yield from expect(PointEncoding)
    s_b = rng.randrange(2)
    first, last = (1, leaf - 1) if s_b else (leaf, 1 << bit_length)
    yield membership_tests(encryptor, point, first, last, bit_length=bit_length, rng=rng)
    return s_b


def type3_alice(
    encryptor: Encryptor, private_key: PrivateKey, leaf: int, *, bit_length: int
) -> Program[None]:
    """PN-NP-SE for Alice: Protocol 2 up to step 3, then a fresh E(s^A)."""
    s_a = yield from protocol2_alice_program(encryptor, private_key, leaf, bit_length=bit_length)
    yield EncryptedBit(encryptor.encrypt(s_a))


def type3_bob(encryptor: Encryptor, leaf: int, *, bit_length: int, rng: RandomSource) -> Program[int]:
    """PN-NP-SE for Bob: returns E([x >= y]) = E(s^A ⊕ s^B), kept by Bob (so not re-randomized here)."""
    s_b = yield from protocol2_bob_program(encryptor, leaf, bit_length=bit_length, rng=rng)
    bit = yield from expect(EncryptedBit)
    return encryptor.xor_bit(encryptor.check(bit.ciphertext), s_b)


class _LeafHolder(KeyHolder[T]):
    """Alice in Protocols 1 and 2: her input x, as the tree leaf x + 1 (the root is leaf-free)."""

    def __init__(
        self, keypair: KeyPair, x: int, params: ComparisonParameters, *, pool: RandomnessPool | None = None
    ) -> None:
        super().__init__(keypair, params, pool=pool)
        params.check_input(x, "x")
        self._leaf = x + 1


class _LeafEvaluator(Evaluator[T]):
    """Bob in Protocols 1 and 2: his input y, as the tree leaf y + 1."""

    def __init__(
        self,
        public_key: PublicKey,
        y: int,
        params: ComparisonParameters,
        *,
        pool: RandomnessPool | None = None,
        rng: RandomSource | None = None,
    ) -> None:
        super().__init__(public_key, params, pool=pool, rng=rng)
        params.check_input(y, "y")
        self._leaf = y + 1


class Protocol1Alice(_LeafHolder[int]):
    """Protocol 1, Alice: outputs δ = [x >= y] (Alice learns the result, Bob nothing)."""

    def _run(self) -> Program[int]:
        bits = self._params.bit_length
        yield encode_point(self._encryptor, self._leaf, bits)
        tests = yield from expect(MembershipTests)
        return read_membership(self._private, tests, bit_length=bits)


class Protocol1Bob(_LeafEvaluator[None]):
    """Protocol 1, Bob: tests Alice's leaf against [y, n]; no output."""

    def _run(self) -> Program[None]:
        point = yield from expect(PointEncoding)
        bits = self._params.bit_length
        yield membership_tests(self._encryptor, point, self._leaf, 1 << bits, bit_length=bits, rng=self._rng)


class Protocol2Alice(_LeafHolder[int]):
    """Protocol 2 (PN-NP-SS), Alice: outputs δ^A (``params.output_sharing``: xor or additive mod N)."""

    def _run(self) -> Program[int]:
        bits = self._params.bit_length
        s_a = yield from protocol2_alice_program(self._encryptor, self._private, self._leaf, bit_length=bits)
        if self._params.output_sharing == "xor":
            return s_a
        yield EncryptedBit(self._encryptor.encrypt(s_a))
        masked = yield from expect(MaskedResult)
        return decrypt(self._private, self._encryptor.check(masked.ciphertext))


class Protocol2Bob(_LeafEvaluator[int]):
    """Protocol 2 (PN-NP-SS), Bob: outputs δ^B (``params.output_sharing``: xor or additive mod N)."""

    def _run(self) -> Program[int]:
        encryptor, rng = self._encryptor, self._rng
        bits = self._params.bit_length
        s_b = yield from protocol2_bob_program(encryptor, self._leaf, bit_length=bits, rng=rng)
        if self._params.output_sharing == "xor":
            return s_b
        bit = yield from expect(EncryptedBit)
        delta = encryptor.xor_bit(encryptor.check(bit.ciphertext), s_b)
        share_b = rng.randrange(encryptor.modulus)
        yield MaskedResult(encryptor.rerandomize(encryptor.add_plain(delta, -share_b)))
        return share_b


def _check_point(encryptor: Encryptor, point: PointEncoding, bit_length: int) -> None:
    if len(point.nodes) != bit_length:
        raise SecureProtocolError(f"expected {bit_length} encrypted nodes, received {len(point.nodes)}")
    for ciphertext in point.nodes:
        encryptor.check(ciphertext)
