"""MessageReader: framing across arbitrary chunk boundaries, limits, and hostile input."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.wire.errors import FramingError, WireProtocolError
from proxy.wire.messages import (
    MessageReader,
    Query,
    StartupMessage,
    decode_frontend_message,
    decode_startup_packet,
)

QUERY = b"Q" + struct.pack("!i", 13) + b"SELECT 1\0"
STARTUP = struct.pack("!ii", 20, 196608) + b"user\0alice\0\0"
# Fuzzing must not write a .hypothesis directory outside tests/unit/wire.
FUZZ = settings(database=None, max_examples=300, deadline=None)


def test_returns_none_until_a_message_is_complete() -> None:
    reader = MessageReader()
    reader.feed(QUERY[:3])
    assert reader.next_message() is None
    reader.feed(QUERY[3:-1])
    assert reader.next_message() is None
    reader.feed(QUERY[-1:])
    assert reader.next_message() == (b"Q", b"SELECT 1\0")
    assert reader.next_message() is None
    assert reader.buffered_size == 0


def test_splits_two_messages_fed_together() -> None:
    reader = MessageReader()
    reader.feed(QUERY + b"X\x00\x00\x00\x04" + b"S")
    assert reader.next_message() == (b"Q", b"SELECT 1\0")
    assert reader.next_message() == (b"X", b"")
    assert reader.next_message() is None
    assert reader.buffered_size == 1


def test_reads_startup_packet_then_typed_message() -> None:
    reader = MessageReader()
    reader.feed(STARTUP + QUERY)
    payload = reader.next_startup()
    assert payload is not None
    assert decode_startup_packet(payload) == StartupMessage(196608, {"user": "alice"})
    assert reader.next_message() == (b"Q", b"SELECT 1\0")


def test_startup_packet_fed_one_byte_at_a_time() -> None:
    reader = MessageReader()
    for index in range(len(STARTUP) - 1):
        reader.feed(STARTUP[index : index + 1])
        assert reader.next_startup() is None
    reader.feed(STARTUP[-1:])
    assert reader.next_startup() == STARTUP[4:]


def test_rejects_oversized_length_before_the_body_arrives() -> None:
    reader = MessageReader(max_message_size=1024)
    reader.feed(b"Q" + struct.pack("!i", 1025))
    with pytest.raises(FramingError, match="exceeds the limit of 1024 bytes"):
        reader.next_message()


def test_rejects_gigabyte_length_by_default() -> None:
    reader = MessageReader()
    reader.feed(b"Q" + struct.pack("!i", 2**31 - 1))
    with pytest.raises(FramingError, match="exceeds the limit"):
        reader.next_message()


def test_accepts_message_exactly_at_the_limit() -> None:
    reader = MessageReader(max_message_size=16)
    reader.feed(b"Q" + struct.pack("!i", 16) + b"x" * 11 + b"\0")
    assert reader.next_message() == (b"Q", b"x" * 11 + b"\0")


def test_rejects_length_smaller_than_the_length_field() -> None:
    reader = MessageReader()
    reader.feed(b"Q" + struct.pack("!i", 3))
    with pytest.raises(FramingError, match="invalid message length 3"):
        reader.next_message()


def test_rejects_negative_startup_length() -> None:
    reader = MessageReader()
    reader.feed(struct.pack("!i", -8))
    with pytest.raises(FramingError, match="invalid message length -8"):
        reader.next_startup()


def test_startup_packet_has_a_smaller_limit_than_messages() -> None:
    reader = MessageReader()
    reader.feed(struct.pack("!i", 10_001))
    with pytest.raises(FramingError, match="limit of 10000 bytes"):
        reader.next_startup()


def test_startup_limit_never_exceeds_message_limit() -> None:
    reader = MessageReader(max_message_size=64)
    reader.feed(struct.pack("!i", 65))
    with pytest.raises(FramingError, match="limit of 64 bytes"):
        reader.next_startup()


@st.composite
def message_streams(draw: st.DrawFn) -> tuple[list[tuple[bytes, bytes]], bytes, list[int]]:
    """Well-formed messages, their concatenation, and cut points to feed it in pieces."""
    messages = draw(
        st.lists(st.tuples(st.binary(min_size=1, max_size=1), st.binary(max_size=40)), max_size=6)
    )
    stream = b"".join(kind + struct.pack("!i", len(payload) + 4) + payload for kind, payload in messages)
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    return messages, stream, cuts


@FUZZ
@given(message_streams())
def test_framing_does_not_depend_on_chunk_boundaries(
    case: tuple[list[tuple[bytes, bytes]], bytes, list[int]],
) -> None:
    messages, stream, cuts = case
    reader = MessageReader()
    received: list[tuple[bytes, bytes]] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        reader.feed(stream[start:end])
        while (message := reader.next_message()) is not None:
            received.append(message)
    assert received == messages
    assert reader.buffered_size == 0


def _drain_typed(data: bytes) -> None:
    reader = MessageReader(max_message_size=4096)
    reader.feed(data)
    while (message := reader.next_message()) is not None:
        decode_frontend_message(*message)


def _drain_startup(data: bytes) -> None:
    reader = MessageReader()
    reader.feed(data)
    payload = reader.next_startup()
    if payload is not None:
        decode_startup_packet(payload)


@FUZZ
@given(st.binary(max_size=300))
def test_arbitrary_bytes_raise_only_wire_protocol_errors(data: bytes) -> None:
    for drain in (_drain_typed, _drain_startup):
        with contextlib.suppress(WireProtocolError):
            drain(data)


known_type = st.sampled_from([b"Q", b"X", b"p", b"P", b"B", b"D", b"E", b"S", b"H", b"C"])
# Payloads glued from plausible fields reach deeper into the decoders than random bytes do.
plausible_field = st.one_of(
    st.text(max_size=5).map(lambda text: text.encode() + b"\0"),
    st.sampled_from([b"S", b"P", b"\xff"]),
    st.integers(-3, 3).map(lambda number: struct.pack("!h", number)),
    st.integers(-3, 6).map(lambda number: struct.pack("!i", number)),
    st.binary(max_size=4),
)
plausible_payload = st.lists(plausible_field, max_size=10).map(b"".join)


@FUZZ
@given(known_type, st.one_of(st.binary(max_size=200), plausible_payload))
def test_known_types_with_arbitrary_payload_raise_only_wire_protocol_errors(
    type_byte: bytes, payload: bytes
) -> None:
    with contextlib.suppress(WireProtocolError):
        decode_frontend_message(type_byte, payload)


def test_decodes_query_read_from_the_stream() -> None:
    reader = MessageReader()
    reader.feed(QUERY)
    message = reader.next_message()
    assert message is not None
    assert decode_frontend_message(*message) == Query("SELECT 1")
