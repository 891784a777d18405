"""A boolean cast to boolean on PostgreSQL (proxy/rewrite/safe_predicates.py, ``_cast``): it cannot fail, so
it is kept as written — with its target type. The answer it gives on a real server is checked in
tests/postgres/test_boolean_cast_postgres.py."""

from __future__ import annotations

from sqlglot import parse_one

from proxy.rewrite.safe_predicates import error_free
from tests.unit.proxy.people_fixture import people


def test_a_boolean_cast_to_boolean_keeps_its_type_on_postgres() -> None:
    """``CAST(smoker AS BOOLEAN)`` with ``smoker`` a boolean column is kept, target type included: without
    it sqlglot writes ``CAST(smoker AS)``, a syntax error on PostgreSQL — after the query was charged."""
    safe = error_free(
        parse_one("CAST(smoker AS BOOLEAN)", read="postgres"), table=people(), dialect="postgres"
    )
    assert safe.sql(dialect="postgres") == "CAST(smoker AS BOOLEAN)"
