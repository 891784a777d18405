"""Text encoding of Python values, compared with what PostgreSQL itself prints."""

from __future__ import annotations

import datetime
import uuid
from decimal import Decimal

import pytest

from proxy.wire import types
from proxy.wire.types import encode_text_value, type_oid_for_python

UTC = datetime.UTC
IST = datetime.timezone(datetime.timedelta(hours=5, minutes=30))
LMT = datetime.timezone(-datetime.timedelta(hours=3, seconds=15))


def test_type_oids_match_pg_type() -> None:
    assert (types.BOOL, types.INT8, types.INT2, types.INT4, types.TEXT) == (16, 20, 21, 23, 25)
    assert (types.FLOAT4, types.FLOAT8, types.VARCHAR, types.DATE) == (700, 701, 1043, 1082)
    assert (types.TIMESTAMP, types.TIMESTAMPTZ, types.NUMERIC) == (1114, 1184, 1700)


def test_none_is_sql_null() -> None:
    assert encode_text_value(None) is None


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, b"t"),
        (False, b"f"),
        (0, b"0"),
        (-42, b"-42"),
        (2**70, b"1180591620717411303424"),
        ("naïve", "naïve".encode()),
        ("", b""),
        (b"\x00\xffA", b"\\x00ff41"),
        (bytearray(b"\x01"), b"\\x01"),
        (uuid.UUID(int=1), b"00000000-0000-0000-0000-000000000001"),
    ],
)
def test_encodes_simple_values(value: object, text: bytes) -> None:
    assert encode_text_value(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, b"1"),
        (0.1, b"0.1"),
        (-123.456, b"-123.456"),
        (1 / 3, b"0.3333333333333333"),
        (1e14, b"100000000000000"),
        (1e15, b"1e+15"),
        (0.0001, b"0.0001"),
        (1e-5, b"1e-05"),
        (1.5e300, b"1.5e+300"),
        (5e-324, b"5e-324"),
        (0.0, b"0"),
        (-0.0, b"-0"),
        (float("inf"), b"Infinity"),
        (float("-inf"), b"-Infinity"),
        (float("nan"), b"NaN"),
    ],
)
def test_encodes_floats_like_float8out(value: float, text: bytes) -> None:
    assert encode_text_value(value) == text


@pytest.mark.parametrize("value", [0.1, 1 / 3, 1e15, 1e-5, 5e-324, 1.7976931348623157e308, -2.5e-7])
def test_float_text_round_trips(value: float) -> None:
    text = encode_text_value(value)
    assert text is not None
    assert float(text) == value


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Decimal("1.50"), b"1.50"),
        (Decimal("1E+2"), b"100"),
        (Decimal("1E-7"), b"0.0000001"),
        (Decimal("-0.00"), b"0.00"),
        (Decimal("NaN"), b"NaN"),
        (Decimal("-Infinity"), b"-Infinity"),
    ],
)
def test_encodes_decimals_like_numeric_out(value: Decimal, text: bytes) -> None:
    assert encode_text_value(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (datetime.date(2024, 2, 29), b"2024-02-29"),
        (datetime.date(99, 1, 1), b"0099-01-01"),
        (datetime.datetime(2024, 1, 2, 3, 4, 5), b"2024-01-02 03:04:05"),
        (datetime.datetime(2024, 1, 2, 3, 4, 5, 120000), b"2024-01-02 03:04:05.12"),
        (datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), b"2024-01-02 03:04:05+00"),
        (datetime.datetime(2024, 1, 2, 3, 4, 5, 1, tzinfo=IST), b"2024-01-02 03:04:05.000001+05:30"),
        (datetime.datetime(1890, 1, 1, tzinfo=LMT), b"1890-01-01 00:00:00-03:00:15"),
        (datetime.time(23, 59, 59, 500000), b"23:59:59.5"),
    ],
)
def test_encodes_dates_and_times_in_iso_style(value: object, text: bytes) -> None:
    assert encode_text_value(value) == text


def test_refuses_values_it_cannot_encode() -> None:
    with pytest.raises(TypeError, match="no PostgreSQL text encoding for a value of type timedelta"):
        encode_text_value(datetime.timedelta(days=1))


@pytest.mark.parametrize(
    ("value", "oid"),
    [
        (None, types.TEXT),
        (True, types.BOOL),
        (7, types.INT8),
        (2**63, types.NUMERIC),
        (1.5, types.FLOAT8),
        (Decimal(1), types.NUMERIC),
        ("x", types.TEXT),
        (b"x", types.BYTEA),
        (datetime.date(2024, 1, 1), types.DATE),
        (datetime.datetime(2024, 1, 1), types.TIMESTAMP),
        (datetime.datetime(2024, 1, 1, tzinfo=UTC), types.TIMESTAMPTZ),
        (datetime.time(1, 2), types.TIME),
        (uuid.UUID(int=0), types.UUID),
    ],
)
def test_picks_a_type_oid_for_python_values(value: object, oid: int) -> None:
    assert type_oid_for_python(value) == oid


def test_type_sizes_cover_fixed_width_types() -> None:
    assert types.TYPE_SIZES[types.INT8] == 8
    assert types.TYPE_SIZES[types.TEXT] == -1
