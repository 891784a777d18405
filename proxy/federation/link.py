"""The peer link between two Veil servers: a TCP connection, mutually authenticated by a shared secret,
carrying length-prefixed frames that are each MAC'd.

Handshake (both sides prove knowledge of the secret without sending it; fresh nonces make every session's
key different and a recorded session useless to replay):

    asker → answerer:  MAGIC ‖ n_a                          (n_a: 32 random bytes)
    answerer → asker:  n_b ‖ HMAC(secret, "answerer" ‖ n_a ‖ n_b)
    asker → answerer:  HMAC(secret, "asker" ‖ n_a ‖ n_b)
    session key K = HMAC(secret, "session" ‖ n_a ‖ n_b)

Every later frame is ``length (4 bytes) ‖ payload ‖ HMAC(K, direction ‖ sequence number ‖ payload)``: a
frame altered, reordered, replayed or reflected back fails its check and ends the link. Frames are not
encrypted — the comparison's payloads are Paillier ciphertexts or already-released noisy counts — so run the
link over a private network or a tunnel if who-asks-what must stay confidential (docs/federation.md).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import socket
import struct

from proxy.errors import FederationPeerError as PeerLinkError

MAGIC = b"VEILFED1"
NONCE_BYTES = 32
TAG_BYTES = 32
MAX_FRAME = 64 << 20  # 64 MiB: a 50-cell batch at 4096-bit keys is a few megabytes


def _mac(key: bytes, *parts: bytes) -> bytes:
    return hmac.new(key, b"".join(parts), hashlib.sha256).digest()


class PeerLink:
    """One authenticated connection; ``send``/``receive`` move whole payloads."""

    def __init__(self, connection: socket.socket, key: bytes, *, asker: bool) -> None:
        self._socket = connection
        self._key = key
        self._outgoing, self._incoming = (b"A", b"B") if asker else (b"B", b"A")
        self._sent = self._received = 0
        self.bytes_sent = self.bytes_received = 0

    def send(self, payload: bytes) -> None:
        tag = _mac(self._key, self._outgoing, struct.pack(">Q", self._sent), payload)
        frame = struct.pack(">I", len(payload)) + payload + tag
        self._socket.sendall(frame)
        self._sent += 1
        self.bytes_sent += len(frame)

    def receive(self) -> bytes:
        (length,) = struct.unpack(">I", _read(self._socket, 4))
        if length > MAX_FRAME:
            raise PeerLinkError(f"the peer sent a frame of {length} bytes, more than {MAX_FRAME}")
        payload = _read(self._socket, length)
        tag = _read(self._socket, TAG_BYTES)
        expected = _mac(self._key, self._incoming, struct.pack(">Q", self._received), payload)
        if not hmac.compare_digest(tag, expected):
            raise PeerLinkError("a frame from the peer failed its authentication check")
        self._received += 1
        self.bytes_received += 4 + length + TAG_BYTES
        return payload

    def close(self) -> None:
        self._socket.close()

    def __enter__(self) -> PeerLink:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def connect(address: tuple[str, int], secret: bytes, *, timeout_s: float) -> PeerLink:
    """Open and authenticate a link to the answering site (the asker's side of the handshake)."""
    try:
        connection = socket.create_connection(address, timeout=timeout_s)
    except OSError as error:
        raise PeerLinkError(
            f"cannot reach the federation peer at {address[0]}:{address[1]} ({error.strerror or error})",
            hint="is the other site's `veil serve` running with this federation's listen address?",
        ) from None
    try:
        ours = secrets.token_bytes(NONCE_BYTES)
        connection.sendall(MAGIC + ours)
        theirs = _read(connection, NONCE_BYTES)
        proof = _read(connection, TAG_BYTES)
        if not hmac.compare_digest(proof, _mac(secret, b"answerer", ours, theirs)):
            raise PeerLinkError(
                "the federation peer did not prove it knows the shared secret",
                hint="both sites must set the same secret in the federation's secret_env variable",
            )
        connection.sendall(_mac(secret, b"asker", ours, theirs))
        return PeerLink(connection, _mac(secret, b"session", ours, theirs), asker=True)
    except BaseException:
        connection.close()
        raise


def accept(connection: socket.socket, secret: bytes, *, timeout_s: float) -> PeerLink:
    """Authenticate an incoming link (the answerer's side of the handshake)."""
    connection.settimeout(timeout_s)
    if _read(connection, len(MAGIC)) != MAGIC:
        raise PeerLinkError("not a Veil federation peer")
    theirs = _read(connection, NONCE_BYTES)
    ours = secrets.token_bytes(NONCE_BYTES)
    connection.sendall(ours + _mac(secret, b"answerer", theirs, ours))
    proof = _read(connection, TAG_BYTES)
    if not hmac.compare_digest(proof, _mac(secret, b"asker", theirs, ours)):
        raise PeerLinkError("the asking peer did not prove it knows the shared secret")
    return PeerLink(connection, _mac(secret, b"session", theirs, ours), asker=False)


def _read(connection: socket.socket, count: int) -> bytes:
    chunks, left = [], count
    while left:
        try:
            chunk = connection.recv(min(left, 1 << 20))
        except TimeoutError:
            raise PeerLinkError("the federation peer stopped answering (timeout)") from None
        except OSError as error:
            raise PeerLinkError(f"the federation link failed ({error.strerror or error})") from None
        if not chunk:
            raise PeerLinkError("the federation peer closed the link")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
