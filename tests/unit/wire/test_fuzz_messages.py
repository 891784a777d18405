"""Fuzzing the parsers that read what a client sends before and after authentication.

Whatever the bytes — random, or a valid message with bytes flipped, cut off or appended — a decoder
returns a message or raises ``WireProtocolError`` (SCRAM: ``ScramAuthenticationError``), never
anything else: an IndexError or UnicodeDecodeError deep in the session would be a crash the
server has to log as a bug, and a message decoded from garbage without complaint would be worse.
"""

from __future__ import annotations

import contextlib
import struct
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.wire.errors import ScramAuthenticationError, WireProtocolError
from proxy.wire.messages import (
    MessageReader,
    decode_frontend_message,
    decode_sasl_initial_response,
    decode_startup_packet,
)
from proxy.wire.scram import ScramServerExchange, make_scram_verifier

FUZZ = settings(max_examples=200, deadline=None)

TYPE_BYTES = [bytes([code]) for code in b"QXpPBDESHCdcfF" + b"\0\xff"]


def _cstrings(*texts: str) -> bytes:
    return b"".join(text.encode() + b"\0" for text in texts)


VALID_MESSAGES: list[tuple[bytes, bytes]] = [
    (b"Q", _cstrings("SELECT COUNT(*) FROM visits")),
    (b"P", _cstrings("s1", "SELECT $1::int") + struct.pack("!hI", 1, 23)),
    (
        b"B",
        _cstrings("", "s1")
        + struct.pack("!hh", 1, 0)
        + struct.pack("!hi", 1, 2)
        + b"42"
        + struct.pack("!hh", 1, 1),
    ),
    (b"D", b"S" + _cstrings("s1")),
    (b"E", _cstrings("") + struct.pack("!i", 0)),
    (b"C", b"P" + _cstrings("p1")),
    (b"S", b""),
    (b"H", b""),
    (b"X", b""),
    (b"p", _cstrings("SCRAM-SHA-256") + struct.pack("!i", 3) + b"n,,"),
]

VALID_STARTUP: list[bytes] = [
    struct.pack("!i", 196608) + _cstrings("user", "alice", "database", "demo", ""),
    struct.pack("!i", 80877103),
    struct.pack("!i", 80877104),
    struct.pack("!iII", 80877102, 1234, 0xFFFFFFFF),
]


@st.composite
def mutated(draw: Any, payload: bytes) -> bytes:
    """``payload`` with a few bytes overwritten, inserted or removed, and maybe cut short or extended."""
    data = bytearray(payload)
    for _ in range(draw(st.integers(0, 4))):
        position = draw(st.integers(0, len(data)))
        match draw(st.sampled_from(["overwrite", "insert", "delete"])):
            case "overwrite" if position < len(data):
                data[position] = draw(st.integers(0, 255))
            case "insert":
                data.insert(position, draw(st.integers(0, 255)))
            case "delete" if position < len(data):
                del data[position]
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    return bytes(data) + draw(st.binary(max_size=8))


def decodes_or_refuses(decode: Any, *args: bytes) -> None:
    with contextlib.suppress(WireProtocolError):
        decode(*args)


@FUZZ
@given(st.binary(max_size=64))
def test_random_startup_packets_decode_or_raise_protocol_errors(payload: bytes) -> None:
    decodes_or_refuses(decode_startup_packet, payload)


@FUZZ
@given(st.data())
def test_mutated_startup_packets_decode_or_raise_protocol_errors(data: st.DataObject) -> None:
    decodes_or_refuses(decode_startup_packet, data.draw(mutated(data.draw(st.sampled_from(VALID_STARTUP)))))


@FUZZ
@given(st.sampled_from(TYPE_BYTES), st.binary(max_size=64))
def test_random_messages_decode_or_raise_protocol_errors(type_byte: bytes, payload: bytes) -> None:
    decodes_or_refuses(decode_frontend_message, type_byte, payload)


@FUZZ
@given(st.data())
def test_mutated_messages_decode_or_raise_protocol_errors(data: st.DataObject) -> None:
    type_byte, payload = data.draw(st.sampled_from(VALID_MESSAGES))
    decodes_or_refuses(decode_frontend_message, type_byte, data.draw(mutated(payload)))


@FUZZ
@given(st.binary(max_size=64))
def test_random_sasl_initial_responses_decode_or_raise_protocol_errors(data: bytes) -> None:
    decodes_or_refuses(decode_sasl_initial_response, data)


@FUZZ
@given(st.lists(st.binary(max_size=40), max_size=6), st.booleans())
def test_the_framer_returns_messages_or_raises_protocol_errors(chunks: list[bytes], startup: bool) -> None:
    """Any stream, in any pieces: complete packets come out, or the stream is refused."""
    reader = MessageReader(max_message_size=1024)
    try:
        for chunk in chunks:
            reader.feed(chunk)
            while (reader.next_startup() if startup else reader.next_message()) is not None:
                pass
    except WireProtocolError:
        pass


@FUZZ
@given(st.data())
def test_framed_valid_messages_survive_any_split(data: st.DataObject) -> None:
    """The framer hands back exactly the messages that went in, however the bytes are cut."""
    messages = data.draw(st.lists(st.sampled_from(VALID_MESSAGES), min_size=1, max_size=5))
    stream = b"".join(type_byte + struct.pack("!i", len(body) + 4) + body for type_byte, body in messages)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    reader, received = MessageReader(), []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        reader.feed(stream[start:end])
        while (message := reader.next_message()) is not None:
            received.append(message)
    assert received == messages


VERIFIER = make_scram_verifier("secret", iterations=16)  # few iterations: the fuzz is about parsing


def _exchange() -> ScramServerExchange:
    return ScramServerExchange(VERIFIER, username="alice", mock_salt_key=b"k" * 32)


CLIENT_FIRST = b"n,,n=alice,r=abcdefghijklmnopqrstuvwx"


@FUZZ
@given(st.data())
def test_scram_client_first_messages_are_answered_or_refused(data: st.DataObject) -> None:
    message = data.draw(st.one_of(st.binary(max_size=64), mutated(CLIENT_FIRST)))
    with contextlib.suppress(ScramAuthenticationError):
        _exchange().server_first(message)


@FUZZ
@given(st.data())
def test_scram_client_final_messages_are_refused(data: st.DataObject) -> None:
    """Nothing but the right proof passes; garbage is an authentication failure, never a crash."""
    exchange = _exchange()
    server_first = exchange.server_first(CLIENT_FIRST).decode()
    nonce = server_first.split(",")[0][2:]
    final = f"c=biws,r={nonce},p=AAAA".encode()
    message = data.draw(st.one_of(st.binary(max_size=64), mutated(final)))
    try:
        exchange.server_final(message)
    except ScramAuthenticationError:
        return
    raise AssertionError(f"a forged client-final-message was accepted: {message!r}")
