"""Paillier on raw integers for the comparison protocols, on top of phe (python-paillier).

Why raw integers: phe's ``EncryptedNumber`` encodes values and refuses plaintexts above N/3, but shares are
uniform in Z_N; so we use ``raw_encrypt``/``raw_decrypt`` and do the homomorphic arithmetic ourselves mod N²
with g = N + 1 (E(a)·E(b) = E(a + b), E(a)^k = E(k·a), E(a)^−1 = E(−a), E(a)·(1 + N·k) = E(a + k)).
phe uses gmpy2 for ``powmod``/``mulmod``/``invert`` when it is installed (an optional extra); we call the
same helpers so that the speed-up applies here too.

Why a randomness pool: an encryption is ``(1 + N·m)·r^N mod N²`` and ``r^N`` is the only expensive part,
independent of m. :class:`RandomnessPool` computes these offline; online, encrypting or re-randomizing is one
modular multiplication (which is what the 0.011 ms of [D] Table 8.2's step 1 implies).

Why re-randomize: phe does not re-randomize the result of ``+`` or ``*``. A ciphertext computed from the
receiver's own ciphertexts lets the receiver test hypotheses about the sender's secrets (spec §8), so every
homomorphic result that leaves a party goes through :meth:`Encryptor.rerandomize`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from phe import paillier
from phe.util import invert, mulmod, powmod

from mechanisms.errors import MechanismError, SecureProtocolError
from mechanisms.random_source import RandomSource, secure_random_source
from mechanisms.secure.parameters import DEFAULT_KEY_BITS

PublicKey = paillier.PaillierPublicKey
PrivateKey = paillier.PaillierPrivateKey


@dataclass(frozen=True)
class KeyPair:
    """Alice's key pair: she decrypts, Bob computes on ciphertexts under ``public``."""

    public: PublicKey
    private: PrivateKey


def generate_keypair(bits: int = DEFAULT_KEY_BITS) -> KeyPair:
    """A fresh Paillier key pair with an exactly ``bits``-bit modulus ([D] Table 8.3 "initialization")."""
    if isinstance(bits, bool) or not isinstance(bits, int) or bits < 64 or bits % 2:
        # phe draws two bits/2-bit primes and retries until N has `bits` bits: odd sizes never terminate.
        raise MechanismError(
            f"key size must be an even number of bits >= 64, got {bits!r}",
            hint=f"use {DEFAULT_KEY_BITS} (or 1024 to reproduce [D] ch. 8)",
        )
    public, private = paillier.generate_paillier_keypair(n_length=bits)
    return KeyPair(public=public, private=private)


def public_key_from_modulus(modulus: int) -> PublicKey:
    """Rebuild Alice's public key from N as received in a ``PublicKeyAnnouncement`` (g = N + 1 in phe)."""
    if isinstance(modulus, bool) or not isinstance(modulus, int) or modulus < 3 or modulus % 2 == 0:
        raise SecureProtocolError("the announced Paillier modulus is not an odd integer > 2")
    return paillier.PaillierPublicKey(modulus)


def random_unit(modulus: int, rng: RandomSource) -> int:
    """A uniform element of Z_N^*: r_i of Protocols 1–2 and the r of r^N (non-units have probability ~2/√N)."""
    while True:
        value = 1 + rng.randrange(modulus - 1)
        if math.gcd(value, modulus) == 1:
            return value


class RandomnessPool:
    """Encryption randomness ρ = r^N mod N², drawn ahead of time with :meth:`fill`.

    :meth:`take` hands out each value once; if the pool has run dry it computes one on the spot and counts
    it in ``online_draws`` (benchmarks separate the online phase from precomputation with it).
    """

    def __init__(self, public_key: PublicKey, *, rng: RandomSource | None = None) -> None:
        self._modulus: int = public_key.n
        self._nsquare: int = public_key.nsquare
        self._rng = rng if rng is not None else secure_random_source()
        self._values: list[int] = []
        self.online_draws = 0

    def __len__(self) -> int:
        return len(self._values)

    def fill(self, count: int) -> None:
        """Precompute ``count`` more values (the offline phase)."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise MechanismError(f"count must be a non-negative integer, got {count!r}")
        self._values.extend(self._draw() for _ in range(count))

    def take(self) -> int:
        """One value never handed out before; computed now if the pool is empty."""
        if self._values:
            return self._values.pop()
        self.online_draws += 1
        return self._draw()

    def _draw(self) -> int:
        return powmod(random_unit(self._modulus, self._rng), self._modulus, self._nsquare)


class Encryptor:
    """Encryption and homomorphic arithmetic under one public key, randomness from a pool.

    Ciphertexts are plain ints in [1, N²). Methods that return a ciphertext another party may see without
    further masking are :meth:`encrypt` (fresh) and :meth:`rerandomize`; the others are building blocks.
    """

    def __init__(self, public_key: PublicKey, pool: RandomnessPool | None = None) -> None:
        self.public_key = public_key
        self.modulus: int = public_key.n
        self.nsquare: int = public_key.nsquare
        self.pool = pool if pool is not None else RandomnessPool(public_key)

    def nude(self, plaintext: int) -> int:
        """g^m = 1 + N·m mod N², the encryption with randomness 1 (= ``raw_encrypt(m % N, r_value=1)``)."""
        return (1 + self.modulus * (plaintext % self.modulus)) % self.nsquare

    def encrypt(self, plaintext: int) -> int:
        """A fresh encryption of ``plaintext mod N``: one multiplication with a pooled r^N."""
        return mulmod(self.nude(plaintext), self.pool.take(), self.nsquare)

    def rerandomize(self, ciphertext: int) -> int:
        """Same plaintext, fresh randomness: unlinkable to every ciphertext the receiver has seen."""
        return mulmod(ciphertext, self.pool.take(), self.nsquare)

    def add(self, left: int, right: int) -> int:
        """E(a) ⊕ E(b) = E(a + b)."""
        return mulmod(left, right, self.nsquare)

    def add_plain(self, ciphertext: int, plaintext: int) -> int:
        """E(a) ⊕ k = E(a + k) for any integer k (taken mod N)."""
        return mulmod(ciphertext, self.nude(plaintext), self.nsquare)

    def negate(self, ciphertext: int) -> int:
        """E(−a) as the inverse mod N² (cheaper than raising to N − 1)."""
        return int(invert(ciphertext, self.nsquare))

    def scale(self, ciphertext: int, factor: int) -> int:
        """k ⊗ E(a) = E(k·a) for any integer k (taken mod N)."""
        return powmod(ciphertext, factor % self.modulus, self.nsquare)

    def xor_bit(self, ciphertext: int, bit: int) -> int:
        """E(m ⊕ bit) for m ∈ {0, 1}: E(m)·(1 − 2·bit) ⊕ bit, i.e. E(m) or E(1 − m)."""
        return ciphertext if bit == 0 else self.add_plain(self.negate(ciphertext), 1)

    def check(self, ciphertext: object) -> int:
        """See :func:`check_ciphertext`."""
        return check_ciphertext(self.public_key, ciphertext)


def check_ciphertext(public_key: PublicKey, ciphertext: object) -> int:
    """A received ciphertext must be an int in [1, N²); anything else is a protocol violation."""
    if isinstance(ciphertext, bool) or not isinstance(ciphertext, int):
        raise SecureProtocolError("received a ciphertext that is not an integer")
    if not 0 < ciphertext < public_key.nsquare:
        raise SecureProtocolError("received a ciphertext outside [1, N²)")
    return ciphertext


def decrypt(private_key: PrivateKey, ciphertext: int) -> int:
    """The plaintext in [0, N) (phe's CRT ``raw_decrypt``; never ``decrypt``, which rejects shares)."""
    return int(private_key.raw_decrypt(ciphertext))


def is_zero(private_key: PrivateKey, ciphertext: int) -> bool:
    """Whether the plaintext is 0 mod p, at half the cost of a decryption.

    c^(p−1) mod p² = (1 + N)^(m(p−1)) · r^(N(p−1)) = 1 + N·m·(p−1) mod p², which is 1 iff p divides m.
    Alice only needs "is it zero" for Protocols 1–2's tests; a non-zero test value (uniform in Z_N^*) is
    divisible by p with probability ~1/q, i.e. never.
    """
    return powmod(ciphertext, private_key.p - 1, private_key.psquare) == 1
