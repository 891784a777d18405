"""The kind of value an expression computes, as PostgreSQL types it (analysis/value_kinds.py)."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.analysis.value_kinds import Kind, value_kind
from tests.unit.proxy.people_fixture import people

KINDS = {
    "age": Kind.NUMBER,
    "note": Kind.TEXT,
    "born": Kind.DATE,
    "smoker": Kind.BOOLEAN,
    "born + 30": Kind.DATE,
    "30 + born": Kind.DATE,
    "born - 30": Kind.DATE,
    "born - born": Kind.NUMBER,
    "born + INTERVAL '1' DAY": Kind.TIMESTAMP,
    "INTERVAL '1' DAY + born": Kind.TIMESTAMP,
    "CAST(born AS TIMESTAMP) - born": Kind.INTERVAL,
    "INTERVAL '1' DAY * 3": Kind.INTERVAL,
    "date_trunc('month', born)": Kind.TIMESTAMP,
    "current_date": Kind.DATE,
    "EXTRACT(year FROM born)": Kind.NUMBER,
    "length(note) * 2": Kind.NUMBER,
    "CASE WHEN age > 1 THEN NULL ELSE born END": Kind.DATE,
    "CASE WHEN age > 1 THEN born END": Kind.DATE,
    "COALESCE(NULL, born + 1)": Kind.DATE,
    "age > 1 AND smoker": Kind.BOOLEAN,
    "note || 'x'": Kind.TEXT,
    "age + note": Kind.UNKNOWN,  # PostgreSQL refuses it when it plans the query
    "born + born": Kind.UNKNOWN,
}


@pytest.mark.parametrize(("sql", "kind"), KINDS.items())
def test_kind(sql: str, kind: Kind) -> None:
    assert value_kind(sqlglot.parse_one(sql, dialect="postgres"), table=people()) is kind
