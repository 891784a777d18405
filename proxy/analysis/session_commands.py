"""The SQL commands whose state lives in the session, read from their text: cursors (``DECLARE … CURSOR``,
``FETCH``, ``MOVE``, ``CLOSE``) and SQL-level prepared statements (``PREPARE``, ``EXECUTE``).

sqlglot reads these as generic commands (the verb, then the rest as text), so they are parsed here with a
small grammar of PostgreSQL's forms. The query of a cursor or of a prepared statement is ordinary SQL and is
analysed later like any other statement. Cursors move forward only (the form psql's FETCH_COUNT, psycopg's
named cursors and SQLAlchemy's stream_results use): the answer is computed, and charged, at DECLARE and held
by the session; FETCH and MOVE walk through it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp

from proxy.analysis.parse import parse_statements
from proxy.errors import QuerySyntaxError, UnsupportedQueryError

ALL = None  # FETCH ALL: every remaining row

_NAME = r'(?P<name>"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)'
_DECLARE = re.compile(
    rf"^{_NAME}\s+(?P<options>(?:BINARY|ASENSITIVE|INSENSITIVE|NO\s+SCROLL|SCROLL|\s)*)CURSOR\s+"
    r"(?:(?P<hold>WITH|WITHOUT)\s+HOLD\s+)?FOR\s+(?P<query>.+)$",
    re.IGNORECASE | re.DOTALL,
)
_FETCH = re.compile(
    rf"^(?:(?P<direction>NEXT|FORWARD(?:\s+(?P<forward>\d+|ALL))?|ALL|(?P<count>\d+)|"
    r"PRIOR|FIRST|LAST|ABSOLUTE\s+-?\d+|RELATIVE\s+-?\d+|BACKWARD(?:\s+(?:\d+|ALL))?)\s+)?"
    rf"(?:(?:FROM|IN)\s+)?{_NAME}\s*$",
    re.IGNORECASE | re.DOTALL,
)
_PREPARE = re.compile(
    rf"^{_NAME}\s*(?:\((?P<types>[^)]*)\))?\s+AS\s+(?P<query>.+)$", re.IGNORECASE | re.DOTALL
)
_EXECUTE = re.compile(rf"^{_NAME}\s*(?:\((?P<arguments>.*)\))?\s*$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class DeclareCursor:
    name: str
    hold: bool  # WITH HOLD: the cursor outlives the transaction that declared it
    query: str


@dataclass(frozen=True)
class FetchCursor:
    name: str
    count: int | None  # None: ALL
    move: bool  # MOVE: advance without returning rows


@dataclass(frozen=True)
class CloseCursor:
    name: str | None  # None: CLOSE ALL


@dataclass(frozen=True)
class PrepareStatement:
    name: str
    types: tuple[str, ...]  # declared parameter types, as written ("int", "text"); may be empty
    query: str


@dataclass(frozen=True)
class ExecutePrepared:
    name: str
    arguments: str  # the argument list as written, without its parentheses ("" for none)


SessionCommand = DeclareCursor | FetchCursor | CloseCursor | PrepareStatement | ExecutePrepared


def session_command(verb: str, argument: str) -> SessionCommand | None:
    """The command ``verb argument`` (sqlglot's generic command parts), or None for any other verb."""
    verb, text = verb.upper(), argument.strip().rstrip(";").strip()
    if verb == "DECLARE":
        return _declare(text)
    if verb in ("FETCH", "MOVE"):
        return _fetch(text, move=verb == "MOVE")
    if verb == "CLOSE":
        return CloseCursor(None if text.upper() == "ALL" else _name(text, "CLOSE name, or CLOSE ALL"))
    if verb == "PREPARE":
        return _prepare(text)
    if verb == "EXECUTE":
        return _execute(text)
    return None


def _declare(text: str) -> DeclareCursor:
    match = _DECLARE.match(text)
    if match is None:
        raise QuerySyntaxError(
            "syntax error in DECLARE", hint="DECLARE name [NO SCROLL] CURSOR [WITH HOLD] FOR query"
        )
    if re.search(r"\bBINARY\b", match["options"], re.IGNORECASE):
        raise UnsupportedQueryError(
            "BINARY cursors are not supported", hint="declare the cursor without BINARY"
        )
    return DeclareCursor(_identifier(match["name"]), (match["hold"] or "").upper() == "WITH", match["query"])


def _fetch(text: str, *, move: bool) -> FetchCursor:
    match = _FETCH.match(text)
    if match is None:
        raise QuerySyntaxError(
            f"syntax error in {'MOVE' if move else 'FETCH'}", hint="FETCH [FORWARD] n FROM name"
        )
    direction = (match["direction"] or "NEXT").upper().split()[0]
    if direction not in ("NEXT", "FORWARD", "ALL") and not direction.isdigit():
        raise UnsupportedQueryError(
            f"cursors here move forward only: FETCH {direction} is not supported",
            hint="FETCH [FORWARD] n | ALL; declare the query again to start over",
        )
    amount = match["forward"] or match["count"] or ("ALL" if direction == "ALL" else "1")
    count = None if amount.upper() == "ALL" else int(amount)
    return FetchCursor(_identifier(match["name"]), count, move)


def _prepare(text: str) -> PrepareStatement:
    match = _PREPARE.match(text)
    if match is None:
        raise QuerySyntaxError("syntax error in PREPARE", hint="PREPARE name [(type, …)] AS statement")
    types = tuple(t.strip() for t in (match["types"] or "").split(",") if t.strip())
    return PrepareStatement(_identifier(match["name"]), types, match["query"])


def _execute(text: str) -> ExecutePrepared:
    match = _EXECUTE.match(text)
    if match is None:
        raise QuerySyntaxError("syntax error in EXECUTE", hint="EXECUTE name [(argument, …)]")
    return ExecutePrepared(_identifier(match["name"]), (match["arguments"] or "").strip())


def _name(text: str, hint: str) -> str:
    if not re.fullmatch(_NAME, text):
        raise QuerySyntaxError("syntax error", hint=hint)
    return _identifier(text)


def _identifier(text: str) -> str:
    """An unquoted name folds to lower case, as PostgreSQL folds identifiers."""
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1].replace('""', '"')
    return text.lower()


def command_of(tree: object) -> SessionCommand | None:
    """The session command a parsed statement is, if it is one (sqlglot reads them as generic commands)."""
    if not isinstance(tree, exp.Command):
        return None
    argument = (
        tree.expression.name if isinstance(tree.expression, exp.Literal) else str(tree.expression or "")
    )
    return session_command(str(tree.this), argument)


def execute_arguments(text: str) -> list[str | None]:
    """EXECUTE's arguments as the text a Bind in text format would carry (None for NULL). Only constants
    are accepted — literals, signed numbers, casts of literals — as PostgreSQL's EXECUTE evaluates them
    before the statement runs."""
    if not text:
        return []
    (select,) = parse_statements(f"SELECT {text}")
    assert isinstance(select, exp.Select)
    return [_constant_text(item) for item in select.expressions]


def _constant_text(item: exp.Expression) -> str | None:
    node = item.this if isinstance(item, exp.Cast) else item
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    if isinstance(node, exp.Literal):
        return str(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return f"-{node.this.this}"
    raise UnsupportedQueryError(
        f"EXECUTE arguments must be constants, not {item.sql(dialect='postgres')}",
        hint="EXECUTE name(1, 'text', NULL)",
    )
