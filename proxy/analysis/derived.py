"""A FROM clause that is not a plain table but is still private data of known shape."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sqlglot import exp

from proxy.config import TablePolicy


@dataclass(frozen=True)
class ValueBound:
    """How the bound of a per-person value (``COUNT(*) AS n``, ``SUM(cost) AS spent``) is chosen with DP
    when the query gives none: ``M = unit × L``, L chosen with DP from ``⌈|value| / unit⌉`` over the people
    (at most ``cap``) by the same mechanism and target as ``max_contributions = "auto"``
    (mechanisms/contribution_bound.py). Each person is one row of the per-person table, so one count of
    that histogram: the scores' sensitivity is 1. Values are then clamped to ``[0, M]`` (``sign`` 1: the value cannot be
    negative), ``[−M, 0]`` (``sign`` −1) or ``[−M, M]`` (``sign`` 0). ``chosen`` is L once chosen.

    Under a FILTER clause (``AVG(n) FILTER (WHERE n > 1)``) the bound is the value's where ``condition``
    holds: chosen from those people only, since they are the values the aggregate reads — chosen over
    everyone, the bound would fit the values the clause leaves out and clamp the ones it keeps."""

    column: str
    unit: float  # a per-person count: 1; a per-person sum: the largest |value| one row can add
    cap: int
    sign: int
    chosen: int | None = None
    condition: exp.Expression | None = None  # unqualified, checked like any condition on private values

    @property
    def key(self) -> str:
        """What the bound is of, and the name the aggregate inputs it bounds carry (``value_bound``):
        ``n``, or ``n FILTER (WHERE n > 1)``."""
        if self.condition is None:
            return self.column
        return f"{self.column} FILTER (WHERE {self.condition.sql(dialect='postgres')})"

    @property
    def bounds(self) -> tuple[float, float]:
        """The clamping range; before the choice, the widest the choice could give (what ``veil explain``
        prices, as the sensitivity can be at most that)."""
        magnitude = self.unit * (self.chosen if self.chosen is not None else self.cap)
        return (0.0 if self.sign > 0 else -magnitude, 0.0 if self.sign < 0 else magnitude)

    def describe(self) -> str:
        """``n in [0, 24] chosen with DP`` once chosen; what it may be before (``veil explain``)."""
        low, high = self.bounds
        if self.chosen is None:
            return f"{self.key} in [{low:g}, {high:g}] at most, chosen with DP when the query runs"
        return f"{self.key} in [{low:g}, {high:g}] chosen with DP"

    def with_choice(self, chosen: int) -> ValueBound:
        return dataclasses.replace(self, chosen=chosen)


@dataclass(frozen=True)
class DerivedSource:
    """The SQL that produces the rows (emitted as a subquery), and the policy of the table(s) it reads,
    by which its own WHERE and aggregate arguments are made error-free. ``value_bounds``: for each
    per-person value whose bounds the policy cannot know, how to choose them with DP."""

    select: exp.Select
    table: TablePolicy
    lookup_keys: tuple[tuple[str, str], ...] = ()  # (public table, key column) the planner checks unique
    value_bounds: tuple[ValueBound, ...] = ()

    def value_bound(self, column: str) -> ValueBound | None:
        return next((bound for bound in self.value_bounds if bound.column == column), None)
