"""A catalog query as PostgreSQL clients write it → the same query on the shadow database (DuckDB).

One pass per PostgreSQL habit that DuckDB does not share, applied in order by :func:`shadow_query`:

* catalog relations and qualified columns move to the shadow's schemas (``pg_catalog.pg_class`` →
  ``veil_pg_catalog.pg_class``); ``pg_catalog.`` before a function is dropped;
* the session's identity becomes literals (``current_user``, ``version()``, ``current_schemas(true)``);
* ``OPERATOR(pg_catalog.~)`` becomes the operator, ``COLLATE pg_catalog.default`` disappears;
* casts to ``regclass``/``regtype``/``regnamespace``/``regrole`` become lookups: a string literal turns
  into the object's OID (``'pg_class'::regclass``), an OID into its name (``c.oid::regclass``), and
  any of them into the name where it is selected, as PostgreSQL prints it;
  ``oid``, ``name``, ``"char"``, ``int2vector`` … become the DuckDB types the shadow stores them as;
* array literals in PostgreSQL's text form (``'{0}'``) become DuckDB lists;
* PostgreSQL catalog functions call the shadow's macros. A relation or function the shadow does not have
  raises :class:`UnansweredCatalogQuery`, and the caller answers with an empty result instead.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from proxy.catalog.names import (
    CATALOG_FUNCTIONS,
    SESSION_FUNCTIONS,
    catalog_schema,
    function_name,
    relations,
    type_name,
)
from proxy.catalog.relations import NATIVE_FUNCTIONS, PG_CATALOG, SHADOW_SCHEMAS
from proxy.rewrite.session_info import SessionInfo

SHADOW_PG_CATALOG = SHADOW_SCHEMAS[PG_CATALOG]
Setting = Callable[[str], str | None]  # a setting's current value in the session, None if unknown


class UnansweredCatalogQuery(Exception):
    """The shadow has no such relation or function (the message names it)."""


def shadow_query(
    tree: exp.Query, *, info: SessionInfo, setting: Setting, known: frozenset[tuple[str, str]]
) -> exp.Query:
    """``known``: the shadow's (schema, relation) pairs, with the shadow's schema names."""
    tree = tree.copy()
    _move_relations(tree, known)
    passes: tuple[Callable[[exp.Expression], exp.Expression], ...] = (
        _move_columns,
        _unqualify_functions,
        lambda node: _session_value(node, info, setting),
        _operator,
        _uncollate,
        _cast,
        _array_literal,
        _function,
    )
    for transform in passes:
        _apply(tree, transform)
    return tree


def _apply(tree: exp.Expression, transform: Callable[[exp.Expression], exp.Expression]) -> None:
    """Each node, parents first; unlike ``Expression.transform``, the children of a replaced node are
    visited too (a pass that rewrites ``pg_catalog.f(…)`` must still see the calls in its arguments). A
    pass builds its replacement from the node's own children, uncopied, so they stay in the walk; the
    nodes it drops are skipped."""
    for node in list(tree.walk()):
        if node.root() is not tree:
            continue
        replacement = transform(node)
        if replacement is not node:
            node.replace(replacement)


def _move_relations(tree: exp.Expression, known: frozenset[tuple[str, str]]) -> None:
    for table in relations(tree):
        schema = catalog_schema(table)
        if schema is None:  # the classifier sends only catalog relations here
            raise ValueError(f"{table.sql()} is not a catalog relation")
        target = SHADOW_SCHEMAS[schema]
        if (target, table.name.lower()) not in known:
            raise UnansweredCatalogQuery(f"relation {schema}.{table.name}")
        table.set("db", exp.to_identifier(target))
        table.set("catalog", None)
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):  # a table function: generate_series(…)
            table.set("db", None)
            table.set("catalog", None)


def _move_columns(node: exp.Expression) -> exp.Expression:
    """``pg_catalog.pg_class.relname`` (SQLAlchemy writes columns so) follows its table."""
    if isinstance(node, exp.Column) and node.args.get("db") is not None:
        schema = node.text("db").lower()
        if schema in SHADOW_SCHEMAS:
            node.set("db", exp.to_identifier(SHADOW_SCHEMAS[schema]))
            node.set("catalog", None)
    return node


def _unqualify_functions(node: exp.Expression) -> exp.Expression:
    is_qualified_call = isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func)
    return node.expression if is_qualified_call and node.this.name.lower() == PG_CATALOG else node


_IDENTITY: dict[type[exp.Expression], str] = {
    exp.CurrentVersion: "version",
    exp.CurrentUser: "current_user",
    exp.SessionUser: "session_user",
    exp.CurrentDatabase: "current_database",
    exp.CurrentSchema: "current_schema",
}


def _session_value(node: exp.Expression, info: SessionInfo, setting: Setting) -> exp.Expression:
    """The session's identity and settings, as literals: the shadow is shared by every session."""
    name = _IDENTITY.get(type(node)) or (function_name(node) if isinstance(node, exp.Anonymous) else "")
    values = {
        "version": info.version,
        "current_user": info.user,
        "session_user": info.user,
        "current_database": info.database,
        "current_schema": info.schema,
    }
    if name in values:
        return exp.Literal.string(values[name])
    if isinstance(node, exp.CurrentSchemas) or name == "current_schemas":
        return _current_schemas(node, info.schema)
    if name == "current_setting" and isinstance(node, exp.Anonymous):
        first = node.expressions[0] if node.expressions else None
        if isinstance(first, exp.Literal) and first.is_string and (value := setting(first.this)) is not None:
            return exp.Literal.string(value)
    return node


def _current_schemas(node: exp.Expression, schema: str) -> exp.Expression:
    with_implicit = exp.Array(expressions=[exp.Literal.string(PG_CATALOG), exp.Literal.string(schema)])
    explicit = exp.Array(expressions=[exp.Literal.string(schema)])
    argument = node.this if isinstance(node, exp.CurrentSchemas) else node.expressions[0]
    if isinstance(argument, exp.Boolean):
        return with_implicit if argument.this else explicit
    return exp.Case(ifs=[exp.If(this=argument, true=with_implicit)], default=explicit)


_OPERATORS: dict[str, Callable[[exp.Expression, exp.Expression], exp.Expression]] = {
    "~": lambda a, b: exp.RegexpLike(this=a, expression=b),
    "!~": lambda a, b: exp.not_(exp.RegexpLike(this=a, expression=b), copy=False),
    "~*": lambda a, b: exp.RegexpILike(this=a, expression=b),
    "!~*": lambda a, b: exp.not_(exp.RegexpILike(this=a, expression=b), copy=False),
    "~~": lambda a, b: exp.Like(this=a, expression=b),
    "!~~": lambda a, b: exp.not_(exp.Like(this=a, expression=b), copy=False),
    "=": lambda a, b: exp.EQ(this=a, expression=b),
    "<>": lambda a, b: exp.NEQ(this=a, expression=b),
    "<": lambda a, b: exp.LT(this=a, expression=b),
    "<=": lambda a, b: exp.LTE(this=a, expression=b),
    ">": lambda a, b: exp.GT(this=a, expression=b),
    ">=": lambda a, b: exp.GTE(this=a, expression=b),
}


def _operator(node: exp.Expression) -> exp.Expression:
    """psql writes ``c.relname OPERATOR(pg_catalog.~) '^(visits)$'`` so no user operator can intervene."""
    if not isinstance(node, exp.Operator):
        return node
    symbol = str(node.args.get("operator", "")).rsplit(".", 1)[-1]
    build = _OPERATORS.get(symbol)
    if build is None:
        raise UnansweredCatalogQuery(f"operator {symbol}")
    return exp.paren(build(node.this, node.expression), copy=False)


def _uncollate(node: exp.Expression) -> exp.Expression:
    """``COLLATE pg_catalog.default``: the shadow compares names bytewise, as the C collation does."""
    return node.this if isinstance(node, exp.Collate) else node


# What the shadow stores each PostgreSQL type as; reg* types are handled apart (lookups).
_STORED_AS = {
    "oid": "BIGINT", "xid": "BIGINT", "cid": "BIGINT", "regoper": "BIGINT", "regoperator": "BIGINT",
    "regconfig": "BIGINT", "regdictionary": "BIGINT", "int8": "BIGINT", "int4": "INTEGER",
    "int2": "SMALLINT", "float4": "FLOAT", "float8": "DOUBLE", "bool": "BOOLEAN", "numeric": "DOUBLE",
    "name": "VARCHAR", "char": "VARCHAR", "bpchar": "VARCHAR", "text": "VARCHAR", "varchar": "VARCHAR",
    "pg_node_tree": "VARCHAR", "aclitem": "VARCHAR", "unknown": "VARCHAR", "cstring": "VARCHAR",
    "regproc": "VARCHAR", "regprocedure": "VARCHAR", "int2vector": "SMALLINT[]", "oidvector": "BIGINT[]",
}  # fmt: skip
_OBJECT_LOOKUPS = {  # reg* type → (macro: literal name → OID, macro: OID → name)
    "regclass": ("to_regclass", "regclass_name"),
    "regtype": ("to_regtype", "regtype_name"),
    "regnamespace": ("to_regnamespace", "regnamespace_name"),
    "regrole": ("to_regrole", "regrole_name"),
}
_NUMBER_TYPES = {"oid", "int8", "int4", "int2", "bigint", "int", "integer", "smallint"}
_TEXT_TYPES = {"text", "varchar", "name"}


def _cast(node: exp.Expression) -> exp.Expression:
    if not isinstance(node, exp.Cast):
        return node
    name = type_name(node.to)
    inner = node.this
    if _is_object_cast(inner) and name in _NUMBER_TYPES:
        return exp.cast(_object_oid(inner), "BIGINT", copy=False)  # c.oid::regclass::oid is c.oid
    if _is_object_cast(inner) and name in _TEXT_TYPES:
        return _object_name(inner)  # 'visits'::regclass::text is its name
    if name in _OBJECT_LOOKUPS:
        return _object_oid(node) if _is_text(inner) and not _is_output(node) else _object_name(node)
    if name in ("regproc", "regprocedure") and _is_text(inner):
        # the shadow stores regproc columns (typinput …) as names: 'pg_catalog.array_in'::regproc → 'array_in'
        return exp.Literal.string(inner.this.split("(")[0].rsplit(".", 1)[-1])
    if isinstance(node.to, exp.DataType) and node.to.this == exp.DataType.Type.ARRAY:
        return _array_cast(inner, node.to)
    if name in _STORED_AS:
        return exp.cast(inner, _STORED_AS[name], copy=False)
    if isinstance(node.to, exp.DataType) and node.to.this == exp.DataType.Type.USERDEFINED:
        raise UnansweredCatalogQuery(f"type {name}")
    return node


def _is_output(node: exp.Expression) -> bool:
    """A select item: where PostgreSQL prints a reg* value, as its name."""
    parent = node.parent.parent if isinstance(node.parent, exp.Alias) else node.parent
    return isinstance(parent, exp.Select) and node.arg_key in ("expressions", "this")


def _is_object_cast(node: exp.Expression) -> bool:
    return isinstance(node, exp.Cast) and type_name(node.to) in _OBJECT_LOOKUPS


def _object_oid(cast: exp.Cast) -> exp.Expression:
    """The OID a reg* cast stands for: a name literal is looked up (``'pg_class'::regclass``), a digit
    string is the OID itself (``'16402'::regclass``), anything else already is an OID."""
    value = cast.this
    if not _is_text(value):
        return value
    if str(value.this).isdigit():
        return exp.Literal.number(int(value.this))
    return _macro(_OBJECT_LOOKUPS[type_name(cast.to)][0], value)


def _object_name(cast: exp.Cast) -> exp.Expression:
    """What PostgreSQL prints for a reg* value: the object's name (``c.oid::regclass`` → ``visits``)."""
    return _macro(_OBJECT_LOOKUPS[type_name(cast.to)][1], _object_oid(cast))


def _array_cast(inner: exp.Expression, to: exp.DataType) -> exp.Expression:
    """``'{16,25}'::oid[]``: a list of what the shadow stores the element type as (reg* types: OIDs)."""
    if _is_text(inner) and _is_array_text(inner.this):
        inner = _list(inner.this)
    element = to.expressions[0] if to.expressions else exp.DataType.build("text")
    name = type_name(element)
    if name not in _STORED_AS and element.this != exp.DataType.Type.USERDEFINED:
        return exp.cast(inner, to, copy=False)  # int[], text[] …: DuckDB has them
    stored = _STORED_AS.get(name) or ("BIGINT" if name in _OBJECT_LOOKUPS else None)
    if stored is None:
        raise UnansweredCatalogQuery(f"type {name}[]")
    return exp.cast(inner, exp.DataType.build(f"{stored}[]", dialect="duckdb"), copy=False)


def _is_text(node: exp.Expression) -> bool:
    return isinstance(node, exp.Literal) and node.is_string


def _macro(name: str, *arguments: exp.Expression) -> exp.Expression:
    return exp.Dot(
        this=exp.to_identifier(SHADOW_PG_CATALOG),
        expression=exp.Anonymous(this=name, expressions=list(arguments)),
    )


def _array_literal(node: exp.Expression) -> exp.Expression:
    """``pol.polroles = '{0}'`` and ``c.relkind = ANY('{r,p,f}')`` (pgcli's lists, bound by psycopg on
    the client): PostgreSQL reads the string as an array; DuckDB needs a list."""
    if isinstance(node, exp.EQ | exp.NEQ):
        for side, other in ((node.this, node.expression), (node.expression, node.this)):
            if isinstance(other, exp.Column) and _is_text(side) and _is_array_text(side.this):
                side.replace(_list(side.this))
    if isinstance(node, exp.Any | exp.All):
        inner = node.this.this if isinstance(node.this, exp.Paren) else node.this
        if _is_text(inner) and _is_array_text(inner.this):
            inner.replace(_list(inner.this))
    return node


def _is_array_text(text: str) -> bool:
    return text.startswith("{") and text.endswith("}")


def _list(text: str) -> exp.Array:
    """PostgreSQL's array text (``{1,2}``, ``{"a b",c}``) as a DuckDB list of literals."""
    elements: list[exp.Expression] = []
    for raw in _array_elements(text[1:-1]):
        if raw is None:
            elements.append(exp.null())
        elif raw.lstrip("-").isdigit():
            elements.append(exp.Literal.number(int(raw)))
        else:
            elements.append(exp.Literal.string(raw))
    return exp.Array(expressions=elements)


def _array_elements(body: str) -> list[str | None]:
    """The elements of an array's text between its braces; an unquoted NULL is SQL NULL."""
    elements: list[str | None] = []
    current, quoted, escaped, was_quoted = "", False, False, False
    for char in body:
        if escaped:
            current, escaped = current + char, False
        elif char == "\\":
            escaped = True
        elif char == '"':
            quoted, was_quoted = not quoted, True
        elif char == "," and not quoted:
            elements.append(None if current == "NULL" and not was_quoted else current)
            current, was_quoted = "", False
        else:
            current += char
    if body:
        elements.append(None if current == "NULL" and not was_quoted else current)
    return elements


_RENAMED = {"json_build_object": "json_object", "jsonb_build_object": "json_object"}


def _function(node: exp.Expression) -> exp.Expression:
    """PostgreSQL's catalog functions are the shadow's macros; DuckDB answers a few itself."""
    if not isinstance(node, exp.Anonymous) or _is_macro_call(node):
        return node
    name = function_name(node)
    if name in CATALOG_FUNCTIONS - SESSION_FUNCTIONS:
        return _macro(name, *node.expressions)
    if name in NATIVE_FUNCTIONS:
        return node
    if name in _RENAMED:
        return exp.Anonymous(this=_RENAMED[name], expressions=node.expressions)
    raise UnansweredCatalogQuery(f"function {name}()")


def _is_macro_call(node: exp.Anonymous) -> bool:
    parent = node.parent
    return isinstance(parent, exp.Dot) and parent.this.name == SHADOW_PG_CATALOG
