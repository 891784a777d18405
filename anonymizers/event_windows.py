"""Per-window user × item 0/1 matrices of an event table, built in the SQL engine (spec
``matrix-factorization.md`` §2, [D] Table 5.1).

An event table holds one row per (user, time, item) event — a web log, purchases, ratings. For an
observation window T, ``M_T[i, j] = 1`` if user i had at least one event on item j during T. Every window's
matrix has the *same* users in the same rows (a user inactive in a window keeps a zero row), so that the
evaluator can align them; the attacker never sees that alignment, because every window is published under
fresh pseudonyms.

Windows are either fixed spans (``8h`` from a start, N consecutive ones) or ``median``: each user's events
before and after that user's median event — the split the spec prescribes for MovieLens, whose ratings are
spread over twenty years rather than concentrated in a day.

Only the engine scans the events: it computes each event's window, ranks users by their number of events and
items by theirs (ties broken by value, so the same data gives the same matrices), keeps the top ones, and
returns the distinct (user rank, item rank, window) triples — at most one per cell — which numpy scatters
into dense float32 matrices. No event row becomes a Python object.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import sqlglot
from sqlglot import exp

from anonymizers.errors import AnonymizationError
from anonymizers.source import TableSource

MEDIAN = "median"
_UNITS = {"s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_SPAN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|min|m|h|d|w)\s*$")
_NUMERIC_TYPES = ("INT", "DOUBLE", "FLOAT", "REAL", "NUMERIC", "DECIMAL", "HUGEINT")
_TEMPORAL_TYPES = ("TIMESTAMP", "DATE")
_MAX_CELLS = 2_000_000_000  # users × items × windows of float32: refuse before allocating 8 GB


@dataclass(frozen=True)
class WindowSpec:
    """Fixed windows of ``seconds`` from ``start`` (None: the first event), ``count`` of them; or the
    per-user ``median`` split (``seconds`` None, two windows). ``start_epoch`` (seconds) replaces ``start``
    when a recorded release is rebuilt."""

    seconds: float | None
    count: int = 2
    start: str | None = None
    start_epoch: float | None = None

    @classmethod
    def parse(cls, text: str, *, count: int = 2, start: str | None = None) -> WindowSpec:
        if text.strip().lower() == MEDIAN:
            if count != 2 or start is not None:
                raise AnonymizationError(
                    "--window median makes exactly two windows per user",
                    hint="drop --windows and --start, or give a span such as --window 8h",
                )
            return cls(None)
        match = _SPAN.match(text.lower())
        if match is None or float(match.group(1)) <= 0:
            raise AnonymizationError(
                f"cannot read the window {text!r}", hint="a span such as 30min, 8h, 2d, 1w — or 'median'"
            )
        if count < 2:
            raise AnonymizationError(f"--windows must be at least 2, got {count}", hint="linkage needs two")
        return cls(float(match.group(1)) * _UNITS[match.group(2)], count, start)

    def describe(self) -> dict[str, object]:
        if self.seconds is None:
            return {"kind": MEDIAN, "windows": 2}
        return {"kind": "fixed", "seconds": self.seconds, "windows": self.count, "start": self.start}


@dataclass(frozen=True)
class EventWindows:
    """``matrices[w]`` is window w's users × items 0/1 matrix; row i is ``users[i]`` and column j
    ``items[j]`` (both as the engine's text) in every window. ``start`` is the first window's start in
    epoch seconds (None for median windows)."""

    matrices: list[np.ndarray]
    users: list[str]
    items: list[str]
    start: float | None
    events: int  # events that fell into the windows, before the top-users/items cut


def build_windows(
    source: TableSource,
    *,
    user: str,
    item: str,
    time: str,
    spec: WindowSpec,
    top_users: int | None = None,
    top_items: int | None = None,
) -> EventWindows:
    """Read ``source``'s events into per-window matrices (see the module docstring)."""
    source.require_columns([user, item, time])
    for name, value in (("--top-users", top_users), ("--top-items", top_items)):
        if value is not None and value < 2:
            raise AnonymizationError(f"{name} must be at least 2, got {value}")
    kind = _time_kind(source, time)
    start = spec.start_epoch
    if spec.seconds is not None and start is None:
        start = _start_epoch(source, time, kind, spec.start)
    windowed = _windowed_events(source, user, item, time, kind, spec, start)
    ranked = _ranked_query(windowed, top_users, top_items)
    triples = source.arrays(_parse(ranked))
    users = _names(source, windowed, "u", top_users)
    items = _names(source, windowed, "i", top_items)
    events = int(source.rows(_parse(f"SELECT COUNT(*) FROM ({windowed}) AS e"))[0][0])
    if not users or not items:
        raise AnonymizationError(
            "no event falls into the windows", hint="check --start, --window and the time column"
        )
    count = 2 if spec.seconds is None else spec.count
    if len(users) * len(items) * count > _MAX_CELLS:
        raise AnonymizationError(
            f"{len(users):,} users × {len(items):,} items × {count} windows is too large to hold in memory",
            hint="limit them with --top-users and --top-items",
        )
    matrices = [np.zeros((len(users), len(items)), dtype=np.float32) for _ in range(count)]
    for window, matrix in enumerate(matrices):
        chosen = triples["w"] == window
        matrix[triples["ur"][chosen].astype(np.intp), triples["ir"][chosen].astype(np.intp)] = 1.0
    return EventWindows(matrices, users, items, start, events)


def _time_kind(source: TableSource, time: str) -> str:
    """``epoch`` for a numeric column (seconds since 1970), ``temporal`` for a date/timestamp column."""
    declared = dict(source.columns())[time].upper()
    if any(word in declared for word in _TEMPORAL_TYPES):
        return "temporal"
    if any(word in declared for word in _NUMERIC_TYPES):
        return "epoch"
    raise AnonymizationError(
        f"column {time!r} has type {declared}, not a timestamp, date or number of seconds",
        hint="cast it in a view first, e.g. CAST(t AS TIMESTAMP)",
    )


def _seconds(column: str, kind: str) -> str:
    return f"EPOCH({column})" if kind == "temporal" else f"CAST({column} AS DOUBLE)"


def _start_epoch(source: TableSource, time: str, kind: str, start: str | None) -> float:
    """The first window's start: ``--start`` read by the engine as the column's kind, or the first event."""
    column = _identifier(time)
    if start is None:
        query = f"SELECT MIN({_seconds(column, kind)}) FROM {source.table.sql(dialect='duckdb')}"
    elif kind == "temporal":
        query = f"SELECT EPOCH(CAST({exp.Literal.string(start).sql()} AS TIMESTAMP))"
    else:
        try:
            return float(start)
        except ValueError:
            raise AnonymizationError(
                f"--start {start!r} is not a number of seconds", hint=f"{time!r} holds epoch seconds"
            ) from None
    try:
        value = source.rows(_parse(query))[0][0]
    except Exception as error:  # the engine's words on a malformed --start
        raise AnonymizationError(
            f"cannot read --start {start!r} as a timestamp", hint=str(error).splitlines()[0]
        ) from None
    if value is None:
        raise AnonymizationError(f"{source.description} has no events with a time")
    return float(value)


def _windowed_events(
    source: TableSource, user: str, item: str, time: str, kind: str, spec: WindowSpec, start: float | None
) -> str:
    """The events that fall into a window, as (u, i, w) with u and i as text (DuckDB dialect text)."""
    u, i, t = (_identifier(name) for name in (user, item, time))
    table = source.table.sql(dialect="duckdb")
    present = f"{u} IS NOT NULL AND {i} IS NOT NULL AND {t} IS NOT NULL"
    if spec.seconds is None:
        window = (
            f"CASE WHEN 2 * ROW_NUMBER() OVER (PARTITION BY {u} ORDER BY {t}, CAST({i} AS TEXT)) "
            f"<= COUNT(*) OVER (PARTITION BY {u}) THEN 0 ELSE 1 END"
        )
        return f"SELECT CAST({u} AS TEXT) AS u, CAST({i} AS TEXT) AS i, {window} AS w FROM {table} WHERE {present}"
    seconds = _seconds(t, kind)
    end = start + spec.seconds * spec.count
    window = f"CAST(FLOOR(({seconds} - {start!r}) / {spec.seconds!r}) AS INT)"
    return (
        f"SELECT CAST({u} AS TEXT) AS u, CAST({i} AS TEXT) AS i, {window} AS w FROM {table} "
        f"WHERE {present} AND {seconds} >= {start!r} AND {seconds} < {end!r}"
    )


def _ranking(windowed: str, column: str, top: int | None) -> str:
    """Each distinct ``column`` value with its rank by number of events (most first, ties by value)."""
    keep = "" if top is None else f" WHERE r < {int(top)}"
    return (
        f"SELECT * FROM (SELECT {column}, ROW_NUMBER() OVER (ORDER BY COUNT(*) DESC, {column}) - 1 AS r "
        f"FROM ({windowed}) AS e GROUP BY {column}) AS ranked{keep}"
    )


def _ranked_query(windowed: str, top_users: int | None, top_items: int | None) -> str:
    return (
        f"SELECT DISTINCT users.r AS ur, items.r AS ir, e.w AS w FROM ({windowed}) AS e "
        f"JOIN ({_ranking(windowed, 'u', top_users)}) AS users ON users.u = e.u "
        f"JOIN ({_ranking(windowed, 'i', top_items)}) AS items ON items.i = e.i"
    )


def _names(source: TableSource, windowed: str, column: str, top: int | None) -> list[str]:
    rows = source.rows(_parse(f"SELECT {column}, r FROM ({_ranking(windowed, column, top)}) AS x ORDER BY r"))
    return [str(row[0]) for row in rows]


def _identifier(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql(dialect="duckdb")


def _parse(text: str) -> exp.Expression:
    """DuckDB-dialect text as a sqlglot tree: the source generates its own dialect from it (PostgreSQL gets
    ``DATE_PART('epoch', …)`` for ``EPOCH(…)``)."""
    return sqlglot.parse_one(text, read="duckdb")
