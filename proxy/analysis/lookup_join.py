"""Joins of a private table with public lookup tables on their declared unique key:
``visits v JOIN diagnosis_codes d ON v.diagnosis = d.code``.

Each private row meets at most one row of a lookup table (the key is unique, which the planner checks in
the engine before the query runs — the lookup table is public), so the join changes no person's number
of rows and every bound of the private table carries over. The lookup table's columns are public: they
can be grouped by, with their key domain read from the lookup table itself.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

from sqlglot import exp

from proxy.analysis.derived import DerivedSource
from proxy.analysis.unit_join import JoinedTables, joined_name, joined_rows
from proxy.config import TablePolicy
from proxy.errors import PolicyViolationError

PATTERN = "FROM private_table p JOIN lookup_table l ON p.column = l.<declared key>"


def refuse(message: str) -> PolicyViolationError:
    return PolicyViolationError(message, hint=f"join public lookup tables on their key: {PATTERN}")


def lookup_join(select: exp.Select, first: exp.Table, tables: dict[str, TablePolicy]) -> JoinedTables:
    aliases = list(tables)
    private = tables[aliases[0]]
    if private.public or any(not tables[alias].public for alias in aliases[1:]):
        raise refuse("a lookup join reads one private table first, then public lookup tables")
    lookups: list[tuple[str, str]] = []
    for index, join in enumerate(select.args.get("joins") or []):
        alias = aliases[index + 1]
        lookups.append(_check_join(join, alias, aliases[: index + 1], tables))
    columns = {
        joined_name(alias, column.name): dataclasses.replace(
            column, name=joined_name(alias, column.name), public=column.public or policy.public
        )
        for alias, policy in tables.items()
        for column in policy.columns.values()
    }
    unit = joined_name(aliases[0], private.privacy_unit) if private.privacy_unit else None
    table = TablePolicy(
        "_dp_joined",
        unit,
        private.max_contributions,
        MappingProxyType(columns),
        auto_contributions=private.auto_contributions,
    )
    source = DerivedSource(_select(first, select, tables), table, tuple(lookups))
    return JoinedTables(table, tables, source)


def _check_join(
    join: exp.Join, alias: str, earlier: list[str], tables: dict[str, TablePolicy]
) -> tuple[str, str]:
    if join.args.get("kind") not in (None, "INNER", "OUTER") or join.args.get("side") not in (None, "LEFT"):
        raise refuse("only inner and left joins with lookup tables are supported")
    policy = tables[alias]
    if policy.key is None:
        raise refuse(f'lookup table "{policy.name}" declares no unique key (key = "…" in the policy)')
    condition = join.args.get("on")
    if not (
        isinstance(condition, exp.EQ)
        and all(isinstance(side, exp.Column) for side in condition.args.values())
    ):
        raise refuse("the join condition must be one equality with the lookup table's key")
    sides = [(side.table.lower(), side.name.lower()) for side in (condition.this, condition.expression)]
    if (alias, policy.key) not in sides:
        raise refuse(f'the join must use the key "{alias}.{policy.key}" of the lookup table')
    (other_alias, other_column) = next(side for side in sides if side != (alias, policy.key))
    if other_alias not in earlier or tables[other_alias].column(other_column) is None:
        raise refuse("the join must match a column of a table joined before it")
    return policy.name, policy.key


def _select(first: exp.Table, select: exp.Select, tables: dict[str, TablePolicy]) -> exp.Select:
    return joined_rows(first, tables, [_rebuilt(join) for join in select.args.get("joins") or []])


def _rebuilt(join: exp.Join) -> exp.Join:
    """A fresh join from the checked parts only (table, key equality, side)."""
    table, condition = join.this, join.args["on"]
    sides = [exp.column(side.name, table=side.table) for side in (condition.this, condition.expression)]
    return exp.Join(
        this=exp.to_table(table.name).as_(table.alias_or_name.lower()),
        on=exp.EQ(this=sides[0], expression=sides[1]),
        side=join.args.get("side"),
    )
