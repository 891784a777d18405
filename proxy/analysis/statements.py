"""Classify each parsed statement into what the session must do with it."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from proxy.analysis.checks import check_constant_expression, check_public_query
from proxy.analysis.output_names import output_name
from proxy.analysis.refusals import refuse
from proxy.analysis.shape import QueryShape, query_shape, referenced_tables
from proxy.config import DatasetPolicy
from proxy.errors import UnsupportedQueryError


@dataclass(frozen=True)
class SetStatement:
    name: str
    value: str | None  # None means DEFAULT, i.e. reset


@dataclass(frozen=True)
class ShowStatement:
    name: str


@dataclass(frozen=True)
class ResetStatement:
    name: str | None  # None means RESET ALL


@dataclass(frozen=True)
class TransactionStatement:
    """BEGIN/COMMIT/ROLLBACK: accepted as no-ops — Veil is read-only, so there is nothing to undo."""

    tag: str


@dataclass(frozen=True)
class ConstantQuery:
    tree: exp.Select
    output_names: tuple[str, ...]


@dataclass(frozen=True)
class PublicQuery:
    """Reads only public lookup tables: answered exactly, at no privacy cost."""

    tree: exp.Select


@dataclass(frozen=True)
class PrivateQuery:
    shape: QueryShape


@dataclass(frozen=True)
class BudgetQuery:
    """Reads the ``veil.budget`` view: the analyst's own budget, from the ledger — no data, no
    cost. ``tree`` names the view ``BUDGET_TABLE``, as the sandbox that answers it registers it."""

    tree: exp.Select


BUDGET_TABLE = "veil_budget"


Statement = (
    SetStatement
    | ShowStatement
    | ResetStatement
    | TransactionStatement
    | ConstantQuery
    | PublicQuery
    | PrivateQuery
    | BudgetQuery
)


def classify_transaction(tree: exp.Expression) -> TransactionStatement | None:
    if isinstance(tree, exp.Transaction):
        return TransactionStatement("BEGIN")
    if isinstance(tree, exp.Commit):
        return TransactionStatement("COMMIT")
    if isinstance(tree, exp.Rollback):
        return TransactionStatement("ROLLBACK")
    return None


def classify(tree: exp.Expression, dataset: DatasetPolicy) -> Statement:
    if (transaction := classify_transaction(tree)) is not None:
        return transaction
    if isinstance(tree, exp.Set):
        return _set_statement(tree)
    if isinstance(tree, exp.Command):
        return _command(tree)
    if tables := referenced_tables(tree):
        if any(_is_budget_view(table) for table in tables):
            return _budget_query(tree, tables)
        if not isinstance(tree, exp.Select):
            _refuse_non_select(tree, dataset)
        if all((policy := dataset.table(table.name)) is not None and policy.public for table in tables):
            check_public_query(tree)
            return PublicQuery(tree)
        return PrivateQuery(query_shape(tree, dataset))
    if isinstance(tree, exp.Select):
        check_constant_expression(tree)
        return ConstantQuery(tree, tuple(output_name(item) for item in tree.expressions))
    raise UnsupportedQueryError(f"{tree.key.upper()} statements are not supported", hint="Veil is read-only")


def _is_budget_view(table: exp.Table) -> bool:
    return table.db.lower() == "veil" and table.name.lower() == "budget" and not table.catalog


def _budget_query(tree: exp.Expression, tables: list[exp.Table]) -> BudgetQuery:
    if not isinstance(tree, exp.Select) or not all(_is_budget_view(table) for table in tables):
        raise UnsupportedQueryError(
            "veil.budget can only be read on its own, with SELECT",
            hint="SELECT * FROM veil.budget — or SHOW veil.budget",
        )
    check_public_query(tree)
    renamed = tree.copy()
    for table in referenced_tables(renamed):
        table.set("db", None)
        table.set("this", exp.to_identifier(BUDGET_TABLE))
    return BudgetQuery(renamed)


def _refuse_non_select(tree: exp.Expression, dataset: DatasetPolicy) -> None:
    if any(dataset.table(table.name) for table in referenced_tables(tree)):
        raise refuse("only SELECT statements may read private tables")
    raise UnsupportedQueryError(f"{tree.key.upper()} statements are not supported", hint="Veil is read-only")


def _setting_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Column):
        return ".".join(part.name for part in node.parts)
    return node.name


def _set_statement(tree: exp.Set) -> SetStatement:
    items = tree.expressions
    if len(items) != 1 or not isinstance(items[0].this, exp.EQ):
        raise UnsupportedQueryError("this form of SET is not supported", hint="use SET name = value")
    assignment = items[0].this
    name = _setting_name(assignment.this)
    value = assignment.expression
    if isinstance(value, exp.Var | exp.Column) and value.name.upper() == "DEFAULT":
        return SetStatement(name, None)
    if isinstance(value, exp.Literal):
        return SetStatement(name, str(value.this))
    if isinstance(value, exp.Column | exp.Var | exp.Identifier | exp.Boolean):
        return SetStatement(name, value.sql(dialect="postgres").strip('"'))
    if isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal):
        return SetStatement(name, f"-{value.this.this}")
    return SetStatement(name, value.sql(dialect="postgres").strip("'"))


def _command(tree: exp.Command) -> Statement:
    verb = str(tree.this).upper()
    argument = (
        tree.expression.name if isinstance(tree.expression, exp.Literal) else str(tree.expression or "")
    )
    argument = argument.strip()
    if verb == "SHOW" and argument:
        return ShowStatement(argument.strip('"'))
    if verb == "RESET" and argument:
        return ResetStatement(None if argument.upper() == "ALL" else argument.strip('"'))
    words = argument.split()
    if verb == "SET" and [w.upper() for w in words[-3:-1]] == ["TIME", "ZONE"]:
        return SetStatement("TimeZone", words[-1].strip("'"))
    raise UnsupportedQueryError(f"{verb} statements are not supported")
