"""Which statements read a federation, and the statement each site runs over its own table
(analysis/federated.py)."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from proxy.analysis.federated import count_column, federation_read, local_statement
from proxy.analysis.statements import PrivateQuery, classify
from proxy.errors import UnsupportedQueryError
from tests.unit.proxy.policy_fixture import HOSPITALS, clinic_policy


def local(sql: str) -> str:
    tree = sqlglot.parse_one(sql, read="postgres")
    assert isinstance(tree, exp.Select)
    return local_statement(tree, HOSPITALS).sql(dialect="postgres")


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (  # the federation's name stays the qualifier the analyst may use
            "SELECT region, COUNT(*) FROM hospitals WHERE hospitals.age > 3 GROUP BY region",
            "SELECT region, COUNT(*) FROM visits AS hospitals WHERE hospitals.age > 3 GROUP BY region",
        ),
        (  # an alias the analyst gave is kept
            "SELECT h.region, COUNT(*) FROM hospitals AS h WHERE h.age > 3 GROUP BY h.region",
            "SELECT h.region, COUNT(*) FROM visits AS h WHERE h.age > 3 GROUP BY h.region",
        ),
    ],
)
def test_each_site_runs_the_statement_over_its_own_table(sql: str, expected: str) -> None:
    assert local(sql) == expected


def test_the_statement_itself_is_not_changed() -> None:
    tree = sqlglot.parse_one("SELECT COUNT(*) FROM hospitals AS h", read="postgres")
    assert isinstance(tree, exp.Select)
    local_statement(tree, HOSPITALS)
    assert tree.sql(dialect="postgres") == "SELECT COUNT(*) FROM hospitals AS h"


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT COUNT(*) FROM hospitals JOIN zones ON hospitals.region = zones.code", "cannot be joined"),
        ("WITH h AS (SELECT * FROM hospitals) SELECT COUNT(*) FROM h", "cannot be read beside a WITH query"),
        (
            "SELECT COUNT(*) FROM hospitals UNION ALL SELECT COUNT(*) FROM hospitals",
            "cannot be combined by UNION: send its count as a SELECT statement of its own",
        ),
        (
            "SELECT COUNT(*) FROM hospitals EXCEPT SELECT 1",
            "cannot be combined by EXCEPT: send its count as a SELECT statement of its own",
        ),
        (
            "COPY (SELECT region, COUNT(*) FROM hospitals GROUP BY region) TO STDOUT",
            "cannot be read by COPY: send its count as a SELECT statement of its own",
        ),
        (
            "SELECT COUNT(*) FROM hospitals WHERE region IN (SELECT region FROM hospitals)",
            "cannot be read with other tables or subqueries",
        ),
        ("DELETE FROM hospitals", "can only be read by SELECT, not by DELETE"),
    ],
)
def test_a_federation_is_counted_only_on_its_own_and_each_refusal_says_why(sql: str, reason: str) -> None:
    """A federation releases joint counts of its own rows and nothing else; each other shape is refused
    before any spend with what is wrong in it (a COPY used to be told it was not "on its own")."""
    with pytest.raises(UnsupportedQueryError) as refused:
        federation_read(sqlglot.parse_one(sql, read="postgres"), {"hospitals": HOSPITALS})
    assert refused.value.message == f"federation hospitals {reason}"


def test_statements_naming_no_federation_read_none() -> None:
    tree = sqlglot.parse_one("SELECT COUNT(*) FROM visits", read="postgres")
    assert federation_read(tree, {"hospitals": HOSPITALS}) is None
    assert federation_read(tree, {}) is None


def count_position(sql: str) -> int:
    tree = sqlglot.parse_one(sql, read="postgres")
    assert isinstance(tree, exp.Select)
    statement = classify(local_statement(tree, HOSPITALS), clinic_policy())
    assert isinstance(statement, PrivateQuery)
    return count_column(statement.shape, HOSPITALS)


@pytest.mark.parametrize(
    ("sql", "position"),
    [
        ("SELECT region, COUNT(*) FROM hospitals GROUP BY region", 1),
        ("SELECT COUNT(*) AS n, region FROM hospitals WHERE age > 30 GROUP BY region", 0),
    ],
)
def test_the_count_is_found_where_the_analyst_put_it(sql: str, position: int) -> None:
    assert count_position(sql) == position


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT region, COUNT(*) FROM hospitals GROUP BY region ORDER BY 2",  # no plain column list
        "SELECT region, region AS again, COUNT(*) FROM hospitals GROUP BY region",  # a column too many
        "SELECT region, COUNT(*) + 1 FROM hospitals GROUP BY region",
    ],
)
def test_a_federated_count_is_answered_only_as_it_is(sql: str) -> None:
    with pytest.raises(UnsupportedQueryError, match="a federated count is answered as it is"):
        count_position(sql)
