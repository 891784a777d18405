"""Message codecs: decoders against hand-built bytes, encoders byte for byte."""

from __future__ import annotations

import struct

import pytest

from proxy.wire.errors import InvalidEncodingError, UnencodableValueError, WireProtocolError
from proxy.wire.messages import (
    Bind,
    CancelRequest,
    Close,
    Describe,
    ErrorFields,
    Execute,
    FieldDescription,
    Flush,
    GSSENCRequest,
    Parse,
    PasswordMessage,
    Query,
    SASLInitialResponse,
    SSLRequest,
    StartupMessage,
    Sync,
    Terminate,
    UnsupportedMessage,
    authentication_ok,
    authentication_sasl,
    authentication_sasl_continue,
    authentication_sasl_final,
    backend_key_data,
    bind_complete,
    close_complete,
    command_complete,
    data_row,
    decode_frontend_message,
    decode_sasl_initial_response,
    decode_startup_packet,
    empty_query_response,
    error_response,
    negotiate_protocol_version,
    no_data,
    notice_response,
    parameter_description,
    parameter_status,
    parse_complete,
    portal_suspended,
    ready_for_query,
    row_description,
    ssl_refused,
)


def typed(type_byte: bytes, payload: bytes) -> bytes:
    """A typed message built independently of the code under test."""
    return type_byte + struct.pack("!i", len(payload) + 4) + payload


# --- startup packets ------------------------------------------------------------------------


def test_decodes_startup_message_parameters() -> None:
    payload = struct.pack("!i", 196608) + b"user\0alice\0database\0demo\0\0"
    assert decode_startup_packet(payload) == StartupMessage(196608, {"user": "alice", "database": "demo"})


def test_keeps_minor_protocol_version_for_negotiation() -> None:
    payload = struct.pack("!i", (3 << 16) | 2) + b"user\0alice\0\0"
    assert decode_startup_packet(payload) == StartupMessage((3 << 16) | 2, {"user": "alice"})


def test_rejects_protocol_major_version_other_than_3() -> None:
    payload = struct.pack("!i", 2 << 16) + b"user\0alice\0\0"
    with pytest.raises(WireProtocolError, match=r"unsupported frontend protocol 2\.0"):
        decode_startup_packet(payload)


def test_rejects_startup_message_without_terminator() -> None:
    payload = struct.pack("!i", 196608) + b"user\0alice\0"
    with pytest.raises(WireProtocolError, match="unterminated string"):
        decode_startup_packet(payload)


def test_rejects_startup_parameter_without_value() -> None:
    payload = struct.pack("!i", 196608) + b"user\0"
    with pytest.raises(WireProtocolError, match="unterminated string"):
        decode_startup_packet(payload)


def test_rejects_startup_message_with_trailing_bytes() -> None:
    payload = struct.pack("!i", 196608) + b"user\0alice\0\0junk"
    with pytest.raises(WireProtocolError, match="4 unexpected trailing bytes"):
        decode_startup_packet(payload)


def test_rejects_startup_parameter_that_is_not_utf8() -> None:
    payload = struct.pack("!i", 196608) + b"user\0\xff\xfe\0\0"
    with pytest.raises(WireProtocolError, match="UTF8"):
        decode_startup_packet(payload)


def test_decodes_ssl_and_gssenc_requests() -> None:
    assert decode_startup_packet(struct.pack("!i", 80877103)) == SSLRequest()
    assert decode_startup_packet(struct.pack("!i", 80877104)) == GSSENCRequest()


def test_rejects_ssl_request_with_extra_bytes() -> None:
    with pytest.raises(WireProtocolError, match="trailing"):
        decode_startup_packet(struct.pack("!ii", 80877103, 0))


def test_decodes_cancel_request_keys_as_unsigned() -> None:
    payload = struct.pack("!iII", 80877102, 4242, 0xDEADBEEF)
    assert decode_startup_packet(payload) == CancelRequest(process_id=4242, secret_key=0xDEADBEEF)


def test_rejects_truncated_cancel_request() -> None:
    with pytest.raises(WireProtocolError, match="truncated"):
        decode_startup_packet(struct.pack("!ii", 80877102, 4242))


def test_rejects_startup_packet_shorter_than_a_code() -> None:
    with pytest.raises(WireProtocolError, match="truncated"):
        decode_startup_packet(b"\x00\x03")


# --- typed frontend messages ----------------------------------------------------------------


def test_decodes_query() -> None:
    assert decode_frontend_message(b"Q", "SELECT 'é'\0".encode()) == Query(sql="SELECT 'é'")


def test_rejects_query_without_terminator() -> None:
    with pytest.raises(WireProtocolError, match="Query message has an unterminated string"):
        decode_frontend_message(b"Q", b"SELECT 1")


def test_rejects_query_with_a_nul_inside_as_an_invalid_byte() -> None:
    with pytest.raises(InvalidEncodingError, match='invalid byte sequence for encoding "UTF8": 0x00'):
        decode_frontend_message(b"Q", b"SELECT 1\0x\0")


def test_rejects_query_that_is_not_utf8() -> None:
    with pytest.raises(InvalidEncodingError, match='invalid byte sequence for encoding "UTF8"'):
        decode_frontend_message(b"Q", b"SELECT '\xc3'\0")


def test_decodes_messages_without_payload() -> None:
    assert decode_frontend_message(b"X", b"") == Terminate()
    assert decode_frontend_message(b"S", b"") == Sync()
    assert decode_frontend_message(b"H", b"") == Flush()


def test_rejects_sync_with_payload() -> None:
    with pytest.raises(WireProtocolError, match="Sync message has 1 unexpected trailing bytes"):
        decode_frontend_message(b"S", b"\0")


def test_keeps_password_family_payload_raw() -> None:
    assert decode_frontend_message(b"p", b"\x00\x01raw") == PasswordMessage(data=b"\x00\x01raw")


def test_returns_unsupported_message_for_unknown_type() -> None:
    assert decode_frontend_message(b"F", b"\x01\x02") == UnsupportedMessage(type_byte=b"F")


def test_decodes_sasl_initial_response() -> None:
    data = b"SCRAM-SHA-256\0" + struct.pack("!i", 9) + b"n,,n=,r=x"
    assert decode_sasl_initial_response(data) == SASLInitialResponse("SCRAM-SHA-256", b"n,,n=,r=x")


def test_sasl_initial_response_without_data_is_empty() -> None:
    data = b"SCRAM-SHA-256\0" + struct.pack("!i", -1)
    assert decode_sasl_initial_response(data) == SASLInitialResponse("SCRAM-SHA-256", b"")


def test_rejects_sasl_initial_response_shorter_than_declared() -> None:
    data = b"SCRAM-SHA-256\0" + struct.pack("!i", 10) + b"n,,"
    with pytest.raises(WireProtocolError, match="SASLInitialResponse message is truncated"):
        decode_sasl_initial_response(data)


def test_decodes_parse() -> None:
    payload = b"stmt1\0SELECT $1, $2\0" + struct.pack("!hII", 2, 23, 0)
    assert decode_frontend_message(b"P", payload) == Parse("stmt1", "SELECT $1, $2", [23, 0])


def test_rejects_parse_with_fewer_oids_than_counted() -> None:
    payload = b"\0SELECT $1\0" + struct.pack("!hI", 2, 23)
    with pytest.raises(WireProtocolError, match="Parse message is truncated"):
        decode_frontend_message(b"P", payload)


def test_decodes_bind_with_null_and_binary_parameters() -> None:
    payload = (
        b"portal\0stmt\0"
        + struct.pack("!hhh", 2, 0, 1)
        + struct.pack("!h", 2)
        + struct.pack("!i", 2)
        + b"42"
        + struct.pack("!i", -1)
        + struct.pack("!hh", 1, 1)
    )
    expected = Bind("portal", "stmt", [0, 1], [b"42", None], [1])
    assert decode_frontend_message(b"B", payload) == expected


def test_rejects_bind_with_format_count_not_matching_parameters() -> None:
    payload = b"\0\0" + struct.pack("!hhh", 2, 0, 0) + struct.pack("!hi", 1, -1) + struct.pack("!h", 0)
    with pytest.raises(WireProtocolError, match="2 parameter formats but 1 parameters"):
        decode_frontend_message(b"B", payload)


def test_rejects_bind_with_unknown_format_code() -> None:
    payload = b"\0\0" + struct.pack("!hh", 1, 7) + struct.pack("!h", 0) + struct.pack("!h", 0)
    with pytest.raises(WireProtocolError, match="unsupported format code"):
        decode_frontend_message(b"B", payload)


def test_rejects_bind_with_negative_count() -> None:
    payload = b"\0\0" + struct.pack("!h", -1)
    with pytest.raises(WireProtocolError, match="negative count"):
        decode_frontend_message(b"B", payload)


def test_rejects_bind_with_parameter_length_below_minus_one() -> None:
    payload = b"\0\0" + struct.pack("!h", 0) + struct.pack("!hi", 1, -2) + struct.pack("!h", 0)
    with pytest.raises(WireProtocolError, match="invalid parameter length"):
        decode_frontend_message(b"B", payload)


def test_decodes_describe_close_and_execute() -> None:
    assert decode_frontend_message(b"D", b"Sstmt\0") == Describe(kind="S", name="stmt")
    assert decode_frontend_message(b"C", b"P\0") == Close(kind="P", name="")
    assert decode_frontend_message(b"E", b"\0" + struct.pack("!i", 10)) == Execute(portal="", max_rows=10)


def test_rejects_describe_with_unknown_kind() -> None:
    with pytest.raises(WireProtocolError, match="invalid Describe message subtype"):
        decode_frontend_message(b"D", b"Xname\0")


def test_rejects_execute_without_row_limit() -> None:
    with pytest.raises(WireProtocolError, match="Execute message is truncated"):
        decode_frontend_message(b"E", b"portal\0\x00\x00")


# --- backend encoders -----------------------------------------------------------------------


def test_encodes_authentication_messages() -> None:
    assert authentication_ok() == b"R\x00\x00\x00\x08\x00\x00\x00\x00"
    assert authentication_sasl(["SCRAM-SHA-256"]) == typed(b"R", struct.pack("!i", 10) + b"SCRAM-SHA-256\0\0")
    assert authentication_sasl_continue(b"r=abc") == typed(b"R", struct.pack("!i", 11) + b"r=abc")
    assert authentication_sasl_final(b"v=xyz") == typed(b"R", struct.pack("!i", 12) + b"v=xyz")


def test_encodes_parameter_status_and_backend_key_data() -> None:
    assert parameter_status("server_version", "16.0") == typed(b"S", b"server_version\x0016.0\0")
    assert backend_key_data(7, 0xFFFFFFFF) == typed(b"K", struct.pack("!II", 7, 0xFFFFFFFF))


def test_encodes_ready_for_query() -> None:
    assert ready_for_query("I") == b"Z\x00\x00\x00\x05I"


def test_rejects_unknown_transaction_status() -> None:
    with pytest.raises(UnencodableValueError, match="'I', 'T' or 'E'"):
        ready_for_query("X")


def test_encodes_row_description() -> None:
    fields = [FieldDescription("n", 20, 8), FieldDescription("name", 25, table_oid=1, column_number=2)]
    expected = typed(
        b"T",
        struct.pack("!h", 2)
        + b"n\0"
        + struct.pack("!IhIhih", 0, 0, 20, 8, -1, 0)
        + b"name\0"
        + struct.pack("!IhIhih", 1, 2, 25, -1, -1, 0),
    )
    assert row_description(fields) == expected


def test_encodes_data_row_with_null() -> None:
    expected = typed(
        b"D", struct.pack("!h", 3) + struct.pack("!i", 1) + b"1" + struct.pack("!i", -1) + b"\0\0\0\0"
    )
    assert data_row([b"1", None, b""]) == expected


def test_encodes_command_complete_and_empty_messages() -> None:
    assert command_complete("SELECT 3") == typed(b"C", b"SELECT 3\0")
    assert empty_query_response() == b"I\x00\x00\x00\x04"
    assert parse_complete() == b"1\x00\x00\x00\x04"
    assert bind_complete() == b"2\x00\x00\x00\x04"
    assert close_complete() == b"3\x00\x00\x00\x04"
    assert no_data() == b"n\x00\x00\x00\x04"
    assert portal_suspended() == b"s\x00\x00\x00\x04"
    assert ssl_refused() == b"N"


def test_encodes_parameter_description() -> None:
    assert parameter_description([23, 25]) == typed(b"t", struct.pack("!hII", 2, 23, 25))


def test_encodes_negotiate_protocol_version() -> None:
    expected = typed(b"v", struct.pack("!ii", 0, 1) + b"_pq_.option\0")
    assert negotiate_protocol_version(0, ["_pq_.option"]) == expected


def test_encodes_error_response_with_all_fields() -> None:
    fields = ErrorFields("ERROR", "42501", 'column "salary" is private', "why", "how", 8)
    expected = typed(
        b"E",
        b"SERROR\0VERROR\0C42501\0M" + b'column "salary" is private\0' + b"Dwhy\0Hhow\0P8\0\0",
    )
    assert error_response(fields) == expected


def test_encodes_notice_response_without_optional_fields() -> None:
    expected = typed(b"N", b"SNOTICE\0VNOTICE\0C00000\0Mhello\0\0")
    assert notice_response(ErrorFields("NOTICE", "00000", "hello")) == expected


def test_rejects_notice_severity_in_error_response() -> None:
    with pytest.raises(UnencodableValueError, match="ErrorResponse cannot have severity NOTICE"):
        error_response(ErrorFields("NOTICE", "00000", "hello"))


def test_rejects_malformed_sqlstate() -> None:
    with pytest.raises(UnencodableValueError, match="SQLSTATE"):
        ErrorFields("ERROR", "4250", "x")


def test_rejects_nul_inside_a_string_field() -> None:
    with pytest.raises(UnencodableValueError, match="NUL"):
        command_complete("SELECT\0 1")


def test_rejects_integer_too_large_for_its_field() -> None:
    with pytest.raises(UnencodableValueError, match="does not fit"):
        backend_key_data(1, 2**32)
