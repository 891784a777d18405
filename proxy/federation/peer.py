"""The answering site's side of a federation: a TCP listener on the federation's ``listen`` address, one
thread per incoming link, each answering one federated statement (proxy/federation/exchange.py).

It runs beside the PostgreSQL-protocol listener of ``veil serve`` and shares its query services, ledger and
engines; a failure on one link is logged and ends that link only.
"""

from __future__ import annotations

import logging
import socket
import threading

from proxy.config import FederationPolicy
from proxy.errors import ConfigError, ProxyError
from proxy.federation.exchange import AnswerForPeer, FederationGateway
from proxy.federation.link import accept

log = logging.getLogger("veil.federation")


class PeerListener:
    """Answers the other site of one federation on ``policy.listen``."""

    def __init__(
        self, gateway: FederationGateway, policy: FederationPolicy, answer_for_peer: AnswerForPeer
    ) -> None:
        assert policy.listen is not None
        self.gateway, self.policy, self.answer_for_peer = gateway, policy, answer_for_peer
        try:
            self._socket = socket.create_server(policy.listen)
        except OSError as error:
            raise ConfigError(
                f"federation {policy.name}: cannot listen on {policy.listen[0]}:{policy.listen[1]}: {error.strerror}",
                hint="choose another listen address in [federations]",
            ) from None
        self.address: tuple[str, int] = self._socket.getsockname()[:2]
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._accept_loop, name=f"veil-federation-{policy.name}", daemon=True
        )

    def start(self) -> PeerListener:
        self.gateway.secret(self.policy)  # refuse to listen without a secret, at start-up
        self._thread.start()
        log.info("federation %s: answering on %s:%d", self.policy.name, *self.address)
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._socket.close()

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                connection, origin = self._socket.accept()
            except OSError:
                return  # closed by stop()
            threading.Thread(target=self._serve, args=(connection, origin), daemon=True).start()

    def _serve(self, connection: socket.socket, origin: tuple[str, int]) -> None:
        try:
            with accept(
                connection, self.gateway.secret(self.policy), timeout_s=self.policy.timeout_s
            ) as link:
                self.gateway.answer(link, self.policy, self.answer_for_peer)
        except ProxyError as error:
            log.warning(
                "federation %s: link from %s:%d ended: %s", self.policy.name, *origin[:2], error.message
            )
        except Exception:
            log.exception("federation %s: link from %s:%d failed", self.policy.name, *origin[:2])
        finally:
            connection.close()
