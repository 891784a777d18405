"""Where a session stands with respect to a transaction block, as ReadyForQuery reports it.

Veil's statements are read-only and every answer is final (its ε is spent when it is computed), so a
block changes nothing in the data — but clients and drivers follow the status PostgreSQL reports
(psycopg refuses to go on in a failed block, poolers reset on it), so it is tracked exactly: idle
(``I``), in a block (``T``), or in a failed block (``E``, where only a transaction end is accepted)."""

from __future__ import annotations

from proxy.errors import InFailedTransactionError

IDLE, IN_BLOCK, FAILED = "I", "T", "E"
TRANSACTION_ENDS = ("COMMIT", "ROLLBACK", "ROLLBACK TO SAVEPOINT")  # also allowed in a failed block
# How each transaction statement moves the status: BEGIN opens a block, COMMIT and ROLLBACK end it.
_TRANSITIONS = {"BEGIN": IN_BLOCK, "COMMIT": IDLE, "ROLLBACK": IDLE}


class TransactionBlock:
    def __init__(self) -> None:
        self.status = IDLE

    def check(self, tag: str | None) -> None:
        """Refuse a statement (``tag``: its transaction command, or None) inside a failed block."""
        if self.status == FAILED and tag not in TRANSACTION_ENDS:
            raise InFailedTransactionError(
                "current transaction is aborted, commands ignored until end of transaction block",
                hint="send ROLLBACK",
            )

    def fail(self) -> None:
        """An error inside a block fails it (25P02 until ROLLBACK); outside one it changes nothing."""
        if self.status == IN_BLOCK:
            self.status = FAILED

    def advance(self, tag: str | None) -> None:
        """The status after a statement ran. ROLLBACK TO SAVEPOINT clears a failed block but stays in
        it (and outside a block, where PostgreSQL would refuse it, changes nothing)."""
        if tag == "ROLLBACK TO SAVEPOINT":
            self.status = IDLE if self.status == IDLE else IN_BLOCK
        else:
            self.status = _TRANSITIONS.get(tag or "", self.status)
