"""Which statements are catalog queries, and how a catalog query that reaches the dataset is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import (
    CatalogQuery,
    ConstantQuery,
    PrivateQuery,
    ShowStatement,
    TransactionStatement,
    classify,
    classify_transaction,
)
from proxy.config import DatasetPolicy, parse_config
from proxy.errors import ProxyError
from tests.unit.proxy.policy_fixture import POLICY, clinic_policy


def classify_sql(sql: str, dataset: DatasetPolicy | None = None) -> object:
    (tree,) = parse_statements(sql)
    return classify(tree, dataset or clinic_policy())


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT relname FROM pg_catalog.pg_class",
        "SELECT relname FROM pg_class",  # pg_catalog is searched first, as in PostgreSQL
        "SELECT table_name FROM information_schema.tables",
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace",
        "SELECT nspname FROM pg_namespace UNION SELECT datname FROM pg_database",
        "WITH RECURSIVE t(oid) AS (SELECT oid FROM pg_type) SELECT oid FROM t",
        "SELECT pg_catalog.version()",
        "SELECT * FROM unnest(current_schemas(true))",
        "SELECT format_type(20, NULL)",
        "SELECT has_table_privilege('visits', 'SELECT')",
        "SELECT pg_encoding_to_char(6)",
        "SELECT 'visits'::regclass",
        "SELECT current_schema(), session_user",  # DBeaver, on connect
        "SELECT string_agg(word, ',') FROM pg_catalog.pg_get_keywords()",  # DBeaver: a catalog table function
    ],
)
def test_reads_of_the_catalog_are_catalog_queries(sql: str) -> None:
    assert isinstance(classify_sql(sql), CatalogQuery)


@pytest.mark.parametrize("sql", ["SELECT version()", "SELECT current_schema()", "SELECT 1 + 1 AS two"])
def test_constant_queries_stay_constant(sql: str) -> None:
    assert isinstance(classify_sql(sql), ConstantQuery)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM visits, pg_class",
        "SELECT relname FROM pg_class WHERE relname IN (SELECT region FROM visits)",
        "SELECT c.relname FROM pg_catalog.pg_class c JOIN public.zones z ON z.code = c.relname",
        "WITH t AS (SELECT region FROM visits) SELECT relname FROM pg_class, t",
        "SELECT relname FROM pg_class UNION SELECT note FROM visits",
    ],
)
def test_catalog_relations_mixed_with_dataset_tables_are_refused(sql: str) -> None:
    with pytest.raises(ProxyError, match="catalog relations cannot be read together with table") as raised:
        classify_sql(sql)
    assert raised.value.sqlstate == "42501"


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM pg_catalog.pg_class",
        "SELECT * INTO pg_copy FROM pg_class",
        "CREATE TABLE pg_mine AS SELECT relname FROM pg_class",
        "UPDATE pg_class SET relname = 'x'",
    ],
)
def test_the_catalog_is_read_only(sql: str) -> None:
    with pytest.raises(ProxyError, match="only SELECT statements may read the catalog") as raised:
        classify_sql(sql)
    assert raised.value.sqlstate == "0A000"


def test_a_dataset_table_named_like_a_catalog_keeps_its_privacy() -> None:
    policy = POLICY + '\n[datasets.clinic.tables.pg_notes]\nprivacy_unit = "row"\n'
    policy += '[datasets.clinic.tables.pg_notes.columns]\nnote = { type = "text" }\n'
    dataset = parse_config(policy, path=Path("/nonexistent/veil.toml")).dataset("clinic")
    assert dataset is not None
    assert isinstance(classify_sql("SELECT COUNT(*) FROM pg_notes", dataset), PrivateQuery)
    with pytest.raises(ProxyError, match=r"column \"note\" is private"):
        classify_sql("SELECT note FROM pg_notes", dataset)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ('SAVEPOINT "_pg3_1"', TransactionStatement("SAVEPOINT")),
        ('RELEASE "_pg3_1"', TransactionStatement("RELEASE")),
        ("RELEASE SAVEPOINT sp", TransactionStatement("RELEASE")),
        ("ROLLBACK TO SAVEPOINT sp", TransactionStatement("ROLLBACK", to_savepoint=True)),
        ("ROLLBACK", TransactionStatement("ROLLBACK")),
    ],
)
def test_savepoints_are_transaction_statements(sql: str, expected: TransactionStatement) -> None:
    (tree,) = parse_statements(sql)
    assert classify_transaction(tree) == expected


def test_show_transaction_isolation_level_is_the_setting() -> None:
    assert classify_sql("show transaction isolation level") == ShowStatement("transaction_isolation")
