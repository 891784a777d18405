"""The two sides every comparison protocol has: the key holder (Alice) and the evaluator (Bob).

Each protocol class used to repeat the same set-up — check the modulus against the parameters, wrap the
key in an :class:`Encryptor` drawing on an optional randomness pool, and, on Bob's side, fall back to the
operating system's randomness when no generator is injected. The two bases below do it once, so a
protocol class states only its own inputs and its program.
"""

from __future__ import annotations

from typing import TypeVar

from mechanisms.random_source import RandomSource, secure_random_source
from mechanisms.secure.paillier import Encryptor, KeyPair, PublicKey, RandomnessPool
from mechanisms.secure.parameters import ComparisonParameters
from mechanisms.secure.party import Party

T = TypeVar("T")


class KeyHolder(Party[T]):
    """Alice: holds the Paillier key pair, so she can decrypt what Bob sends back."""

    def __init__(
        self, keypair: KeyPair, params: ComparisonParameters, *, pool: RandomnessPool | None = None
    ) -> None:
        super().__init__()
        params.check_modulus(keypair.public.n)
        self._private = keypair.private
        self._encryptor = Encryptor(keypair.public, pool)
        self._params = params


class Evaluator(Party[T]):
    """Bob: holds only Alice's public key, and the randomness that masks what he sends back (a
    cryptographically strong source unless a test injects a seeded one)."""

    def __init__(
        self,
        public_key: PublicKey,
        params: ComparisonParameters,
        *,
        pool: RandomnessPool | None = None,
        rng: RandomSource | None = None,
    ) -> None:
        super().__init__()
        params.check_modulus(public_key.n)
        self._encryptor = Encryptor(public_key, pool)
        self._params = params
        self._rng = rng if rng is not None else secure_random_source()
