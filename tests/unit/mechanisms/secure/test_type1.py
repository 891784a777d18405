"""The Type 1 protocol (SS-SS-SS): correctness, 2ℓ + 6 ciphertexts, re-randomization, refusals."""

from __future__ import annotations

import random

import pytest

from mechanisms.errors import MechanismError
from mechanisms.secure import (
    ComparisonParameters,
    EncryptedBit,
    EncryptedQuotient,
    EncryptedShare,
    KeyPair,
    LocalRun,
    MaskedDifference,
    MaskedResult,
    RandomnessPool,
    Type1Alice,
    Type1Bob,
    combine_shares,
    run_local,
    split_plaintext,
    type1_ciphertexts,
    type1_pool_demand,
)
from mechanisms.secure.paillier import Encryptor
from mechanisms.secure.parameters import OutputSharing
from tests.unit.mechanisms.secure.keys import parameters


def compare(
    keypair: KeyPair,
    x: int,
    y: int,
    params: ComparisonParameters,
    *,
    seed: int,
    alice_pool: RandomnessPool | None = None,
    bob_pool: RandomnessPool | None = None,
) -> LocalRun[int, int]:
    """One Type 1 run on fresh random splits of x and y; coins from a seeded source."""
    rng = random.Random(seed)
    n = keypair.public.n
    x_a, x_b = split_plaintext(x, n, rng)
    y_a, y_b = split_plaintext(y, n, rng)
    alice = Type1Alice(keypair, x_a, y_a, params, pool=alice_pool)
    bob = Type1Bob(keypair.public, x_b, y_b, params, pool=bob_pool, rng=rng)
    return run_local(alice, bob)


def result(keypair: KeyPair, run: LocalRun[int, int], sharing: OutputSharing) -> int:
    return combine_shares(run.alice_output, run.bob_output, sharing=sharing, modulus=keypair.public.n)


@pytest.mark.parametrize("sharing", ["xor", "additive"])
def test_correct_for_every_3_bit_pair(keypair: KeyPair, sharing: OutputSharing) -> None:
    params = parameters(3, output_sharing=sharing)
    pairs = [(x, y) for x in range(8) for y in range(8)]
    outcomes = [
        result(keypair, compare(keypair, x, y, params, seed=i), sharing) for i, (x, y) in enumerate(pairs)
    ]
    assert outcomes == [int(x >= y) for x, y in pairs]


def test_xor_output_shares_are_bits(keypair: KeyPair) -> None:
    params = parameters(3)
    seen = set()
    for seed in range(12):
        run = compare(keypair, 5, 2, params, seed=seed)
        assert {run.alice_output, run.bob_output} <= {0, 1}
        seen.add(run.bob_output)
    assert seen == {0, 1}


@pytest.mark.parametrize("bit_length", [10, 25, 64])
def test_random_and_edge_pairs(keypair: KeyPair, bit_length: int) -> None:
    n = 2**bit_length
    rng = random.Random(bit_length)
    pairs = [(0, 0), (0, n - 1), (n - 1, 0), (n - 1, n - 1), (7, 7), (1, 0), (0, 1)]
    pairs += [(rng.randrange(n), rng.randrange(n)) for _ in range(6 if bit_length < 64 else 2)]
    for sharing in ("xor", "additive"):
        params = parameters(bit_length, output_sharing=sharing)
        for seed, (x, y) in enumerate(pairs):
            assert result(keypair, compare(keypair, x, y, params, seed=seed), sharing) == int(x >= y), (x, y)


@pytest.mark.parametrize("bit_length", [1, 3, 10, 25])
def test_sends_2l_plus_6_ciphertexts_in_6_flights(keypair: KeyPair, bit_length: int) -> None:
    run = compare(keypair, 0, 2**bit_length - 1, parameters(bit_length), seed=1)
    assert run.ciphertexts == type1_ciphertexts(bit_length) == 2 * bit_length + 6
    assert (run.ciphertexts_from("alice"), run.ciphertexts_from("bob")) == (bit_length + 4, bit_length + 2)
    assert run.flights == 6
    assert [type(message) for _, message in run.transcript][:3] == [
        EncryptedShare,
        EncryptedShare,
        MaskedDifference,
    ]


def test_bytes_are_counted_per_direction(keypair: KeyPair) -> None:
    run = compare(keypair, 3, 3, parameters(3), seed=2)
    to_bob = sum(len(m.to_bytes()) for sender, m in run.transcript if sender == "alice")
    to_alice = sum(len(m.to_bytes()) for sender, m in run.transcript if sender == "bob")
    assert (run.bytes_to_bob, run.bytes_to_alice) == (to_bob, to_alice)


@pytest.mark.parametrize("y", [0, 5])  # y = 0 takes the R = [1, n] / R = ∅ paths
def test_pool_demand_covers_one_comparison_exactly(keypair: KeyPair, y: int) -> None:
    alice_need, bob_need = type1_pool_demand(4)
    alice_pool = RandomnessPool(keypair.public, rng=random.Random(1))
    bob_pool = RandomnessPool(keypair.public, rng=random.Random(2))
    alice_pool.fill(alice_need)
    bob_pool.fill(bob_need)
    for seed in range(4):  # both of Bob's coins
        compare(keypair, 9, y, parameters(4), seed=seed, alice_pool=alice_pool, bob_pool=bob_pool)
        assert (len(alice_pool), len(bob_pool)) == (0, 0)
        assert (alice_pool.online_draws, bob_pool.online_draws) == (seed * alice_need, seed * bob_need)


def test_every_ciphertext_bob_sends_is_rerandomized(keypair: KeyPair) -> None:
    # Same inputs, same coins, same Alice randomness; only Bob's pool differs. Alice's messages depend on
    # plaintexts only, so they repeat exactly; every ciphertext Bob sends must still change.
    params = parameters(6)
    runs = [
        compare(
            keypair,
            40,
            17,
            params,
            seed=5,
            alice_pool=RandomnessPool(keypair.public, rng=random.Random(7)),
            bob_pool=RandomnessPool(keypair.public, rng=random.Random(bob_seed)),
        )
        for bob_seed in (8, 9)
    ]
    assert len(runs[0].transcript) == len(runs[1].transcript) == 8
    for (sender, one), (_, two) in zip(runs[0].transcript, runs[1].transcript, strict=True):
        if sender == "alice":
            assert one == two
        else:
            assert set(ciphertexts(one)).isdisjoint(ciphertexts(two)), type(one).__name__
    assert runs[0].alice_output == runs[1].alice_output


def ciphertexts(message: object) -> list[int]:
    values = vars(message).values()
    return [item for value in values for item in (value if isinstance(value, tuple) else (value,))]


def is_nude(ciphertext: int, keypair: KeyPair) -> bool:
    """1 + k·N: what remains when a ciphertext carries no randomness beyond Alice's own."""
    return ciphertext % keypair.public.n == 1


def alice_can_link_bobs_answers(keypair: KeyPair, run: LocalRun[int, int]) -> bool:
    """The spec's §8 attack: are Bob's replies plaintext shifts of Alice's own ciphertexts?"""
    messages = {type(m): m for _, m in run.transcript}
    shares = [m.ciphertext for _, m in run.transcript if isinstance(m, EncryptedShare)]
    encryptor = Encryptor(keypair.public)
    difference = encryptor.add(
        messages[MaskedDifference].ciphertext, encryptor.add(shares[1], encryptor.negate(shares[0]))
    )
    quotient, bit = messages[EncryptedQuotient].ciphertext, messages[EncryptedBit].ciphertext
    final = messages[MaskedResult].ciphertext
    candidates = [difference]
    for q in (quotient, encryptor.negate(quotient)):
        for s in (bit, encryptor.negate(bit)):
            candidates.append(encryptor.add(final, encryptor.add(q, s)))
    return any(is_nude(candidate, keypair) for candidate in candidates)


def test_alice_cannot_link_bobs_answers_to_her_ciphertexts(keypair: KeyPair) -> None:
    params = parameters(4)
    assert not any(
        alice_can_link_bobs_answers(keypair, compare(keypair, 9, 4, params, seed=s)) for s in range(6)
    )


def test_linkage_check_has_teeth_without_rerandomization(
    keypair: KeyPair, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Encryptor, "rerandomize", lambda self, ciphertext: ciphertext)
    assert alice_can_link_bobs_answers(keypair, compare(keypair, 9, 4, parameters(4), seed=0))


def test_refuses_a_key_too_small_for_the_bit_length(keypair: KeyPair) -> None:
    params = parameters(220)  # needs N >= 2^262 > 2^256
    with pytest.raises(MechanismError, match=r"N must be at least 2\^262"):
        Type1Alice(keypair, 0, 0, params)
    with pytest.raises(MechanismError, match=r"N must be at least 2\^262"):
        Type1Bob(keypair.public, 0, 0, params)


def test_refuses_keys_below_the_production_floor_by_default(keypair: KeyPair) -> None:
    with pytest.raises(MechanismError, match="256 bits; at least 1024 are required"):
        Type1Alice(keypair, 0, 0, ComparisonParameters(bit_length=3))


@pytest.mark.parametrize("share", [-1, "n", 3.0, True])
def test_refuses_shares_outside_z_n(keypair: KeyPair, share: object) -> None:
    with pytest.raises(MechanismError, match=r"x_share is not a share in \[0, N\)"):
        Type1Bob(keypair.public, share, 0, parameters(3))  # type: ignore[arg-type]


def test_refuses_share_equal_to_the_modulus(keypair: KeyPair) -> None:
    with pytest.raises(MechanismError, match=r"y_share is not a share in \[0, N\)"):
        Type1Alice(keypair, 0, keypair.public.n, parameters(3))
