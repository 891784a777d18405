"""Errors of the wire layer.

They know nothing of SQLSTATEs: ``proxy/errors.py`` maps them to ErrorResponses. Each class
exists because the session must react to it differently, not to describe every way bytes can
be wrong.
"""

from __future__ import annotations


class WireProtocolError(Exception):
    """A client sent a message that is malformed, oversized or not allowed here (08P01).

    Raised by the decoders for one already-framed message, so the stream is still in step and
    the session may answer with an error and carry on (PostgreSQL does the same for "invalid
    message format").
    """


class InvalidEncodingError(WireProtocolError):
    """A string that is not UTF-8, or a query string with a NUL byte inside (22021, as PostgreSQL's
    "invalid byte sequence for encoding"). The message itself is intact: the session answers ERROR
    and goes on."""


class FramingError(WireProtocolError):
    """The stream lost its message boundaries (impossible or oversized declared length).

    Nothing after this point can be trusted to start a message, so the only safe reaction is
    an ErrorResponse (FATAL) and closing the connection.
    """


class ScramAuthenticationError(Exception):
    """A SCRAM exchange failed: wrong password, unknown user, or a malformed SCRAM message.

    Wrong password and unknown user raise it with the same text on purpose, so that neither
    the client nor a log reader can tell which names exist.
    """


class InvalidScramVerifierError(ValueError):
    """A stored password verifier is not in PostgreSQL's SCRAM-SHA-256 format.

    A configuration problem, not a client's fault, so it is kept apart from
    ScramAuthenticationError.
    """


class UnencodableValueError(ValueError):
    """We were asked to send something the protocol cannot carry.

    Typically a NUL inside a string (a client would read the rest as the next field, which is
    a message-injection vector) or an integer that does not fit its field.
    """


class InvalidTextValueError(ValueError):
    """A text-format parameter is not valid input for its type (SQLSTATE 22P02, as PostgreSQL's
    "invalid input syntax for type integer"). The message quotes the client's own value only."""


class InvalidBinaryValueError(ValueError):
    """A binary-format parameter does not have its type's layout (SQLSTATE 22P03, as PostgreSQL's
    "incorrect binary data format"), or holds a value Python cannot represent (infinite dates)."""


class UnsupportedBinaryTypeError(ValueError):
    """A parameter of a type Veil has no binary codec for was sent in binary format; text works."""
