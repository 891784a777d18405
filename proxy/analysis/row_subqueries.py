"""Subqueries in FROM that only filter and rename rows are folded into the query that reads them.

``SELECT r, COUNT(*) FROM (SELECT region AS r, cost FROM visits WHERE age > 30) AS v WHERE cost > 10 GROUP BY r``
reads the same rows as ``SELECT v.region AS r, COUNT(*) FROM visits AS v WHERE v.age > 30 AND v.cost > 10
GROUP BY v.region``, and that is the query Veil analyses and prices: a row-level subquery changes which
rows and columns are read, never how many rows one person has, so folding it keeps every bound. A
WITH query that filters a table (analysis/with_clauses.py) is such a subquery once inlined.

A subquery is *row-level* when it has no GROUP BY, HAVING, DISTINCT or aggregate. It may read a table, a
per-person subquery (analysis/per_person.py) or, when the outer query joins nothing else, a join. Its
ORDER BY is dropped (it does not change the rows); a LIMIT or OFFSET is refused — which rows it keeps
depends on the others. Column references follow PostgreSQL: an outer reference names one of the
subquery's output columns (a ``*`` passes every column of what it reads), and an unknown one is 42703.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.analysis.output_names import output_name
from proxy.analysis.refusals import refuse_construct
from proxy.errors import AmbiguousColumnError, UnknownColumnError


def fold_row_subqueries(tree: exp.Expression) -> exp.Expression:
    """A copy of ``tree`` with every row-level subquery of a FROM folded (``tree`` if it has none)."""
    if not isinstance(tree, exp.Select) or tree.find(exp.Subquery) is None:
        return tree
    return _fold(tree.copy())


def _from(select: exp.Select) -> exp.From | None:
    return select.args.get("from_")


def _fold(select: exp.Select) -> exp.Select:
    """Innermost first, so that a chain of filters collapses onto the table."""
    source = _from(select)
    if source is None or not isinstance(source.this, exp.Subquery):
        return select
    subquery = source.this
    if not isinstance(subquery.this, exp.Select):
        return select
    inner = _fold(subquery.this)
    subquery.set("this", inner)
    if not _row_level(inner):
        return select
    return _merge(select, subquery, inner)


def _row_level(inner: exp.Select) -> bool:
    """No grouping, no aggregate: each output row is one input row. A window function is refused here,
    as it would be anywhere on private data; so is a WINDOW clause, whose items are Window nodes too."""
    if any(isinstance(node, exp.Window) for node in inner.walk()):
        raise refuse_construct("window function")
    if any(inner.args.get(clause) for clause in ("group", "having", "distinct", "qualify")):
        return False
    return not any(isinstance(node, exp.AggFunc) for item in inner.expressions for node in item.walk())


class _Outputs:
    """What an outer reference to the subquery's columns stands for."""

    def __init__(self, inner: exp.Select) -> None:
        self.expressions: dict[str, exp.Expression] = {}
        self.ambiguous: set[str] = set()
        self.star = False
        for item in inner.expressions:
            if item.is_star:
                self.star = True
                continue
            name = output_name(item).lower()
            if name in self.expressions:
                self.ambiguous.add(name)
            self.expressions[name] = item.unalias()


def _merge(outer: exp.Select, subquery: exp.Subquery, inner: exp.Select) -> exp.Select:
    if inner.args.get("limit") or inner.args.get("offset"):
        fetch = isinstance(inner.args.get("limit"), exp.Fetch)
        raise refuse_construct("FETCH" if fetch else "subquery LIMIT")
    outer_joins = list(outer.args.get("joins") or [])
    inner_joins = list(inner.args.get("joins") or [])
    if outer_joins and inner_joins:
        raise refuse_construct("joined subquery")
    inner_from = _from(inner)
    if inner_from is None:
        return outer  # a subquery without FROM reads no table: left for the classification to refuse
    name = subquery.alias_or_name or inner_from.this.alias_or_name
    relation = inner_from.this.copy()
    if not inner_joins:  # one relation: it takes the subquery's name, so outer qualifiers stay valid
        inner = _requalified(inner, name)
        relation.set("alias", exp.TableAlias(this=exp.to_identifier(name)))
    substitute = _Substitution(
        _Outputs(inner),
        alias=subquery.alias_or_name.lower(),
        outer=outer,
        joined=bool(outer_joins),
        relations=len(inner_joins) + 1,
    )
    merged = outer.copy()
    for key, value in list(merged.args.items()):
        if key in ("from_", "expressions"):
            continue
        if isinstance(value, exp.Expression):
            merged.set(key, substitute.clause(key, value))
        elif isinstance(value, list):
            merged.set(
                key, [substitute.clause(key, v) if isinstance(v, exp.Expression) else v for v in value]
            )
    merged.set("expressions", [substitute.item(item) for item in outer.expressions])
    merged.set("from_", exp.From(this=relation))
    if inner_joins:
        merged.set("joins", inner_joins)
    inner_where = inner.args.get("where")
    if inner_where is not None:
        outer_where = merged.args.get("where")
        condition = inner_where.this if outer_where is None else exp.and_(inner_where.this, outer_where.this)
        merged.set("where", exp.Where(this=condition))
    return merged


def _requalified(inner: exp.Select, name: str) -> exp.Select:
    """Every column of a one-relation SELECT qualified with the relation's new name."""

    def qualify(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.is_star:
            return exp.column(node.name, table=name, quoted=node.this.quoted)
        return node

    requalified = inner.copy()
    for key in ("expressions", "where"):
        value = requalified.args.get(key)
        if isinstance(value, list):
            requalified.set(key, [v.transform(qualify) for v in value])
        elif value is not None:
            requalified.set(key, value.transform(qualify))
    return requalified


class _Substitution:
    """Outer column references → the subquery's expressions, by PostgreSQL's name resolution: in ORDER
    BY an output alias of the outer query wins over an input column, elsewhere the input column wins."""

    def __init__(
        self, outputs: _Outputs, *, alias: str, outer: exp.Select, joined: bool, relations: int
    ) -> None:
        self.outputs, self.alias, self.joined, self.relations = outputs, alias, joined, relations
        self.outer_aliases = {item.alias.lower() for item in outer.expressions if isinstance(item, exp.Alias)}

    def item(self, item: exp.Expression) -> exp.Expression:
        """A select item keeps the name it had: ``SELECT r`` stays named r when r was ``region AS r``."""
        replaced = self.clause("expressions", item)
        if isinstance(item, exp.Alias) or item.is_star or output_name(replaced) == output_name(item):
            return replaced
        return exp.alias_(replaced, output_name(item))

    def clause(self, key: str, expression: exp.Expression) -> exp.Expression:
        return expression.transform(lambda node: self._column(node, in_order=key == "order"))

    def _column(self, node: exp.Expression, *, in_order: bool) -> exp.Expression:
        if not isinstance(node, exp.Column) or node.is_star:
            return node
        qualifier = node.table.lower()
        if qualifier and qualifier != self.alias:
            return node  # another table's column
        name = node.name.lower()
        if (
            not qualifier
            and name in self.outer_aliases
            and (in_order or name not in self.outputs.expressions)
        ):
            return node  # the outer query's own output column
        if name in self.outputs.ambiguous:
            raise AmbiguousColumnError(f'column reference "{node.name}" is ambiguous')
        if name in self.outputs.expressions:
            return _parenthesized(self.outputs.expressions[name].copy())
        if self.outputs.star:  # a column of what the subquery reads; its join's tables are not named s
            return node if self.relations == 1 else exp.column(node.name, quoted=node.this.quoted)
        if qualifier or not self.joined:
            raise UnknownColumnError(f'column "{node.sql(dialect="postgres")}" does not exist')
        return node


def _parenthesized(expression: exp.Expression) -> exp.Expression:
    if isinstance(expression, exp.Binary | exp.Unary) and not isinstance(expression, exp.Paren):
        return exp.Paren(this=expression)
    return expression
