"""CancelRequests between worker processes (``veil serve --workers N``).

A client cancels by opening a new connection, which the kernel may hand to any worker; only the
worker that runs the session can stop it. The process id in the request names that worker
(proxy/server/cancel_keys.py), and the worker that received the request forwards its eight bytes
(process id, secret) to the owner over a unix socket in a directory only the server's user can
enter. The owner checks the secret as for a request of its own: a forwarded request is worth no
more than the client's, and a wrong key is still ignored without an answer.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path

log = logging.getLogger("veil.server")
_REQUEST = struct.Struct("!II")  # process id, secret key: as in the CancelRequest
FORWARD_TIMEOUT_S = 5.0


class CancelRouter:
    """One worker's end: forward requests for other workers' sessions, take in those for its own."""

    def __init__(self, directory: Path, worker: int) -> None:
        self.directory = directory
        self.worker = worker
        self._server: asyncio.AbstractServer | None = None

    def socket_of(self, worker: int) -> Path:
        return self.directory / f"worker-{worker}.sock"

    async def start(self, cancel: Callable[[int, int], Awaitable[None]]) -> None:
        """Take forwarded requests: ``await cancel(process_id, secret_key)`` for each."""

        async def receive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                process_id, secret_key = _REQUEST.unpack(await reader.readexactly(_REQUEST.size))
                await cancel(process_id, secret_key)
            except asyncio.IncompleteReadError:
                pass
            finally:
                writer.close()

        path = self.socket_of(self.worker)
        path.unlink(missing_ok=True)  # a crashed predecessor's
        self._server = await asyncio.start_unix_server(receive, path=str(path))

    async def forward(self, worker: int, process_id: int, secret_key: int) -> None:
        """Hand a CancelRequest to the worker that owns its session; a worker that is gone (or a
        process id no worker issued) means there is nothing to cancel."""
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(str(self.socket_of(worker))), FORWARD_TIMEOUT_S
            )
        except (OSError, TimeoutError):
            log.warning("cancel request for worker %d, which does not answer", worker)
            return
        try:
            writer.write(_REQUEST.pack(process_id, secret_key))
            await writer.drain()
        finally:
            writer.close()

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
