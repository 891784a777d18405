"""SQL cursors (``DECLARE … CURSOR``, ``FETCH``, ``MOVE``, ``CLOSE``) as PostgreSQL has them: named portals.

A cursor is a portal of the session's PreparedState, so drivers that DECLARE in SQL and then Describe and
Execute the portal by name over the extended protocol (psycopg's named cursors) read the same rows as FETCH
does. The answer behind it is computed — and charged — once, at DECLARE; FETCH, MOVE and Execute walk through
it, forward. A cursor without HOLD ends with its transaction; one WITH HOLD outlives a COMMIT, not the
ROLLBACK of the transaction that declared it (PreparedState.end_transaction). Nothing here does I/O.
"""

from __future__ import annotations

from proxy.analysis.parameters import ParameterizedStatement
from proxy.analysis.session_commands import CloseCursor, DeclareCursor, FetchCursor
from proxy.errors import DuplicatePortalError, NoActiveTransactionError
from proxy.query.service import Description, StatementOutcome
from proxy.release.apply import ReleasedTable, ResultColumn
from proxy.server.prepared import Portal, PreparedState, PreparedStatement


def check_declare(state: PreparedState, command: DeclareCursor, *, in_transaction: bool) -> None:
    """Refusals that must come before the query runs (and is charged)."""
    if not command.hold and not in_transaction:
        raise NoActiveTransactionError(
            "DECLARE CURSOR can only be used in transaction blocks",
            hint="BEGIN first, or declare it WITH HOLD",
        )
    if state.has_portal(command.name):
        raise DuplicatePortalError(f'cursor "{command.name}" already exists')


def declare(
    state: PreparedState, command: DeclareCursor, answer: StatementOutcome, *, in_transaction: bool
) -> StatementOutcome:
    """Hold ``answer`` as the portal ``command.name``; the client sees DECLARE CURSOR and the notices."""
    table = answer.table if answer.table is not None else ReleasedTable((), [])
    statement = PreparedStatement(command.name, command.query, ParameterizedStatement(None, 0, {}), ())
    held = StatementOutcome(f"SELECT {len(table.rows)}", table=table)
    portal = Portal(
        statement, (), [], Description(table.columns, held), held, 0, command.hold, in_transaction
    )
    state.add_portal(command.name, portal)
    return StatementOutcome("DECLARE CURSOR", notices=answer.notices, charge=answer.charge)


def fetch(state: PreparedState, command: FetchCursor) -> StatementOutcome:
    portal = state.portal(command.name)
    assert portal.outcome is not None and portal.outcome.table is not None
    table = portal.outcome.table
    start = portal.sent
    portal.sent = len(table.rows) if command.count is None else min(len(table.rows), start + command.count)
    rows = table.rows[start : portal.sent]
    if command.move:
        return StatementOutcome(f"MOVE {len(rows)}")
    return StatementOutcome(f"FETCH {len(rows)}", table=ReleasedTable(table.columns, rows))


def close(state: PreparedState, command: CloseCursor) -> StatementOutcome:
    if command.name is None:
        state.close_all_portals()
    else:
        state.close_portal(command.name)
    return StatementOutcome("CLOSE CURSOR")


def columns(state: PreparedState, name: str) -> tuple[ResultColumn, ...]:
    """The columns a FETCH from ``name`` answers with (for Describe)."""
    description = state.portal(name).description
    return description.columns or () if description is not None else ()
