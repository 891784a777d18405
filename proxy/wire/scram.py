"""SCRAM-SHA-256 authentication, server side (RFC 5802, RFC 7677), as PostgreSQL does it.

Veil stores only verifiers (salt, iteration count, StoredKey, ServerKey), never passwords,
and checks a client's proof without learning the password. The exchange follows
PostgreSQL's ``auth-scram.c`` so that libpq, psycopg and asyncpg behave exactly as against a
real server:

* the username inside the SCRAM message is ignored (the startup packet's ``user`` counts);
* no channel binding: only ``SCRAM-SHA-256`` is offered, so a client sending ``p=`` is
  refused, ``n,,`` and ``y,,`` are accepted, and an authorization identity (``a=``) or a
  mandatory extension (``m=``) is refused;
* for an unknown user the exchange runs against a mock verifier and fails at the very end,
  so an unknown user looks exactly like a wrong password.

Passwords are normalised with SASLprep (RFC 4013) the way PostgreSQL's ``pg_saslprep`` does,
falling back to the raw UTF-8 bytes when SASLprep refuses the string, as libpq also does;
verifiers made here therefore match those made by PostgreSQL for the same password.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import secrets
import stringprep
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from proxy.wire.errors import InvalidScramVerifierError, ScramAuthenticationError

SCRAM_SHA_256: Final = "SCRAM-SHA-256"
DEFAULT_ITERATIONS: Final = 4096
"""PostgreSQL's default scram_iterations."""

_SALT_SIZE: Final = 16
_NONCE_SIZE: Final = 18
_KEY_SIZE: Final = hashlib.sha256().digest_size
_AUTHENTICATION_FAILED: Final = "password authentication failed"


# --------------------------------------------------------------------------------------------
# Password preparation (SASLprep, RFC 4013)


def prepare_password(password: str) -> bytes:
    """The bytes PostgreSQL hashes for ``password``: SASLprep'd, or raw UTF-8 if it fails.

    A lone surrogate cannot be encoded at all and raises UnicodeEncodeError.
    """
    raw = password.encode("utf-8")
    if password.isascii():
        return raw
    prepared = _saslprep(password)
    return raw if prepared is None else prepared.encode("utf-8")


def _saslprep(text: str) -> str | None:
    """RFC 4013 in pg_saslprep's order: map, normalise (NFKC), prohibit, check bidi.

    pg_saslprep runs the prohibition and bidi checks on the mapped, not-yet-normalised
    characters; so do we, to hash exactly what PostgreSQL hashes. None means "prohibited".
    """
    mapped = "".join(
        " " if stringprep.in_table_c12(ch) else ch for ch in text if not stringprep.in_table_b1(ch)
    )
    if not mapped or any(map(_is_prohibited, mapped)) or not _bidi_allowed(mapped):
        return None
    return unicodedata.normalize("NFKC", mapped)


# C.1.2 (non-ASCII spaces) is absent: the mapping step has already turned those into spaces.
_PROHIBITED_TABLES: Final[tuple[Callable[[str], bool], ...]] = (
    stringprep.in_table_c21_c22,
    stringprep.in_table_c3,
    stringprep.in_table_c4,
    stringprep.in_table_c5,
    stringprep.in_table_c6,
    stringprep.in_table_c7,
    stringprep.in_table_c8,
    stringprep.in_table_c9,
    stringprep.in_table_a1,
)


def _is_prohibited(character: str) -> bool:
    return any(in_table(character) for in_table in _PROHIBITED_TABLES)


def _bidi_allowed(text: str) -> bool:
    """RFC 3454 §6: with any right-to-left character, no left-to-right one and RTL at both ends."""
    if not any(map(stringprep.in_table_d1, text)):
        return True
    no_left_to_right = not any(map(stringprep.in_table_d2, text))
    return no_left_to_right and stringprep.in_table_d1(text[0]) and stringprep.in_table_d1(text[-1])


# --------------------------------------------------------------------------------------------
# Verifiers


@dataclass(frozen=True)
class ScramVerifier:
    """What the server stores: enough to check a proof, not enough to log in."""

    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes

    def __str__(self) -> str:
        """PostgreSQL's pg_authid format, so verifiers can move between the two."""
        return (
            f"{SCRAM_SHA_256}${self.iterations}:{_b64(self.salt)}"
            f"${_b64(self.stored_key)}:{_b64(self.server_key)}"
        )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _hmac(key: bytes, message: bytes) -> bytes:
    return hmac.digest(key, message, "sha256")


def _derive_verifier(password: str, salt: bytes, iterations: int) -> ScramVerifier:
    salted = hashlib.pbkdf2_hmac("sha256", prepare_password(password), salt, iterations)
    stored_key = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
    return ScramVerifier(iterations, salt, stored_key, _hmac(salted, b"Server Key"))


def make_scram_verifier(
    password: str, *, salt: bytes | None = None, iterations: int = DEFAULT_ITERATIONS
) -> str:
    """A verifier for ``password`` in PostgreSQL's format.

    ``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`` (base64 fields); the salt
    is 16 random bytes unless given (give one only to reproduce a known verifier).
    """
    if iterations < 1:
        raise InvalidScramVerifierError(f"SCRAM iterations must be at least 1, not {iterations}")
    if salt is None:
        salt = secrets.token_bytes(_SALT_SIZE)
    return str(_derive_verifier(password, salt, iterations))


def _b64decode_field(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidScramVerifierError(f"SCRAM verifier has an invalid base64 {what}") from None


def parse_scram_verifier(verifier: str) -> ScramVerifier:
    """Parse PostgreSQL's verifier format, refusing anything else (md5 hashes, plaintext)."""
    mechanism, _, rest = verifier.partition("$")
    parameters, _, keys = rest.partition("$")
    iterations_text, _, salt_text = parameters.partition(":")
    stored_text, _, server_text = keys.partition(":")
    if mechanism != SCRAM_SHA_256 or not (salt_text and stored_text and server_text):
        raise InvalidScramVerifierError(
            "not a SCRAM-SHA-256 verifier: expected SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>"
        )
    if not (iterations_text.isascii() and iterations_text.isdigit()) or int(iterations_text) < 1:
        raise InvalidScramVerifierError(f"SCRAM verifier has an invalid iteration count {iterations_text!r}")
    stored_key = _b64decode_field(stored_text, "StoredKey")
    server_key = _b64decode_field(server_text, "ServerKey")
    if len(stored_key) != _KEY_SIZE or len(server_key) != _KEY_SIZE:
        raise InvalidScramVerifierError(f"SCRAM verifier keys must be {_KEY_SIZE} bytes")
    salt = _b64decode_field(salt_text, "salt")
    return ScramVerifier(int(iterations_text), salt, stored_key, server_key)


def _mock_verifier(username: str, mock_salt_key: bytes | None, iterations: int) -> ScramVerifier:
    """A verifier no password matches, for users that do not exist.

    With ``mock_salt_key`` (a server secret) the salt is HMAC(key, username): the same on
    every attempt, as a real user's would be, and unpredictable without the key — the
    approach of PostgreSQL's scram_mock_salt. Without it the salt is random, so repeated
    attempts could tell an unknown name from a real one by the changing salt.
    """
    if mock_salt_key is None:
        salt = secrets.token_bytes(_SALT_SIZE)
    else:
        salt = _hmac(mock_salt_key, username.encode("utf-8"))[:_SALT_SIZE]
    return ScramVerifier(iterations, salt, secrets.token_bytes(_KEY_SIZE), secrets.token_bytes(_KEY_SIZE))


# --------------------------------------------------------------------------------------------
# The exchange


def random_nonce() -> str:
    """The server's share of the nonce: 18 random bytes, base64 (printable, no commas)."""
    return _b64(secrets.token_bytes(_NONCE_SIZE))


def _malformed(reason: str) -> ScramAuthenticationError:
    return ScramAuthenticationError(f"malformed SCRAM message: {reason}")


def _decode_message(message: bytes) -> str:
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise _malformed("not valid UTF-8") from None


def _is_printable(text: str) -> bool:
    """RFC 5802's "printable": visible ASCII except the comma that separates attributes."""
    return all("\x21" <= ch <= "\x7e" and ch != "," for ch in text)


def _split_gs2_header(client_first: str) -> tuple[str, str]:
    """Split off "n,," or "y,,"; refuse channel binding and authorization identities."""
    flag, _, rest = client_first.partition(",")
    authzid, separator, bare = rest.partition(",")
    if flag.startswith("p="):
        raise ScramAuthenticationError(
            "the client selected SCRAM-SHA-256 without channel binding, but the SCRAM message "
            "includes channel binding data"
        )
    if flag not in ("n", "y") or not separator:
        raise _malformed("invalid GS2 header")
    if authzid:
        raise ScramAuthenticationError("the client uses an authorization identity, which is not supported")
    return f"{flag},,", bare


def _client_nonce(client_first_bare: str) -> str:
    """The c-nonce of ``n=<user>,r=<nonce>[,extensions]``; the user name is ignored."""
    attributes = client_first_bare.split(",")
    if attributes[0].startswith("m="):
        raise ScramAuthenticationError("the client requires an unsupported SCRAM extension")
    if len(attributes) < 2 or not attributes[0].startswith("n=") or not attributes[1].startswith("r="):
        raise _malformed("expected n= and r= in client-first-message")
    nonce = attributes[1][2:]
    if not nonce or not _is_printable(nonce):
        raise _malformed("invalid client nonce")
    return nonce


def _client_proof(proof_text: str) -> bytes:
    try:
        proof = base64.b64decode(proof_text, validate=True)
    except (binascii.Error, ValueError):
        raise _malformed("invalid base64 in the client proof") from None
    if len(proof) != _KEY_SIZE:
        raise _malformed("client proof has the wrong length")
    return proof


class _Stage(enum.Enum):
    AWAITING_CLIENT_FIRST = enum.auto()
    AWAITING_CLIENT_FINAL = enum.auto()
    FINISHED = enum.auto()


class ScramServerExchange:
    """One SCRAM-SHA-256 conversation: ``server_first`` then ``server_final``, once each.

    Any failure ends the conversation; later calls raise ScramAuthenticationError too. Pass
    ``verifier=None`` for an unknown user (see the module docstring); give ``username`` and a
    ``mock_salt_key`` (a secret fixed for the server's lifetime) so the fake salt is stable.
    ``nonce_factory`` is a seam for tests; it must return printable ASCII without commas.
    """

    def __init__(
        self,
        verifier: str | None,
        *,
        nonce_factory: Callable[[], str] = random_nonce,
        username: str = "",
        mock_salt_key: bytes | None = None,
        mock_iterations: int = DEFAULT_ITERATIONS,
    ) -> None:
        self._doomed = verifier is None
        if verifier is None:
            self._verifier = _mock_verifier(username, mock_salt_key, mock_iterations)
        else:
            self._verifier = parse_scram_verifier(verifier)
        self._nonce_factory = nonce_factory
        self._stage = _Stage.AWAITING_CLIENT_FIRST
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def server_first(self, client_first: bytes) -> bytes:
        """Answer the client-first-message (SASLInitialResponse data) with ``r=,s=,i=``."""
        self._advance(_Stage.AWAITING_CLIENT_FIRST)
        self._gs2_header, self._client_first_bare = _split_gs2_header(_decode_message(client_first))
        self._nonce = _client_nonce(self._client_first_bare) + self._nonce_factory()
        salt, iterations = _b64(self._verifier.salt), self._verifier.iterations
        self._server_first = f"r={self._nonce},s={salt},i={iterations}"
        self._stage = _Stage.AWAITING_CLIENT_FINAL
        return self._server_first.encode("ascii")

    def server_final(self, client_final: bytes) -> bytes:
        """Check the client-final-message and return ``v=<ServerSignature>``.

        The proof is checked even for a mock verifier, so both failures cost the same time.
        """
        self._advance(_Stage.AWAITING_CLIENT_FINAL)
        without_proof, separator, proof_text = _decode_message(client_final).rpartition(",p=")
        if not separator:
            raise _malformed("client-final-message has no proof")
        self._check_binding_and_nonce(without_proof)
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        if not self._proof_matches(_client_proof(proof_text), auth_message) or self._doomed:
            raise ScramAuthenticationError(_AUTHENTICATION_FAILED)
        self._stage = _Stage.FINISHED
        return b"v=" + _b64(_hmac(self._verifier.server_key, auth_message)).encode("ascii")

    def _advance(self, expected: _Stage) -> None:
        """Refuse out-of-order calls, and mark the exchange dead until a step succeeds."""
        if self._stage is not expected:
            raise ScramAuthenticationError("unexpected SCRAM message")
        self._stage = _Stage.FINISHED

    def _check_binding_and_nonce(self, without_proof: str) -> None:
        """c= must repeat our GS2 header, and r= the full nonce we sent."""
        attributes = without_proof.split(",")
        if len(attributes) < 2 or not attributes[0].startswith("c=") or not attributes[1].startswith("r="):
            raise _malformed("expected c= and r= in client-final-message")
        if attributes[0][2:] != _b64(self._gs2_header.encode("ascii")):
            raise ScramAuthenticationError(
                "SCRAM channel-binding data does not match the client-first-message"
            )
        if not hmac.compare_digest(attributes[1][2:].encode(), self._nonce.encode()):
            raise ScramAuthenticationError("SCRAM nonce does not match")

    def _proof_matches(self, proof: bytes, auth_message: bytes) -> bool:
        """ClientKey = proof XOR HMAC(StoredKey, AuthMessage); it must hash to StoredKey."""
        client_signature = _hmac(self._verifier.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        return hmac.compare_digest(hashlib.sha256(client_key).digest(), self._verifier.stored_key)
