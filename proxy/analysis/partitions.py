"""Which partition a statement reads, from its parsed WHERE alone — so that its price is fixed before
anything runs (parallel composition across statements; docs/privacy.md, "Accounting").

A table may declare one public column with ``partition = true``. A statement on that table is
*pinned* when its WHERE is a conjunction (AND, at any depth of parentheses) of which at least one
conjunct is ``column = <declared value>`` or ``column IN (<declared values>)``: the rows it reads then
all hold one of those values, whatever the other conjuncts say. Several pins intersect. The statement
is charged to the values left (budget/partitions.py); the engine query keeps only people all of whose
rows hold one value (rewrite/partition_guard.py).

Everything else is charged as an ordinary statement — never to a fresh partition:

* OR, NOT, ``<>``, ``NOT IN``, ``IS [NOT] DISTINCT FROM``, comparisons and ranges: the rows read could
  hold other values (``region = 'north' OR age > 30``; ``(region = 'north') IS NOT FALSE`` reads NULLs);
* a value that is not a plain literal of a declared value, exactly: another case or spacing, a cast,
  a function of the column, NULL in an IN list, a string for an integer column (engines cast ``' 7'``),
  a value outside the declared domain (people holding it may exist and would get fresh budget);
* contradictory pins (``region = 'north' AND region = 'south'``): they read nobody, charged as ordinary
  rather than to nothing;
* joins and per-person subqueries (the pin would be on another table's rows).

>>> partition_pin(patients, sqlglot.parse_one("region IN ('south', 'north') AND age > 30"))
PartitionPin(table='patients', column='region', values=('north', 'south'))
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from budget.partitions import Partition, PartitionValue, order, sql_literal
from proxy.config import ColumnPolicy, ColumnType, TablePolicy

_DIGITS = 18  # no declared integer has more digits (BIGINT): a longer literal pins nothing


@dataclass(frozen=True)
class PartitionPin:
    """The declared values of ``table.column`` a statement's rows all hold (distinct, sorted)."""

    table: str
    column: str
    values: tuple[PartitionValue, ...]

    @property
    def name(self) -> str:
        """The partition column as the ledger names it: ``table.column``."""
        return f"{self.table}.{self.column}"

    @property
    def label(self) -> str:
        """``patients.region = 'north'`` or ``patients.region IN ('north', 'south')``."""
        if len(self.values) == 1:
            return f"{self.name} = {sql_literal(self.values[0])}"
        return f"{self.name} IN ({', '.join(sql_literal(value) for value in self.values)})"

    def ledger_partition(self) -> Partition:
        return Partition(self.name, self.values)


def partition_pin(table: TablePolicy, where: exp.Expression | None) -> PartitionPin | None:
    """The partition a statement on ``table`` filtered by ``where`` (its columns unqualified, as in
    QueryShape) reads, or None: charged as an ordinary statement."""
    name = table.partition_column
    if name is None or where is None:
        return None
    column = table.columns[name]
    pins = [values for conjunct in _conjuncts(where) if (values := _pinned(conjunct, column)) is not None]
    if not pins:
        return None
    common = set.intersection(*pins)
    if not common:
        return None
    return PartitionPin(table.name, column.name, tuple(sorted(common, key=order)))


def _conjuncts(condition: exp.Expression) -> Iterator[exp.Expression]:
    """The operands of a conjunction, through parentheses and nested ANDs."""
    if isinstance(condition, exp.Paren):
        yield from _conjuncts(condition.this)
    elif isinstance(condition, exp.And):
        yield from _conjuncts(condition.this)
        yield from _conjuncts(condition.expression)
    else:
        yield condition


def _pinned(condition: exp.Expression, column: ColumnPolicy) -> set[PartitionValue] | None:
    """The declared values ``column = v`` or ``column IN (…)`` allows, or None for any other condition."""
    if type(condition) is exp.EQ:
        for side, other in ((condition.this, condition.expression), (condition.expression, condition.this)):
            if _is_column(side, column) and (value := _declared(other, column)) is not None:
                return {value}
        return None
    if type(condition) is exp.In and _is_column(condition.this, column):
        if any(condition.args.get(arg) is not None for arg in ("query", "unnest", "field")):
            return None
        items = [_declared(item, column) for item in condition.expressions]
        if not items or any(item is None for item in items):
            return None
        return {item for item in items if item is not None}
    return None


def _is_column(node: exp.Expression, column: ColumnPolicy) -> bool:
    return (
        type(node) is exp.Column
        and not node.table
        and isinstance(node.this, exp.Identifier)
        and node.name.lower() == column.name
    )


def _declared(node: exp.Expression, column: ColumnPolicy) -> PartitionValue | None:
    """The declared value a plain literal is, exactly; None for anything else."""
    assert column.values is not None, "a partition column has declared values (proxy/config.py)"
    if column.type is ColumnType.TEXT:
        if type(node) is exp.Literal and node.is_string and node.this in column.values:
            return str(node.this)
        return None
    number = _integer(node)
    return number if number is not None and number in column.values else None


def _integer(node: exp.Expression) -> int | None:
    """A number literal (``1980``, ``1980.0``, ``-3``, ``19.8e2``) with an integer value, else None."""
    negative = type(node) is exp.Neg
    literal = node.this if negative else node
    if type(literal) is not exp.Literal or literal.is_string:
        return None
    try:
        number = Decimal(literal.this)
    except InvalidOperation:
        return None
    if not number.is_finite() or number.adjusted() > _DIGITS or number != number.to_integral_value():
        return None
    return -int(number) if negative else int(number)
