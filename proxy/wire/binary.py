"""PostgreSQL's binary format of the common types, both ways (``typsend``/``typreceive``).

Clients ask for it per column in Bind (asyncpg always does, psycopg with ``binary=True``, JDBC for
some types) and send parameters in it. The layouts are those of PostgreSQL's ``*send`` functions:
big-endian integers, IEEE floats, dates as days and timestamps as microseconds since 2000-01-01,
numeric as base-10000 digits with a weight and a display scale, text and bytea as their bytes.

Decoders are strict — a wrong length or an impossible field raises ``InvalidBinaryValueError`` —
because a parameter decoded "leniently" would be a different value than the client meant.
"""

from __future__ import annotations

import datetime
import decimal
import struct
from collections.abc import Callable, Mapping
from decimal import Decimal
from types import MappingProxyType
from typing import Any, Final

from proxy.wire import types
from proxy.wire.errors import InvalidBinaryValueError, UnencodableValueError, UnsupportedBinaryTypeError

POSTGRES_EPOCH: Final = datetime.datetime(2000, 1, 1)
"""Dates and timestamps travel as days or microseconds since this instant."""
_POSTGRES_EPOCH_DATE: Final = POSTGRES_EPOCH.date()
_POSTGRES_EPOCH_UTC: Final = POSTGRES_EPOCH.replace(tzinfo=datetime.UTC)
_MICROSECOND: Final = datetime.timedelta(microseconds=1)
_INFINITE_DATES: Final = frozenset({2**31 - 1, -(2**31)})
_INFINITE_TIMESTAMPS: Final = frozenset({2**63 - 1, -(2**63)})

_INTEGERS: Final = {
    types.INT2: struct.Struct("!h"),
    types.INT4: struct.Struct("!i"),
    types.INT8: struct.Struct("!q"),
}
_FLOATS: Final = {types.FLOAT4: struct.Struct("!f"), types.FLOAT8: struct.Struct("!d")}
_DATE: Final = struct.Struct("!i")
_TIMESTAMP: Final = struct.Struct("!q")
_NUMERIC_HEADER: Final = struct.Struct("!hhHh")  # ndigits, weight, sign, dscale

_NUMERIC_POSITIVE: Final = 0x0000
_NUMERIC_NEGATIVE: Final = 0x4000
_NUMERIC_NAN: Final = 0xC000
_NUMERIC_PLUS_INFINITY: Final = 0xD000
_NUMERIC_MINUS_INFINITY: Final = 0xF000
_NUMERIC_MAX_SCALE: Final = 0x3FFF
_WORD_DIGITS: Final = 4  # numeric's words are base 10000


def _unpack(codec: struct.Struct, data: bytes, what: str) -> Any:
    if len(data) != codec.size:
        raise InvalidBinaryValueError(
            f"incorrect binary data format: {what} takes {codec.size} bytes, not {len(data)}"
        )
    return codec.unpack(data)[0]


def _pack(codec: struct.Struct, value: object, what: str) -> bytes:
    try:
        return codec.pack(value)
    except (struct.error, OverflowError) as error:
        raise UnencodableValueError(f"{value!r} does not fit in binary {what}") from error


# --- bool, integers, floats ----------------------------------------------------------------------


def _bool_recv(_: int, data: bytes) -> bool:
    if data not in (b"\x00", b"\x01"):
        raise InvalidBinaryValueError("incorrect binary data format: a boolean is one byte, 0 or 1")
    return data == b"\x01"


def _bool_send(_: int, value: Any) -> bytes:
    return b"\x01" if value else b"\x00"


def _integer_recv(oid: int, data: bytes) -> int:
    value: int = _unpack(_INTEGERS[oid], data, types.TYPE_NAMES[oid])
    return value


def _is_integral(value: Any) -> bool:
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, Decimal):
        return value.is_finite() and value == value.to_integral_value()
    return isinstance(value, int)


def _integer_send(oid: int, value: Any) -> bytes:
    """An integral float (3.0) passes; a fraction would be truncated silently, so it is refused."""
    if not _is_integral(value):
        raise UnencodableValueError(f"{value!r} is not an integer")
    return _pack(_INTEGERS[oid], int(value), types.TYPE_NAMES[oid])


def _float_recv(oid: int, data: bytes) -> float:
    value: float = _unpack(_FLOATS[oid], data, types.TYPE_NAMES[oid])
    return value


def _float_send(oid: int, value: Any) -> bytes:
    return _pack(_FLOATS[oid], float(value), types.TYPE_NAMES[oid])


# --- numeric -------------------------------------------------------------------------------------


def _numeric_send(_: int, value: Any) -> bytes:
    """numeric_send: base-10000 words of the digits, aligned on the decimal point, without leading
    or trailing zero words; ``dscale`` keeps the number of decimals (``1.50`` stays ``1.50``)."""
    number = value if isinstance(value, Decimal) else Decimal(value)
    if number.is_nan():
        return _NUMERIC_HEADER.pack(0, 0, _NUMERIC_NAN, 0)
    if number.is_infinite():
        sign = _NUMERIC_MINUS_INFINITY if number.is_signed() else _NUMERIC_PLUS_INFINITY
        return _NUMERIC_HEADER.pack(0, 0, sign, 0)
    negative, digit_tuple, exponent = number.as_tuple()
    assert isinstance(exponent, int)  # finite
    scale = max(-exponent, 0)
    if scale > _NUMERIC_MAX_SCALE:
        raise UnencodableValueError(f"{number} has more than {_NUMERIC_MAX_SCALE} decimals")
    digits = ("".join(map(str, digit_tuple)) + "0" * max(exponent, 0)).rjust(scale + 1, "0")
    integer, fraction = digits[: len(digits) - scale], digits[len(digits) - scale :]
    integer = integer.rjust(-(-len(integer) // _WORD_DIGITS) * _WORD_DIGITS, "0")
    fraction = fraction.ljust(-(-len(fraction) // _WORD_DIGITS) * _WORD_DIGITS, "0")
    words = [int((integer + fraction)[i : i + _WORD_DIGITS]) for i in range(0, len(integer + fraction), 4)]
    weight = len(integer) // _WORD_DIGITS - 1
    while words and words[0] == 0:
        words.pop(0)
        weight -= 1
    while words and words[-1] == 0:
        words.pop()
    if not words:
        weight, negative = 0, False
    sign = _NUMERIC_NEGATIVE if negative else _NUMERIC_POSITIVE
    try:
        return _NUMERIC_HEADER.pack(len(words), weight, sign, scale) + struct.pack(f"!{len(words)}h", *words)
    except struct.error as error:
        raise UnencodableValueError(f"{number} is too large for binary numeric") from error


def _numeric_recv(_: int, data: bytes) -> Decimal:
    """numeric_recv, including its truncation of digits beyond ``dscale``."""
    if len(data) < _NUMERIC_HEADER.size:
        raise InvalidBinaryValueError("incorrect binary data format: numeric header is truncated")
    count, weight, sign, scale = _NUMERIC_HEADER.unpack_from(data)
    if count < 0 or len(data) != _NUMERIC_HEADER.size + 2 * count:
        raise InvalidBinaryValueError("incorrect binary data format: numeric has the wrong number of digits")
    special = {_NUMERIC_NAN: "NaN", _NUMERIC_PLUS_INFINITY: "Infinity", _NUMERIC_MINUS_INFINITY: "-Infinity"}
    if sign in special:
        return Decimal(special[sign])
    words = struct.unpack_from(f"!{count}h", data, _NUMERIC_HEADER.size)
    if sign not in (_NUMERIC_POSITIVE, _NUMERIC_NEGATIVE):
        raise InvalidBinaryValueError("invalid sign in external numeric value")
    if not 0 <= scale <= _NUMERIC_MAX_SCALE:
        raise InvalidBinaryValueError("invalid scale in external numeric value")
    if not all(0 <= word < 10**_WORD_DIGITS for word in words):
        raise InvalidBinaryValueError("invalid digit in external numeric value")
    digits = "".join(f"{word:04d}" for word in words) or "0"
    exponent = (weight + 1 - count) * _WORD_DIGITS
    value = Decimal(f"{'-' if sign == _NUMERIC_NEGATIVE else ''}{digits}E{exponent}")
    context = decimal.Context(prec=len(digits) + abs(exponent) + scale + 1, rounding=decimal.ROUND_DOWN)
    return value.quantize(Decimal(1).scaleb(-scale), context=context)


# --- text and bytea ------------------------------------------------------------------------------


def _text_recv(_: int, data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidBinaryValueError('invalid byte sequence for encoding "UTF8"') from None
    if "\0" in text:
        raise InvalidBinaryValueError('invalid byte sequence for encoding "UTF8": 0x00')
    return text


def _text_send(_: int, value: Any) -> bytes:
    """The text form of any value: a text column may hold what the engine typed as something else."""
    encoded = types.encode_text_value(value)
    assert encoded is not None  # NULL never reaches a codec
    return encoded


def _bytea_recv(_: int, data: bytes) -> bytes:
    return data


def _bytea_send(_: int, value: Any) -> bytes:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise UnencodableValueError(f"a {type(value).__name__} is not bytea")
    return bytes(value)


# --- date and timestamps -------------------------------------------------------------------------


def _date_recv(_: int, data: bytes) -> datetime.date:
    days: int = _unpack(_DATE, data, "date")
    if days in _INFINITE_DATES:
        raise InvalidBinaryValueError("infinite dates are not supported")
    try:
        return _POSTGRES_EPOCH_DATE + datetime.timedelta(days=days)
    except OverflowError:
        raise InvalidBinaryValueError("date out of range") from None


def _date_send(_: int, value: Any) -> bytes:
    day = value.date() if isinstance(value, datetime.datetime) else value
    if not isinstance(day, datetime.date):
        raise UnencodableValueError(f"a {type(value).__name__} is not a date")
    return _DATE.pack((day - _POSTGRES_EPOCH_DATE).days)


def _timestamp_recv(oid: int, data: bytes) -> datetime.datetime:
    """timestamptz arrives as UTC; the value is aware so that nobody reads it as local time."""
    microseconds: int = _unpack(_TIMESTAMP, data, types.TYPE_NAMES[oid])
    if microseconds in _INFINITE_TIMESTAMPS:
        raise InvalidBinaryValueError("infinite timestamps are not supported")
    epoch = _POSTGRES_EPOCH_UTC if oid == types.TIMESTAMPTZ else POSTGRES_EPOCH
    try:
        return epoch + datetime.timedelta(microseconds=microseconds)
    except OverflowError:
        raise InvalidBinaryValueError("timestamp out of range") from None


def _timestamp_send(oid: int, value: Any) -> bytes:
    """Without time zone the wall-clock time is sent; with time zone a naive value counts as UTC."""
    if not isinstance(value, datetime.datetime):
        if not isinstance(value, datetime.date):
            raise UnencodableValueError(f"a {type(value).__name__} is not a timestamp")
        value = datetime.datetime.combine(value, datetime.time())
    if oid == types.TIMESTAMP:
        elapsed = value.replace(tzinfo=None) - POSTGRES_EPOCH
    else:
        elapsed = (value if value.tzinfo else value.replace(tzinfo=datetime.UTC)) - _POSTGRES_EPOCH_UTC
    return _TIMESTAMP.pack(elapsed // _MICROSECOND)


_Receive = Callable[[int, bytes], object]
_Send = Callable[[int, Any], bytes]
_CODECS: Final[Mapping[int, tuple[_Receive, _Send]]] = MappingProxyType(
    {
        types.BOOL: (_bool_recv, _bool_send),
        types.INT2: (_integer_recv, _integer_send),
        types.INT4: (_integer_recv, _integer_send),
        types.INT8: (_integer_recv, _integer_send),
        types.FLOAT4: (_float_recv, _float_send),
        types.FLOAT8: (_float_recv, _float_send),
        types.NUMERIC: (_numeric_recv, _numeric_send),
        types.TEXT: (_text_recv, _text_send),
        types.VARCHAR: (_text_recv, _text_send),
        types.BYTEA: (_bytea_recv, _bytea_send),
        types.DATE: (_date_recv, _date_send),
        types.TIMESTAMP: (_timestamp_recv, _timestamp_send),
        types.TIMESTAMPTZ: (_timestamp_recv, _timestamp_send),
    }
)
BINARY_TYPES: Final = frozenset(_CODECS)
"""The types that travel in binary format here; any other is text only."""


def _codec(oid: int) -> tuple[_Receive, _Send]:
    codec = _CODECS.get(oid)
    if codec is None:
        name = types.TYPE_NAMES.get(oid, f"with OID {oid}")
        raise UnsupportedBinaryTypeError(f"binary format is not supported for type {name}; use text format")
    return codec


def decode_binary_value(oid: int, data: bytes) -> object:
    """The Python value of a binary-format parameter of type ``oid``."""
    receive, _ = _codec(oid)
    return receive(oid, data)


def encode_binary_value(oid: int, value: object) -> bytes:
    """The DataRow bytes of a non-NULL ``value`` in a column of type ``oid``, binary format."""
    _, send = _codec(oid)
    return send(oid, value)
