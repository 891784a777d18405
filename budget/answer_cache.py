"""Stored noisy answers, so that asking the same query again costs nothing and reveals nothing new.

Re-asking a query and averaging the answers is the classic way to wear noise down; with the cache a
repeat gets the very same noisy answer, free. The key is the analyst, the dataset, the version of
the data and a digest of the normalized query and every setting that shapes the answer (chosen by
the proxy). Two identical queries racing past an empty cache are both charged; the first stored
answer stays. Rows are written without waiting for the disk: losing one only means the next repeat
is charged again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from budget.store import LedgerStore


@dataclass(frozen=True)
class CacheKey:
    analyst: str
    dataset: str
    data_version: str
    query_key: str  # a digest of the normalized query and its settings

    @property
    def values(self) -> tuple[str, str, str, str]:
        return (self.analyst, self.dataset, self.data_version, self.query_key)


_WHERE = "analyst = ? AND dataset = ? AND data_version = ? AND query_key = ?"


class AnswerCache:
    def __init__(self, store: LedgerStore, *, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._clock = clock

    def get(self, key: CacheKey) -> str | None:
        with self._store.transaction(write=False) as tx:
            rows = tx.execute(f"SELECT answer FROM answers WHERE {_WHERE}", key.values)
        return str(rows[0][0]) if rows else None

    def put(self, key: CacheKey, answer: str, *, spend_id: int) -> None:
        with self._store.transaction(write=True, durable=False) as tx:
            tx.execute(
                "INSERT INTO answers (analyst, dataset, data_version, query_key, answer, spend_id, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (*key.values, answer, spend_id, self._clock().isoformat()),
            )
