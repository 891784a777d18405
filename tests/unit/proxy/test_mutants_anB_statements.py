"""Statements that are not queries on private data (analysis/statements.py: the catalog) and the group keys
the planner completes (shape.py ``GroupKey.with_domain``)."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from proxy.analysis.shape import GroupKey
from proxy.analysis.statements import BudgetQuery, PrivateQuery, TransactionStatement, classify
from proxy.config import ColumnType
from proxy.errors import PolicyViolationError, UnsupportedQueryError
from tests.unit.proxy.policy_fixture import clinic_policy
from tests.unit.proxy.test_moment_domains import lab
from tests.unit.proxy.test_mutants_an_joins import classified


@pytest.mark.parametrize("sql", ["INSERT INTO pg_class VALUES (1)", "DELETE FROM pg_class"])
def test_a_write_to_the_catalog_is_refused_as_read_only(sql: str) -> None:
    with pytest.raises(UnsupportedQueryError) as refused:
        classified(sql)
    assert (refused.value.sqlstate, refused.value.message, refused.value.hint) == (
        "0A000",
        "only SELECT statements may read the catalog",
        "Veil's catalog is read-only",
    )


def test_the_catalog_read_with_a_dataset_table_is_refused_saying_why() -> None:
    """The catalog is answered from a schema-only database: joined with a table, it would need the rows."""
    with pytest.raises(PolicyViolationError) as refused:
        classified("SELECT COUNT(*) FROM pg_class, visits")
    error = refused.value
    assert (error.sqlstate, error.message) == (
        "42501",
        'catalog relations cannot be read together with table "visits"',
    )
    assert error.detail == "catalog queries are answered from the schema alone, never from the dataset's rows"
    assert error.hint == "query the catalog and the dataset's tables in separate statements"


@pytest.mark.parametrize("thresholded", [False, True])
def test_a_key_given_its_domain_keeps_everything_else(thresholded: bool) -> None:
    """The planner fills in a key's public domain (query/planning.py); whether its keys come from the data
    (τ-thresholding, charged δ) must not change with it, and the key is part of the answer cache's key."""
    source = clinic_policy().table("visits").column("region")  # type: ignore[union-attr]
    assert source is not None
    key = GroupKey(exp.column("region"), source, None, ColumnType.TEXT, thresholded, ("zones", "code"))
    completed = key.with_domain(("north", "south"), ColumnType.TEXT)
    assert completed == GroupKey(
        exp.column("region"), source, ("north", "south"), ColumnType.TEXT, thresholded, ("zones", "code")
    )
    assert completed.thresholded is thresholded


@pytest.mark.parametrize(
    "sql", ["SELECT COUNT(*) FROM visits TABLESAMPLE (10)", "SELECT COUNT(*) FROM visits USING SAMPLE 10"]
)
def test_sampling_a_private_table_is_refused_rather_than_ignored(sql: str) -> None:
    """An answer over the whole table while the analyst believes it sampled would be a wrong answer."""
    with pytest.raises(UnsupportedQueryError) as refused:
        classified(sql)
    error = refused.value
    assert (error.sqlstate, error.message) == (
        "0A000",
        "TABLESAMPLE and USING SAMPLE are not supported on private tables",
    )
    assert error.detail == "the noise already hides every person; a sample would only add error"
    assert (
        error.hint
        == "remove the sampling clause: the answer over the whole table is cheaper in accuracy for the same ε"
    )


def test_a_timestamp_column_grouped_as_it_is_takes_its_keys_from_the_data() -> None:
    """A timestamp's own values (every second) have no public domain: its declared range gives the days
    between its bounds, which are the domain of ``date_trunc('day', ts)``, not of ``ts`` — read as the
    domain of ``ts``, every instant not at midnight would be dropped and the keys charged as public."""
    tree = sqlglot.parse_one("SELECT ts, COUNT(*) FROM events GROUP BY ts", read="postgres")
    statement = classify(tree, lab())
    assert isinstance(statement, PrivateQuery)
    (key,) = statement.shape.group_keys
    assert (key.thresholded, key.values) == (True, None)


@pytest.mark.parametrize("sql", ["SELECT * FROM veil.budget", "SELECT remaining_epsilon FROM Veil.Budget"])
def test_the_budget_view_is_read_from_the_ledger_whatever_its_case(sql: str) -> None:
    """veil.budget is the analyst's own budget, free: read as a dataset table it would be unknown."""
    assert isinstance(classified(sql), BudgetQuery)


@pytest.mark.parametrize(
    ("sql", "statement"),
    [
        ("ROLLBACK TO SAVEPOINT s", TransactionStatement("ROLLBACK", to_savepoint=True)),
        ("ROLLBACK", TransactionStatement("ROLLBACK")),
        ("RELEASE SAVEPOINT s", TransactionStatement("RELEASE")),
    ],
)
def test_savepoint_commands_are_transaction_statements(sql: str, statement: TransactionStatement) -> None:
    """A rollback to a savepoint keeps the block open; a plain one ends it (psycopg nests savepoints)."""
    assert classified(sql) == statement
