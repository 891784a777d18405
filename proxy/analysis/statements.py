"""Classify each parsed statement into what the session must do with it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp

from proxy.analysis.checks import check_constant_expression, check_public_query
from proxy.analysis.complexity import check_complexity
from proxy.analysis.copy import CopyStatement, copy_statement
from proxy.analysis.output_names import output_name
from proxy.analysis.reconstruct import ReconstructQuery, is_reconstruct, reconstruct_query
from proxy.analysis.refusals import refuse, refuse_construct
from proxy.analysis.set_operations import UnionModifiers, union_modifiers, union_parts
from proxy.analysis.shape import QueryShape, pinned, referenced_tables
from proxy.analysis.top_k import top_k_query_shape
from proxy.analysis.ttest import TTestQuery, is_ttest, ttest_query
from proxy.analysis.with_clauses import inline_with
from proxy.catalog.names import (
    calls_catalog_function,
    catalog_schema,
    is_catalog_table_function,
    relations,
)
from proxy.config import DatasetPolicy
from proxy.errors import PolicyViolationError, QuerySyntaxError, UnsupportedQueryError


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
    to_savepoint: bool = False  # ROLLBACK TO SAVEPOINT: its tag is ROLLBACK, but the block goes on

    @property
    def transition(self) -> str:
        """What the session's transaction status follows (the tag alone cannot tell the rollbacks apart)."""
        return "ROLLBACK TO SAVEPOINT" if self.to_savepoint else self.tag


@dataclass(frozen=True)
class DiscardStatement:
    """DISCARD ALL | PLANS | SEQUENCES | TEMP (pools send DISCARD ALL when a connection is handed back):
    ALL resets the session (its settings and prepared statements); Veil has nothing else to discard."""

    what: str  # "ALL", "PLANS", "SEQUENCES" or "TEMP"


@dataclass(frozen=True)
class DeallocateStatement:
    """DEALLOCATE [PREPARE] name | ALL: the session drops one prepared statement (``name``) or all (None)."""

    name: str | None


@dataclass(frozen=True)
class ConstantQuery:
    tree: exp.Select
    output_names: tuple[str, ...]


@dataclass(frozen=True)
class PublicQuery:
    """Reads only public lookup tables: answered exactly, at no privacy cost."""

    tree: exp.Query


@dataclass(frozen=True)
class PrivateQuery:
    shape: QueryShape


@dataclass(frozen=True)
class UnionQuery:
    """``q1 UNION ALL q2 …`` of aggregate queries on private data (analysis/set_operations.py): each part
    answered and priced on its own share of the statement's ε, the rows one after another, then the
    statement's ORDER BY / LIMIT / OFFSET over them. Column names are the first part's."""

    parts: tuple[QueryShape, ...]
    modifiers: UnionModifiers

    @property
    def output_names(self) -> tuple[str, ...]:
        return self.parts[0].output_names


@dataclass(frozen=True)
class TTestStatement:
    """``SELECT veil_ttest(value, predicate) FROM table …`` (proxy/analysis/ttest.py)."""

    query: TTestQuery


@dataclass(frozen=True)
class ReconstructStatement:
    """``SELECT * FROM veil_reconstruct('release', …)`` (proxy/analysis/reconstruct.py): free, public."""

    query: ReconstructQuery


@dataclass(frozen=True)
class BudgetQuery:
    """Reads the ``veil.budget`` view: the analyst's own budget, from the ledger — no data, no
    cost. ``tree`` names the view ``BUDGET_TABLE``, as the sandbox that answers it registers it."""

    tree: exp.Select


@dataclass(frozen=True)
class CatalogQuery:
    """Reads only the system catalog (``pg_catalog``, ``information_schema``) or calls catalog
    functions (``pg_catalog.version()``, ``format_type(…)``): answered from the schema-only shadow
    database, which holds none of the dataset's rows — no data, no cost."""

    tree: exp.Query


BUDGET_TABLE = "veil_budget"


Statement = (
    CopyStatement
    | SetStatement
    | ShowStatement
    | ResetStatement
    | TransactionStatement
    | DiscardStatement
    | DeallocateStatement
    | ConstantQuery
    | PublicQuery
    | PrivateQuery
    | UnionQuery
    | TTestStatement
    | ReconstructStatement
    | BudgetQuery
    | CatalogQuery
)


def classify_transaction(tree: exp.Expression) -> TransactionStatement | None:
    if isinstance(tree, exp.Transaction):
        return TransactionStatement("BEGIN")
    if isinstance(tree, exp.Commit):
        return TransactionStatement("COMMIT")
    if isinstance(tree, exp.Rollback):
        return TransactionStatement("ROLLBACK", to_savepoint=tree.args.get("savepoint") is not None)
    if isinstance(tree, exp.Command) and str(tree.this).upper() in ("SAVEPOINT", "RELEASE"):
        return TransactionStatement(str(tree.this).upper())  # nothing to undo: a name is all they need
    return None


def classify(tree: exp.Expression, dataset: DatasetPolicy) -> Statement:
    if (transaction := classify_transaction(tree)) is not None:
        return transaction
    if isinstance(tree, exp.Set):
        return _set_statement(tree)
    if isinstance(tree, exp.Command):
        return _command(tree)
    if isinstance(tree, exp.Copy):
        return copy_statement(tree, dataset)
    if is_reconstruct(tree):
        assert isinstance(tree, exp.Select)
        return ReconstructStatement(reconstruct_query(tree, dataset))
    if any(_is_catalog_relation(table, dataset) for table in relations(tree)) or any(
        is_catalog_table_function(table) for table in tree.find_all(exp.Table)
    ):
        return _catalog_query(tree, dataset)
    if tables := referenced_tables(tree):
        if any(_is_budget_view(table) for table in tables):
            return _budget_query(tree, tables)
        tree = inline_with(tree, max_nodes=dataset.limits.max_nodes)
        tables = referenced_tables(tree)
        if not isinstance(tree, exp.Select | exp.SetOperation):
            _refuse_non_select(tree, dataset)
        if all((policy := dataset.table(table.name)) is not None and policy.public for table in tables):
            check_public_query(tree)
            return PublicQuery(tree)
        check_complexity(tree, dataset.limits)
        _refuse_sampling(tree)
        if isinstance(tree, exp.SetOperation):
            return _union_query(tree, dataset)
        if is_ttest(tree):
            assert isinstance(tree, exp.Select)
            return TTestStatement(ttest_query(tree, dataset))
        return PrivateQuery(pinned(top_k_query_shape(tree, dataset)))
    if isinstance(tree, exp.Select):
        if calls_catalog_function(tree):
            return CatalogQuery(tree)
        check_constant_expression(tree)
        return ConstantQuery(tree, tuple(output_name(item) for item in tree.expressions))
    raise UnsupportedQueryError(f"{tree.key.upper()} statements are not supported", hint="Veil is read-only")


def _union_query(tree: exp.SetOperation, dataset: DatasetPolicy) -> UnionQuery:
    """Each part must be an aggregate query on private data, all with as many columns."""
    shapes = []
    for part in union_parts(tree):
        tables = referenced_tables(part)
        if not tables or all((p := dataset.table(t.name)) is not None and p.public for t in tables):
            raise refuse_construct("UNION ALL part")
        if is_ttest(part):
            raise refuse_construct("UNION ALL part")
        shapes.append(top_k_query_shape(part, dataset))
    if len({len(shape.output_names) for shape in shapes}) > 1:
        raise QuerySyntaxError("each UNION query must have the same number of columns")
    assert isinstance(tree, exp.Union)  # union_parts refused INTERSECT and EXCEPT
    return UnionQuery(tuple(shapes), union_modifiers(tree, shapes[0].output_names))


def _refuse_sampling(tree: exp.Expression) -> None:
    """``TABLESAMPLE`` / ``USING SAMPLE`` over private data: refused rather than dropped. An answer
    computed from the whole table while the analyst believes it sampled would be wrong, and pricing a
    sample's privacy amplification needs the sampling to be Veil's own (secret randomness), not the
    engine's (a REPEATABLE seed makes it a deterministic filter)."""
    if tree.find(exp.TableSample) is not None:
        raise UnsupportedQueryError(
            "TABLESAMPLE and USING SAMPLE are not supported on private tables",
            detail="the noise already hides every person; a sample would only add error",
            hint="remove the sampling clause: the answer over the whole table is cheaper in accuracy "
            "for the same ε",
        )


def _is_catalog_relation(table: exp.Table, dataset: DatasetPolicy) -> bool:
    """A dataset table keeps its name even if it starts with ``pg_``; any other ``pg_*`` is a catalog."""
    declared = not table.db and dataset.table(table.name) is not None
    return catalog_schema(table) is not None and not declared


_WRITES = (exp.Into, exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Create, exp.Drop, exp.Alter)


def _catalog_query(tree: exp.Expression, dataset: DatasetPolicy) -> CatalogQuery:
    """Catalog relations only: a catalog query joined with a dataset table could not be answered from
    the schema alone, and must not reach the rows either."""
    if not isinstance(tree, exp.Query) or tree.find(*_WRITES) is not None:
        raise UnsupportedQueryError(
            "only SELECT statements may read the catalog", hint="Veil's catalog is read-only"
        )
    others = [table for table in relations(tree) if not _is_catalog_relation(table, dataset)]
    if others:
        raise PolicyViolationError(
            f'catalog relations cannot be read together with table "{others[0].name}"',
            detail="catalog queries are answered from the schema alone, never from the dataset's rows",
            hint="query the catalog and the dataset's tables in separate statements",
        )
    return CatalogQuery(tree)


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
    """A statement touching a private table is a privacy refusal (42501); one touching only public lookup
    tables or nothing is simply not supported, since Veil is read-only (0A000)."""
    policies = [dataset.table(table.name) for table in referenced_tables(tree)]
    if any(policy is not None and not policy.public for policy in policies):
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
    if isinstance(value, exp.Boolean):
        return SetStatement(name, "true" if value.this else "false")
    if isinstance(value, exp.Column | exp.Var | exp.Identifier):  # a word: its text, as PostgreSQL keeps it
        return SetStatement(name, value.name)  # (sqlglot has already unquoted "x y"; """x""" stays "x")
    if isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal):
        return SetStatement(name, f"-{value.this.this}")
    if isinstance(value, exp.ByteString):  # E'…': the tokenizer has already read its escapes
        return SetStatement(name, value.this)
    if isinstance(value, exp.UnicodeString):
        return SetStatement(name, _unicode_text(value))
    return SetStatement(name, value.sql(dialect="postgres").strip("'"))


def _unicode_text(value: exp.UnicodeString) -> str:
    """The text of ``U&'d\\0061t' [UESCAPE '!']`` as PostgreSQL reads it: ``\\XXXX`` and ``\\+XXXXXX`` are
    code points (a surrogate pair is one), a doubled escape character is the character itself."""
    escape = value.args["escape"].name if isinstance(value.args.get("escape"), exp.Literal) else "\\"
    quoted = re.escape(escape)
    pattern = re.compile(rf"{quoted}(?:({quoted})|\+([0-9A-Fa-f]{{6}})|([0-9A-Fa-f]{{4}}))")

    def read(match: re.Match[str]) -> str:
        return escape if match.group(1) else chr(int(match.group(2) or match.group(3), 16))

    try:
        return pattern.sub(read, value.this).encode("utf-16", "surrogatepass").decode("utf-16")
    except ValueError:  # above U+10FFFF, or half a surrogate pair
        raise QuerySyntaxError("invalid Unicode escape value") from None


def _command(tree: exp.Command) -> Statement:
    verb = str(tree.this).upper()
    argument = (
        tree.expression.name if isinstance(tree.expression, exp.Literal) else str(tree.expression or "")
    )
    argument = argument.strip()
    spelled = _SHOW_SPELLINGS.get(" ".join(argument.upper().split()))
    if verb == "SHOW" and spelled is not None:
        return ShowStatement(spelled)
    if verb == "SHOW" and argument:
        return ShowStatement(argument.strip('"'))
    if verb == "RESET" and argument:
        return ResetStatement(None if argument.upper() == "ALL" else argument.strip('"'))
    words = argument.split()
    if verb == "SET" and [w.upper() for w in words[-3:-1]] == ["TIME", "ZONE"]:
        return SetStatement("TimeZone", words[-1].strip("'"))
    if verb == "DISCARD" and len(words) == 1 and words[0].upper() in _DISCARDABLE:
        return DiscardStatement(_DISCARDABLE[words[0].upper()])
    if verb == "DEALLOCATE":
        return _deallocate(words)
    raise UnsupportedQueryError(f"{verb} statements are not supported")


# PostgreSQL's other spellings of settings: SQLAlchemy sends the first, pgcli the second at start-up.
_SHOW_SPELLINGS = {"TRANSACTION ISOLATION LEVEL": "transaction_isolation", "TIME ZONE": "TimeZone"}
_DISCARDABLE = {"ALL": "ALL", "PLANS": "PLANS", "SEQUENCES": "SEQUENCES", "TEMP": "TEMP", "TEMPORARY": "TEMP"}


def _deallocate(words: list[str]) -> DeallocateStatement:
    if words and words[0].upper() == "PREPARE":
        words = words[1:]
    if len(words) != 1:
        raise QuerySyntaxError("syntax error in DEALLOCATE", hint="DEALLOCATE name, or DEALLOCATE ALL")
    name = words[0]
    if name.upper() == "ALL":
        return DeallocateStatement(None)
    # an unquoted name folds to lower case, as PostgreSQL folds identifiers
    return DeallocateStatement(name[1:-1] if name.startswith('"') and name.endswith('"') else name.lower())
