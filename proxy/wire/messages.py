"""PostgreSQL protocol 3.0 messages: bytes in, frozen dataclasses out, and encoders back.

Layouts follow the "Message Formats" chapter of the PostgreSQL manual. All integers are
big-endian; strings are NUL-terminated UTF-8 (Veil only speaks client_encoding UTF8).

No I/O happens here. The session reads from its socket, ``feed``s a ``MessageReader``, and
passes each framed message to ``decode_startup_packet`` or ``decode_frontend_message``; it
writes the ``bytes`` the encoders return. That keeps every rule about what a valid message is
testable without a socket (psycopg 3 splits its protocol code the same way).

Decoders are strict: a truncated field, trailing bytes, or bytes that are not UTF-8 raise
``WireProtocolError`` and nothing else, so hostile input cannot surface as an IndexError or
struct.error deep in the session.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from proxy.wire.errors import FramingError, InvalidEncodingError, UnencodableValueError, WireProtocolError

STARTUP_HEADER_SIZE: Final = 4
"""Untyped startup-phase packets begin with only an int32 length (which counts itself)."""

MESSAGE_HEADER_SIZE: Final = 5
"""Typed messages begin with a type byte and an int32 length (which counts itself, not the type)."""

DEFAULT_MAX_MESSAGE_SIZE: Final = 1 << 20
MAX_STARTUP_PACKET_SIZE: Final = 10_000
"""PostgreSQL's own MAX_STARTUP_PACKET_LENGTH: startup packets arrive before authentication,
so they get a much smaller allowance than later messages."""

SSL_REQUEST_CODE: Final = 80877103
GSSENC_REQUEST_CODE: Final = 80877104
CANCEL_REQUEST_CODE: Final = 80877102
PROTOCOL_VERSION_3_0: Final = 196608
"""(3 << 16) | 0: major version in the high 16 bits, minor in the low 16."""

_INT16: Final = struct.Struct("!h")
_INT32: Final = struct.Struct("!i")
_UINT32: Final = struct.Struct("!I")
_NULL_LENGTH: Final = _INT32.pack(-1)


# --------------------------------------------------------------------------------------------
# Reading fields off one payload


class _PayloadCursor:
    """Reads fields off one payload, turning every short read into a WireProtocolError."""

    __slots__ = ("_data", "_position", "_what")

    def __init__(self, data: bytes, what: str) -> None:
        self._data = data
        self._position = 0
        self._what = what

    def take(self, size: int) -> bytes:
        end = self._position + size
        if size < 0 or end > len(self._data):
            raise WireProtocolError(f"{self._what} is truncated")
        chunk = self._data[self._position : end]
        self._position = end
        return chunk

    def int16(self) -> int:
        value: int = _INT16.unpack(self.take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _INT32.unpack(self.take(4))[0]
        return value

    def uint32(self) -> int:
        value: int = _UINT32.unpack(self.take(4))[0]
        return value

    def count(self) -> int:
        """An int16 element count; negative counts are a protocol violation, not an empty list."""
        value = self.int16()
        if value < 0:
            raise WireProtocolError(f"{self._what} has a negative count ({value})")
        return value

    def cstring(self) -> str:
        end = self._data.find(b"\0", self._position)
        if end < 0:
            raise WireProtocolError(f"{self._what} has an unterminated string")
        raw = self._data[self._position : end]
        self._position = end + 1
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidEncodingError(
                f'{self._what} has an invalid byte sequence for encoding "UTF8"'
            ) from None

    def rest(self) -> bytes:
        return self.take(len(self._data) - self._position)

    def finish(self) -> None:
        """PostgreSQL's pq_getmsgend: bytes left over mean we misread the message."""
        left = len(self._data) - self._position
        if left:
            raise WireProtocolError(f"{self._what} has {left} unexpected trailing bytes")


# --------------------------------------------------------------------------------------------
# Startup phase


@dataclass(frozen=True)
class SSLRequest:
    """The client asks for TLS before anything else; answer ``ssl_refused()`` or upgrade."""


@dataclass(frozen=True)
class GSSENCRequest:
    """The client asks for GSSAPI encryption; answer ``ssl_refused()`` (the same b"N")."""


@dataclass(frozen=True)
class CancelRequest:
    """Sent on a fresh connection to cancel the query running on another one.

    Both numbers are unsigned 32-bit, as handed out by ``backend_key_data``.
    """

    process_id: int
    secret_key: int


@dataclass(frozen=True)
class StartupMessage:
    """Opens a session. ``protocol_version`` is kept whole so the session can negotiate a minor
    version it does not support (see ``negotiate_protocol_version``)."""

    protocol_version: int
    parameters: dict[str, str]


StartupPacket: TypeAlias = SSLRequest | GSSENCRequest | CancelRequest | StartupMessage


def decode_startup_packet(payload: bytes) -> StartupPacket:
    """Decode the payload (the bytes after the length) of an untyped startup-phase packet."""
    cursor = _PayloadCursor(payload, "startup packet")
    code = cursor.uint32()
    if code == SSL_REQUEST_CODE:
        cursor.finish()
        return SSLRequest()
    if code == GSSENC_REQUEST_CODE:
        cursor.finish()
        return GSSENCRequest()
    if code == CANCEL_REQUEST_CODE:
        request = CancelRequest(process_id=cursor.uint32(), secret_key=cursor.uint32())
        cursor.finish()
        return request
    return _decode_startup_message(code, cursor)


def _decode_startup_message(version: int, cursor: _PayloadCursor) -> StartupMessage:
    """Name/value pairs end with an empty name; a later duplicate wins, as in PostgreSQL."""
    major, minor = version >> 16, version & 0xFFFF
    if major != 3:
        raise WireProtocolError(f"unsupported frontend protocol {major}.{minor}: server supports 3.0 to 3.0")
    parameters: dict[str, str] = {}
    while name := cursor.cstring():
        parameters[name] = cursor.cstring()
    cursor.finish()
    return StartupMessage(protocol_version=version, parameters=parameters)


# --------------------------------------------------------------------------------------------
# Typed frontend messages


@dataclass(frozen=True)
class Query:
    """Simple query protocol: one string that may hold several statements."""

    sql: str


@dataclass(frozen=True)
class Terminate:
    """The client is closing the connection."""


@dataclass(frozen=True)
class PasswordMessage:
    """Any 'p' message. Its layout depends on what the server asked for (SASLInitialResponse,
    SASLResponse, password), which only the session knows, so the payload is kept raw."""

    data: bytes


@dataclass(frozen=True)
class SASLInitialResponse:
    """The first SASL message: chosen mechanism and the client-first-message.

    A client that sends no initial response (length -1) gets ``b""``; SCRAM always sends one.
    """

    mechanism: str
    initial_response: bytes


@dataclass(frozen=True)
class Parse:
    """Extended protocol: prepare ``query`` as ``statement`` ("" is the unnamed statement).

    An OID of 0 leaves that parameter's type unspecified.
    """

    statement: str
    query: str
    param_type_oids: list[int]


@dataclass(frozen=True)
class Bind:
    """Extended protocol: bind parameter values to a prepared statement, creating a portal.

    ``param_formats`` and ``result_formats`` hold 0 (text) or 1 (binary); an empty list means
    all text and a single code applies to every column. A ``None`` parameter is SQL NULL.
    """

    portal: str
    statement: str
    param_formats: list[int]
    params: list[bytes | None]
    result_formats: list[int]


@dataclass(frozen=True)
class Describe:
    """Extended protocol: describe a prepared statement ('S') or portal ('P')."""

    kind: Literal["S", "P"]
    name: str


@dataclass(frozen=True)
class Execute:
    """Extended protocol: run a portal; ``max_rows`` 0 (or less) means no limit."""

    portal: str
    max_rows: int


@dataclass(frozen=True)
class Sync:
    """Extended protocol: end of a batch; the server answers ReadyForQuery."""


@dataclass(frozen=True)
class Flush:
    """Extended protocol: send whatever output is pending."""


@dataclass(frozen=True)
class Close:
    """Extended protocol: close a prepared statement ('S') or portal ('P')."""

    kind: Literal["S", "P"]
    name: str


@dataclass(frozen=True)
class UnsupportedMessage:
    """A well-framed message Veil does not implement (COPY, FunctionCall, ...).

    Returned rather than raised so the session decides how to refuse it.
    """

    type_byte: bytes


FrontendMessage: TypeAlias = (
    Query
    | Terminate
    | PasswordMessage
    | Parse
    | Bind
    | Describe
    | Execute
    | Sync
    | Flush
    | Close
    | UnsupportedMessage
)

_VALID_FORMAT_CODES: Final = frozenset({0, 1})


def _decode_query(cursor: _PayloadCursor) -> Query:
    """A query string is one C string: bytes after its NUL mean a NUL inside the query, which
    PostgreSQL refuses as an invalid byte (0x00), not as a broken message."""
    sql = cursor.cstring()
    if cursor.rest():
        raise InvalidEncodingError('Query message has an invalid byte sequence for encoding "UTF8": 0x00')
    return Query(sql=sql)


def _decode_password(cursor: _PayloadCursor) -> PasswordMessage:
    return PasswordMessage(data=cursor.rest())


def _decode_parse(cursor: _PayloadCursor) -> Parse:
    statement = cursor.cstring()
    query = cursor.cstring()
    oids = [cursor.uint32() for _ in range(cursor.count())]
    return Parse(statement=statement, query=query, param_type_oids=oids)


def _decode_format_codes(cursor: _PayloadCursor) -> list[int]:
    codes = [cursor.int16() for _ in range(cursor.count())]
    if not _VALID_FORMAT_CODES.issuperset(codes):
        raise WireProtocolError(f"Bind message has an unsupported format code in {codes}")
    return codes


def _decode_param_value(cursor: _PayloadCursor) -> bytes | None:
    length = cursor.int32()
    if length == -1:
        return None
    if length < 0:
        raise WireProtocolError(f"Bind message has an invalid parameter length ({length})")
    return cursor.take(length)


def _decode_bind(cursor: _PayloadCursor) -> Bind:
    """Also checks PostgreSQL's rule that there are 0, 1 or one-per-parameter format codes."""
    portal = cursor.cstring()
    statement = cursor.cstring()
    param_formats = _decode_format_codes(cursor)
    params = [_decode_param_value(cursor) for _ in range(cursor.count())]
    if len(param_formats) > 1 and len(param_formats) != len(params):
        raise WireProtocolError(
            f"Bind message has {len(param_formats)} parameter formats but {len(params)} parameters"
        )
    result_formats = _decode_format_codes(cursor)
    return Bind(portal, statement, param_formats, params, result_formats)


def _decode_target_kind(cursor: _PayloadCursor, what: str) -> Literal["S", "P"]:
    kind = cursor.take(1)
    if kind == b"S":
        return "S"
    if kind == b"P":
        return "P"
    raise WireProtocolError(f"invalid {what} message subtype {kind!r}")


def _decode_describe(cursor: _PayloadCursor) -> Describe:
    kind = _decode_target_kind(cursor, "Describe")
    return Describe(kind=kind, name=cursor.cstring())


def _decode_close(cursor: _PayloadCursor) -> Close:
    kind = _decode_target_kind(cursor, "Close")
    return Close(kind=kind, name=cursor.cstring())


def _decode_execute(cursor: _PayloadCursor) -> Execute:
    portal = cursor.cstring()
    return Execute(portal=portal, max_rows=cursor.int32())


_FRONTEND_DECODERS: Final[dict[bytes, tuple[str, Callable[[_PayloadCursor], FrontendMessage]]]] = {
    b"Q": ("Query", _decode_query),
    b"X": ("Terminate", lambda _: Terminate()),
    b"p": ("password", _decode_password),
    b"P": ("Parse", _decode_parse),
    b"B": ("Bind", _decode_bind),
    b"D": ("Describe", _decode_describe),
    b"E": ("Execute", _decode_execute),
    b"S": ("Sync", lambda _: Sync()),
    b"H": ("Flush", lambda _: Flush()),
    b"C": ("Close", _decode_close),
}


def decode_frontend_message(type_byte: bytes, payload: bytes) -> FrontendMessage:
    """Decode one framed message, as returned by ``MessageReader.next_message``."""
    if len(type_byte) != 1:
        raise WireProtocolError(f"message type must be one byte, got {type_byte!r}")
    entry = _FRONTEND_DECODERS.get(type_byte)
    if entry is None:
        return UnsupportedMessage(type_byte=type_byte)
    name, decoder = entry
    cursor = _PayloadCursor(payload, f"{name} message")
    message = decoder(cursor)
    cursor.finish()
    return message


def decode_sasl_initial_response(data: bytes) -> SASLInitialResponse:
    """Decode the data of a PasswordMessage the session knows to be a SASLInitialResponse."""
    cursor = _PayloadCursor(data, "SASLInitialResponse message")
    mechanism = cursor.cstring()
    length = cursor.int32()
    if length < -1:
        raise WireProtocolError(f"SASLInitialResponse message has an invalid length ({length})")
    response = b"" if length == -1 else cursor.take(length)
    cursor.finish()
    return SASLInitialResponse(mechanism=mechanism, initial_response=response)


# --------------------------------------------------------------------------------------------
# Framing


class MessageReader:
    """Cuts a byte stream into packets and messages, in whatever pieces the socket delivers.

    Declared lengths are checked as soon as a header is complete, before the body is
    buffered, so a peer that announces a 2 GiB message is refused after five bytes instead of
    after we have stored them. After a ``FramingError`` the stream position is lost: close the
    connection rather than reading on.
    """

    def __init__(
        self,
        *,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        max_startup_size: int = MAX_STARTUP_PACKET_SIZE,
    ) -> None:
        self._buffer = bytearray()
        self._max_message_size = max_message_size
        self._max_startup_size = min(max_startup_size, max_message_size)

    def feed(self, data: bytes) -> None:
        """Append bytes received from the peer."""
        self._buffer += data

    @property
    def buffered_size(self) -> int:
        """Bytes received but not yet returned.

        Non-zero right after an SSLRequest means the client pipelined plaintext behind it;
        when upgrading to TLS those bytes must be refused, not read as if encrypted
        (CVE-2021-23214).
        """
        return len(self._buffer)

    def next_startup(self) -> bytes | None:
        """The payload of the next untyped startup packet, or None until it is complete."""
        length = self._declared_length(0, self._max_startup_size)
        if length is None or len(self._buffer) < length:
            return None
        payload = bytes(self._buffer[STARTUP_HEADER_SIZE:length])
        del self._buffer[:length]
        return payload

    def next_message(self) -> tuple[bytes, bytes] | None:
        """(type byte, payload) of the next typed message, or None until it is complete."""
        length = self._declared_length(1, self._max_message_size)
        if length is None or len(self._buffer) < 1 + length:
            return None
        type_byte = bytes(self._buffer[:1])
        payload = bytes(self._buffer[MESSAGE_HEADER_SIZE : 1 + length])
        del self._buffer[: 1 + length]
        return type_byte, payload

    def _declared_length(self, offset: int, limit: int) -> int | None:
        """The int32 length at ``offset`` (it counts itself), once those bytes have arrived."""
        if len(self._buffer) < offset + 4:
            return None
        length: int = _INT32.unpack_from(self._buffer, offset)[0]
        if length < 4:
            raise FramingError(f"invalid message length {length}")
        if length > limit:
            raise FramingError(f"message length {length} exceeds the limit of {limit} bytes")
        return length


# --------------------------------------------------------------------------------------------
# Backend message encoders


def _message(type_byte: bytes, *parts: bytes) -> bytes:
    """Frame a typed message: the length counts itself and the payload, not the type byte."""
    payload = b"".join(parts)
    return type_byte + _INT32.pack(len(payload) + 4) + payload


def _pack(codec: struct.Struct, *values: int) -> bytes:
    try:
        return codec.pack(*values)
    except struct.error as error:
        raise UnencodableValueError(f"integer does not fit its protocol field: {values}") from error


def _cstring(value: str, what: str) -> bytes:
    """NUL-terminate ``value``, refusing an embedded NUL that would split the field."""
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise UnencodableValueError(f"{what} is not valid Unicode") from error
    if b"\0" in encoded:
        raise UnencodableValueError(f"{what} contains a NUL character")
    return encoded + b"\0"


def authentication_ok() -> bytes:
    """AuthenticationOk: the client is in; parameter statuses and ReadyForQuery follow."""
    return _message(b"R", _INT32.pack(0))


def authentication_sasl(mechanisms: list[str]) -> bytes:
    """AuthenticationSASL: offer mechanisms; Veil offers only SCRAM-SHA-256 (no -PLUS)."""
    if not mechanisms:
        raise UnencodableValueError("AuthenticationSASL needs at least one mechanism")
    names = [_cstring(name, "SASL mechanism") for name in mechanisms]
    return _message(b"R", _INT32.pack(10), *names, b"\0")


def authentication_sasl_continue(data: bytes) -> bytes:
    """AuthenticationSASLContinue carrying the server-first-message."""
    return _message(b"R", _INT32.pack(11), data)


def authentication_sasl_final(data: bytes) -> bytes:
    """AuthenticationSASLFinal carrying the server-final-message (``v=...``)."""
    return _message(b"R", _INT32.pack(12), data)


def parameter_status(name: str, value: str) -> bytes:
    """ParameterStatus: clients read server_version, client_encoding, etc. from these."""
    return _message(b"S", _cstring(name, "parameter name"), _cstring(value, "parameter value"))


def backend_key_data(process_id: int, secret_key: int) -> bytes:
    """BackendKeyData: what the client must quote in a CancelRequest (both unsigned 32-bit)."""
    return _message(b"K", _pack(_UINT32, process_id), _pack(_UINT32, secret_key))


def negotiate_protocol_version(newest_minor_version: int, unrecognized_options: Sequence[str]) -> bytes:
    """NegotiateProtocolVersion: tell a client asking for 3.x (x > 0), or sending ``_pq_.``
    options, what we support instead of refusing it."""
    names = [_cstring(name, "protocol option") for name in unrecognized_options]
    counts = _pack(_INT32, newest_minor_version) + _pack(_INT32, len(names))
    return _message(b"v", counts, *names)


_TRANSACTION_STATUSES: Final = frozenset({"I", "T", "E"})


def ready_for_query(status: str) -> bytes:
    """ReadyForQuery: 'I' idle, 'T' in a transaction, 'E' in a failed transaction."""
    if status not in _TRANSACTION_STATUSES:
        raise UnencodableValueError(f"transaction status must be 'I', 'T' or 'E', not {status!r}")
    return _message(b"Z", status.encode("ascii"))


@dataclass(frozen=True)
class FieldDescription:
    """One column of a RowDescription.

    ``type_size`` -1 means variable length; ``type_modifier`` -1 means none; ``table_oid``
    and ``column_number`` 0 mean "not a plain table column" (Veil never names its sources).
    """

    name: str
    type_oid: int
    type_size: int = -1
    type_modifier: int = -1
    format_code: int = 0
    table_oid: int = 0
    column_number: int = 0


_FIELD: Final = struct.Struct("!IhIhih")


def _field_description(field: FieldDescription) -> bytes:
    numbers = _pack(
        _FIELD,
        field.table_oid,
        field.column_number,
        field.type_oid,
        field.type_size,
        field.type_modifier,
        field.format_code,
    )
    return _cstring(field.name, "column name") + numbers


def row_description(fields: Sequence[FieldDescription]) -> bytes:
    """RowDescription: names and types of the columns of the rows that follow."""
    return _message(b"T", _pack(_INT16, len(fields)), *map(_field_description, fields))


def _column_value(value: bytes | None) -> bytes:
    if value is None:
        return _NULL_LENGTH
    return _INT32.pack(len(value)) + value


def data_row(values: Sequence[bytes | None]) -> bytes:
    """DataRow: values already encoded (see ``types.encode_text_value``); None is SQL NULL."""
    return _message(b"D", _pack(_INT16, len(values)), *map(_column_value, values))


def command_complete(tag: str) -> bytes:
    """CommandComplete, e.g. ``SELECT 3``; psycopg reads the row count from the tag."""
    return _message(b"C", _cstring(tag, "command tag"))


def empty_query_response() -> bytes:
    """EmptyQueryResponse: the query string held no statement."""
    return _message(b"I")


def parse_complete() -> bytes:
    """ParseComplete."""
    return _message(b"1")


def bind_complete() -> bytes:
    """BindComplete."""
    return _message(b"2")


def close_complete() -> bytes:
    """CloseComplete."""
    return _message(b"3")


def no_data() -> bytes:
    """NoData: the described statement or portal returns no rows."""
    return _message(b"n")


def portal_suspended() -> bytes:
    """PortalSuspended: Execute stopped at ``max_rows``; more rows remain."""
    return _message(b"s")


def parameter_description(oids: Sequence[int]) -> bytes:
    """ParameterDescription: the type of each parameter of a described statement."""
    return _message(b"t", _pack(_INT16, len(oids)), *(_pack(_UINT32, oid) for oid in oids))


def ssl_refused() -> bytes:
    """The single-byte answer to SSLRequest (or GSSENCRequest) that declines encryption."""
    return b"N"


def ssl_accepted() -> bytes:
    """The single-byte answer to SSLRequest that accepts: the TLS handshake follows at once."""
    return b"S"


# --------------------------------------------------------------------------------------------
# Errors and notices


_ERROR_SEVERITIES: Final = frozenset({"ERROR", "FATAL", "PANIC"})
_NOTICE_SEVERITIES: Final = frozenset({"WARNING", "NOTICE", "DEBUG", "INFO", "LOG"})
_SQLSTATE_CHARACTERS: Final = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ")


@dataclass(frozen=True)
class ErrorFields:
    """The fields of an ErrorResponse or NoticeResponse that Veil sends.

    ``position`` is a 1-based character index into the query (psql draws a caret under it).
    Validated on construction so a bad SQLSTATE fails where it is written, not on the wire.
    """

    severity: str
    sqlstate: str
    message: str
    detail: str | None = None
    hint: str | None = None
    position: int | None = None

    def __post_init__(self) -> None:
        if self.severity not in _ERROR_SEVERITIES | _NOTICE_SEVERITIES:
            raise UnencodableValueError(f"unknown severity {self.severity!r}")
        if len(self.sqlstate) != 5 or not _SQLSTATE_CHARACTERS.issuperset(self.sqlstate):
            raise UnencodableValueError(f"SQLSTATE must be five digits or capitals, not {self.sqlstate!r}")
        if self.position is not None and self.position < 1:
            raise UnencodableValueError(f"error position is 1-based, not {self.position}")


def _error_fields_payload(fields: ErrorFields) -> bytes:
    """S is the localized severity and V the fixed English one; Veil does not localize."""
    present: list[tuple[bytes, str | None]] = [
        (b"S", fields.severity),
        (b"V", fields.severity),
        (b"C", fields.sqlstate),
        (b"M", fields.message),
        (b"D", fields.detail),
        (b"H", fields.hint),
        (b"P", None if fields.position is None else str(fields.position)),
    ]
    parts = [code + _cstring(text, "error field") for code, text in present if text is not None]
    return b"".join(parts) + b"\0"


def error_response(fields: ErrorFields) -> bytes:
    """ErrorResponse; the severity must be ERROR, FATAL or PANIC."""
    if fields.severity not in _ERROR_SEVERITIES:
        raise UnencodableValueError(f"an ErrorResponse cannot have severity {fields.severity}")
    return _message(b"E", _error_fields_payload(fields))


def notice_response(fields: ErrorFields) -> bytes:
    """NoticeResponse; the severity must be WARNING, NOTICE, DEBUG, INFO or LOG."""
    if fields.severity not in _NOTICE_SEVERITIES:
        raise UnencodableValueError(f"a NoticeResponse cannot have severity {fields.severity}")
    return _message(b"N", _error_fields_payload(fields))
