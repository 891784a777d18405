"""Survivors of the second fresh mutation sample (seed 1145, docs/testing.md): GROUP BY by position, and the
kind of a CAST to a type Veil has no kind for."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.analysis.output_names import output_name
from proxy.analysis.statements import PrivateQuery
from proxy.analysis.value_kinds import Kind, value_kind
from proxy.errors import UnknownColumnError, UnsupportedQueryError
from proxy.query.service import QueryService
from tests.unit.proxy import test_service_answers as answers
from tests.unit.proxy.people_fixture import people
from tests.unit.proxy.test_mutants_an_joins import classified, refusal
from tests.unit.proxy.test_service_answers import run

service = answers.service  # the clinic on DuckDB: 3,000 visits, ages 20–69


@pytest.mark.parametrize(
    ("sql", "key"),
    [
        ("SELECT COUNT(*), region FROM visits GROUP BY 2", "region"),  # the last item of the select list
        ("SELECT region, COUNT(*) FROM visits GROUP BY 1", "region"),
        ("SELECT sex, region, COUNT(*) FROM visits GROUP BY 2, 1", "region"),
    ],
)
def test_a_group_by_position_names_that_item_of_the_select_list(sql: str, key: str) -> None:
    statement = classified(sql)
    assert isinstance(statement, PrivateQuery)
    assert statement.shape.group_keys[0].expression.sql() == key


@pytest.mark.parametrize("position", [0, 3])
def test_a_group_by_position_outside_the_select_list_is_refused_free(position: int) -> None:
    sqlstate, message, _ = refusal(
        f"SELECT COUNT(*), region FROM visits GROUP BY {position}", UnknownColumnError
    )
    assert (sqlstate, message) == ("42703", f"GROUP BY position {position} is not in select list")


@pytest.mark.parametrize("target", ["uuid", "bytea", "json"])
def test_a_cast_to_a_type_without_a_kind_is_unknown_and_refused_in_a_private_query(target: str) -> None:
    """``value_kind`` is total (its callers treat UNKNOWN as untyped); the analysis refuses such a CAST
    over private data before any engine query, by its type."""
    node = sqlglot.parse_one(f"CAST(born AS {target.upper()})", dialect="postgres")
    assert value_kind(node, table=people()) is Kind.UNKNOWN
    sql = f"SELECT COUNT(*) FROM visits WHERE CAST(note AS {target.upper()}) IS NULL"
    sqlstate, message, _ = refusal(sql, UnsupportedQueryError)
    assert (sqlstate, message) == ("0A000", f"CAST to {target} is not supported in a query on private data")


@pytest.mark.parametrize(
    ("sql", "keys"),
    [
        # DuckDB's power() overflows to infinity where PostgreSQL fails: made error-free in DuckDB's way
        ("SELECT power(age, 200) > 1 AS k, COUNT(*) FROM visits GROUP BY 1", [False, True]),
        # a text-to-integer CAST is TRY_CAST on DuckDB, not refused as on a PostgreSQL dataset
        ("SELECT CAST(CAST(age AS TEXT) AS INTEGER) AS k, COUNT(*) FROM visits GROUP BY 1", list(range(101))),
    ],
)
def test_a_group_by_expression_is_made_error_free_in_the_datasets_own_dialect(
    service: QueryService, sql: str, keys: list[object]
) -> None:
    """The bounded query's key is rewritten for the engine that runs it (rewrite/bound_contributions.py
    ``_key``); PostgreSQL's rewrite on DuckDB refused the CAST and made the engine fail on power()."""
    outcome = run(service, sql, **{"veil.epsilon": "1"})
    assert outcome.table is not None
    assert [key for key, _ in outcome.table.rows] == keys
    assert outcome.charge is not None and outcome.charge.epsilon == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("item", "name"),
    [
        ("version()", "version"),  # sqlglot's own name would be current_version
        ("current_user", "current_user"),
        ("current_database()", "current_database"),
        ("current_schema()", "current_schema"),
        ("var_pop(x)", "var_pop"),  # sqlglot's: variance_pop
        ("variance(x)", "variance"),
        ("stddev_pop(x)", "stddev_pop"),
        ("stddev(x)", "stddev"),
        ("stddev_samp(x)", "stddev_samp"),
    ],
)
def test_functions_sqlglot_renames_get_postgresqls_column_name(item: str, name: str) -> None:
    """Clients and pandas read result columns by the names PostgreSQL gives them (seed 1145: a mutant that
    skipped this table timed out in an end-to-end test instead of failing a quick one)."""
    assert output_name(sqlglot.parse_one(item, dialect="postgres")) == name
