"""Partitions: the disjoint parts of a dataset's people that parallel composition charges separately.

A spend charged to a *partition* read only the rows where one column (``table.column``) holds one of
the listed values, and the proxy made sure that only people all of whose rows hold that one value
took part. Adding or removing one person then changes the answers charged to one value of the
column at most, so what anyone in the data can lose is the ordinary spends plus *one* value's spends
— parallel composition (McSherry 2009; spec dp-mechanisms §6.1) across statements — and the ledger
charges the largest value, not the sum (budget/ledger.py, docs/privacy.md "Accounting").

A spend that names several values (``region IN ('north', 'south')``) counts in each of them. Two
partition columns are two independent ways of cutting the same people — a person has a region *and*
a year — so their largest values add up; so do the same column name in two tables, which is why a
partition column is named with its table.

The ledger treats values as opaque: text or integers, compared as JSON. It never learns what a value
means; the proxy decides which statements may be charged to a partition (proxy/analysis/partitions.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from budget.errors import InvalidBudgetError

PartitionValue = str | int


@dataclass(frozen=True)
class Partition:
    """The values of one partition column that a spend read: ``column`` is ``table.column``;
    ``values`` are distinct and sorted (given in any order, with repeats, they are normalised)."""

    column: str
    values: tuple[PartitionValue, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column:
            raise InvalidBudgetError("a partition needs a column (table.column)")
        if not self.values:
            raise InvalidBudgetError(
                "a partition needs at least one value", hint="a spend over no value needs no partition"
            )
        for value in self.values:
            if isinstance(value, bool) or not isinstance(value, str | int):
                raise InvalidBudgetError(f"partition values are text or integers, got {value!r}")
        object.__setattr__(self, "values", tuple(sorted(set(self.values), key=order)))

    def stored_values(self) -> tuple[str, ...]:
        """The values as the ledger stores them (:func:`value_key`)."""
        return tuple(value_key(value) for value in self.values)

    def describe(self) -> str:
        """``patients.region = 'north'`` or ``patients.region IN ('north', 'south')``."""
        if len(self.values) == 1:
            return f"{self.column} = {sql_literal(self.values[0])}"
        return f"{self.column} IN ({', '.join(sql_literal(value) for value in self.values)})"

    def to_json(self) -> str:
        return json.dumps(list(self.values), ensure_ascii=False)

    @classmethod
    def from_stored(cls, column: str, values: str) -> Partition | None:
        """A spend's partition as the spends table holds it; None for an ordinary spend."""
        return cls(column, tuple(json.loads(values))) if column else None


@dataclass(frozen=True)
class PartitionBalance:
    """What an analyst may still spend on statements charged to one value of a partition column
    (``value`` None: any value not charged yet in this period). ``spent`` is what a person holding
    that value has lost: the ordinary spends, this value's, and the largest value of every other
    partition column, composed by ``accountant``."""

    analyst: str
    dataset: str
    column: str
    value: PartitionValue | None
    spent_epsilon: float
    remaining_epsilon: float
    spent_delta: float
    remaining_delta: float
    accountant: str
    releases: int


def order(value: PartitionValue) -> tuple[bool, PartitionValue]:
    """Integers by value, then text; a column holds one kind, so this is its values' own order."""
    return isinstance(value, str), value


def value_key(value: PartitionValue) -> str:
    """A value as stored: JSON, so that ``'2020'`` and ``2020`` differ and no value is empty."""
    return json.dumps(value, ensure_ascii=False)


def value_of(key: str) -> PartitionValue:
    value = json.loads(key)
    assert isinstance(value, str | int) and not isinstance(value, bool)
    return value


def sql_literal(value: PartitionValue) -> str:
    return str(value) if isinstance(value, int) else "'" + value.replace("'", "''") + "'"
