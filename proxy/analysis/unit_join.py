"""Joins of private tables on the privacy unit: ``visits v JOIN patients p ON v.patient_id = p.patient_id``.

Rows of different people never meet in such a join, so its result is again a private table with the
same privacy unit: one person's joined rows are the product of their rows in each table, at most
``L_1 · L_2 · …`` of them, and bounding then scales each person to that many rows. Columns are renamed
``<alias>__<column>`` so both tables' ``region`` can coexist; the query's ``v.region`` and an unambiguous
bare ``region`` resolve to them (an ambiguous bare name is refused, as PostgreSQL refuses it).
"""

from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType

from sqlglot import exp

from proxy.analysis.derived import DerivedSource
from proxy.config import TablePolicy
from proxy.errors import PolicyViolationError

JOIN_PATTERN = "FROM a JOIN b ON a.<privacy unit> = b.<privacy unit> (or JOIN b USING (<privacy unit>))"


@dataclasses.dataclass(frozen=True)
class JoinedTables:
    """The joined table's policy, and each alias's own table, for resolving qualified columns."""

    table: TablePolicy
    aliases: dict[str, TablePolicy]
    source: DerivedSource


def refuse(message: str) -> PolicyViolationError:
    return PolicyViolationError(
        message, hint=f"private tables can be joined on their privacy unit: {JOIN_PATTERN}"
    )


def joined_name(alias: str, column: str) -> str:
    return f"{alias}__{column}"


def unit_join(select: exp.Select, first: exp.Table, tables: dict[str, TablePolicy]) -> JoinedTables:
    """``tables`` maps each alias, in FROM/JOIN order, to its policy (already checked to exist)."""
    aliases = list(tables)
    for policy in tables.values():
        if policy.privacy_unit is None:
            raise refuse(f'table "{policy.name}" has no privacy-unit column to join on')
        if policy.auto_contributions:
            raise refuse(
                f'table "{policy.name}" chooses max_contributions per query ("auto"); joins need fixed bounds'
            )
    for index, join in enumerate(select.args.get("joins") or []):
        _check_join(join, aliases[: index + 1], aliases[index + 1], tables)
    columns = {
        joined_name(alias, column.name): dataclasses.replace(column, name=joined_name(alias, column.name))
        for alias, policy in tables.items()
        for column in policy.columns.values()
    }
    first_alias = aliases[0]
    unit = joined_name(first_alias, tables[first_alias].privacy_unit or "")
    bound = math.prod(policy.max_contributions for policy in tables.values())
    table = TablePolicy("_dp_joined", unit, bound, MappingProxyType(columns))
    return JoinedTables(table, tables, DerivedSource(_join_select(select, first, tables), table))


def _check_join(join: exp.Join, earlier: list[str], alias: str, tables: dict[str, TablePolicy]) -> None:
    if join.args.get("side") or join.args.get("kind") not in (None, "INNER"):
        raise refuse("only inner joins of private tables are supported")
    policy = tables[alias]
    using = join.args.get("using")
    if using:
        names = [identifier.name.lower() for identifier in using]
        if names != [policy.privacy_unit] or any(
            tables[a].privacy_unit != policy.privacy_unit for a in earlier
        ):
            raise refuse("USING must name exactly the privacy unit of both tables")
        return
    condition = join.args.get("on")
    if not (
        isinstance(condition, exp.EQ)
        and all(isinstance(side, exp.Column) for side in condition.args.values())
    ):
        raise refuse("the join condition must be one equality of the two tables' privacy units")
    sides = {(side.table.lower(), side.name.lower()) for side in (condition.this, condition.expression)}
    expected_right = (alias, policy.privacy_unit)
    lefts = {(a, tables[a].privacy_unit) for a in earlier}
    if expected_right not in sides or not (sides - {expected_right}) <= lefts or len(sides) != 2:
        raise refuse("the join condition must be one equality of the two tables' privacy units")


def joined_rows(first: exp.Table, tables: dict[str, TablePolicy], joins: list[exp.Join]) -> exp.Select:
    """``SELECT v.cost AS v__cost, … FROM visits AS v JOIN …``: every column of every table, renamed."""
    items = [
        exp.column(column.name, table=alias).as_(joined_name(alias, column.name))
        for alias, policy in tables.items()
        for column in policy.columns.values()
    ]
    query = exp.select(*items).from_(exp.to_table(first.name).as_(first.alias_or_name.lower()))
    for join in joins:
        query = query.join(join)
    return query


def _join_select(select: exp.Select, first: exp.Table, tables: dict[str, TablePolicy]) -> exp.Select:
    return joined_rows(first, tables, [_rebuilt(join) for join in select.args.get("joins") or []])


def _rebuilt(join: exp.Join) -> exp.Join:
    """A fresh join from the checked parts only, so nothing else of the analyst's node (a NATURAL
    method, a sample clause) reaches the engine."""
    table = join.this
    target = exp.to_table(table.name).as_(table.alias_or_name.lower())
    using = join.args.get("using")
    if using:
        return exp.Join(this=target, using=[exp.to_identifier(identifier.name) for identifier in using])
    condition = join.args["on"]
    sides = [exp.column(side.name, table=side.table) for side in (condition.this, condition.expression)]
    return exp.Join(this=target, on=exp.EQ(this=sides[0], expression=sides[1]))
