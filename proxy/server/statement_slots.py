"""At most so many statements of one analyst run at once, across all their connections: one analyst
opening many connections and sending heavy statements on each must not take every worker thread and
engine connection from the others. Statements beyond the limit wait their turn on the event loop,
holding no thread — a pool of connections of one analyst still works, only less in parallel."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class StatementSlots:
    def __init__(self, per_analyst: int) -> None:
        self.per_analyst = per_analyst
        self._slots: dict[str, asyncio.Semaphore] = {}  # one per analyst seen; used on the loop only

    @asynccontextmanager
    async def taken(self, analyst: str) -> AsyncIterator[None]:
        """A slot for one statement of ``analyst`` while the block runs, waited for if need be."""
        slots = self._slots.setdefault(analyst, asyncio.Semaphore(self.per_analyst))
        async with slots:
            yield
