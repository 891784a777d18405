"""One value of the extended query protocol, in the format a Bind message chose for it.

Bind gives format codes for the parameters and for the result columns under one rule — no code:
all text; one code: all of them; otherwise one per item — and ``expand_format_codes`` applies it.
The codecs themselves are in ``types.py`` (text) and ``binary.py`` (binary).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from proxy.wire.binary import decode_binary_value, encode_binary_value
from proxy.wire.errors import InvalidTextValueError, WireProtocolError
from proxy.wire.types import decode_text_value, encode_text_value

TEXT_FORMAT: Final = 0
BINARY_FORMAT: Final = 1


def expand_format_codes(codes: Sequence[int], count: int, *, items: str) -> list[int]:
    """One format code per item (``items``: "parameters" or "columns"), from Bind's zero, one or
    ``count`` codes. The result codes can only be checked here, once the columns are known (08P01,
    as PostgreSQL's "bind message has 2 result formats but query has 1 columns")."""
    if not codes:
        return [TEXT_FORMAT] * count
    if len(codes) == 1:
        return [codes[0]] * count
    if len(codes) != count:
        raise WireProtocolError(f"bind message has {len(codes)} format codes for {count} {items}")
    return list(codes)


def decode_parameter(oid: int, format_code: int, data: bytes | None) -> object:
    """The Python value of one Bind parameter; None is SQL NULL."""
    if data is None:
        return None
    if format_code == BINARY_FORMAT:
        return decode_binary_value(oid, data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidTextValueError('invalid byte sequence for encoding "UTF8"') from None
    if "\0" in text:
        raise InvalidTextValueError('invalid byte sequence for encoding "UTF8": 0x00')
    return decode_text_value(oid, text)


def encode_value(oid: int, format_code: int, value: object) -> bytes | None:
    """The DataRow bytes of ``value`` in a column of type ``oid``; None stays None (SQL NULL)."""
    if value is None:
        return None
    if format_code == BINARY_FORMAT:
        return encode_binary_value(oid, value)
    return encode_text_value(value)
