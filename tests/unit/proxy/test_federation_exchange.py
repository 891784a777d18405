"""The two halves of a federated count over a real socket pair (proxy/federation/): the answer, and what
crosses the link — neither site's count of a suppressed cell, in any form the other could read."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest

from proxy.config import FederationPolicy
from proxy.errors import FederationPeerError, UnsupportedQueryError
from proxy.federation.comparison import bit_length_for, comparison_input
from proxy.federation.exchange import FederationGateway, PeerAnswer
from proxy.federation.link import PeerLink, accept, connect

SECRET = "s3cret-shared-by-both-sites"
CELLS = [("north",), ("south",), ("east",), ("west",)]
ASKER_COUNTS = [180.4, 3.2, 14.0, 0.0]  # noisy counts at the asking site
ANSWERER_COUNTS = [75.9, 1.1, 9.0, 13.0]  # … and at the answering site: sums 256.3, 4.3, 23.0, 13.0


def policy(**changes: object) -> FederationPolicy:
    settings = {"name": "hospitals", "dataset": "clinic", "table": "patients", "group_by": ("region",),
                "threshold": 20, "secret_env": "FED_SECRET", "peer": ("127.0.0.1", 1), "listen": ("127.0.0.1", 1),
                "peer_analyst": "peer", "key_bits": 1024, "timeout_s": 30.0}  # fmt: skip
    return FederationPolicy(**{**settings, **changes})  # type: ignore[arg-type]


class RecordingLink(PeerLink):
    """A PeerLink that keeps every payload it receives."""

    def __init__(self, link: PeerLink) -> None:
        self.__dict__.update(link.__dict__)
        self.received: list[bytes] = []

    def receive(self) -> bytes:
        payload = super().receive()
        self.received.append(payload)
        return payload


@pytest.fixture(scope="module")
def gateway() -> FederationGateway:
    return FederationGateway({"hospitals": policy()}, {"FED_SECRET": SECRET})


def run_pair(
    gateway: FederationGateway, answerer_counts: list[float] = ANSWERER_COUNTS, **answer: object
) -> tuple:
    """The asker's result and both sides' received payloads, over a loopback TCP connection."""
    listener = socket.create_server(("127.0.0.1", 0))
    address = listener.getsockname()[:2]
    received: dict[str, list[bytes]] = {}
    errors: list[BaseException] = []

    def answering() -> None:
        connection, _ = listener.accept()
        try:
            link = RecordingLink(accept(connection, SECRET.encode(), timeout_s=30))
            peer = answer.get("answer_for_peer") or (
                lambda p, s: PeerAnswer(list(CELLS), answerer_counts, 1.0)
            )
            gateway.answer(link, policy(), peer)  # type: ignore[arg-type]
            received["answerer"] = link.received
        except BaseException as error:  # reported to the test below
            errors.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=answering)
    thread.start()
    try:
        link = RecordingLink(connect(address, SECRET.encode(), timeout_s=30))
        with link:
            result = gateway.ask(link, policy(), "SELECT region, COUNT(*) FROM hospitals GROUP BY region",
                                 CELLS, ASKER_COUNTS)  # fmt: skip
        received["asker"] = link.received
    finally:
        thread.join(30)
        listener.close()
    return result, received, errors


def test_cells_reaching_k_show_the_summed_noisy_counts_and_the_others_none(
    gateway: FederationGateway,
) -> None:
    result, _, errors = run_pair(gateway)
    assert not errors
    assert result.counts == [pytest.approx(256.3), None, pytest.approx(23.0), None]
    assert result.peer_epsilon == 1.0 and result.bytes_exchanged > 0


def test_no_frame_carries_a_count_of_a_suppressed_cell(gateway: FederationGateway) -> None:
    """The answerer's frames hold the request (cells, statement), the key, ciphertexts and the decisions;
    the asker's hold the decisions' shares and the answerer's noisy counts of released cells only."""
    _, received, errors = run_pair(gateway)
    assert not errors
    readable = [json.loads(frame) for frame in received["asker"] if frame.startswith(b"{")]
    shared = [number for message in readable for number in message.get("counts", [])]
    assert shared == [75.9, 9.0]  # released cells only; south (1.1) and west (13.0) never cross
    answerer_readable = [json.loads(frame) for frame in received["answerer"] if frame.startswith(b"{")]
    numbers = {value for message in answerer_readable for value in _numbers(message)}
    # version 1, k = 20, ℓ = 6, and the 0/1 decisions: no count of the asker in any form
    assert numbers <= {0, 1, 6, 20}, numbers


def _numbers(value: object) -> Iterator[float]:
    if isinstance(value, bool | int | float):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from _numbers(item)


def test_a_wrong_secret_is_refused_before_anything_is_asked(gateway: FederationGateway) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    address = listener.getsockname()[:2]

    def answering() -> None:
        connection, _ = listener.accept()
        with pytest.raises(FederationPeerError), connection:
            accept(connection, b"another-secret-entirely", timeout_s=10)

    thread = threading.Thread(target=answering)
    thread.start()
    with pytest.raises(FederationPeerError, match="did not prove"):
        connect(address, SECRET.encode(), timeout_s=10)
    thread.join(10)
    listener.close()


def test_a_refusal_at_the_answering_site_reaches_the_asker_with_its_reason(
    gateway: FederationGateway,
) -> None:
    def refuse(_policy: FederationPolicy, _statement: str) -> PeerAnswer:
        raise UnsupportedQueryError("budget exhausted", hint="grant more")

    with pytest.raises(FederationPeerError, match="refused: budget exhausted"):
        run_pair(gateway, answer_for_peer=refuse)


def test_clamped_inputs_decide_exactly() -> None:
    """Clamping each count to 2^(ℓ-1) - 1 >= k keeps x_A + x_B >= k unchanged, and sums stay below 2^ℓ."""
    for k in (1, 5, 20, 1000):
        ell = bit_length_for(k)
        top = (1 << (ell - 1)) - 1
        assert top >= k
        for a in (-3.0, 0.0, k / 3, k - 1.0, 10.0 * k):
            for b in (-1.0, 0.4, k / 2, 5.0 * k):
                exact = max(round(a), 0) + max(round(b), 0) >= k
                clamped = comparison_input(a, ell) + comparison_input(b, ell)
                assert (clamped >= k) == exact and clamped < (1 << ell)
