"""WITH queries are inlined where they are read (analysis/with_clauses.py), with SQL's scoping."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.analysis.with_clauses import inline_with
from proxy.errors import PolicyViolationError, ProgramLimitExceededError


def inlined(sql: str, *, max_nodes: int = 2000) -> str:
    return inline_with(sqlglot.parse_one(sql, read="postgres"), max_nodes=max_nodes).sql(dialect="postgres")


def test_a_cte_becomes_the_subquery_it_names() -> None:
    assert inlined(
        "WITH p AS (SELECT user_id, COUNT(*) AS n FROM ratings GROUP BY user_id) SELECT AVG(n) FROM p"
    ) == ("SELECT AVG(n) FROM (SELECT user_id, COUNT(*) AS n FROM ratings GROUP BY user_id) AS p")


def test_a_reference_keeps_its_own_alias() -> None:
    assert inlined("WITH p AS (SELECT * FROM visits) SELECT COUNT(*) FROM p AS q WHERE q.age > 3") == (
        "SELECT COUNT(*) FROM (SELECT * FROM visits) AS q WHERE q.age > 3"
    )


def test_a_later_cte_reads_an_earlier_one() -> None:
    assert inlined(
        "WITH a AS (SELECT * FROM visits WHERE age > 3), b AS (SELECT * FROM a) SELECT COUNT(*) FROM b"
    ) == ("SELECT COUNT(*) FROM (SELECT * FROM (SELECT * FROM visits WHERE age > 3) AS a) AS b")


def test_an_inner_with_shadows_an_outer_one() -> None:
    sql = "WITH t AS (SELECT 1 AS x FROM visits) SELECT COUNT(*) FROM (WITH t AS (SELECT 2 AS x FROM ratings) SELECT * FROM t) AS s"
    assert inlined(sql) == "SELECT COUNT(*) FROM (SELECT * FROM (SELECT 2 AS x FROM ratings) AS t) AS s"


def test_a_qualified_name_is_a_table_not_a_cte() -> None:
    assert inlined("WITH visits AS (SELECT * FROM ratings) SELECT COUNT(*) FROM public.visits") == (
        "SELECT COUNT(*) FROM public.visits"
    )


def test_a_cte_that_names_a_table_reads_the_table_inside_itself() -> None:
    assert inlined("WITH visits AS (SELECT * FROM visits WHERE age > 3) SELECT COUNT(*) FROM visits") == (
        "SELECT COUNT(*) FROM (SELECT * FROM visits WHERE age > 3) AS visits"
    )


def test_an_unused_cte_is_dropped() -> None:
    assert (
        inlined("WITH unused AS (SELECT * FROM ratings) SELECT COUNT(*) FROM visits")
        == "SELECT COUNT(*) FROM visits"
    )


def test_each_reference_gets_its_own_copy() -> None:
    sql = "WITH p AS (SELECT * FROM visits) SELECT COUNT(*) FROM p UNION ALL SELECT COUNT(*) FROM p"
    assert inlined(sql) == (
        "SELECT COUNT(*) FROM (SELECT * FROM visits) AS p UNION ALL SELECT COUNT(*) FROM (SELECT * FROM visits) AS p"
    )


def test_column_lists_rename_the_select_items() -> None:
    assert inlined(
        "WITH p(u, n) AS (SELECT user_id, COUNT(*) FROM ratings GROUP BY user_id) SELECT AVG(n) FROM p"
    ) == ("SELECT AVG(n) FROM (SELECT user_id AS u, COUNT(*) AS n FROM ratings GROUP BY user_id) AS p")
    assert inlined("SELECT COUNT(*) FROM (SELECT age, cost FROM visits) AS s(a)") == (
        "SELECT COUNT(*) FROM (SELECT age AS a, cost FROM visits) AS s"
    )


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "WITH t(a) AS (SELECT * FROM visits) SELECT COUNT(*) FROM t",
            'the column list of "t" cannot rename',
        ),
        ("SELECT COUNT(*) FROM (SELECT age FROM visits) AS s(a, b)", '"s" has 1 columns available but 2'),
        (
            "WITH RECURSIVE t AS (SELECT * FROM visits) SELECT COUNT(*) FROM t",
            "WITH RECURSIVE is not supported",
        ),
    ],
)
def test_refusals(sql: str, message: str) -> None:
    with pytest.raises(PolicyViolationError, match=message):
        inlined(sql)


def test_copies_that_multiply_are_stopped_at_the_node_limit() -> None:
    """Each CTE reads the previous one three times: 3^12 copies of the first, refused long before."""
    ctes = ["c0 AS (SELECT * FROM visits)"]
    ctes += [f"c{i} AS (SELECT * FROM c{i - 1}, c{i - 1} AS x, c{i - 1} AS y)" for i in range(1, 13)]
    sql = f"WITH {', '.join(ctes)} SELECT COUNT(*) FROM c12"
    with pytest.raises(
        ProgramLimitExceededError, match="expand to more than this dataset's max_nodes of 2000"
    ):
        inlined(sql)


def test_a_statement_without_with_is_left_as_it_is() -> None:
    tree = sqlglot.parse_one("SELECT COUNT(*) FROM visits", read="postgres")
    assert inline_with(tree, max_nodes=10) is tree
