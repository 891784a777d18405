"""The two sites' halves of one federated count, over an authenticated :class:`~proxy.federation.link.PeerLink`.

    asker (Alice)                                   answerer (Bob)
    ── request: federation, statement, cells, ℓ, k ─▶  checks the statement against its own policy, answers it
                                                       with its own DP noise, debiting its peer_analyst
    ◀─ accepted (its ε), or refused (nothing spent) ──
    ── Alice's Paillier public key ─────────────────▶
    ◀──────── Type 1 comparisons, all cells in lockstep (6 flights) ────────▶
    ◀─ Bob's XOR shares δ^B ─────────────────────────
    ── δ per cell ──────────────────────────────────▶
    ◀─ Bob's noisy counts of the cells with δ = 1 ────

What each side learns: which cells reach k (δ, the protocol's output), and the asker also the answerer's noisy
count of every released cell. Neither learns the other's count — noisy or exact — of a suppressed cell
(semi-honest model: a site that deviates from the protocol is not resisted; docs/privacy.md). The counts
compared and released are each site's DP noisy counts, so the suppression pattern is post-processing of
DP releases, not a function of exact counts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mechanisms.errors import MechanismError
from mechanisms.secure import PublicKeyAnnouncement, decode_message
from proxy.config import FederationPolicy
from proxy.errors import FederationPeerError, ProxyError
from proxy.federation.comparison import (
    AliceKeys,
    BobPools,
    alice_compare,
    bit_length_for,
    bob_compare,
    comparison_input,
    parameters,
)
from proxy.federation.link import PeerLink, connect

PROTOCOL_VERSION = 1
KEY_WAIT_S = 60.0


@dataclass(frozen=True)
class PeerAnswer:
    """The answering site's DP answer to a federated statement: its cells (as text) and noisy counts."""

    cells: list[tuple[str, ...]]
    counts: list[float]
    epsilon: float


@dataclass(frozen=True)
class FederatedCounts:
    """Per cell, the joint noisy count or None (suppressed); what the peer spent; bytes both ways."""

    counts: list[float | None]
    peer_epsilon: float
    bytes_exchanged: int


AnswerForPeer = Callable[[FederationPolicy, str], PeerAnswer]


class FederationGateway:
    """This site's federations: the asker's keys, the answerer's pools, and the shared secrets."""

    def __init__(
        self, federations: Mapping[str, FederationPolicy], environ: Mapping[str, str] | None = None
    ) -> None:
        self.policies = dict(federations)
        environ = os.environ if environ is None else environ
        self._secrets = {
            name: environ.get(policy.secret_env, "").encode() for name, policy in federations.items()
        }
        self._alice = {
            name: AliceKeys(policy.key_bits, bit_length_for(policy.threshold))
            for name, policy in federations.items()
            if policy.peer is not None
        }
        self.bob_pools = BobPools()

    def of_dataset(self, dataset: str) -> dict[str, FederationPolicy]:
        return {name: policy for name, policy in self.policies.items() if policy.dataset == dataset}

    def secret(self, policy: FederationPolicy) -> bytes:
        secret = self._secrets.get(policy.name, b"")
        if len(secret) < 16:
            raise FederationPeerError(
                f"federation {policy.name} has no shared secret",
                hint=f"set the environment variable {policy.secret_env} (16 characters or more) before `veil serve`",
            )
        return secret

    def open(self, policy: FederationPolicy) -> PeerLink:
        """The link to the answering site, opened before anything is spent: a peer that is down or
        unauthenticated costs the analyst nothing."""
        if policy.peer is None:
            raise FederationPeerError(
                f"this site only answers federation {policy.name}; it cannot ask", hint="set its peer address"
            )
        return connect(policy.peer, self.secret(policy), timeout_s=policy.timeout_s)

    def ask(
        self,
        link: PeerLink,
        policy: FederationPolicy,
        statement: str,
        cells: Sequence[tuple[str, ...]],
        noisy_counts: Sequence[float],
    ) -> FederatedCounts:
        """Alice's half (see the module docstring)."""
        bit_length = bit_length_for(policy.threshold)
        request = {"version": PROTOCOL_VERSION, "federation": policy.name, "statement": statement,
                   "cells": [list(cell) for cell in cells], "threshold": policy.threshold, "bit_length": bit_length}  # fmt: skip
        _send(link, request)
        reply = _receive(link)
        if not reply.get("ok"):
            raise FederationPeerError(
                f"the federation peer refused: {reply.get('message', 'no reason given')}",
                hint=reply.get("hint"),
            )
        try:
            keypair, pool = self._alice[policy.name].get(KEY_WAIT_S)
        except TimeoutError:
            raise FederationPeerError(
                "the federation's Paillier key is still being generated; try again"
            ) from None
        link.send(PublicKeyAnnouncement(keypair.public.n).to_bytes())
        inputs = [comparison_input(count, bit_length) for count in noisy_counts]
        ours = _guarded(lambda: alice_compare(link, keypair, pool, inputs, policy.threshold, bit_length))
        theirs = _receive(link).get("shares")
        if not isinstance(theirs, list) or len(theirs) != len(ours):
            raise FederationPeerError("the federation peer sent a malformed reply")
        released = [int(a) ^ int(b) for a, b in zip(ours, theirs, strict=True)]
        _send(link, {"released": released})
        peer_counts = iter(_receive(link).get("counts", []))
        counts = [float(count) + float(next(peer_counts)) if keep else None
                  for count, keep in zip(noisy_counts, released, strict=True)]  # fmt: skip
        return FederatedCounts(counts, float(reply["epsilon"]), link.bytes_sent + link.bytes_received)

    def answer(self, link: PeerLink, policy: FederationPolicy, answer_for_peer: AnswerForPeer) -> None:
        """Bob's half: one request on ``link``, answered with ``answer_for_peer`` (the dataset's query
        service, debiting the federation's ``peer_analyst``)."""
        request = _receive(link)
        refusal = _refusal(request, policy)
        if refusal is None:
            try:
                answer = answer_for_peer(policy, str(request["statement"]))
                order = _aligned(answer.cells, [tuple(map(str, cell)) for cell in request["cells"]])
            except ProxyError as error:
                refusal = {"ok": False, "message": error.message, "hint": error.hint}
        if refusal is not None:
            _send(link, refusal)
            return
        _send(link, {"ok": True, "epsilon": answer.epsilon})
        bit_length = bit_length_for(policy.threshold)
        modulus = _announced_modulus(link.receive(), bit_length)
        pool = self.bob_pools.for_modulus(modulus, bit_length)
        inputs = [comparison_input(answer.counts[i], bit_length) for i in order]
        shares = _guarded(lambda: bob_compare(link, modulus, pool, inputs, bit_length))
        _send(link, {"shares": shares})
        released = _receive(link).get("released")
        if not isinstance(released, list) or len(released) != len(order):
            raise FederationPeerError("the asking peer sent a malformed decision")
        _send(link, {"counts": [answer.counts[i] for i, keep in zip(order, released, strict=True) if keep]})


def _refusal(request: dict[str, Any], policy: FederationPolicy) -> dict[str, Any] | None:
    """Why this site will not answer ``request`` (None: it will); checked before anything is spent."""
    if request.get("version") != PROTOCOL_VERSION:
        return {"ok": False, "message": f"protocol version {request.get('version')!r} is not supported"}
    if request.get("federation") != policy.name:
        return {"ok": False, "message": f"this link serves federation {policy.name}"}
    if request.get("threshold") != policy.threshold or request.get("bit_length") != bit_length_for(
        policy.threshold
    ):
        return {
            "ok": False,
            "message": "the two sites' thresholds differ",
            "hint": "give both the same threshold",
        }
    if not isinstance(request.get("statement"), str) or not isinstance(request.get("cells"), list):
        return {"ok": False, "message": "malformed request"}
    return None


def _aligned(ours: list[tuple[str, ...]], theirs: list[tuple[str, ...]]) -> list[int]:
    """For each of the asker's cells, its position in this site's answer; the domains must be equal."""
    position = {cell: i for i, cell in enumerate(ours)}
    if set(position) != set(theirs) or len(ours) != len(theirs):
        raise FederationPeerError(
            "the two sites' group domains differ",
            hint="declare the same `values` for the group columns at both",
        )
    return [position[cell] for cell in theirs]


def _announced_modulus(frame: bytes, bit_length: int) -> int:
    try:
        message = decode_message(frame)
    except (MechanismError, ValueError):
        raise FederationPeerError("the asking peer sent a malformed key") from None
    if not isinstance(message, PublicKeyAnnouncement):
        raise FederationPeerError("the asking peer did not send its key")
    try:
        parameters(bit_length, 1024).check_modulus(message.modulus)
    except MechanismError as error:
        raise FederationPeerError(f"the asking peer's key is unacceptable: {error}") from None
    if message.modulus.bit_length() < 1024:
        raise FederationPeerError("the asking peer's key is shorter than 1024 bits")
    return message.modulus


def _guarded(run: Callable[[], list[int]]) -> list[int]:
    """A malformed or out-of-order protocol message ends the link with one error."""
    try:
        return run()
    except (MechanismError, ValueError) as error:
        raise FederationPeerError(f"the secure comparison failed: {error}") from None


def _send(link: PeerLink, payload: dict[str, Any]) -> None:
    link.send(json.dumps(payload, separators=(",", ":")).encode())


def _receive(link: PeerLink) -> dict[str, Any]:
    try:
        payload = json.loads(link.receive())
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise FederationPeerError("the federation peer sent a malformed frame") from None
    if not isinstance(payload, dict):
        raise FederationPeerError("the federation peer sent a malformed frame")
    return payload
