"""A FROM clause that is not a plain table but is still private data of known shape."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from proxy.config import TablePolicy


@dataclass(frozen=True)
class DerivedSource:
    """The SQL that produces the rows (emitted as a subquery), and the policy of the table(s) it reads,
    by which its own WHERE is made error-free."""

    select: exp.Select
    table: TablePolicy
    lookup_keys: tuple[tuple[str, str], ...] = ()  # (public table, key column) the planner checks unique
