"""Protocols 1 and 2 with the root removed: exhaustive for ℓ = 3, random pairs beyond, counts, aborts."""

from __future__ import annotations

import random

import pytest

from mechanisms.errors import MechanismError, SecureProtocolError
from mechanisms.secure import (
    Encryptor,
    KeyPair,
    MembershipTests,
    PointEncoding,
    Protocol1Alice,
    Protocol1Bob,
    Protocol2Alice,
    Protocol2Bob,
    RandomnessPool,
    combine_shares,
    decrypt,
    run_local,
)
from mechanisms.secure.parameters import OutputSharing
from mechanisms.secure.protocols import membership_tests
from tests.unit.mechanisms.secure.keys import parameters

PAIRS_3 = [(x, y) for x in range(8) for y in range(8)]


def protocol1(keypair: KeyPair, x: int, y: int, bit_length: int, seed: int = 0) -> int:
    params = parameters(bit_length)
    run = run_local(
        Protocol1Alice(keypair, x, params), Protocol1Bob(keypair.public, y, params, rng=random.Random(seed))
    )
    return run.alice_output


def protocol2(keypair: KeyPair, x: int, y: int, bit_length: int, sharing: OutputSharing, seed: int) -> int:
    params = parameters(bit_length, output_sharing=sharing)
    run = run_local(
        Protocol2Alice(keypair, x, params), Protocol2Bob(keypair.public, y, params, rng=random.Random(seed))
    )
    return combine_shares(run.alice_output, run.bob_output, sharing=sharing, modulus=keypair.public.n)


def test_protocol1_is_correct_for_every_3_bit_pair(keypair: KeyPair) -> None:
    assert [protocol1(keypair, x, y, 3) for x, y in PAIRS_3] == [int(x >= y) for x, y in PAIRS_3]


@pytest.mark.parametrize("sharing", ["xor", "additive"])
def test_protocol2_is_correct_for_every_3_bit_pair_and_both_coins(
    keypair: KeyPair, sharing: OutputSharing
) -> None:
    # Seeds 0..3 give Bob both values of s^B for every pair (checked by the coin test below).
    for seed in range(4):
        results = [protocol2(keypair, x, y, 3, sharing, seed * 100 + i) for i, (x, y) in enumerate(PAIRS_3)]
        assert results == [int(x >= y) for x, y in PAIRS_3]


def test_protocol2_xor_shares_are_bits_and_bobs_coin_takes_both_values(keypair: KeyPair) -> None:
    params = parameters(3)
    coins = set()
    for seed in range(16):
        run = run_local(
            Protocol2Alice(keypair, 0, params),
            Protocol2Bob(keypair.public, 0, params, rng=random.Random(seed)),
        )
        assert {run.alice_output, run.bob_output} <= {0, 1}
        coins.add(run.bob_output)
    assert coins == {0, 1}


@pytest.mark.parametrize("bit_length", [10, 25, 64])
def test_random_and_edge_pairs(keypair: KeyPair, bit_length: int) -> None:
    n = 2**bit_length
    rng = random.Random(bit_length)
    pairs = [(0, 0), (0, n - 1), (n - 1, 0), (n - 1, n - 1), (5, 5), (1, 0), (0, 1)]
    pairs += [(rng.randrange(n), rng.randrange(n)) for _ in range(5)]
    for index, (x, y) in enumerate(pairs):
        assert protocol1(keypair, x, y, bit_length, seed=index) == int(x >= y)
        assert protocol2(keypair, x, y, bit_length, "xor", index) == int(x >= y)


@pytest.mark.parametrize("bit_length", [1, 3, 10])
def test_protocol1_sends_l_ciphertexts_each_way(keypair: KeyPair, bit_length: int) -> None:
    params = parameters(bit_length)
    run = run_local(Protocol1Alice(keypair, 1, params), Protocol1Bob(keypair.public, 0, params))
    assert (run.ciphertexts_from("alice"), run.ciphertexts_from("bob"), run.flights) == (
        bit_length,
        bit_length,
        2,
    )


@pytest.mark.parametrize(("sharing", "extra", "flights"), [("xor", 0, 2), ("additive", 2, 4)])
def test_protocol2_ciphertext_counts(
    keypair: KeyPair, sharing: OutputSharing, extra: int, flights: int
) -> None:
    params = parameters(5, output_sharing=sharing)
    run = run_local(Protocol2Alice(keypair, 3, params), Protocol2Bob(keypair.public, 4, params))
    assert run.ciphertexts == 2 * 5 + extra
    assert run.flights == flights


def test_alice_omits_the_root(keypair: KeyPair) -> None:
    (point,) = Protocol1Alice(keypair, 5, parameters(3)).start()  # leaf 6: (0, 6), (1, 3), (2, 2)
    assert isinstance(point, PointEncoding)
    assert [decrypt(keypair.private, c) for c in point.nodes] == [6, 2**4 + 3, 2 * 2**4 + 2]


@pytest.mark.parametrize(("first", "last", "zeros"), [(1, 8, 1), (1, 0, 0), (4, 8, 1), (1, 3, 0)])
def test_membership_tests_hold_one_zero_iff_the_leaf_is_in_the_range(
    keypair: KeyPair, first: int, last: int, zeros: int
) -> None:
    encryptor = Encryptor(keypair.public, RandomnessPool(keypair.public, rng=random.Random(0)))
    (point,) = Protocol1Alice(keypair, 5, parameters(3)).start()  # leaf 6
    assert isinstance(point, PointEncoding)
    tests = membership_tests(encryptor, point, first, last, bit_length=3, rng=random.Random(1))
    plaintexts = [decrypt(keypair.private, c) for c in tests.tests]
    assert len(plaintexts) == 3
    assert plaintexts.count(0) == zeros


def test_alice_aborts_on_two_zero_tests(keypair: KeyPair) -> None:
    encryptor = Encryptor(keypair.public)
    alice = Protocol1Alice(keypair, 2, parameters(3))
    alice.start()
    with pytest.raises(SecureProtocolError, match="more than one membership test is zero"):
        alice.receive(MembershipTests((encryptor.encrypt(0), encryptor.encrypt(0), encryptor.encrypt(9))))


def test_alice_refuses_the_wrong_number_of_tests(keypair: KeyPair) -> None:
    alice = Protocol1Alice(keypair, 2, parameters(3))
    alice.start()
    with pytest.raises(SecureProtocolError, match="expected 3 membership tests, received 1"):
        alice.receive(MembershipTests((Encryptor(keypair.public).encrypt(1),)))


def test_bob_refuses_the_wrong_number_of_nodes(keypair: KeyPair) -> None:
    bob = Protocol1Bob(keypair.public, 2, parameters(3))
    bob.start()
    with pytest.raises(SecureProtocolError, match="expected 3 encrypted nodes, received 2"):
        bob.receive(PointEncoding((5, 6)))


@pytest.mark.parametrize("party", ["alice", "bob"])
def test_refuses_inputs_outside_the_bit_length(keypair: KeyPair, party: str) -> None:
    params = parameters(3)
    with pytest.raises(MechanismError, match=r"outside \[0, 2\^3\)"):
        if party == "alice":
            Protocol2Alice(keypair, 8, params)
        else:
            Protocol2Bob(keypair.public, -1, params)
