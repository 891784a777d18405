"""The refusals every shape check uses: 42501 with a hint that says what is allowed, and one message (and
one way out) per SQL construct that is not answered on private data.

Every refusal here is raised while the statement is analysed, before any engine query: it spends
nothing. docs/sql.md lists each message of :data:`UNSUPPORTED` (a test keeps it so).
"""

from __future__ import annotations

from proxy.errors import PolicyViolationError

ALLOWED_SHAPE = (
    "queries on private tables must aggregate: SELECT [public group columns,] aggregates FROM table "
    "[WHERE …] [GROUP BY public columns] [HAVING …] [ORDER BY …] [LIMIT …], where the aggregates are COUNT(*), "
    "COUNT(col), COUNT(DISTINCT <privacy unit>), SUM, AVG, VAR_*, STDDEV_*, MEDIAN, PERCENTILE_CONT/DISC, MIN, MAX, "
    "MODE() WITHIN GROUP (ORDER BY public column), CORR, COVAR_POP/SAMP, REGR_*"
)


CLAUSE_NAMES = {
    "where": "WHERE",
    "joins": "JOIN",
    "group": "GROUP BY",
    "having": "HAVING",
    "with_": "WITH",
    "distinct": "DISTINCT",
    "qualify": "QUALIFY",
    "windows": "WINDOW",
    "order": "ORDER BY",
    "limit": "LIMIT",
    "offset": "OFFSET",
}
"""sqlglot's key of a clause in a SELECT → the clause as the analyst wrote it, for refusals that name it."""


def refuse(message: str, *, hint: str = ALLOWED_SHAPE) -> PolicyViolationError:
    return PolicyViolationError(message, hint=hint)


_ONE_GROUPING = "write one query per grouping and combine them with UNION ALL"
_AGGREGATE_INSTEAD = (
    "aggregate with GROUP BY instead (SELECT key, COUNT(*) FROM t GROUP BY key); a rank or a running total "
    "can then be computed over that answer, with ORDER BY or in your client"
)

# construct → (message, hint)
UNSUPPORTED: dict[str, tuple[str, str]] = {
    "window function": ("window functions are not allowed on private data", _AGGREGATE_INSTEAD),
    "WINDOW clause": ("WINDOW clauses are not allowed on private data", _AGGREGATE_INSTEAD),
    "QUALIFY": ("QUALIFY is not allowed on private data", "filter groups with HAVING"),
    "WITH RECURSIVE": (
        "WITH RECURSIVE is not supported",
        "write it without RECURSIVE: a WITH query over private data may be a per-person subquery "
        "(SELECT unit, COUNT(*) AS n FROM table GROUP BY unit) or a filter of one table",
    ),
    "UNION": (
        "UNION without ALL is not supported on private data",
        "write UNION ALL: each part is answered and priced on its own, and no rows are merged",
    ),
    "INTERSECT": (
        "INTERSECT is not supported on private data",
        "combine the conditions in one WHERE (… WHERE a AND b), or ask the queries one by one",
    ),
    "EXCEPT": (
        "EXCEPT is not supported on private data",
        "write the condition as WHERE a AND NOT b, or ask the queries one by one",
    ),
    "nested UNION ALL": (
        "UNION ALL is answered only as the whole statement, not inside a subquery",
        "write SELECT … UNION ALL SELECT … at the top level: each part is answered and priced on its own",
    ),
    "UNION ALL part": (
        "each part of a UNION ALL must be an aggregate query on private data",
        "ask constant or public-table queries in a statement of their own",
    ),
    "LATERAL": (
        "LATERAL subqueries are not supported on private data",
        "join tables on the privacy unit, or compute per-person values in a subquery in FROM: "
        "(SELECT unit, COUNT(*) AS n FROM table GROUP BY unit) AS p",
    ),
    "joined subquery": (
        "a subquery cannot be joined in a query on private data",
        "join the tables themselves on the privacy unit (FROM a JOIN b ON a.unit = b.unit), or put the "
        "join inside the subquery",
    ),
    "GROUPING SETS": ("GROUPING SETS is not supported on private data", _ONE_GROUPING),
    "ROLLUP": ("ROLLUP is not supported on private data", _ONE_GROUPING),
    "CUBE": ("CUBE is not supported on private data", _ONE_GROUPING),
    "select-list subquery": (
        "subqueries in the select list are not supported on private data",
        "put all the aggregates in one query, or combine queries with UNION ALL",
    ),
    "subquery LIMIT": (
        "LIMIT and OFFSET are not allowed in a subquery over private data",
        "filter with WHERE instead: which rows a LIMIT keeps depends on the other rows, so one person "
        "could change who else is counted",
    ),
    "FETCH": ("FETCH FIRST is not supported on private data", "write LIMIT n"),
}


def refuse_construct(construct: str) -> PolicyViolationError:
    """The refusal of one construct of :data:`UNSUPPORTED`, with its hint."""
    message, hint = UNSUPPORTED[construct]
    return PolicyViolationError(message, hint=hint)
