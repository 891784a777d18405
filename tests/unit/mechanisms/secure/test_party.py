"""The sans-I/O party contract: start once, messages in order, output only when finished."""

from __future__ import annotations

import random

import pytest

from mechanisms.errors import SecureProtocolError
from mechanisms.secure import (
    EncryptedShare,
    KeyPair,
    MaskedResult,
    Protocol2Alice,
    Protocol2Bob,
    Type1Alice,
    Type1Bob,
    run_local,
)
from mechanisms.secure.party import shuffled
from tests.unit.mechanisms.secure.keys import parameters


def test_alice_speaks_first_and_bob_waits(keypair: KeyPair) -> None:
    params = parameters(3)
    assert [type(m) for m in Type1Alice(keypair, 1, 2, params).start()] == [EncryptedShare, EncryptedShare]
    assert Type1Bob(keypair.public, 1, 2, params).start() == ()


def test_start_twice_is_refused(keypair: KeyPair) -> None:
    alice = Type1Alice(keypair, 1, 2, parameters(3))
    alice.start()
    with pytest.raises(SecureProtocolError, match="already started"):
        alice.start()


def test_receive_before_start_is_refused(keypair: KeyPair) -> None:
    with pytest.raises(SecureProtocolError, match="before start"):
        Type1Bob(keypair.public, 1, 2, parameters(3)).receive(EncryptedShare(5))


def test_output_before_finishing_is_refused(keypair: KeyPair) -> None:
    bob = Type1Bob(keypair.public, 1, 2, parameters(3))
    bob.start()
    with pytest.raises(SecureProtocolError, match="has not finished"):
        _ = bob.output


def test_out_of_order_message_aborts(keypair: KeyPair) -> None:
    bob = Type1Bob(keypair.public, 1, 2, parameters(3))
    bob.start()
    with pytest.raises(SecureProtocolError, match="expected EncryptedShare, received MaskedResult"):
        bob.receive(MaskedResult(5))


def test_message_after_finishing_is_refused(keypair: KeyPair) -> None:
    params = parameters(3)
    alice, bob = Protocol2Alice(keypair, 1, params), Protocol2Bob(keypair.public, 2, params)
    run_local(alice, bob)
    with pytest.raises(SecureProtocolError, match="after finishing"):
        bob.receive(MaskedResult(5))


def test_run_local_reports_a_stalled_exchange(keypair: KeyPair) -> None:
    # Alice stops after the XOR shares; Bob was told to convert them to additive shares and waits.
    alice = Protocol2Alice(keypair, 1, parameters(3, output_sharing="xor"))
    bob = Protocol2Bob(keypair.public, 2, parameters(3, output_sharing="additive"))
    with pytest.raises(SecureProtocolError, match="stopped before both parties finished"):
        run_local(alice, bob)


def test_shuffle_is_a_permutation_driven_by_the_source() -> None:
    values = list(range(20))
    first = shuffled(values, random.Random(1))
    assert sorted(first) == values
    assert first == shuffled(values, random.Random(1))
    assert first != shuffled(values, random.Random(2))
