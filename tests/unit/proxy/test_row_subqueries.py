"""Row-level subqueries in FROM are folded into the query that reads them (analysis/row_subqueries.py)."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.analysis.parse import parse_statements
from proxy.analysis.row_subqueries import fold_row_subqueries
from proxy.analysis.statements import classify
from proxy.errors import (
    AmbiguousColumnError,
    PolicyViolationError,
    ProgramLimitExceededError,
    UnknownColumnError,
)
from tests.unit.proxy.policy_fixture import clinic_policy


def folded(sql: str) -> str:
    return fold_row_subqueries(sqlglot.parse_one(sql, read="postgres")).sql(dialect="postgres")


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "SELECT COUNT(*) FROM (SELECT * FROM visits WHERE age > 30) AS v WHERE cost > 10",
            "SELECT COUNT(*) FROM visits AS v WHERE v.age > 30 AND cost > 10",
        ),
        (
            "SELECT r, SUM(c) FROM (SELECT region AS r, cost * 2 AS c FROM visits) AS v GROUP BY r",
            "SELECT v.region AS r, SUM((v.cost * 2)) FROM visits AS v GROUP BY v.region",
        ),
        (  # a chain of filters collapses onto the table
            "SELECT COUNT(*) FROM (SELECT * FROM (SELECT * FROM visits WHERE age > 3) AS a WHERE cost > 1) AS b",
            "SELECT COUNT(*) FROM visits AS b WHERE b.age > 3 AND b.cost > 1",
        ),
        (  # ORDER BY in a subquery changes no row: dropped
            "SELECT COUNT(*) FROM (SELECT age FROM visits ORDER BY age) AS s",
            "SELECT COUNT(*) FROM visits AS s",
        ),
        (  # in ORDER BY the outer output name wins over the subquery's column
            "SELECT region, COUNT(*) AS age FROM (SELECT region, age FROM visits) AS s GROUP BY region ORDER BY age",
            "SELECT s.region, COUNT(*) AS age FROM visits AS s GROUP BY s.region ORDER BY age",
        ),
        (  # a row-level subquery over a per-person subquery
            "SELECT AVG(n) FROM (SELECT n FROM (SELECT user_id, COUNT(*) AS n FROM ratings GROUP BY user_id) AS p"
            " WHERE n > 2) AS s",
            "SELECT AVG(s.n) FROM (SELECT user_id, COUNT(*) AS n FROM ratings GROUP BY user_id) AS s WHERE s.n > 2",
        ),
        (  # inside a per-person subquery
            "SELECT AVG(n) FROM (SELECT user_id, COUNT(*) AS n FROM (SELECT * FROM ratings WHERE stars > 3) AS r"
            " GROUP BY user_id) AS p",
            "SELECT AVG(n) FROM (SELECT user_id, COUNT(*) AS n FROM ratings AS r WHERE r.stars > 3 GROUP BY user_id) AS p",
        ),
        (  # the subquery joined with nothing may itself be a join
            "SELECT COUNT(*) FROM (SELECT v.cost, p.sex FROM visits AS v JOIN patients AS p ON v.patient_id ="
            " p.patient_id) AS j WHERE j.sex = 'male'",
            "SELECT COUNT(*) FROM visits AS v JOIN patients AS p ON v.patient_id = p.patient_id WHERE p.sex = 'male'",
        ),
        (  # a `*` subquery over one relation: its columns keep the subquery's name as qualifier
            "SELECT COUNT(*) FROM (SELECT * FROM visits) AS v JOIN zones AS z ON v.region = z.code"
            " WHERE v.cost > 1",
            "SELECT COUNT(*) FROM visits AS v JOIN zones AS z ON v.region = z.code WHERE v.cost > 1",
        ),
        (  # an unqualified column the subquery does not output belongs to the table the outer query joins
            "SELECT COUNT(*) FROM (SELECT region FROM visits) AS v JOIN zones AS z ON v.region = z.code"
            " WHERE zone = 'a'",
            "SELECT COUNT(*) FROM visits AS v JOIN zones AS z ON v.region = z.code WHERE zone = 'a'",
        ),
        (  # a grouped subquery is not row-level: left for the per-person analysis
            "SELECT AVG(n) FROM (SELECT user_id, COUNT(*) AS n FROM ratings GROUP BY user_id) AS p",
            "SELECT AVG(n) FROM (SELECT user_id, COUNT(*) AS n FROM ratings GROUP BY user_id) AS p",
        ),
    ],
)
def test_folds(sql: str, expected: str) -> None:
    assert folded(sql) == expected


@pytest.mark.parametrize(
    ("sql", "error", "message"),
    [
        (
            "SELECT AVG(age) FROM (SELECT cost AS x FROM visits) AS s",
            UnknownColumnError,
            'column "age" does not exist',
        ),
        (
            "SELECT AVG(s.age) FROM (SELECT cost FROM visits) AS s",
            UnknownColumnError,
            'column "s.age" does not exist',
        ),
        (
            "SELECT AVG(x) FROM (SELECT cost AS x, age AS x FROM visits) AS s",
            AmbiguousColumnError,
            "ambiguous",
        ),
        (
            "SELECT COUNT(*) FROM (SELECT * FROM visits LIMIT 10) AS s",
            PolicyViolationError,
            "LIMIT and OFFSET",
        ),
        (
            "SELECT COUNT(*) FROM (SELECT * FROM visits OFFSET 10) AS s",
            PolicyViolationError,
            "LIMIT and OFFSET",
        ),
        (
            "SELECT COUNT(*) FROM (SELECT ROW_NUMBER() OVER () AS r FROM visits) AS s",
            PolicyViolationError,
            "window functions",
        ),
    ],
)
def test_refusals(sql: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        folded(sql)


def test_an_expression_read_many_times_counts_each_time_against_the_complexity_limit() -> None:
    """40 nested calls under one name, read 30 times: 1,200 calls per row once folded, not 40."""
    nested = "age"
    for _ in range(20):
        nested = f"abs(floor({nested}))"
    reads = ", ".join(["x"] * 30)
    sql = f"SELECT SUM(veil_clamp(GREATEST({reads}), 0, 1)) FROM (SELECT {nested} AS x FROM visits) AS s"
    (tree,) = parse_statements(sql)
    with pytest.raises(ProgramLimitExceededError, match="1202 scalar function calls"):
        classify(tree, clinic_policy())
