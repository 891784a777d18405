"""The backend messages that carry a statement's outcome to the client: rows, COPY data, notices,
errors. Pure functions of the outcome (no I/O, no session state), shared by both protocols: the simple
query answers with :func:`outcome_messages`, the extended one a portal's rows at a time with
:func:`portal_messages`."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

from proxy.config import ColumnType
from proxy.errors import ProxyError
from proxy.query.service import StatementOutcome
from proxy.release.apply import ResultColumn
from proxy.server.prepared import Portal
from proxy.wire import copy_out
from proxy.wire import messages as wire
from proxy.wire import types as pgtypes
from proxy.wire.rows import text_data_rows
from proxy.wire.values import TEXT_FORMAT, encode_value

TYPE_OIDS = {
    ColumnType.INTEGER: pgtypes.INT8,
    ColumnType.REAL: pgtypes.FLOAT8,
    ColumnType.TEXT: pgtypes.TEXT,
    ColumnType.DATE: pgtypes.DATE,
    ColumnType.TIMESTAMP: pgtypes.TIMESTAMP,
    ColumnType.BOOLEAN: pgtypes.BOOL,
}


def error_message(error: ProxyError, *, severity: str = "ERROR") -> bytes:
    fields = wire.ErrorFields(
        severity=severity,
        sqlstate=error.sqlstate,
        message=error.message,
        detail=error.detail,
        hint=error.hint,
        position=error.position,
    )
    return wire.error_response(fields)


def notice(text: str) -> bytes:
    return wire.notice_response(wire.ErrorFields(severity="NOTICE", sqlstate="00000", message=text))


def outcome_messages(outcome: StatementOutcome) -> list[bytes]:
    """A simple query's answer: the columns, every row in text, what the run says, the command tag."""
    if outcome.copy is not None:
        return [b"".join(part) if isinstance(part, Iterator) else part for part in copy_messages(outcome)]
    out: list[bytes] = []
    if outcome.table is not None:
        out.append(row_description(outcome.table.columns, None))
        out.extend(data_rows(outcome.table.columns, outcome.table.rows, None))
    return [*out, *run_messages(outcome), wire.command_complete(outcome.tag)]


def copy_messages(outcome: StatementOutcome) -> list[bytes | Iterator[bytes]]:
    """COPY … TO STDOUT: CopyOutResponse, the CopyData of every row (and header) — an iterator that
    encodes them a chunk at a time —, CopyDone, what the run says, the command tag."""
    copy = outcome.copy
    assert copy is not None
    data = copy_out.copy_data_messages(
        copy.names,
        copy.values,
        copy.count,
        csv=copy.options.format == "csv",
        header=copy.options.header,
        separator=copy.options.separator,
    )
    return [
        copy_out.copy_out_response(len(copy.names)),
        data,
        copy_out.copy_done(),
        *run_messages(outcome),
        wire.command_complete(outcome.tag),
    ]


def run_messages(outcome: StatementOutcome) -> list[bytes]:
    """What running the statement says besides its rows: notices (ε spent) and a changed setting."""
    out = [notice(text) for text in outcome.notices]
    if outcome.parameter_changed is not None:
        out.append(wire.parameter_status(*outcome.parameter_changed))
    return out


def portal_messages(portal: Portal, max_rows: int, *, first: bool) -> list[bytes]:
    """The rows of one Execute — at most ``max_rows`` (0: all) from where the last one stopped — then
    PortalSuspended if rows remain, else CommandComplete with the number of rows of this Execute, as
    PostgreSQL counts them. Only the Execute that ran the statement says what the run says."""
    outcome = portal.outcome
    assert outcome is not None
    if outcome.copy is not None:  # COPY sends all its rows in one Execute, whatever max_rows says
        if not first:
            outcome = dataclasses.replace(outcome, notices=(), parameter_changed=None)
        return outcome_messages(outcome)
    table = outcome.table
    rows = table.rows if table is not None else []
    start = portal.sent
    portal.sent = len(rows) if max_rows <= 0 else min(len(rows), start + max_rows)
    out = data_rows(table.columns, rows[start : portal.sent], portal.formats(table.columns)) if table else []
    if first:
        out.extend(run_messages(outcome))
    if portal.sent < len(rows):
        return [*out, wire.portal_suspended()]
    tag = f"SELECT {portal.sent - start}" if outcome.tag.startswith("SELECT ") else outcome.tag
    return [*out, wire.command_complete(tag)]


def row_description(columns: Sequence[ResultColumn] | None, formats: Sequence[int] | None) -> bytes:
    """RowDescription, or NoData for a statement without rows; ``formats`` None means all text."""
    if columns is None:
        return wire.no_data()
    codes = formats or [TEXT_FORMAT] * len(columns)
    fields = []
    for column, code in zip(columns, codes, strict=True):
        oid = column.type_oid or TYPE_OIDS[column.type]
        fields.append(
            wire.FieldDescription(
                name=column.name, type_oid=oid, type_size=pgtypes.TYPE_SIZES[oid], format_code=code
            )
        )
    return wire.row_description(fields)


def data_rows(
    columns: Sequence[ResultColumn], rows: Sequence[tuple[object, ...]], formats: Sequence[int] | None
) -> list[bytes]:
    """DataRows; all text unless Bind asked for binary columns."""
    if not formats or not any(formats):
        return [text_data_rows(rows)]
    oids = [column.type_oid or TYPE_OIDS[column.type] for column in columns]
    return [
        wire.data_row(
            [encode_value(oid, code, value) for oid, code, value in zip(oids, formats, row, strict=True)]
        )
        for row in rows
    ]
