"""One client's socket as the login and the session see it: framed messages in, bytes out.

Kept apart from both so that each speaks in messages: the login (proxy/server/login.py) before the
client is known, the session (proxy/server/session.py) after."""

from __future__ import annotations

import asyncio

from proxy.wire import messages as wire

READ_CHUNK = 65536


class ClientGone(Exception):
    """The peer closed the connection; nothing more can be sent."""


class Connection:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, max_message_size: int
    ) -> None:
        self.reader, self.writer = reader, writer
        self.buffer = wire.MessageReader(max_message_size=max_message_size)
        self.peer = _peer(writer)  # host:port, for the log
        self.address = self.peer.rpartition(":")[0] or self.peer  # the host alone: who is throttled
        self.left_mid_statement = False  # the client closed the connection while a statement ran

    async def fill(self) -> None:
        data = await self.reader.read(READ_CHUNK)
        if not data:
            raise ClientGone
        self.buffer.feed(data)

    async def next_startup(self) -> bytes:
        while (payload := self.buffer.next_startup()) is None:
            await self.fill()
        return payload

    async def next_message(self) -> tuple[bytes, bytes]:
        if self.left_mid_statement:  # what the client pipelined before leaving is not run
            raise ClientGone
        while (message := self.buffer.next_message()) is None:
            await self.fill()
        return message

    async def send(self, data: bytes) -> None:
        try:
            self.writer.write(data)
            await self.writer.drain()
        except (ConnectionError, RuntimeError):
            raise ClientGone from None

    def unread_bytes(self) -> int:
        """Bytes received from the socket but not yet read. StreamReader has no public way to ask; its
        ``_buffer`` has been the same bytearray since asyncio began."""
        return len(getattr(self.reader, "_buffer", b""))

    def encrypted(self) -> bool:
        return self.writer.get_extra_info("ssl_object") is not None


def _peer(writer: asyncio.StreamWriter) -> str:
    address = writer.get_extra_info("peername")
    return f"{address[0]}:{address[1]}" if isinstance(address, tuple) else str(address)
