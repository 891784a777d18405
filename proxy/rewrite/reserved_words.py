"""Quote PostgreSQL's reserved words when Veil writes SQL for PostgreSQL.

sqlglot quotes an identifier in generated SQL only when it was quoted in the tree or when its dialect
lists the word as reserved — and its PostgreSQL dialect lists none (sqlglot 30.30). A policy may well
name a column ``order``, ``end`` or ``user``: written bare, the first two are syntax errors in
PostgreSQL, and ``user`` is worse — it is ``current_user``, so a privacy unit named ``user`` would
group every row under the server's user name and answer as if one person held them all. DuckDB's
dialect already quotes its reserved words; Spark (pyspark 4.3, ANSI mode) reads all of these bare words as
the columns they name.

The list is PostgreSQL 15's reserved key words, both kinds (``pg_get_keywords()``, catcode R and T:
the words that cannot be a column name); quoting one keeps its text, so a lower-case name still names
the lower-case column. Applied once, to sqlglot's PostgreSQL generator, when ``proxy.rewrite`` is
imported — before any engine SQL is built."""

from __future__ import annotations

from sqlglot.dialects.postgres import Postgres

POSTGRES_RESERVED_WORDS = frozenset(
    [
        "all",
        "analyse",
        "analyze",
        "and",
        "any",
        "array",
        "as",
        "asc",
        "asymmetric",
        "both",
        "case",
        "cast",
        "check",
        "collate",
        "column",
        "constraint",
        "create",
        "current_catalog",
        "current_date",
        "current_role",
        "current_time",
        "current_timestamp",
        "current_user",
        "default",
        "deferrable",
        "desc",
        "distinct",
        "do",
        "else",
        "end",
        "except",
        "false",
        "fetch",
        "for",
        "foreign",
        "from",
        "grant",
        "group",
        "having",
        "in",
        "initially",
        "intersect",
        "into",
        "lateral",
        "leading",
        "limit",
        "localtime",
        "localtimestamp",
        "not",
        "null",
        "offset",
        "on",
        "only",
        "or",
        "order",
        "placing",
        "primary",
        "references",
        "returning",
        "select",
        "session_user",
        "some",
        "symmetric",
        "table",
        "then",
        "to",
        "trailing",
        "true",
        "union",
        "unique",
        "user",
        "using",
        "variadic",
        "when",
        "where",
        "window",
        "with",
        "authorization",
        "binary",
        "collation",
        "concurrently",
        "cross",
        "current_schema",
        "freeze",
        "full",
        "ilike",
        "inner",
        "is",
        "isnull",
        "join",
        "left",
        "like",
        "natural",
        "notnull",
        "outer",
        "overlaps",
        "right",
        "similar",
        "tablesample",
        "verbose",
    ]
)


def quote_reserved_words() -> None:
    Postgres.Generator.RESERVED_KEYWORDS = set(Postgres.Generator.RESERVED_KEYWORDS) | POSTGRES_RESERVED_WORDS
