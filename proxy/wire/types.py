"""PostgreSQL type OIDs and the text format of values, both ways.

Rows reach the client as DataRow values in PostgreSQL's *text* format (unless a Bind asks for
binary, see ``binary.py``), so clients parse them with the same code they use against a real
server. Each encoder below reproduces what PostgreSQL prints (with DateStyle ISO and
extra_float_digits >= 1, the defaults modern drivers set), not merely something a lenient parser
would accept: psql shows these strings verbatim, and tests compare them byte for byte.

The decoders read text-format *parameters* of the extended query protocol, as PostgreSQL's type
input functions do (``int8in``, ``boolin``, ``date_in`` with DateStyle ISO …), and raise
``InvalidTextValueError`` for anything those would refuse.
"""

from __future__ import annotations

import datetime
import math
import numbers
import re
import uuid
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from types import MappingProxyType
from typing import Any, Final

from proxy.wire.errors import InvalidTextValueError

UNSPECIFIED: Final = 0
"""A parameter type left for the server to infer (Parse) — not a type of its own."""
BOOL: Final = 16
BYTEA: Final = 17
INT8: Final = 20
INT2: Final = 21
INT4: Final = 23
TEXT: Final = 25
FLOAT4: Final = 700
FLOAT8: Final = 701
VARCHAR: Final = 1043
DATE: Final = 1082
TIME: Final = 1083
TIMESTAMP: Final = 1114
TIMESTAMPTZ: Final = 1184
TIMETZ: Final = 1266
NUMERIC: Final = 1700
UUID: Final = 2950

TYPE_SIZES: Final[Mapping[int, int]] = MappingProxyType(
    {
        BOOL: 1,
        BYTEA: -1,
        INT8: 8,
        INT2: 2,
        INT4: 4,
        TEXT: -1,
        FLOAT4: 4,
        FLOAT8: 8,
        VARCHAR: -1,
        DATE: 4,
        TIME: 8,
        TIMESTAMP: 8,
        TIMESTAMPTZ: 8,
        TIMETZ: 12,
        NUMERIC: -1,
        UUID: 16,
    }
)
"""pg_type.typlen of each type above, for ``FieldDescription.type_size`` (-1: variable)."""

TYPE_NAMES: Final[Mapping[int, str]] = MappingProxyType(
    {
        BOOL: "bool",
        BYTEA: "bytea",
        INT8: "int8",
        INT2: "int2",
        INT4: "int4",
        TEXT: "text",
        FLOAT4: "float4",
        FLOAT8: "float8",
        VARCHAR: "varchar",
        DATE: "date",
        TIME: "time",
        TIMESTAMP: "timestamp",
        TIMESTAMPTZ: "timestamptz",
        TIMETZ: "timetz",
        NUMERIC: "numeric",
        UUID: "uuid",
    }
)
"""pg_type.typname of each type above: the vocabulary in which the SQL analysis names the type it
infers for a parameter, without knowing OIDs."""

OIDS_BY_NAME: Final[Mapping[str, int]] = MappingProxyType({name: oid for oid, name in TYPE_NAMES.items()})

_INT8_RANGE: Final = range(-(2**63), 2**63)


def _bool_text(value: bool) -> str:
    return "t" if value else "f"


def _int_text(value: numbers.Integral) -> str:
    return str(int(value))


def _float_text(value: float) -> str:
    """float8out with extra_float_digits >= 1: the shortest digits that round-trip (Ryu).

    Python's repr picks the same digits but a different layout: PostgreSQL writes no ".0"
    and switches to exponent form from 1e15 (printf's %g rule with 15 digits), with at
    least two exponent digits ("1e+15", "1.5e-05"), and keeps the sign of zero.
    """
    if 1e-4 <= abs(value) < 1e15:  # the common case, fast: repr is positional here, as is float8out
        text = float.__repr__(value)  # not repr(): a float subclass (numpy's) prints its type name
        return text[:-2] if text.endswith(".0") else text
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    shortest = Decimal(repr(value)).normalize()
    leading_exponent = shortest.adjusted()
    if -4 <= leading_exponent < 15:
        return format(shortest, "f")
    mantissa = "".join(map(str, shortest.as_tuple().digits))
    if len(mantissa) > 1:
        mantissa = f"{mantissa[0]}.{mantissa[1:]}"
    sign = "-" if value < 0 else ""
    return f"{sign}{mantissa}e{leading_exponent:+03d}"


float_text: Final[Callable[[float], str]] = _float_text
"""float8out's text of a float (for the batch row encoder in ``rows.py``)."""


def _numeric_text(value: Decimal) -> str:
    """numeric_out: always positional (never "1E+2"), no negative zero, no signalling NaN."""
    if value.is_nan():
        return "NaN"
    if value.is_infinite():
        return "-Infinity" if value.is_signed() else "Infinity"
    if value.is_zero():
        value = value.copy_abs()
    return format(value, "f")


def _str_text(value: str) -> str:
    return value


def _fraction_text(microsecond: int) -> str:
    """PostgreSQL drops trailing zeros of fractional seconds (".12", not ".120000")."""
    return f".{microsecond:06d}".rstrip("0") if microsecond else ""


def _offset_text(offset: datetime.timedelta) -> str:
    """UTC offsets as PostgreSQL prints them: "+00", "+05:30", "-03:00:15" (LMT)."""
    seconds = int(offset.total_seconds())
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, seconds = divmod(rest, 60)
    text = f"{sign}{hours:02d}"
    if minutes or seconds:
        text += f":{minutes:02d}"
    if seconds:
        text += f":{seconds:02d}"
    return text


def _time_text(value: datetime.time) -> str:
    text = f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}{_fraction_text(value.microsecond)}"
    offset = value.utcoffset()
    return text if offset is None else text + _offset_text(offset)


def _timestamp_text(value: datetime.datetime) -> str:
    """Aware values keep their own offset, which any client parses to the same instant."""
    offset = value.utcoffset()
    text = f"{value.date().isoformat()} {_time_text(value.time())}"
    return text if offset is None else text + _offset_text(offset)


def _date_text(value: datetime.date) -> str:
    return value.isoformat()


def _bytea_text(value: bytes | bytearray | memoryview) -> str:
    """bytea_output = 'hex', the default since PostgreSQL 9.0."""
    return "\\x" + bytes(value).hex()


def _uuid_text(value: uuid.UUID) -> str:
    return str(value)


# Order matters: bool is an int, and datetime is a date.
_CODECS: Final[tuple[tuple[type | tuple[type, ...], int, Callable[[Any], str]], ...]] = (
    (bool, BOOL, _bool_text),
    (numbers.Integral, INT8, _int_text),
    (float, FLOAT8, _float_text),
    (Decimal, NUMERIC, _numeric_text),
    (str, TEXT, _str_text),
    (datetime.datetime, TIMESTAMP, _timestamp_text),
    (datetime.date, DATE, _date_text),
    (datetime.time, TIME, _time_text),
    ((bytes, bytearray, memoryview), BYTEA, _bytea_text),
    (uuid.UUID, UUID, _uuid_text),
)
_WITH_TIME_ZONE: Final = {TIMESTAMP: TIMESTAMPTZ, TIME: TIMETZ}


def _with_time_zone(oid: int, value: object) -> int:
    """An aware datetime or time is a "with time zone" type; everything else keeps ``oid``."""
    if isinstance(value, datetime.datetime | datetime.time) and value.utcoffset() is not None:
        return _WITH_TIME_ZONE[oid]
    return oid


def _codec_for(value: object) -> tuple[int, Callable[[Any], str]]:
    for python_type, oid, to_text in _CODECS:
        if isinstance(value, python_type):
            return _with_time_zone(oid, value), to_text
    raise TypeError(f"no PostgreSQL text encoding for a value of type {type(value).__name__}")


def encode_text_value(value: object) -> bytes | None:
    """The DataRow bytes of ``value`` in text format; None stays None (SQL NULL)."""
    if value is None:
        return None
    _, to_text = _codec_for(value)
    return to_text(value).encode("utf-8")


def type_oid_for_python(value: object) -> int:
    """A column type for a value when the backend gave none.

    None is TEXT, as PostgreSQL resolves an untyped NULL column; integers beyond int8 are
    NUMERIC so that clients do not overflow parsing them.
    """
    if value is None:
        return TEXT
    oid, _ = _codec_for(value)
    if isinstance(value, numbers.Integral) and int(value) not in _INT8_RANGE:
        return NUMERIC
    return oid


# --------------------------------------------------------------------------------------------
# Text input: parameters of the extended query protocol


_INTEGER_TEXT: Final = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*")
_INTEGER_RANGES: Final = {
    INT2: ("smallint", range(-(2**15), 2**15)),
    INT4: ("integer", range(-(2**31), 2**31)),
    INT8: ("bigint", _INT8_RANGE),
}
_TRUE_WORDS: Final = frozenset({"t", "tr", "tru", "true", "y", "ye", "yes", "on", "1"})
_FALSE_WORDS: Final = frozenset({"f", "fa", "fal", "fals", "false", "n", "no", "of", "off", "0"})
_FLOAT4_MAX: Final = 3.4028234663852886e38
_OCTAL_ESCAPE: Final = re.compile(rb"\\([0-3][0-7]{2}|\\)")
_ESCAPED_BYTES: Final = re.compile(rb"(?:[^\\]|\\[0-3][0-7]{2}|\\\\)*", re.DOTALL)


def _invalid(type_name: str, text: str) -> InvalidTextValueError:
    return InvalidTextValueError(f'invalid input syntax for type {type_name}: "{text}"')


def _integer_in(oid: int, text: str) -> int:
    """int2in/int4in/int8in: surrounding spaces, a sign, digits (PostgreSQL 16 allows ``1_000``)."""
    name, bounds = _INTEGER_RANGES[oid]
    stripped = text.strip()
    if not _INTEGER_TEXT.fullmatch(stripped):
        raise _invalid(name, text)
    value = int(stripped)
    if value not in bounds:
        raise InvalidTextValueError(f'value "{text}" is out of range for type {name}')
    return value


def _bool_in(text: str) -> bool:
    """boolin: any unique prefix of true/false/yes/no, on/off, 1/0, in any case."""
    word = text.strip().lower()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    raise _invalid("boolean", text)


def _float_in(oid: int, text: str) -> float:
    """float4in/float8in accept NaN, Infinity and inf as Python's float() does (not its ``1_0``)."""
    name = "real" if oid == FLOAT4 else "double precision"
    if "_" in text:
        raise _invalid(name, text)
    try:
        value = float(text)
    except ValueError:
        raise _invalid(name, text) from None
    if oid == FLOAT4 and math.isfinite(value) and abs(value) > _FLOAT4_MAX:
        raise InvalidTextValueError(f'"{text}" is out of range for type real')
    return value


def _numeric_in(text: str) -> Decimal:
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise _invalid("numeric", text) from None
    if value.is_snan():
        raise _invalid("numeric", text)
    return value


def _date_in(text: str) -> datetime.date:
    """ISO dates only: Veil reports DateStyle ISO, so clients send ``YYYY-MM-DD``."""
    try:
        return datetime.date.fromisoformat(text.strip())
    except ValueError:
        raise _invalid("date", text) from None


def _timestamp_in(oid: int, text: str) -> datetime.datetime:
    """ISO timestamps, with ``T`` or a space. Without time zone, an offset is ignored, as in
    PostgreSQL; with time zone, a missing offset means UTC (Veil's TimeZone)."""
    name = "timestamp with time zone" if oid == TIMESTAMPTZ else "timestamp without time zone"
    try:
        value = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise _invalid(name, text) from None
    if oid == TIMESTAMP:
        return value.replace(tzinfo=None)
    return value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)


def _bytea_in(text: str) -> bytes:
    """byteain: ``\\x`` then hex digits, or the escape format (``\\ooo`` octal, ``\\\\``)."""
    raw = text.encode("utf-8")
    if raw.startswith(b"\\x"):
        try:
            return bytes.fromhex(raw[2:].decode("ascii"))
        except ValueError:
            raise _invalid("bytea", text) from None
    if not _ESCAPED_BYTES.fullmatch(raw):
        raise _invalid("bytea", text)
    return _OCTAL_ESCAPE.sub(lambda match: b"\\" if match[1] == b"\\" else bytes([int(match[1], 8)]), raw)


_TEXT_DECODERS: Final[Mapping[int, Callable[[int, str], object]]] = MappingProxyType(
    {
        BOOL: lambda _, text: _bool_in(text),
        INT2: _integer_in,
        INT4: _integer_in,
        INT8: _integer_in,
        FLOAT4: _float_in,
        FLOAT8: _float_in,
        NUMERIC: lambda _, text: _numeric_in(text),
        DATE: lambda _, text: _date_in(text),
        TIMESTAMP: _timestamp_in,
        TIMESTAMPTZ: _timestamp_in,
        BYTEA: lambda _, text: _bytea_in(text),
    }
)


def decode_text_value(oid: int, text: str) -> object:
    """The Python value of a text-format parameter of type ``oid``.

    Text, varchar, unspecified and any type without a decoder here stay strings: PostgreSQL gives
    such a value to the statement as an untyped literal, and so does Veil.
    """
    decoder = _TEXT_DECODERS.get(oid)
    return text if decoder is None else decoder(oid, text)
