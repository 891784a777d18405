"""Extended-protocol messages: what a client encodes decodes to the same fields, for any fields; what
Veil answers has the layout the manual gives; Bind's format-code rule."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.wire.errors import WireProtocolError
from proxy.wire.messages import (
    Bind,
    Close,
    Describe,
    Execute,
    FieldDescription,
    Flush,
    Parse,
    Sync,
    decode_frontend_message,
    parameter_description,
    row_description,
)
from proxy.wire.values import BINARY_FORMAT, TEXT_FORMAT, expand_format_codes

names = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=20)
oids = st.integers(0, 2**32 - 1)
formats = st.sampled_from([TEXT_FORMAT, BINARY_FORMAT])
values = st.none() | st.binary(max_size=30)


def cstring(text: str) -> bytes:
    return text.encode() + b"\0"


def int16s(items: list[int]) -> bytes:
    return struct.pack(f"!h{len(items)}h", len(items), *items)


def encode_parse(message: Parse) -> bytes:
    """What libpq's PQsendPrepare writes."""
    oid_list = message.param_type_oids
    return (
        cstring(message.statement)
        + cstring(message.query)
        + struct.pack(f"!h{len(oid_list)}I", len(oid_list), *oid_list)
    )


def encode_bind(message: Bind) -> bytes:
    params = b"".join(
        struct.pack("!i", -1) if value is None else struct.pack("!i", len(value)) + value
        for value in message.params
    )
    return (
        cstring(message.portal)
        + cstring(message.statement)
        + int16s(message.param_formats)
        + struct.pack("!h", len(message.params))
        + params
        + int16s(message.result_formats)
    )


@given(names, names, st.lists(oids, max_size=5))
def test_parse_decodes_to_what_the_client_encoded(statement: str, query: str, types: list[int]) -> None:
    message = Parse(statement, query, types)
    assert decode_frontend_message(b"P", encode_parse(message)) == message


@st.composite
def binds(draw: st.DrawFn) -> Bind:
    params = draw(st.lists(values, max_size=5))
    param_formats = draw(st.sampled_from([[], [draw(formats)], [draw(formats) for _ in params]]))
    return Bind(draw(names), draw(names), param_formats, params, draw(st.lists(formats, max_size=4)))


@given(binds())
def test_bind_decodes_to_what_the_client_encoded(message: Bind) -> None:
    assert decode_frontend_message(b"B", encode_bind(message)) == message


@given(st.sampled_from(["S", "P"]), names)
def test_describe_and_close_decode_their_target(kind: str, name: str) -> None:
    payload = kind.encode() + cstring(name)
    assert decode_frontend_message(b"D", payload) == Describe(kind, name)  # type: ignore[arg-type]
    assert decode_frontend_message(b"C", payload) == Close(kind, name)  # type: ignore[arg-type]


@given(names, st.integers(-(2**31), 2**31 - 1))
def test_execute_decodes_its_portal_and_row_limit(portal: str, max_rows: int) -> None:
    payload = cstring(portal) + struct.pack("!i", max_rows)
    assert decode_frontend_message(b"E", payload) == Execute(portal, max_rows)


def test_sync_and_flush_have_no_payload() -> None:
    assert decode_frontend_message(b"S", b"") == Sync()
    assert decode_frontend_message(b"H", b"") == Flush()
    with pytest.raises(WireProtocolError, match="trailing"):
        decode_frontend_message(b"H", b"\0")


def test_bind_with_a_parameter_longer_than_the_message_is_refused() -> None:
    payload = b"\0\0" + struct.pack("!hhi", 0, 1, 100) + b"short" + struct.pack("!h", 0)
    with pytest.raises(WireProtocolError, match="Bind message is truncated"):
        decode_frontend_message(b"B", payload)


@given(st.lists(oids, max_size=10))
def test_parameter_description_lists_each_type(types: list[int]) -> None:
    message = parameter_description(types)
    assert message[:1] == b"t"
    assert struct.unpack("!i", message[1:5])[0] == len(message) - 1
    count = struct.unpack("!h", message[5:7])[0]
    assert list(struct.unpack(f"!{count}I", message[7:])) == types


def test_row_description_carries_each_columns_format_code() -> None:
    fields = [FieldDescription("n", 20, 8, format_code=1), FieldDescription("t", 25, format_code=0)]
    body = row_description(fields)[5:]
    assert body == (
        struct.pack("!h", 2)
        + b"n\0"
        + struct.pack("!IhIhih", 0, 0, 20, 8, -1, 1)
        + b"t\0"
        + struct.pack("!IhIhih", 0, 0, 25, -1, -1, 0)
    )


@pytest.mark.parametrize(
    ("codes", "count", "expanded"),
    [
        ([], 3, [0, 0, 0]),
        ([1], 3, [1, 1, 1]),
        ([0, 1, 0], 3, [0, 1, 0]),
        ([1], 0, []),
        ([], 0, []),
    ],
)
def test_format_codes_follow_binds_zero_one_or_each_rule(
    codes: list[int], count: int, expanded: list[int]
) -> None:
    assert expand_format_codes(codes, count, items="columns") == expanded


def test_result_format_codes_that_do_not_match_the_columns_are_a_protocol_violation() -> None:
    with pytest.raises(WireProtocolError, match="bind message has 2 format codes for 3 columns"):
        expand_format_codes([0, 1], 3, items="columns")
