"""Raw-integer Paillier on phe: encryption with pooled randomness, homomorphic steps, zero tests."""

from __future__ import annotations

import random

import pytest

from mechanisms.errors import MechanismError, SecureProtocolError
from mechanisms.secure import (
    Encryptor,
    KeyPair,
    RandomnessPool,
    decrypt,
    generate_keypair,
    public_key_from_modulus,
)
from mechanisms.secure.paillier import is_zero


def encryptor_for(keypair: KeyPair, seed: int = 0) -> Encryptor:
    return Encryptor(keypair.public, RandomnessPool(keypair.public, rng=random.Random(seed)))


def test_nude_encryption_equals_phe_raw_encrypt_with_randomness_one(keypair: KeyPair) -> None:
    encryptor = encryptor_for(keypair)
    n = keypair.public.n
    for plaintext in (0, 1, 12345, n // 2, n - 2, -1):
        assert encryptor.nude(plaintext) == keypair.public.raw_encrypt(plaintext % n, r_value=1)


def test_encryption_round_trips_over_all_of_z_n(keypair: KeyPair) -> None:
    encryptor = encryptor_for(keypair)
    n = keypair.public.n
    for plaintext in (0, 1, n // 3, n // 2, n - 1):
        assert decrypt(keypair.private, encryptor.encrypt(plaintext)) == plaintext


def test_pooled_encryption_decrypts_with_phe(keypair: KeyPair) -> None:
    ciphertext = encryptor_for(keypair).encrypt(42)
    assert keypair.private.raw_decrypt(ciphertext) == 42


def test_homomorphic_operations(keypair: KeyPair) -> None:
    encryptor = encryptor_for(keypair)
    n = keypair.public.n
    a, b = encryptor.encrypt(20), encryptor.encrypt(7)
    assert decrypt(keypair.private, encryptor.add(a, b)) == 27
    assert decrypt(keypair.private, encryptor.add_plain(a, -25)) == n - 5
    assert decrypt(keypair.private, encryptor.negate(b)) == n - 7
    assert decrypt(keypair.private, encryptor.scale(b, 3)) == 21
    assert decrypt(keypair.private, encryptor.scale(b, -1)) == n - 7


@pytest.mark.parametrize(("bit", "flip"), [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_xor_bit(keypair: KeyPair, bit: int, flip: int) -> None:
    encryptor = encryptor_for(keypair)
    assert decrypt(keypair.private, encryptor.xor_bit(encryptor.encrypt(bit), flip)) == bit ^ flip


def test_rerandomize_changes_the_ciphertext_not_the_plaintext(keypair: KeyPair) -> None:
    encryptor = encryptor_for(keypair)
    ciphertext = encryptor.encrypt(9)
    fresh = encryptor.rerandomize(ciphertext)
    assert fresh != ciphertext
    assert decrypt(keypair.private, fresh) == 9


def test_is_zero_agrees_with_decryption(keypair: KeyPair) -> None:
    encryptor = encryptor_for(keypair)
    rng = random.Random(3)
    for plaintext in [0, 1, keypair.public.n - 1, *(rng.randrange(keypair.public.n) for _ in range(20))]:
        assert is_zero(keypair.private, encryptor.encrypt(plaintext)) == (plaintext == 0)


def test_pool_hands_out_precomputed_values_once(keypair: KeyPair) -> None:
    pool = RandomnessPool(keypair.public, rng=random.Random(1))
    pool.fill(3)
    assert len(pool) == 3
    taken = [pool.take() for _ in range(3)]
    assert len(set(taken)) == 3
    assert len(pool) == 0
    assert pool.online_draws == 0


def test_pool_values_are_nth_powers(keypair: KeyPair) -> None:
    pool = RandomnessPool(keypair.public, rng=random.Random(1))
    pool.fill(1)
    # An N-th power encrypts 0.
    assert decrypt(keypair.private, pool.take()) == 0


def test_empty_pool_computes_online_and_counts_it(keypair: KeyPair) -> None:
    pool = RandomnessPool(keypair.public, rng=random.Random(1))
    pool.take()
    pool.take()
    assert pool.online_draws == 2


def test_pool_refuses_negative_fill(keypair: KeyPair) -> None:
    with pytest.raises(MechanismError, match="non-negative"):
        RandomnessPool(keypair.public).fill(-1)


@pytest.mark.parametrize("bits", [63, 255, 0])
def test_generate_keypair_refuses_odd_or_tiny_sizes(bits: int) -> None:
    with pytest.raises(MechanismError, match="even number of bits"):
        generate_keypair(bits)


def test_generated_modulus_has_exactly_the_requested_bits(keypair: KeyPair) -> None:
    assert keypair.public.n.bit_length() == 256


def test_public_key_round_trips_through_its_modulus(keypair: KeyPair) -> None:
    assert public_key_from_modulus(keypair.public.n) == keypair.public


def test_public_key_from_even_modulus_is_refused() -> None:
    with pytest.raises(SecureProtocolError, match="odd integer"):
        public_key_from_modulus(2**64)


@pytest.mark.parametrize("ciphertext", [0, -5, "7", True])
def test_check_refuses_non_ciphertexts(keypair: KeyPair, ciphertext: object) -> None:
    with pytest.raises(SecureProtocolError):
        encryptor_for(keypair).check(ciphertext)


def test_check_refuses_values_beyond_n_squared(keypair: KeyPair) -> None:
    with pytest.raises(SecureProtocolError, match=r"outside \[1, N²\)"):
        encryptor_for(keypair).check(keypair.public.nsquare)
