"""The public key domain of a GROUP BY over a date or timestamp column with declared bounds.

A date column's domain is every day of its range. A timestamp column's is not every second of its range
(millions of keys, and a second is nearly a person): only an expression that reads the timestamp **by
whole days or coarser** has a public domain — ``date_trunc('month', ts)``, ``EXTRACT(year FROM ts)``,
``CAST(ts AS DATE)`` — because it takes on any instant of a day the value it takes at that day's
midnight. Such an expression is evaluated over the midnights of every day of the range. ``GROUP BY ts``,
``date_trunc('hour', ts)`` or ``EXTRACT(hour FROM ts)`` have no public domain (their keys would come from
the data: τ-thresholding with δ, or a refusal).

>>> by_whole_days(sqlglot.parse_one("date_trunc('month', ts)"), "ts")
True
"""

from __future__ import annotations

import datetime

from sqlglot import exp

from proxy.analysis.argument_checks import TIME_PARTS, TRUNC_UNITS, canonical_unit
from proxy.config import ColumnPolicy, ColumnType

MAX_DAYS = 100_000  # days evaluated to derive an expression's key domain (shape.MAX_DERIVED_DOMAIN)

DAY_UNITS = frozenset(TRUNC_UNITS[TRUNC_UNITS.index("DAY") :])
"""date_trunc units of a day or longer: ``DAY`` … ``MILLENNIUM``."""
_FRACTIONAL_PARTS = TIME_PARTS | {"EPOCH", "JULIAN"}  # parts that read the time of day


def moment_days(column: ColumnPolicy) -> tuple[datetime.date, ...]:
    """Every day between a date or timestamp column's declared bounds — as dates for a date column, as
    midnights (timestamps) for a timestamp column; () without bounds or when the range is longer than
    MAX_DAYS days. A timestamp range's first day starts at the midnight before its lower bound: the
    truncation of an instant in range to the day is that midnight."""
    lower, upper = column.lower, column.upper
    if not column.type.is_moment or not isinstance(lower, datetime.date):
        return ()
    assert isinstance(upper, datetime.date)
    first, last = _day(lower), _day(upper)
    days = (last - first).days
    if days > MAX_DAYS:
        return ()
    dates = tuple(first + datetime.timedelta(days=day) for day in range(days + 1))
    if column.type is ColumnType.TIMESTAMP:
        return tuple(datetime.datetime.combine(day, datetime.time()) for day in dates)
    return dates


def _day(moment: datetime.date) -> datetime.date:
    return moment.date() if isinstance(moment, datetime.datetime) else moment


def by_whole_days(expression: exp.Expression, column: str) -> bool:
    """Whether every reference to ``column`` in ``expression`` is read only by its day: as the argument
    of date_trunc to a day or longer, of EXTRACT (or date_part) of a date part, or of a cast to DATE."""
    for node in expression.find_all(exp.Column):
        if node.name != column or not _reads_the_day(node):
            return False
    return True


def _reads_the_day(node: exp.Column) -> bool:
    parent = node.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    if isinstance(parent, exp.TimestampTrunc | exp.DateTrunc):
        unit = parent.args.get("unit")
        return unit is not None and canonical_unit(unit.name) in DAY_UNITS
    if isinstance(parent, exp.Extract):
        return canonical_unit(parent.this.name) not in _FRACTIONAL_PARTS
    if isinstance(parent, exp.Cast | exp.TryCast):
        return parent.to.this is exp.DataType.Type.DATE
    return False
