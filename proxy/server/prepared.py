"""Prepared statements and portals: the state the extended query protocol keeps in a session.

Parse creates a prepared statement (named, or the unnamed one that the next Parse replaces); Bind
creates a portal from it with the parameter values; Execute runs the portal — once — and sends its
rows, ``max_rows`` at a time when asked to. The rules for names follow PostgreSQL: a named statement
or portal must be closed before its name is used again (42P05, 42P03); a missing one is 26000 or
34000; closing a missing one is not an error; portals end with their transaction.

Nothing here does I/O: the session reads messages, calls these, and writes what comes back.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType
from typing import Final

from proxy.analysis.parameters import ParameterizedStatement, Tree, parameterized_statement
from proxy.analysis.session_commands import ExecutePrepared, PrepareStatement, execute_arguments
from proxy.errors import (
    DuplicatePortalError,
    DuplicatePreparedStatementError,
    InvalidBinaryRepresentationError,
    InvalidTextRepresentationError,
    ProtocolViolationError,
    UndefinedPortalError,
    UndefinedPreparedStatementError,
    UnsupportedQueryError,
)
from proxy.query.service import Description, QueryService, StatementOutcome
from proxy.release.apply import ResultColumn
from proxy.wire import types as pgtypes
from proxy.wire.errors import InvalidBinaryValueError, InvalidTextValueError, UnsupportedBinaryTypeError
from proxy.wire.values import decode_parameter, expand_format_codes

_PROBES: Final[Mapping[int, object]] = MappingProxyType(
    {
        pgtypes.BOOL: True,
        pgtypes.INT2: 1,
        pgtypes.INT4: 1,
        pgtypes.INT8: 1,
        pgtypes.FLOAT4: 1.0,
        pgtypes.FLOAT8: 1.0,
        pgtypes.NUMERIC: Decimal(1),
        pgtypes.DATE: datetime.date(2000, 1, 1),
        pgtypes.TIMESTAMP: datetime.datetime(2000, 1, 1),
        pgtypes.TIMESTAMPTZ: datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC),
        pgtypes.BYTEA: b"",
    }
)
"""A stand-in value of each type, for describing a statement before any value is bound: the columns
of an answer do not depend on the values in its WHERE or LIMIT. Any other type (text) gets ``"0"``,
which both engines also read as a number or a boolean where the statement compares it with one."""
_TEXT_PROBE: Final = "0"


@dataclass(frozen=True)
class PreparedStatement:
    name: str
    query: str  # as the client sent it: what the audit log shows for a statement refused before Bind
    statement: ParameterizedStatement
    parameter_types: tuple[int, ...]  # OIDs, as ParameterDescription reports them

    def decode(self, formats: Sequence[int], values: Sequence[bytes | None]) -> tuple[object, ...]:
        """The Python value of each Bind parameter, read as the type this statement reports for it —
        so a client that encodes by our ParameterDescription (asyncpg) is read the way it wrote."""
        if len(values) != len(self.parameter_types):
            raise ProtocolViolationError(
                f"bind message supplies {len(values)} parameters, but prepared statement "
                f'"{self.name}" requires {len(self.parameter_types)}'
            )
        codes = expand_format_codes(formats, len(values), items="parameters")
        return tuple(
            _decode(number, oid, code, data)
            for number, (oid, code, data) in enumerate(
                zip(self.parameter_types, codes, values, strict=True), 1
            )
        )

    def probes(self) -> tuple[object, ...]:
        return tuple(_PROBES.get(oid, _TEXT_PROBE) for oid in self.parameter_types)


def parameter_types(declared: Sequence[int], statement: ParameterizedStatement) -> tuple[int, ...]:
    """Each parameter's type: as the client declared it, else as the statement implies, else text
    (PostgreSQL resolves an unknown literal to text the same way)."""
    count = max(len(declared), statement.parameter_count)
    types = []
    for number in range(1, count + 1):
        oid = declared[number - 1] if number <= len(declared) else pgtypes.UNSPECIFIED
        if oid == pgtypes.UNSPECIFIED:
            oid = pgtypes.OIDS_BY_NAME.get(statement.inferred_types.get(number, "text"), pgtypes.TEXT)
        types.append(oid)
    return tuple(types)


def _decode(number: int, oid: int, format_code: int, data: bytes | None) -> object:
    try:
        return decode_parameter(oid, format_code, data)
    except InvalidTextValueError as error:
        raise InvalidTextRepresentationError(str(error), detail=f"in parameter ${number}") from None
    except InvalidBinaryValueError as error:
        raise InvalidBinaryRepresentationError(str(error), detail=f"in parameter ${number}") from None
    except UnsupportedBinaryTypeError as error:
        raise UnsupportedQueryError(str(error), detail=f"in parameter ${number}") from None


@dataclass
class Portal:
    """A bound statement, ready to run; it remembers what it has sent so that Execute can resume."""

    statement: PreparedStatement
    values: tuple[object, ...]
    result_formats: list[int]  # as Bind sent them: expanded once the columns are known
    description: Description | None = None  # set by Describe
    outcome: StatementOutcome | None = None  # set by the first Execute
    sent: int = 0  # rows of the outcome already sent
    hold: bool = False  # a cursor declared WITH HOLD: it outlives a COMMIT
    declared_in_transaction: bool = False  # … but not a ROLLBACK of the transaction that declared it

    def formats(self, columns: Sequence[ResultColumn]) -> list[int]:
        return expand_format_codes(self.result_formats, len(columns), items="columns")


class PreparedState:
    """The named (and unnamed, ``""``) prepared statements and portals of one session."""

    def __init__(self) -> None:
        self._statements: dict[str, PreparedStatement] = {}
        self._portals: dict[str, Portal] = {}

    def add_statement(self, statement: PreparedStatement) -> None:
        if statement.name and statement.name in self._statements:
            raise DuplicatePreparedStatementError(f'prepared statement "{statement.name}" already exists')
        self._statements[statement.name] = statement

    def statement(self, name: str) -> PreparedStatement:
        found = self._statements.get(name)
        if found is None:
            raise UndefinedPreparedStatementError(f'prepared statement "{name}" does not exist')
        return found

    def add_portal(self, name: str, portal: Portal) -> None:
        if name and name in self._portals:
            raise DuplicatePortalError(f'portal "{name}" already exists')
        self._portals[name] = portal

    def portal(self, name: str) -> Portal:
        found = self._portals.get(name)
        if found is None:
            raise UndefinedPortalError(f'portal "{name}" does not exist')
        return found

    def close(self, kind: str, name: str) -> None:
        """Close, as the Close message does: a portal ('P') or a prepared statement ('S'); a missing
        one is not an error. Portals made from a closed statement stay usable."""
        (self._portals if kind == "P" else self._statements).pop(name, None)

    def deallocate(self, name: str | None) -> None:
        """SQL ``DEALLOCATE name`` (26000 if missing), or ``DEALLOCATE ALL`` with ``None`` — which,
        as in PostgreSQL, leaves the unnamed statement alone."""
        if name is None:
            self._statements = {"": self._statements[""]} if "" in self._statements else {}
        else:
            del self._statements[self.statement(name).name]

    def has_portal(self, name: str) -> bool:
        return name in self._portals

    def close_portal(self, name: str) -> None:
        """SQL CLOSE: a missing cursor is an error here, unlike the Close message."""
        self.portal(name)
        del self._portals[name]

    def close_all_portals(self) -> None:
        self._portals.clear()

    def end_transaction(self, *, committed: bool = True) -> None:
        """Portals live as long as their transaction, except cursors declared WITH HOLD, which outlive a
        COMMIT — but not the ROLLBACK of the transaction that declared them."""
        self._portals = {
            name: portal
            for name, portal in self._portals.items()
            if portal.hold and (committed or not portal.declared_in_transaction)
        }
        for portal in self._portals.values():
            portal.declared_in_transaction = False

    def forget_unnamed(self) -> None:
        """A simple Query replaces the unnamed statement and portal, as in PostgreSQL."""
        self._statements.pop("", None)
        self._portals.pop("", None)


_TYPE_SPELLINGS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "int": "int4", "integer": "int4", "smallint": "int2", "bigint": "int8", "real": "float4",
        "double precision": "float8", "float": "float8", "decimal": "numeric", "boolean": "bool",
        "character varying": "varchar", "timestamp without time zone": "timestamp",
        "timestamp with time zone": "timestamptz",
    }
)  # fmt: skip
"""SQL spellings of the types PREPARE may declare, beside pg_type's own names (TYPE_NAMES)."""


def sql_prepared_statement(command: PrepareStatement, service: QueryService) -> PreparedStatement:
    """SQL ``PREPARE name (types) AS …``: the same prepared statement a Parse message makes, in the same
    namespace (as in PostgreSQL, where EXECUTE can run a driver's statement and Bind an SQL one)."""
    statement = parameterized_statement(service.parse(command.query), service.dataset)
    declared = [_type_oid(name) for name in command.types]
    return PreparedStatement(command.name, command.query, statement, parameter_types(declared, statement))


def bound_execute(prepared: PreparedStatement, command: ExecutePrepared) -> Tree:
    """SQL ``EXECUTE name (arguments)``: the statement bound as a Bind in text format would bind it."""
    texts = execute_arguments(command.arguments)
    values = prepared.decode([0] * len(texts), [None if text is None else text.encode() for text in texts])
    tree = prepared.statement.bind(values)
    if tree is None:
        raise UnsupportedQueryError(f'prepared statement "{prepared.name}" is empty')
    return tree


def _type_oid(name: str) -> int:
    spelled = " ".join(name.lower().split())
    oid = pgtypes.OIDS_BY_NAME.get(_TYPE_SPELLINGS.get(spelled, spelled))
    if oid is None:
        raise UnsupportedQueryError(
            f"type {name} is not supported in PREPARE",
            hint="int, bigint, numeric, float8, text, bool, date, timestamp",
        )
    return oid
