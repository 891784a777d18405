"""Messages survive their byte encoding, and malformed bytes are refused, never half-decoded."""

from __future__ import annotations

import pytest

from mechanisms.errors import SecureProtocolError
from mechanisms.secure import (
    FORMAT_VERSION,
    EncryptedBit,
    EncryptedQuotient,
    EncryptedShare,
    MaskedDifference,
    MaskedResult,
    MembershipTests,
    Message,
    PointEncoding,
    PublicKeyAnnouncement,
    decode_message,
)

BIG = 2**4095 + 12345
EXAMPLES: list[Message] = [
    PublicKeyAnnouncement(2**2047 + 1),
    EncryptedShare(BIG),
    MaskedDifference(1),
    EncryptedQuotient(0),
    PointEncoding((BIG, 5, 0)),
    PointEncoding(()),
    MembershipTests((7, BIG)),
    EncryptedBit(255),
    MaskedResult(256),
]


@pytest.mark.parametrize("message", EXAMPLES, ids=lambda m: type(m).__name__)
def test_round_trip(message: Message) -> None:
    data = message.to_bytes()
    assert decode_message(data) == message
    assert type(message).from_bytes(data) == message


def test_encoding_is_the_documented_layout() -> None:
    assert MembershipTests((0, 258)).to_bytes() == bytes(
        [FORMAT_VERSION, 6, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2, 1, 2]
    )


def test_ciphertext_counts() -> None:
    assert PublicKeyAnnouncement(3).ciphertext_count == 0
    assert EncryptedShare(3).ciphertext_count == 1
    assert PointEncoding((1, 2, 3)).ciphertext_count == 3


def test_from_bytes_refuses_another_message_type() -> None:
    with pytest.raises(SecureProtocolError, match="expected EncryptedBit, received MaskedResult"):
        EncryptedBit.from_bytes(MaskedResult(5).to_bytes())


def test_refuses_unknown_version() -> None:
    data = bytearray(EncryptedBit(5).to_bytes())
    data[0] = FORMAT_VERSION + 1
    with pytest.raises(SecureProtocolError, match="format version 2 is not supported"):
        decode_message(bytes(data))


def test_refuses_unknown_tag() -> None:
    with pytest.raises(SecureProtocolError, match="unknown message tag 200"):
        decode_message(bytes([FORMAT_VERSION, 200]))


def test_refuses_trailing_bytes() -> None:
    with pytest.raises(SecureProtocolError, match="1 trailing bytes"):
        decode_message(EncryptedBit(5).to_bytes() + b"\x00")


@pytest.mark.parametrize("cut", [1, 3, 6])
def test_refuses_truncated_messages(cut: int) -> None:
    data = EncryptedBit(2**40).to_bytes()
    with pytest.raises(SecureProtocolError):
        decode_message(data[:cut])


def test_refuses_a_tuple_longer_than_the_message() -> None:
    with pytest.raises(SecureProtocolError, match="more items"):
        decode_message(bytes([FORMAT_VERSION, 5, 0xFF, 0xFF, 0xFF, 0xFF]))


def test_refuses_non_minimal_integers() -> None:
    with pytest.raises(SecureProtocolError, match="minimally"):
        decode_message(bytes([FORMAT_VERSION, 7, 0, 0, 0, 2, 0, 5]))


def test_refuses_to_encode_negative_fields() -> None:
    with pytest.raises(SecureProtocolError, match="non-negative"):
        EncryptedBit(-1).to_bytes()
