"""The messages of the secure-comparison protocols and their byte format.

Every message is a frozen dataclass whose fields are non-negative ints (ciphertexts, a modulus) or tuples of
them. Byte format, version 1 (``FORMAT_VERSION``)::

    message := version:u8  tag:u8  field*          fields in declaration order
    int     := length:u32  magnitude:length bytes  unsigned big-endian, minimal (0 has length 0)
    tuple   := count:u32   int*count

u32 is big-endian. Decoding trusts nothing: it checks the version, the tag, every length against the bytes
left, minimal encodings and that no bytes remain; the receiving party then checks each ciphertext against
its key and the number of ciphertexts against ℓ. Framing on a stream (a length prefix per message) is the
transport's job.
"""

from __future__ import annotations

import struct
from dataclasses import astuple, dataclass, fields
from typing import Any, ClassVar, Self

from mechanisms.errors import SecureProtocolError

FORMAT_VERSION = 1
_U32 = struct.Struct(">I")
_REGISTRY: dict[int, type[Message]] = {}


@dataclass(frozen=True)
class Message:
    """Base of all protocol messages; subclasses declare their tag: ``class X(Message, tag=7)``."""

    TAG: ClassVar[int]
    CARRIES_CIPHERTEXTS: ClassVar[bool] = True

    def __init_subclass__(cls, *, tag: int, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if tag in _REGISTRY:
            raise TypeError(f"message tag {tag} is already used by {_REGISTRY[tag].__name__}")
        cls.TAG = tag
        _REGISTRY[tag] = cls

    @property
    def ciphertext_count(self) -> int:
        """How many ciphertexts the message carries (the spec's communication measure)."""
        if not self.CARRIES_CIPHERTEXTS:
            return 0
        return sum(len(value) if isinstance(value, tuple) else 1 for value in astuple(self))

    def to_bytes(self) -> bytes:
        """The version-1 encoding (module docstring)."""
        parts = [bytes((FORMAT_VERSION, self.TAG))]
        for value in astuple(self):
            if isinstance(value, tuple):
                parts.append(_U32.pack(len(value)))
                parts.extend(_encode_int(item) for item in value)
            else:
                parts.append(_encode_int(value))
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        """Decode ``data`` and require it to be this message type."""
        message = decode_message(data)
        if not isinstance(message, cls):
            raise SecureProtocolError(f"expected {cls.__name__}, received {type(message).__name__}")
        return message


@dataclass(frozen=True)
class PublicKeyAnnouncement(Message, tag=1):
    """Setup, once per key: Alice's Paillier modulus N (g = N + 1). Not part of a comparison's count."""

    CARRIES_CIPHERTEXTS: ClassVar[bool] = False
    modulus: int


@dataclass(frozen=True)
class EncryptedShare(Message, tag=2):
    """Conversion 3, A→B: E(x^A); Bob completes it to E(x) = E(x^A) ⊕ x^B."""

    ciphertext: int


@dataclass(frozen=True)
class MaskedDifference(Message, tag=3):
    """Conversion 5 step 1, B→A: E(a + b) with a = 2^ℓ + x − y and Bob's mask b (re-randomized)."""

    ciphertext: int


@dataclass(frozen=True)
class EncryptedQuotient(Message, tag=4):
    """Conversion 5 step 2, A→B: E((a + b) div 2^ℓ), a fresh encryption."""

    ciphertext: int


@dataclass(frozen=True)
class PointEncoding(Message, tag=5):
    """Protocols 1–2 step 1, A→B: E(H(i, b_i)) for layers i = 0..ℓ−1 (the root is dropped, [D] §8.1.3)."""

    nodes: tuple[int, ...]


@dataclass(frozen=True)
class MembershipTests(Message, tag=6):
    """Protocols 1–2 step 2, B→A: ℓ shuffled ciphertexts, exactly one of them E(0) iff Alice's leaf ∈ R."""

    tests: tuple[int, ...]


@dataclass(frozen=True)
class EncryptedBit(Message, tag=7):
    """Protocol 2 step 3, A→B: E(s^A), a fresh encryption of Alice's membership bit."""

    ciphertext: int


@dataclass(frozen=True)
class MaskedResult(Message, tag=8):
    """Protocol 2 step 4 / Conversion 4, B→A: E(δ ⊕ δ^B) or E(δ − δ^B) (re-randomized)."""

    ciphertext: int


def decode_message(data: bytes) -> Message:
    """Any message from its version-1 encoding; :class:`SecureProtocolError` if it is malformed."""
    if len(data) < 2:
        raise SecureProtocolError("message is shorter than its two header bytes")
    if data[0] != FORMAT_VERSION:
        raise SecureProtocolError(
            f"message format version {data[0]} is not supported (expected {FORMAT_VERSION})"
        )
    kind = _REGISTRY.get(data[1])
    if kind is None:
        raise SecureProtocolError(f"unknown message tag {data[1]}")
    reader = _Reader(memoryview(data)[2:])
    values = [reader.read_tuple() if _is_tuple_field(f.type) else reader.read_int() for f in fields(kind)]
    if reader.remaining:
        raise SecureProtocolError(f"{kind.__name__} has {reader.remaining} trailing bytes")
    return kind(*values)


def _is_tuple_field(annotation: object) -> bool:
    # Annotations are strings under `from __future__ import annotations`; only two shapes exist here.
    return str(annotation).startswith("tuple")


def _encode_int(value: int) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SecureProtocolError(f"message fields must be non-negative integers, got {value!r}")
    magnitude = value.to_bytes((value.bit_length() + 7) // 8, "big")
    return _U32.pack(len(magnitude)) + magnitude


class _Reader:
    """A cursor over the fields of one message; every read is bounds-checked."""

    def __init__(self, data: memoryview) -> None:
        self._data = data
        self._offset = 0

    @property
    def remaining(self) -> int:
        return len(self._data) - self._offset

    def read_int(self) -> int:
        raw = self._take(self._read_u32())
        if raw and raw[0] == 0:
            raise SecureProtocolError("integer field is not minimally encoded")
        return int.from_bytes(raw, "big")

    def read_tuple(self) -> tuple[int, ...]:
        count = self._read_u32()
        if count * _U32.size > self.remaining:
            raise SecureProtocolError("tuple field claims more items than the message holds")
        return tuple(self.read_int() for _ in range(count))

    def _read_u32(self) -> int:
        (value,) = _U32.unpack(self._take(_U32.size))
        return int(value)

    def _take(self, size: int) -> bytes:
        if size > self.remaining:
            raise SecureProtocolError("message is truncated")
        chunk = bytes(self._data[self._offset : self._offset + size])
        self._offset += size
        return chunk
