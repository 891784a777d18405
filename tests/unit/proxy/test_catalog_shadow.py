"""The shadow database mirrors the policy — tables, columns, types, privacy annotations — and holds no row."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import duckdb
import pytest

from proxy.analysis.parse import parse_statements
from proxy.catalog.comments import MAX_LISTED_VALUES, column_comment, table_comment
from proxy.catalog.shadow import DATASET_SCHEMA, ShadowCatalog, array_text, build_shadow
from proxy.config import ColumnPolicy, ColumnType, TablePolicy
from proxy.release.apply import ReleasedTable
from proxy.rewrite.session_info import SessionInfo
from tests.unit.proxy.policy_fixture import clinic_policy

INFO = SessionInfo(version="PostgreSQL 16.0 (Veil test)", user="alice", database="clinic")


@pytest.fixture(scope="module")
def catalog() -> ShadowCatalog:
    return ShadowCatalog(clinic_policy())  # its path does not exist: the shadow never opens the data


@pytest.fixture(scope="module")
def shadow() -> Iterator[duckdb.DuckDBPyConnection]:
    connection, _ = build_shadow(clinic_policy())
    yield connection
    connection.close()


def ask(catalog: ShadowCatalog, sql: str) -> ReleasedTable:
    (tree,) = parse_statements(sql)
    return catalog.answer(tree, info=INFO, setting=lambda _name: None)  # type: ignore[arg-type]


def rows(catalog: ShadowCatalog, sql: str) -> list[tuple[Any, ...]]:
    return ask(catalog, sql).rows


def test_every_policy_table_is_a_relation_of_schema_public(catalog: ShadowCatalog) -> None:
    tables = rows(
        catalog,
        "SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY 1",
    )
    assert [name for (name,) in tables] == sorted(clinic_policy().tables)


def test_columns_and_types_follow_the_policy(catalog: ShadowCatalog) -> None:
    columns = rows(
        catalog,
        "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_attribute a "
        "WHERE a.attrelid = 'public.visits'::regclass AND a.attnum > 0 ORDER BY a.attnum",
    )
    declared = clinic_policy().tables["visits"].columns
    assert [name for name, _ in columns] == list(declared)
    expected = {"integer": "bigint", "real": "double precision", "text": "text"}
    assert [type_name for _, type_name in columns] == [expected[c.type.value] for c in declared.values()]


def test_boolean_and_date_columns_have_their_postgresql_types(catalog: ShadowCatalog) -> None:
    (smoker,) = rows(
        catalog,
        "SELECT format_type(atttypid, NULL) FROM pg_attribute "
        "WHERE attrelid = 'people'::regclass AND attname = 'smoker'",
    )
    assert smoker == ("boolean",)
    assert rows(catalog, "SELECT format_type(1082, -1), format_type(1043, 68)") == [
        ("date", "character varying(64)")
    ]


def test_column_comments_carry_the_privacy_annotations(catalog: ShadowCatalog) -> None:
    comments = dict(
        rows(
            catalog,
            "SELECT attname, pg_catalog.col_description(attrelid, attnum) FROM pg_catalog.pg_attribute "
            "WHERE attrelid = 'visits'::regclass AND attnum > 0",
        )
    )
    assert comments["age"] == "private: aggregate only; values are clamped to [0, 100]"
    assert comments["cost"] == "private: aggregate only; values are clamped to [-50, 500.5]"
    assert comments["region"] == "public: may be grouped by; values: north, south"
    assert comments["patient_id"].startswith("privacy unit: identifies the person")
    assert comments["note"] == "private: aggregate only (COUNT) or filter on it in WHERE"


def test_table_comments_carry_the_privacy_unit_and_max_contributions(catalog: ShadowCatalog) -> None:
    comments = dict(
        rows(
            catalog,
            "SELECT c.relname, pg_catalog.obj_description(c.oid, 'pg_class') FROM pg_catalog.pg_class c "
            "WHERE c.relnamespace = 'public'::regnamespace",
        )
    )
    assert comments["visits"] == (
        "private table: answers differentially private aggregates only; privacy unit: patient_id; "
        "max_contributions: 3 rows per person"
    )
    assert comments["people"].endswith("privacy unit: row (each row is a different person)")
    assert comments["ratings"].endswith(
        "max_contributions: auto (each query chooses it with DP, at most 100)"
    )
    assert comments["zones"] == "public lookup table: its rows are public and are read exactly; key: code"


def test_the_dataset_tables_hold_no_row(shadow: duckdb.DuckDBPyConnection) -> None:
    for table in clinic_policy().tables:
        (count,) = shadow.execute(f"SELECT count(*) FROM {DATASET_SCHEMA}.{table}").fetchone() or (None,)
        assert count == 0, table


def test_nothing_in_the_catalog_estimates_the_data(catalog: ShadowCatalog) -> None:
    sizes = rows(
        catalog,
        "SELECT c.reltuples, c.relpages, pg_catalog.pg_table_size(c.oid), pg_catalog.pg_total_relation_size(c.oid) "
        "FROM pg_catalog.pg_class c WHERE c.relname = 'visits'",
    )
    assert sizes == [(-1.0, 0, None, None)]
    assert rows(catalog, "SELECT count(*) FROM pg_catalog.pg_stats") == [(0,)]
    assert rows(catalog, "SELECT count(*) FROM pg_catalog.pg_statistic") == [(0,)]


def test_the_database_is_the_dataset_and_the_owner_is_veil(catalog: ShadowCatalog) -> None:
    assert rows(
        catalog,
        "SELECT datname, pg_catalog.pg_get_userbyid(datdba), pg_encoding_to_char(encoding) FROM pg_database",
    ) == [("clinic", "veil", "UTF8")]


def test_oids_are_stable_and_regclass_resolves_both_ways(catalog: ShadowCatalog) -> None:
    ((oid,),) = rows(catalog, "SELECT 'visits'::regclass::oid")
    assert rows(catalog, "SELECT 'visits'::regclass::oid") == [(oid,)]
    assert rows(catalog, f"SELECT {oid}::regclass, 'pg_class'::regclass::oid") == [("visits", 1259)]
    assert rows(catalog, "SELECT 'information_schema.columns'::regclass::text") == [
        ("information_schema.columns",)
    ]


def test_the_catalog_describes_itself(catalog: ShadowCatalog) -> None:
    assert rows(catalog, "SELECT relkind FROM pg_class WHERE oid = 'pg_catalog.pg_class'::regclass") == [
        ("v",)
    ]
    assert ("attname", "text") in rows(
        catalog, "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 1249"
    )


def test_information_schema_lists_the_columns(catalog: ShadowCatalog) -> None:
    columns = rows(
        catalog,
        "SELECT column_name, data_type, ordinal_position FROM information_schema.columns "
        "WHERE table_schema = 'public' AND table_name = 'people' ORDER BY ordinal_position",
    )
    assert columns == [("income", "double precision", 1), ("smoker", "boolean", 2)]


def test_pg_type_knows_the_builtin_types_and_their_arrays(catalog: ShadowCatalog) -> None:
    assert rows(
        catalog, "SELECT typname, typarray, typcategory FROM pg_type WHERE oid IN (20, 1016) ORDER BY oid"
    ) == [("int8", 1016, "N"), ("_int8", 0, "A")]
    assert rows(catalog, "SELECT to_regtype('integer'), to_regtype('hstore')") == [(23, None)]


def test_arrays_are_sent_in_postgresql_text_form(catalog: ShadowCatalog) -> None:
    table = ask(catalog, "SELECT current_schemas(true) AS path, ARRAY['a b', NULL, 'c'] AS odd")
    assert table.rows == [("{pg_catalog,public}", '{"a b",NULL,c}')]
    assert [column.type for column in table.columns] == [ColumnType.TEXT, ColumnType.TEXT]


def test_array_text_quotes_what_postgresql_quotes() -> None:
    assert array_text([1, None, "", "x,y", 'q"', [True, False]]) == '{1,NULL,"","x,y","q\\"",{t,f}}'


def test_long_public_domains_are_summarized() -> None:
    values = tuple(range(1900, 2026))
    column = ColumnPolicy("year", ColumnType.INTEGER, public=True, values=values)
    table = TablePolicy("films", "person_id", 1, {"year": column})
    comment = column_comment(table, column)
    assert comment.startswith("public: may be grouped by; values: 1900, 1901,")
    assert comment.endswith(f"1919, … ({len(values)} values)")
    assert comment.count(",") == MAX_LISTED_VALUES
    assert table_comment(table).endswith("max_contributions: 1 row per person")


def test_pg_database_lists_every_dataset_and_pg_roles_the_asking_analyst_only() -> None:
    catalog = ShadowCatalog(clinic_policy(), databases=("archive", "clinic"))
    assert rows(catalog, "SELECT datname FROM pg_database ORDER BY oid") == [("clinic",), ("archive",)]
    assert rows(catalog, "SELECT rolname FROM pg_roles ORDER BY rolname") == [("alice",), ("veil",)]
    other = SessionInfo(version=INFO.version, user="bob", database="clinic")
    table = catalog.answer(
        parse_statements("SELECT rolname FROM pg_roles")[0], info=other, setting=lambda _: None
    )
    assert sorted(table.rows) == [("bob",), ("veil",)]


def test_pg_get_keywords_lists_postgresql_keywords() -> None:
    catalog = ShadowCatalog(clinic_policy())
    assert rows(catalog, "SELECT catcode FROM pg_get_keywords() WHERE word = 'select'") == [("R",)]
    assert rows(catalog, "SELECT COUNT(*) FROM pg_catalog.pg_get_keywords()")[0][0] == 460
