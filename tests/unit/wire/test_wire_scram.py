"""SCRAM-SHA-256 server, driven by an independent RFC 5802 client written here (stdlib only)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.wire.errors import InvalidScramVerifierError, ScramAuthenticationError
from proxy.wire.scram import (
    ScramServerExchange,
    ScramVerifier,
    make_scram_verifier,
    parse_scram_verifier,
    prepare_password,
)

SALT = bytes(range(16))
CLIENT_NONCE = "fyko+d2lbbFgONRv9qkxdawL"
SERVER_NONCE = "3rfcNHYJY1ZVvWVs7j"


def _hmac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass
class Client:
    """RFC 5802 §3 client math, independent of proxy.wire.scram."""

    password: bytes
    gs2_header: str = "n,,"
    nonce: str = CLIENT_NONCE
    expected_server_final: bytes = field(default=b"", init=False)

    @property
    def first_bare(self) -> str:
        return f"n=alice,r={self.nonce}"

    def client_first(self) -> bytes:
        return (self.gs2_header + self.first_bare).encode()

    def client_final(self, server_first: bytes) -> bytes:
        attributes = dict(item.split("=", 1) for item in server_first.decode().split(","))
        assert attributes["r"].startswith(self.nonce)
        salt, iterations = base64.b64decode(attributes["s"]), int(attributes["i"])
        salted = hashlib.pbkdf2_hmac("sha256", self.password, salt, iterations)
        client_key = _hmac(salted, b"Client Key")
        without_proof = f"c={_b64(self.gs2_header.encode())},r={attributes['r']}"
        auth_message = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        signature = _hmac(hashlib.sha256(client_key).digest(), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self.expected_server_final = b"v=" + _b64(_hmac(_hmac(salted, b"Server Key"), auth_message)).encode()
        return f"{without_proof},p={_b64(proof)}".encode()


def expected_verifier(password: bytes, salt: bytes, iterations: int) -> str:
    salted = hashlib.pbkdf2_hmac("sha256", password, salt, iterations)
    stored_key = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
    server_key = _hmac(salted, b"Server Key")
    return f"SCRAM-SHA-256${iterations}:{_b64(salt)}${_b64(stored_key)}:{_b64(server_key)}"


def exchange_for(password: str) -> ScramServerExchange:
    verifier = make_scram_verifier(password, salt=SALT)
    return ScramServerExchange(verifier, nonce_factory=lambda: SERVER_NONCE)


def failed_final(exchange: ScramServerExchange, client: Client) -> str:
    """Run the exchange to its end and return the failure message."""
    server_first = exchange.server_first(client.client_first())
    with pytest.raises(ScramAuthenticationError) as failure:
        exchange.server_final(client.client_final(server_first))
    return str(failure.value)


# --- verifiers ------------------------------------------------------------------------------


def test_verifier_matches_independent_derivation() -> None:
    assert make_scram_verifier("secret", salt=SALT) == expected_verifier(b"secret", SALT, 4096)


def test_verifier_uses_given_iterations() -> None:
    assert make_scram_verifier("secret", salt=SALT, iterations=2).startswith("SCRAM-SHA-256$2:")


def test_verifier_salt_is_16_random_bytes_by_default() -> None:
    first, second = (
        parse_scram_verifier(make_scram_verifier("x")),
        parse_scram_verifier(make_scram_verifier("x")),
    )
    assert len(first.salt) == 16
    assert first.salt != second.salt


def test_parses_verifier_fields() -> None:
    parsed = parse_scram_verifier(make_scram_verifier("secret", salt=SALT, iterations=10))
    assert (parsed.iterations, parsed.salt, len(parsed.stored_key), len(parsed.server_key)) == (
        10,
        SALT,
        32,
        32,
    )


def test_verifier_string_round_trips() -> None:
    verifier = make_scram_verifier("secret", salt=SALT)
    assert str(parse_scram_verifier(verifier)) == verifier


KEY = _b64(bytes(32))


@pytest.mark.parametrize(
    ("verifier", "message"),
    [
        ("md5" + "0" * 32, "not a SCRAM-SHA-256 verifier"),
        ("plaintext-password", "not a SCRAM-SHA-256 verifier"),
        (f"SCRAM-SHA-1$4096:{KEY}${KEY}:{KEY}", "not a SCRAM-SHA-256 verifier"),
        (f"SCRAM-SHA-256$4096:{KEY}${KEY}", "not a SCRAM-SHA-256 verifier"),
        (f"SCRAM-SHA-256$0:{KEY}${KEY}:{KEY}", "invalid iteration count"),
        (f"SCRAM-SHA-256$x:{KEY}${KEY}:{KEY}", "invalid iteration count"),
        (f"SCRAM-SHA-256$4096:{KEY}$!!!!:{KEY}", "invalid base64 StoredKey"),
        (f"SCRAM-SHA-256$4096:{KEY}${KEY}:{_b64(bytes(31))}", "must be 32 bytes"),
    ],
)
def test_rejects_malformed_verifier(verifier: str, message: str) -> None:
    with pytest.raises(InvalidScramVerifierError, match=message):
        parse_scram_verifier(verifier)


def test_exchange_rejects_malformed_verifier_up_front() -> None:
    with pytest.raises(InvalidScramVerifierError):
        ScramServerExchange("hunter2")


# --- SASLprep -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("password", "prepared"),
    [
        ("I\u00adX", b"IX"),  # RFC 4013 §3 example: soft hyphen maps to nothing
        ("\u2168", b"IX"),  # ROMAN NUMERAL NINE, by NFKC
        ("a\u00a0b", b"a b"),  # non-ASCII space maps to a space
        ("caf\u00e9", "café".encode()),
        ("ascii\x07bell", b"ascii\x07bell"),  # ASCII is used as is, like pg_saslprep
        ("\u00e9\x07", "é\x07".encode()),  # prohibited control character: raw bytes fallback
        ("\u05d0a", "\u05d0a".encode()),  # mixed right-to-left and left-to-right: raw bytes
    ],
)
def test_prepares_password_like_postgresql(password: str, prepared: bytes) -> None:
    assert prepare_password(password) == prepared


def test_equivalent_passwords_share_a_verifier() -> None:
    assert make_scram_verifier("I\u00adX", salt=SALT) == make_scram_verifier("IX", salt=SALT)


# --- exchange -------------------------------------------------------------------------------


def test_rfc7677_test_vector() -> None:
    verifier = make_scram_verifier("pencil", salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    exchange = ScramServerExchange(verifier, nonce_factory=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    server_first = exchange.server_first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert server_first == f"r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
    client_final = f"c=biws,r={nonce},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=".encode()
    assert exchange.server_final(client_final) == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_correct_password_authenticates_and_server_proves_itself() -> None:
    exchange, client = exchange_for("correct horse"), Client(b"correct horse")
    server_first = exchange.server_first(client.client_first())
    assert server_first == f"r={CLIENT_NONCE}{SERVER_NONCE},s={_b64(SALT)},i=4096".encode()
    assert exchange.server_final(client.client_final(server_first)) == client.expected_server_final


def test_wrong_password_is_refused() -> None:
    assert (
        failed_final(exchange_for("correct horse"), Client(b"battery staple"))
        == "password authentication failed"
    )


def test_client_that_supports_channel_binding_but_did_not_see_it_offered() -> None:
    exchange, client = exchange_for("pw"), Client(b"pw", gs2_header="y,,")
    server_first = exchange.server_first(client.client_first())
    assert exchange.server_final(client.client_final(server_first)) == client.expected_server_final


def test_rejects_channel_binding_flag_changed_between_messages() -> None:
    exchange = exchange_for("pw")
    server_first = exchange.server_first(Client(b"pw", gs2_header="y,,").client_first())
    client_final = Client(b"pw").client_final(server_first)  # c=biws, i.e. "n,,"
    with pytest.raises(ScramAuthenticationError, match="channel-binding data does not match"):
        exchange.server_final(client_final)


def test_unknown_user_fails_exactly_like_a_wrong_password() -> None:
    unknown = ScramServerExchange(None, nonce_factory=lambda: SERVER_NONCE)
    wrong = exchange_for("the real one")
    assert failed_final(unknown, Client(b"guess")) == failed_final(wrong, Client(b"guess"))


def test_unknown_user_gets_a_normal_looking_challenge() -> None:
    server_first = ScramServerExchange(None).server_first(Client(b"x").client_first())
    attributes = dict(item.split("=", 1) for item in server_first.decode().split(","))
    assert len(base64.b64decode(attributes["s"])) == 16
    assert attributes["i"] == "4096"


def test_unknown_user_salt_is_stable_per_name_with_a_mock_key() -> None:
    def salt_for(username: str) -> bytes:
        exchange = ScramServerExchange(None, username=username, mock_salt_key=b"server secret")
        server_first = exchange.server_first(Client(b"x").client_first()).decode()
        return base64.b64decode(server_first.split(",s=")[1].split(",")[0])

    assert salt_for("mallory") == salt_for("mallory")
    assert salt_for("mallory") != salt_for("trent")


def test_rejects_channel_binding_request() -> None:
    with pytest.raises(ScramAuthenticationError, match="without channel binding"):
        exchange_for("pw").server_first(b"p=tls-server-end-point,,n=,r=abc")


def test_rejects_authorization_identity() -> None:
    with pytest.raises(ScramAuthenticationError, match="authorization identity"):
        exchange_for("pw").server_first(b"n,a=admin,n=,r=abc")


def test_rejects_mandatory_extension() -> None:
    with pytest.raises(ScramAuthenticationError, match="unsupported SCRAM extension"):
        exchange_for("pw").server_first(b"n,,m=ext,n=,r=abc")


@pytest.mark.parametrize(
    "client_first", [b"", b"n", b"n,,", b"x,,n=,r=abc", b"n,,n=,r=", b"n,,r=abc", b"n,,n=,r=a b"]
)
def test_rejects_malformed_client_first(client_first: bytes) -> None:
    with pytest.raises(ScramAuthenticationError, match="malformed SCRAM message"):
        exchange_for("pw").server_first(client_first)


def test_ignores_username_in_client_first() -> None:
    server_first = exchange_for("pw").server_first(b"n,,n=someone else,r=abc")
    assert server_first.startswith(b"r=abc" + SERVER_NONCE.encode() + b",")


def test_rejects_wrong_nonce_in_client_final() -> None:
    exchange, client = exchange_for("pw"), Client(b"pw")
    server_first = exchange.server_first(client.client_first())
    tampered = client.client_final(server_first).replace(SERVER_NONCE.encode(), b"0" * len(SERVER_NONCE))
    with pytest.raises(ScramAuthenticationError, match="nonce does not match"):
        exchange.server_final(tampered)


def test_rejects_proof_of_wrong_length() -> None:
    exchange = exchange_for("pw")
    exchange.server_first(Client(b"pw").client_first())
    client_final = f"c=biws,r={CLIENT_NONCE}{SERVER_NONCE},p={_b64(bytes(16))}".encode()
    with pytest.raises(ScramAuthenticationError, match="wrong length"):
        exchange.server_final(client_final)


def test_rejects_client_final_before_client_first() -> None:
    with pytest.raises(ScramAuthenticationError, match="unexpected SCRAM message"):
        exchange_for("pw").server_final(b"c=biws,r=x,p=AAAA")


def test_failed_exchange_cannot_be_retried() -> None:
    exchange, client = exchange_for("pw"), Client(b"wrong")
    failed_final(exchange, client)
    with pytest.raises(ScramAuthenticationError, match="unexpected SCRAM message"):
        exchange.server_final(b"c=biws,r=x,p=AAAA")


def test_verifier_dataclass_is_what_exchange_stores() -> None:
    verifier = ScramVerifier(1, b"s", bytes(32), bytes(32))
    assert parse_scram_verifier(str(verifier)) == verifier


# --- fuzzing --------------------------------------------------------------------------------

FUZZ = settings(database=None, max_examples=200, deadline=None)


@FUZZ
@given(st.binary(max_size=80))
def test_arbitrary_client_first_raises_only_scram_errors(data: bytes) -> None:
    with contextlib.suppress(ScramAuthenticationError):
        ScramServerExchange(None).server_first(data)


@FUZZ
@given(
    st.one_of(st.binary(max_size=120), st.text(max_size=60).map(lambda text: f"c=biws,r={text},p=".encode()))
)
def test_arbitrary_client_final_raises_only_scram_errors(data: bytes) -> None:
    exchange = ScramServerExchange(make_scram_verifier("pw", salt=SALT, iterations=1))
    exchange.server_first(Client(b"pw").client_first())
    with contextlib.suppress(ScramAuthenticationError):
        exchange.server_final(data)
