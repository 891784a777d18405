"""Conversions 1–5 one at a time (Conversion 5 exhaustively for ℓ = 3)."""

from __future__ import annotations

import random

import pytest

from mechanisms.errors import SecureProtocolError
from mechanisms.secure import (
    Conversion5Alice,
    Conversion5Bob,
    EncryptedQuotient,
    Encryptor,
    KeyPair,
    MaskedDifference,
    MaskedResult,
    RandomnessPool,
    combine_shares,
    complete_encryption,
    decrypt,
    encrypt_share,
    mask_ciphertext,
    run_local,
    split_plaintext,
    unmask,
)
from mechanisms.secure.parameters import OutputSharing
from tests.unit.mechanisms.secure.keys import parameters


def encryptor_for(keypair: KeyPair, seed: int = 0) -> Encryptor:
    return Encryptor(keypair.public, RandomnessPool(keypair.public, rng=random.Random(seed)))


def test_conversion1_shares_add_up_mod_n(keypair: KeyPair) -> None:
    n = keypair.public.n
    share_a, share_b = split_plaintext(1234, n, random.Random(0))
    assert 0 <= share_a < n and 0 <= share_b < n
    assert (share_a + share_b) % n == 1234


@pytest.mark.parametrize(
    ("sharing", "a", "b", "value"), [("xor", 1, 1, 0), ("xor", 0, 1, 1), ("additive", 5, 9, 3)]
)
def test_conversion2_combines_shares(sharing: OutputSharing, a: int, b: int, value: int) -> None:
    assert combine_shares(a, b, sharing=sharing, modulus=11) == value


def test_conversion3_gives_bob_the_encryption_of_the_sum(keypair: KeyPair) -> None:
    encryptor = encryptor_for(keypair)
    share_a, share_b = split_plaintext(77, keypair.public.n, random.Random(1))
    enc_x = complete_encryption(encryptor, encrypt_share(encryptor, share_a), share_b)
    assert decrypt(keypair.private, enc_x) == 77


@pytest.mark.parametrize("sharing", ["xor", "additive"])
@pytest.mark.parametrize("bit", [0, 1])
def test_conversion4_shares_reconstruct_the_plaintext(
    keypair: KeyPair, sharing: OutputSharing, bit: int
) -> None:
    encryptor = encryptor_for(keypair)
    for seed in range(4):
        message, share_b = mask_ciphertext(
            encryptor, encryptor.encrypt(bit), sharing=sharing, rng=random.Random(seed)
        )
        share_a = unmask(keypair.private, message, sharing=sharing)
        assert combine_shares(share_a, share_b, sharing=sharing, modulus=keypair.public.n) == bit


def test_conversion4_xor_refuses_a_share_that_is_not_a_bit(keypair: KeyPair) -> None:
    with pytest.raises(SecureProtocolError, match="not a bit"):
        unmask(keypair.private, MaskedResult(encryptor_for(keypair).encrypt(2)), sharing="xor")


def conversion5(keypair: KeyPair, x: int, y: int, bit_length: int, seed: int) -> int:
    params = parameters(bit_length)
    encryptor = encryptor_for(keypair, seed)
    bob = Conversion5Bob(
        keypair.public, encryptor.encrypt(x), encryptor.encrypt(y), params, rng=random.Random(seed)
    )
    run = run_local(Conversion5Alice(keypair, params), bob)
    assert run.ciphertexts == 2 * bit_length + 3
    return decrypt(keypair.private, run.bob_output)


def test_conversion5_is_correct_for_every_3_bit_pair(keypair: KeyPair) -> None:
    pairs = [(x, y) for x in range(8) for y in range(8)]
    assert [conversion5(keypair, x, y, 3, seed) for seed, (x, y) in enumerate(pairs)] == [
        int(x >= y) for x, y in pairs
    ]


def test_conversion5_on_random_10_bit_pairs(keypair: KeyPair) -> None:
    rng = random.Random(10)
    for seed in range(10):
        x, y = rng.randrange(1024), rng.randrange(1024)
        assert conversion5(keypair, x, y, 10, seed) == int(x >= y)


def test_conversion5_alice_refuses_a_masked_difference_beyond_its_bound(keypair: KeyPair) -> None:
    params = parameters(3)
    alice = Conversion5Alice(keypair, params)
    alice.start()
    too_big = encryptor_for(keypair).encrypt(2 * params.leaves + params.mask_bound)
    with pytest.raises(SecureProtocolError, match="exceeds its bound"):
        alice.receive(MaskedDifference(too_big))


def test_conversion5_bob_refuses_an_out_of_order_message(keypair: KeyPair) -> None:
    encryptor = encryptor_for(keypair)
    bob = Conversion5Bob(keypair.public, encryptor.encrypt(1), encryptor.encrypt(2), parameters(3))
    bob.start()
    with pytest.raises(SecureProtocolError, match="expected EncryptedQuotient, received MaskedResult"):
        bob.receive(MaskedResult(encryptor.encrypt(0)))
    with pytest.raises(SecureProtocolError, match="aborted earlier"):
        bob.receive(EncryptedQuotient(encryptor.encrypt(0)))
