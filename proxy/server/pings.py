"""Answers to driver pings, remembered by one session.

Pools and drivers check a connection with ``SELECT 1`` (or another select list of literals) over and over.
Its answer cannot depend on data, settings or the analyst, so a session keeps it by the statement's exact
text and answers the next one without parsing, classifying or encoding it again (docs/architecture.md,
"Pings"). Per session, not per dataset: a memory shared by all analysts would let one of them time
whether another had sent a given text.
"""

from __future__ import annotations

from dataclasses import dataclass

from proxy.query.service import StatementOutcome

MAX_PINGS = 64  # texts per session: a client sending ever new literal queries fills it once, then misses


@dataclass(frozen=True)
class Ping:
    """A remembered answer: its audit text, its outcome and its simple-protocol messages."""

    statement: str
    outcome: StatementOutcome
    messages: bytes


class PingMemory:
    def __init__(self) -> None:
        self._answers: dict[str, Ping] = {}

    def get(self, sql: str) -> Ping | None:
        return self._answers.get(sql)

    def remember(self, sql: str, statement: str, outcome: StatementOutcome, messages: bytes) -> None:
        if len(self._answers) < MAX_PINGS:
            self._answers[sql] = Ping(statement, outcome, messages)
