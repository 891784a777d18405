"""A TCP relay a test can cut and restore: the network between Veil and a real PostgreSQL server going
away and coming back, without stopping a server other tests share."""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType


class TcpRelay:
    """Listens on 127.0.0.1 (the same port after every restore) and pipes each connection to
    ``upstream``. ``cut()`` closes the listener and every relayed connection: clients see resets and
    refused connections, as when a host or a link goes down."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = 0
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def __enter__(self) -> TcpRelay:
        self.restore()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.cut()

    def restore(self) -> None:
        listener = socket.create_server(("127.0.0.1", self.port))
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, []
        for sock in [*([listener] if listener else []), *sockets]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes the accept and the pumps blocked on them
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, server]
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(source, target), daemon=True).start()


def _pump(source: socket.socket, target: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            target.sendall(data)
    for sock in (source, target):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
