"""Every refusal of docs/sql.md's "Refused" table, checked word for word at the analysis level: the SQLSTATE,
the message and the hint (analysis/refusals.py, shape.py, statements.py, checks.py).

The strings are written out here, not read back from :data:`proxy.analysis.refusals.UNSUPPORTED`: a test
that compares a refusal with the table it came from cannot notice the table's text being garbled. The hint
is what tells the analyst how to get an answer instead, so a changed hint is a changed behaviour."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.analysis.parse import parse_statements
from proxy.analysis.refusals import ALLOWED_SHAPE
from proxy.analysis.statements import PrivateQuery, classify
from proxy.config import parse_config
from proxy.errors import (
    PolicyViolationError,
    ProxyError,
    UnknownColumnError,
    UnknownTableError,
    UnsupportedQueryError,
)
from tests.unit.proxy.test_mutants_an_joins import classified

AGGREGATE_INSTEAD = (
    "aggregate with GROUP BY instead (SELECT key, COUNT(*) FROM t GROUP BY key); a rank or a running total "
    "can then be computed over that answer, with ORDER BY or in your client"
)
ONE_GROUPING = "write one query per grouping and combine them with UNION ALL"
SELECT_LIST_SUBQUERY = "put all the aggregates in one query, or combine queries with UNION ALL"
SHAPE = (
    "queries on private tables must aggregate: SELECT [public group columns,] aggregates FROM table "
    "[WHERE …] [GROUP BY public columns] [HAVING …] [ORDER BY …] [LIMIT …], where the aggregates are COUNT(*), "
    "COUNT(col), COUNT(DISTINCT <privacy unit>), SUM, AVG, VAR_*, STDDEV_*, MEDIAN, PERCENTILE_CONT/DISC, MIN, MAX, "
    "MODE() WITHIN GROUP (ORDER BY public column), CORR, COVAR_POP/SAMP, REGR_*"
)

# (SQL, message, hint): the constructs of analysis/refusals.py, then the other rows of the table
REFUSED: list[tuple[str, str, str]] = [
    (
        "SELECT COUNT(*) OVER () FROM visits",
        "window functions are not allowed on private data",
        AGGREGATE_INSTEAD,
    ),
    (
        "SELECT region, COUNT(*) FROM visits GROUP BY region WINDOW w AS (PARTITION BY region)",
        "WINDOW clauses are not allowed on private data",
        AGGREGATE_INSTEAD,
    ),
    (
        "SELECT region, COUNT(*) FROM visits GROUP BY region QUALIFY COUNT(*) > 1",
        "QUALIFY is not allowed on private data",
        "filter groups with HAVING",
    ),
    (
        "WITH RECURSIVE r AS (SELECT 1) SELECT COUNT(*) FROM visits",
        "WITH RECURSIVE is not supported",
        "write it without RECURSIVE: a WITH query over private data may be a per-person subquery "
        "(SELECT unit, COUNT(*) AS n FROM table GROUP BY unit) or a filter of one table",
    ),
    (
        "SELECT COUNT(*) FROM visits UNION SELECT COUNT(*) FROM patients",
        "UNION without ALL is not supported on private data",
        "write UNION ALL: each part is answered and priced on its own, and no rows are merged",
    ),
    (
        "SELECT COUNT(*) FROM visits INTERSECT SELECT COUNT(*) FROM patients",
        "INTERSECT is not supported on private data",
        "combine the conditions in one WHERE (… WHERE a AND b), or ask the queries one by one",
    ),
    (
        "SELECT COUNT(*) FROM visits EXCEPT SELECT COUNT(*) FROM patients",
        "EXCEPT is not supported on private data",
        "write the condition as WHERE a AND NOT b, or ask the queries one by one",
    ),
    (
        "SELECT COUNT(*) FROM (SELECT patient_id FROM visits UNION ALL SELECT patient_id FROM patients) s",
        "UNION ALL is answered only as the whole statement, not inside a subquery",
        "write SELECT … UNION ALL SELECT … at the top level: each part is answered and priced on its own",
    ),
    (
        "SELECT COUNT(*) FROM visits UNION ALL SELECT 1",
        "each part of a UNION ALL must be an aggregate query on private data",
        "ask constant or public-table queries in a statement of their own",
    ),
    (
        "SELECT COUNT(*) FROM visits v, LATERAL (SELECT 1) x",
        "LATERAL subqueries are not supported on private data",
        "join tables on the privacy unit, or compute per-person values in a subquery in FROM: "
        "(SELECT unit, COUNT(*) AS n FROM table GROUP BY unit) AS p",
    ),
    (
        "SELECT COUNT(*) FROM visits v JOIN (SELECT patient_id FROM patients) w ON v.patient_id = w.patient_id",
        "a subquery cannot be joined in a query on private data",
        "join the tables themselves on the privacy unit (FROM a JOIN b ON a.unit = b.unit), or put the "
        "join inside the subquery",
    ),
    (
        "SELECT region, COUNT(*) FROM visits GROUP BY GROUPING SETS ((region), ())",
        "GROUPING SETS is not supported on private data",
        ONE_GROUPING,
    ),
    (
        "SELECT region, COUNT(*) FROM visits GROUP BY ROLLUP (region)",
        "ROLLUP is not supported on private data",
        ONE_GROUPING,
    ),
    (
        "SELECT region, COUNT(*) FROM visits GROUP BY CUBE (region)",
        "CUBE is not supported on private data",
        ONE_GROUPING,
    ),
    (
        "SELECT COUNT(*), (SELECT COUNT(*) FROM patients) FROM visits",
        "subqueries in the select list are not supported on private data",
        "put all the aggregates in one query, or combine queries with UNION ALL",
    ),
    # a subquery anywhere in what is computed over the answer: the select list, HAVING, ORDER BY
    *(
        (sql, "subqueries in the select list are not supported on private data", SELECT_LIST_SUBQUERY)
        for sql in (
            "SELECT COUNT(*), (VALUES (1)) FROM visits",
            "SELECT region, COUNT(*) FROM visits GROUP BY region HAVING COUNT(*) > (SELECT 1)",
            "SELECT region, COUNT(*) FROM visits GROUP BY region ORDER BY (SELECT 1)",
        )
    ),
    (
        "SELECT COUNT(*) FROM (SELECT * FROM visits LIMIT 10) s",
        "LIMIT and OFFSET are not allowed in a subquery over private data",
        "filter with WHERE instead: which rows a LIMIT keeps depends on the other rows, so one person "
        "could change who else is counted",
    ),
    (
        "SELECT region, COUNT(*) FROM visits GROUP BY region FETCH FIRST 1 ROWS ONLY",
        "FETCH FIRST is not supported on private data",
        "write LIMIT n",
    ),
    ("SELECT * FROM visits", "SELECT * would reveal private rows", SHAPE),
    (
        "SELECT age FROM visits",
        'column "age" is private',
        "use it inside an aggregate (COUNT, SUM, AVG, …), or add a public column to GROUP BY",
    ),
    (
        "SELECT region FROM visits",
        'column "region" must appear in the GROUP BY clause or be used in an aggregate',
        "add GROUP BY region and an aggregate such as COUNT(*)",
    ),
    (
        "SELECT patient_id, COUNT(*) FROM visits GROUP BY patient_id",
        'GROUP BY the privacy unit "patient_id" would make one group per person',
        "count people with COUNT(DISTINCT …) instead",
    ),
    (
        "SELECT SUM(patient_id) FROM visits",
        'sum(patient_id): column "patient_id" has no declared bounds',
        "declare lower and upper for column patient_id in the policy (veil.toml)",
    ),
    ("SELECT SUM(*) FROM visits", "sum(*) is not allowed", "aggregate a column or an expression of columns"),
    (
        "SELECT STRING_AGG(note, ',') FROM visits",
        "aggregate string_agg() is not supported yet on private data",
        SHAPE,
    ),
    (
        "SELECT COUNT(DISTINCT age) FROM visits",
        "DISTINCT aggregates are only supported as COUNT(DISTINCT <privacy unit>)",
        "count people with COUNT(DISTINCT patient_id)",
    ),
    (
        "SELECT MODE() WITHIN GROUP (ORDER BY note) FROM visits",
        'MODE() of "note": the column has no public value domain',
        "the candidates of a DP mode must be public: declare note public with values = [...] or "
        "range = [start, stop, step] in the policy (veil.toml)",
    ),
    (
        "SELECT SUM(cost / age) FROM visits",
        "sum(cost / age): the range of cost / age cannot be derived from the policy",
        "clamp it explicitly: veil_clamp(cost / age, lower, upper) — or declare bounds for its columns",
    ),
    (
        "SELECT COUNT(*) FROM read_csv('x')",
        "table function read_csv() is not allowed",
        "query the dataset's tables by name",
    ),
    ("DELETE FROM visits", "only SELECT statements may read private tables", SHAPE),
    ("SELECT COUNT(*) FROM visits WHERE visits.* IS NULL", "* is only allowed in COUNT(*)", SHAPE),
    (
        "SELECT 1 WHERE EXISTS (SELECT 1 FROM visits)",
        "subqueries over private tables must be per-person subqueries or joins on the privacy unit",
        SHAPE,
    ),
    (
        "SELECT COUNT(*) FROM (SELECT patient_id FROM visits GROUP BY patient_id) s "
        "JOIN patients p ON s.patient_id = p.patient_id",
        "a subquery cannot be joined in a query on private data",
        "join the tables themselves on the privacy unit (FROM a JOIN b ON a.unit = b.unit), or put the "
        "join inside the subquery",
    ),
    # conditions and group keys: columns and deterministic scalar operations only
    (
        "SELECT COUNT(*) FROM visits WHERE COUNT(*) > 1",
        "aggregate functions are not allowed in WHERE",
        "put aggregates in the select list; HAVING is not supported yet",
    ),
    (
        "SELECT COUNT(*) FROM visits GROUP BY random()",
        "function rand() is not allowed in GROUP BY of a query on private data",
        "use comparisons, arithmetic, CASE, CAST and common scalar functions",
    ),
    (
        "SELECT COUNT(*) FROM visits GROUP BY age > (SELECT 1)",
        "subqueries are not allowed in GROUP BY of a query on private data",
        "filter with comparisons on the table's own columns",
    ),
    (
        "SELECT COUNT(*) FROM visits GROUP BY age + cost",
        "GROUP BY age + cost must use exactly one column",
        "group by an expression of a single public column or bounded integer column",
    ),
    # the select list is computed over the noisy answer: scalar operations only
    (
        "SELECT COUNT(*), random() FROM visits",
        "rand() is not supported in the select list, HAVING or ORDER BY of a query on private data",
        SHAPE,
    ),
    # selections (quantiles, modes) come from per-group histograms, not yet combined with τ-thresholding
    (
        "SELECT note, MEDIAN(age) FROM visits GROUP BY note",
        "quantiles with GROUP BY keys taken from the data are not supported yet",
        SHAPE,
    ),
    (
        "SELECT note, MODE() WITHIN GROUP (ORDER BY region) FROM visits GROUP BY note",
        "MODE() with GROUP BY keys taken from the data is not supported yet",
        "group by columns with public values, or ask for the mode without those keys",
    ),
]


def refused(sql: str) -> ProxyError:
    with pytest.raises(ProxyError) as error:
        classified(sql)
    return error.value


@pytest.mark.parametrize(("sql", "message", "hint"), REFUSED)
def test_each_refusal_of_the_table_is_42501_with_its_message_and_hint(
    sql: str, message: str, hint: str
) -> None:
    """Refused before any engine query: nothing is spent, and the analyst is told what to write instead."""
    error = refused(sql)
    assert isinstance(error, PolicyViolationError)
    assert (error.sqlstate, error.message, error.hint) == ("42501", message, hint)


def test_the_allowed_shape_lists_every_aggregate_veil_answers() -> None:
    assert ALLOWED_SHAPE == SHAPE


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("INSERT INTO zones VALUES ('a', 'b')", "INSERT statements are not supported"),
        ("CREATE TABLE x (a INT)", "CREATE statements are not supported"),
        ("DROP SCHEMA s", "DROP statements are not supported"),
        ("VALUES (1)", "VALUES statements are not supported"),
    ],
)
def test_a_write_is_0a000_because_veil_is_read_only(sql: str, message: str) -> None:
    error = refused(sql)
    assert isinstance(error, UnsupportedQueryError)
    assert (error.sqlstate, error.message, error.hint) == ("0A000", message, "Veil is read-only")


def test_an_unknown_table_is_42p01_and_lists_the_tables_of_the_dataset() -> None:
    error = refused("SELECT COUNT(*) FROM nothing")
    assert isinstance(error, UnknownTableError)
    assert (error.sqlstate, error.message, error.hint) == (
        "42P01",
        'relation "nothing" does not exist',
        "tables of dataset clinic: patients, people, ratings, visits, zones",
    )


@pytest.mark.parametrize(
    ("sql", "error", "sqlstate", "message"),
    [
        (
            "SELECT COUNT(*) FROM visits GROUP BY 3",
            UnknownColumnError,
            "42703",
            "GROUP BY position 3 is not in select list",
        ),
        (
            "SELECT COUNT(*) FROM other.visits",
            UnknownTableError,
            "42P01",
            'relation "other.visits" does not exist',
        ),
    ],
)
def test_names_that_do_not_resolve_are_refused_as_postgresql_refuses_them(
    sql: str, error: type[ProxyError], sqlstate: str, message: str
) -> None:
    refusal = refused(sql)
    assert isinstance(refusal, error)
    assert (refusal.sqlstate, refusal.message) == (sqlstate, message)


@pytest.mark.parametrize("schema", ["public", "PUBLIC", "clinic", "Clinic"])
def test_a_table_qualified_with_public_or_the_dataset_is_the_datasets_table(schema: str) -> None:
    """Clients (and ORMs) qualify tables with the schema: PostgreSQL folds an unquoted name to lower case."""
    statement = classified(f"SELECT COUNT(*) FROM {schema}.visits")
    assert isinstance(statement, PrivateQuery)
    assert statement.shape.table.name == "visits"


def test_an_unknown_table_of_a_dataset_without_tables_says_there_are_none() -> None:
    dataset = parse_config(
        '[datasets.empty]\npath = "x.duckdb"\n', path=Path("/nonexistent/veil.toml")
    ).dataset("empty")
    assert dataset is not None
    (tree,) = parse_statements("SELECT COUNT(*) FROM visits")
    with pytest.raises(UnknownTableError) as refused:
        classify(tree, dataset)
    assert refused.value.hint == "tables of dataset empty: (none)"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM ROWS FROM (generate_series(1, 2))",
        "SELECT COUNT(*) FROM ROWS FROM (read_csv('x'))",
    ],
)
def test_rows_from_is_refused_as_a_privacy_refusal_not_an_internal_error(sql: str) -> None:
    """ROWS FROM (…) is a table whose name sqlglot leaves empty: it failed with an AttributeError (an
    internal error) before it was refused like the table functions it lists."""
    error = refused(sql)
    assert isinstance(error, PolicyViolationError)
    assert (error.sqlstate, error.message, error.hint) == (
        "42501",
        "ROWS FROM is not allowed",
        "query the dataset's tables by name",
    )


@pytest.mark.parametrize("sql", ["SELECT COUNT(*) FROM $1", "SELECT COUNT(*) FROM a.b.c.d"])
def test_a_from_item_that_is_no_name_is_refused_saying_to_name_a_table(sql: str) -> None:
    """An unbound parameter or a four-part name is neither a table nor a function call."""
    error = refused(sql)
    assert isinstance(error, PolicyViolationError)
    assert (error.sqlstate, error.hint) == ("42501", "query the dataset's tables by name")


@pytest.mark.parametrize(
    ("sql", "construct"), [("GROUP BY region WITH ROLLUP", "ROLLUP"), ("GROUP BY region WITH CUBE", "CUBE")]
)
def test_the_mysql_spelling_of_rollup_and_cube_is_refused_as_rollup_and_cube(
    sql: str, construct: str
) -> None:
    """sqlglot keeps ``WITH ROLLUP`` in a list of its own beside the group keys: it must not be read as a
    plain GROUP BY region (a different query, answered without the subtotals the analyst asked for)."""
    error = refused(f"SELECT region, COUNT(*) FROM visits {sql}")
    assert (error.sqlstate, error.message) == ("42501", f"{construct} is not supported on private data")
