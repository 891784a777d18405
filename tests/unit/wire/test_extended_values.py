"""Parameter and result values in both formats: binary codecs round-trip and match the bytes
PostgreSQL's ``*send`` functions produce; text input accepts what PostgreSQL's type input functions
accept and refuses the rest with the message PostgreSQL gives."""

from __future__ import annotations

import datetime
import math
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.wire import types
from proxy.wire.binary import BINARY_TYPES, decode_binary_value, encode_binary_value
from proxy.wire.errors import (
    InvalidBinaryValueError,
    InvalidTextValueError,
    UnencodableValueError,
    UnsupportedBinaryTypeError,
)
from proxy.wire.types import decode_text_value
from proxy.wire.values import BINARY_FORMAT, TEXT_FORMAT, decode_parameter, encode_value

UTC = datetime.UTC

# --- binary: bytes from PostgreSQL 15 itself (SELECT numeric_send('1.50'::numeric), date_send(…) …) -----

POSTGRES_BINARY = [
    (types.NUMERIC, Decimal("0"), "0000000000000000"),
    (types.NUMERIC, Decimal("1"), "00010000000000000001"),
    (types.NUMERIC, Decimal("-1"), "00010000400000000001"),
    (types.NUMERIC, Decimal("1.50"), "000200000000000200011388"),
    (types.NUMERIC, Decimal("0.0001"), "0001ffff000000040001"),
    (types.NUMERIC, Decimal("12345.6789"), "0003000100000004000109291a85"),
    (types.NUMERIC, Decimal("1E+10"), "00010002000000000064"),
    (types.NUMERIC, Decimal("-0.000012"), "0001fffe4000000604b0"),
    (types.NUMERIC, Decimal("0.00"), "0000000000000002"),
    (types.NUMERIC, Decimal("0.10000"), "0001ffff0000000503e8"),
    (types.NUMERIC, Decimal("NaN"), "00000000c0000000"),
    (types.DATE, datetime.date(2024, 2, 29), "00002279"),
    (types.DATE, datetime.date(1999, 12, 31), "ffffffff"),
    (types.TIMESTAMP, datetime.datetime(1999, 12, 31, 23, 59, 59, 500000), "fffffffffff85ee0"),
    (types.TIMESTAMPTZ, datetime.datetime(2000, 1, 1, 1, tzinfo=UTC), "00000000d693a400"),
    (types.FLOAT4, 1.5, "3fc00000"),
    (types.FLOAT8, -2.25, "c002000000000000"),
    (types.INT2, -2, "fffe"),
    (types.INT4, 70000, "00011170"),
    (types.INT8, 2**40, "0000010000000000"),
    (types.BOOL, True, "01"),
    (types.TEXT, "é", "c3a9"),
    (types.VARCHAR, "a", "61"),
    (types.BYTEA, b"\x00\xff", "00ff"),
]


@pytest.mark.parametrize(("oid", "value", "hex_bytes"), POSTGRES_BINARY)
def test_binary_encoding_matches_postgres(oid: int, value: object, hex_bytes: str) -> None:
    assert encode_binary_value(oid, value).hex() == hex_bytes


@pytest.mark.parametrize(("oid", "value", "hex_bytes"), POSTGRES_BINARY)
def test_binary_decoding_reads_postgres_bytes(oid: int, value: object, hex_bytes: str) -> None:
    decoded = decode_binary_value(oid, bytes.fromhex(hex_bytes))
    if isinstance(value, Decimal) and value.is_nan():
        assert isinstance(decoded, Decimal) and decoded.is_nan()
    else:
        assert decoded == value and type(decoded) is type(value)


def test_numeric_keeps_its_display_scale() -> None:
    decoded = decode_binary_value(types.NUMERIC, encode_binary_value(types.NUMERIC, Decimal("2.500")))
    assert str(decoded) == "2.500"


def test_numeric_infinities_round_trip() -> None:
    for text in ("Infinity", "-Infinity"):
        assert decode_binary_value(
            types.NUMERIC, encode_binary_value(types.NUMERIC, Decimal(text))
        ) == Decimal(text)


INTEGER_RANGES = {types.INT2: 16, types.INT4: 32, types.INT8: 64}


@pytest.mark.parametrize("oid", sorted(INTEGER_RANGES))
@given(data=st.data())
def test_integers_round_trip(oid: int, data: st.DataObject) -> None:
    bits = INTEGER_RANGES[oid]
    value = data.draw(st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1))
    assert decode_binary_value(oid, encode_binary_value(oid, value)) == value


@given(st.floats(allow_nan=False))
def test_float8_round_trips(value: float) -> None:
    decoded = decode_binary_value(types.FLOAT8, encode_binary_value(types.FLOAT8, value))
    assert decoded == value and math.copysign(1, decoded) == math.copysign(1, value)  # type: ignore[arg-type]


@given(st.floats(width=32, allow_nan=False))
def test_float4_round_trips(value: float) -> None:
    assert decode_binary_value(types.FLOAT4, encode_binary_value(types.FLOAT4, value)) == value


@given(
    st.decimals(allow_nan=False, allow_infinity=False, places=None).filter(lambda d: abs(d.adjusted()) < 1000)
)
def test_numeric_round_trips_with_its_scale(value: Decimal) -> None:
    decoded = decode_binary_value(types.NUMERIC, encode_binary_value(types.NUMERIC, value))
    assert decoded == value
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    assert decoded.as_tuple().exponent == min(exponent, 0)  # type: ignore[union-attr]


@given(st.booleans())
def test_bool_round_trips(value: bool) -> None:
    assert decode_binary_value(types.BOOL, encode_binary_value(types.BOOL, value)) is value


@given(st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",))))
def test_text_round_trips(value: str) -> None:
    for oid in (types.TEXT, types.VARCHAR):
        assert decode_binary_value(oid, encode_binary_value(oid, value)) == value


@given(st.binary())
def test_bytea_round_trips(value: bytes) -> None:
    assert decode_binary_value(types.BYTEA, encode_binary_value(types.BYTEA, value)) == value


@given(st.dates())
def test_date_round_trips(value: datetime.date) -> None:
    assert decode_binary_value(types.DATE, encode_binary_value(types.DATE, value)) == value


@given(st.datetimes())
def test_timestamp_round_trips(value: datetime.datetime) -> None:
    assert decode_binary_value(types.TIMESTAMP, encode_binary_value(types.TIMESTAMP, value)) == value


@given(st.datetimes(timezones=st.just(UTC) | st.just(datetime.timezone(datetime.timedelta(hours=-7)))))
def test_timestamptz_round_trips_to_the_same_instant_in_utc(value: datetime.datetime) -> None:
    decoded = decode_binary_value(types.TIMESTAMPTZ, encode_binary_value(types.TIMESTAMPTZ, value))
    assert decoded == value
    assert isinstance(decoded, datetime.datetime) and decoded.tzinfo == UTC


@pytest.mark.parametrize(
    ("oid", "data", "message"),
    [
        (types.INT4, b"\x00\x01", "integer|int4 takes 4 bytes, not 2"),
        (types.BOOL, b"\x02", "a boolean is one byte, 0 or 1"),
        (types.DATE, bytes.fromhex("7fffffff"), "infinite dates"),
        (types.TIMESTAMP, bytes.fromhex("7fffffffffffffff"), "infinite timestamps"),
        (types.NUMERIC, bytes.fromhex("00010000"), "numeric header is truncated"),
        (types.NUMERIC, bytes.fromhex("0002000000000000" + "0001"), "wrong number of digits"),
        (types.NUMERIC, bytes.fromhex("0001000000000000" + "2710"), "invalid digit"),
        (types.NUMERIC, bytes.fromhex("0001000012340000" + "0001"), "invalid sign"),
        (types.TEXT, b"\xff", 'invalid byte sequence for encoding "UTF8"'),
        (types.TEXT, b"a\x00", "0x00"),
    ],
)
def test_malformed_binary_parameters_are_refused(oid: int, data: bytes, message: str) -> None:
    with pytest.raises(InvalidBinaryValueError, match=message):
        decode_binary_value(oid, data)


def test_binary_is_refused_for_types_without_a_codec() -> None:
    assert types.UUID not in BINARY_TYPES
    with pytest.raises(UnsupportedBinaryTypeError, match="binary format is not supported for type uuid"):
        decode_binary_value(types.UUID, b"\0" * 16)


@pytest.mark.parametrize(
    ("oid", "value", "message"),
    [
        (types.INT8, 2.5, "not an integer"),
        (types.INT8, Decimal("NaN"), "not an integer"),
        (types.INT2, 2**15, "does not fit in binary int2"),
        (types.FLOAT4, 1e300, "does not fit in binary float4"),
        (types.BYTEA, "text", "not bytea"),
        (types.DATE, "2020-01-01", "not a date"),
    ],
)
def test_values_that_do_not_fit_their_column_are_not_sent(oid: int, value: object, message: str) -> None:
    with pytest.raises(UnencodableValueError, match=message):
        encode_binary_value(oid, value)


def test_a_text_column_sends_any_value_as_its_text() -> None:
    assert encode_binary_value(types.TEXT, datetime.datetime(2020, 1, 2, 3, 4, 5)) == b"2020-01-02 03:04:05"
    assert encode_binary_value(types.INT8, 3.0) == (3).to_bytes(8, "big")


# --- text input ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("oid", "text", "value"),
    [
        (types.INT4, " 42 ", 42),
        (types.INT8, "-9223372036854775808", -(2**63)),
        (types.INT2, "1_000", 1000),
        (types.BOOL, "t", True),
        (types.BOOL, "YES", True),
        (types.BOOL, " off", False),
        (types.BOOL, "0", False),
        (types.FLOAT8, "1.5e3", 1500.0),
        (types.FLOAT8, "-Infinity", -math.inf),
        (types.FLOAT4, "0.25", 0.25),
        (types.NUMERIC, "1.50", Decimal("1.50")),
        (types.DATE, "2024-02-29", datetime.date(2024, 2, 29)),
        (types.TIMESTAMP, "2024-02-29 10:11:12.5", datetime.datetime(2024, 2, 29, 10, 11, 12, 500000)),
        (types.TIMESTAMP, "2024-02-29T10:11:12+02", datetime.datetime(2024, 2, 29, 10, 11, 12)),
        (types.TIMESTAMPTZ, "2024-02-29 10:00:00+02", datetime.datetime(2024, 2, 29, 8, tzinfo=UTC)),
        (types.TIMESTAMPTZ, "2024-02-29 10:00:00", datetime.datetime(2024, 2, 29, 10, tzinfo=UTC)),
        (types.BYTEA, "\\x00ff41", b"\x00\xffA"),
        (types.BYTEA, "a\\\\b\\001", b"a\\b\x01"),
        (types.TEXT, "it's", "it's"),
        (types.UNSPECIFIED, "30", "30"),
        (types.UUID, "00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000001"),
    ],
)
def test_text_input_reads_what_postgres_reads(oid: int, text: str, value: object) -> None:
    decoded = decode_text_value(oid, text)
    assert decoded == value and type(decoded) is type(value)


@pytest.mark.parametrize(
    ("oid", "text", "message"),
    [
        (types.INT4, "abc", 'invalid input syntax for type integer: "abc"'),
        (types.INT4, "1.5", 'invalid input syntax for type integer: "1.5"'),
        (types.INT4, "2147483648", 'value "2147483648" is out of range for type integer'),
        (types.INT8, "", "invalid input syntax for type bigint"),
        (types.BOOL, "maybe", 'invalid input syntax for type boolean: "maybe"'),
        (types.FLOAT8, "1_0", "invalid input syntax for type double precision"),
        (types.FLOAT4, "1e39", "out of range for type real"),
        (types.NUMERIC, "1,5", "invalid input syntax for type numeric"),
        (types.NUMERIC, "sNaN", "invalid input syntax for type numeric"),
        (types.DATE, "31/12/2024", "invalid input syntax for type date"),
        (types.TIMESTAMP, "yesterday", "invalid input syntax for type timestamp without time zone"),
        (types.BYTEA, "\\xzz", "invalid input syntax for type bytea"),
        (types.BYTEA, "a\\9", "invalid input syntax for type bytea"),
    ],
)
def test_text_input_refuses_what_postgres_refuses(oid: int, text: str, message: str) -> None:
    with pytest.raises(InvalidTextValueError, match=message):
        decode_text_value(oid, text)


# --- one value in its Bind format -------------------------------------------------------------------


def test_a_null_parameter_is_none_in_either_format() -> None:
    assert decode_parameter(types.INT4, TEXT_FORMAT, None) is None
    assert decode_parameter(types.INT4, BINARY_FORMAT, None) is None
    assert encode_value(types.INT8, BINARY_FORMAT, None) is None


def test_parameters_are_read_in_the_format_bind_gave() -> None:
    assert decode_parameter(types.INT4, TEXT_FORMAT, b"42") == 42
    assert decode_parameter(types.INT4, BINARY_FORMAT, b"\0\0\0\x2a") == 42


def test_text_parameters_must_be_utf8_without_nul() -> None:
    with pytest.raises(InvalidTextValueError, match="UTF8"):
        decode_parameter(types.TEXT, TEXT_FORMAT, b"\xff")
    with pytest.raises(InvalidTextValueError, match="0x00"):
        decode_parameter(types.TEXT, TEXT_FORMAT, b"a\0b")


def test_results_are_encoded_in_the_format_bind_asked_for() -> None:
    assert encode_value(types.INT8, TEXT_FORMAT, 7) == b"7"
    assert encode_value(types.INT8, BINARY_FORMAT, 7) == (7).to_bytes(8, "big")
    assert encode_value(types.DATE, TEXT_FORMAT, datetime.date(2000, 1, 2)) == b"2000-01-02"
    assert encode_value(types.DATE, BINARY_FORMAT, datetime.date(2000, 1, 2)) == b"\0\0\0\x01"
