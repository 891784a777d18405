"""UNION ALL of aggregate queries (analysis/set_operations.py, analysis/statements.py ``UnionQuery``)."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.analysis.parse import parse_statements
from proxy.analysis.set_operations import UnionModifiers, UnionOrder, union_modifiers, union_parts
from proxy.analysis.statements import PublicQuery, UnionQuery, classify
from proxy.backends.duckdb import DuckDBBackend
from proxy.errors import PolicyViolationError, ProxyError
from proxy.query.explain import explain_query
from tests.unit.proxy.policy_fixture import clinic_policy


def classify_sql(sql: str) -> object:
    (tree,) = parse_statements(sql)
    return classify(tree, clinic_policy())


def test_a_chain_of_union_all_is_its_parts_in_order() -> None:
    tree = sqlglot.parse_one(
        "SELECT 1 FROM a UNION ALL (SELECT 2 FROM b) UNION ALL SELECT 3 FROM c", read="postgres"
    )
    assert [part.sql() for part in union_parts(tree)] == [
        "SELECT 1 FROM a",
        "SELECT 2 FROM b",
        "SELECT 3 FROM c",
    ]


def test_each_part_is_a_query_shape_of_its_own() -> None:
    statement = classify_sql(
        "SELECT 'all' AS region, COUNT(*) AS n FROM visits UNION ALL SELECT region, COUNT(*) FROM visits GROUP BY region"
    )
    assert isinstance(statement, UnionQuery)
    assert [len(part.group_keys) for part in statement.parts] == [0, 1]
    assert statement.output_names == ("region", "n")
    assert statement.modifiers == UnionModifiers()


def test_order_by_limit_and_offset_of_the_whole_statement() -> None:
    statement = classify_sql(
        "SELECT COUNT(*) AS n, 'a' AS k FROM visits UNION ALL SELECT COUNT(*), 'b' FROM patients"
        " ORDER BY n DESC, 2 LIMIT 1 OFFSET 1"
    )
    assert isinstance(statement, UnionQuery)
    assert statement.modifiers == UnionModifiers(
        (
            UnionOrder(0, descending=True, nulls_first=True),
            UnionOrder(1, descending=False, nulls_first=False),
        ),
        1,
        1,
    )


def test_a_union_of_public_tables_is_a_public_query() -> None:
    assert isinstance(classify_sql("SELECT code FROM zones UNION ALL SELECT zone FROM zones"), PublicQuery)


@pytest.mark.parametrize(
    ("sql", "sqlstate", "message"),
    [
        ("SELECT COUNT(*) FROM visits UNION SELECT COUNT(*) FROM patients", "42501", "UNION without ALL"),
        ("SELECT COUNT(*) FROM visits INTERSECT SELECT COUNT(*) FROM patients", "42501", "INTERSECT"),
        ("SELECT COUNT(*) FROM visits EXCEPT SELECT COUNT(*) FROM patients", "42501", "EXCEPT"),
        ("SELECT COUNT(*) FROM visits UNION ALL SELECT 1", "42501", "each part of a UNION ALL"),
        (
            "SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*) FROM zones",
            "42501",
            "each part of a UNION ALL",
        ),
        (
            "SELECT COUNT(*) FROM visits UNION ALL SELECT veil_ttest(cost, age > 3) FROM visits",
            "42501",
            "each part",
        ),
        (
            "SELECT COUNT(*), 1 FROM visits UNION ALL SELECT COUNT(*) FROM visits",
            "42601",
            "same number of columns",
        ),
        (
            "SELECT COUNT(*) AS n FROM visits UNION ALL SELECT COUNT(*) FROM visits ORDER BY n + 1",
            "0A000",
            "ORDER BY clause",
        ),
        (
            "SELECT COUNT(*) AS n FROM visits UNION ALL SELECT COUNT(*) FROM visits ORDER BY 3",
            "42703",
            "position 3",
        ),
        ("SELECT COUNT(*) AS n FROM visits UNION ALL SELECT COUNT(*) FROM visits LIMIT -1", "42601", "LIMIT"),
        (
            "SELECT COUNT(*) FROM visits UNION ALL (SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*) FROM"
            " visits LIMIT 1)",
            "42501",
            "only as the whole statement",
        ),
        ("SELECT COUNT(*) FROM visits UNION ALL SELECT age FROM visits", "42501", 'column "age" is private'),
    ],
)
def test_refusals(sql: str, sqlstate: str, message: str) -> None:
    with pytest.raises(ProxyError, match=message) as raised:
        classify_sql(sql)
    assert raised.value.sqlstate == sqlstate


def test_union_modifiers_refuse_an_ambiguous_name() -> None:
    tree = sqlglot.parse_one(
        "SELECT 1 AS n, 2 AS n FROM a UNION ALL SELECT 1, 2 FROM b ORDER BY n", read="postgres"
    )
    assert isinstance(tree, sqlglot.exp.Union)
    with pytest.raises(ProxyError, match="ambiguous"):
        union_modifiers(tree, ("n", "n"))


def test_refusals_are_policy_violations() -> None:
    with pytest.raises(PolicyViolationError):
        classify_sql("SELECT COUNT(*) FROM visits INTERSECT SELECT COUNT(*) FROM visits")


def test_explain_prices_each_part_at_its_share() -> None:
    sandbox = DuckDBBackend.sandbox()
    try:
        explanation = explain_query(
            clinic_policy(),
            "SELECT 'all', COUNT(*) FROM visits UNION ALL SELECT region, COUNT(*) FROM visits GROUP BY region",
            backend=sandbox,
            epsilon=1.0,
        )
    finally:
        sandbox.close()
    assert explanation.epsilon == 1.0 and explanation.cells == 3
    assert [(m.quantity, m.epsilon) for m in explanation.measurements] == [
        ("part 1: count(*)", 0.5),
        ("part 2: count(*)", 0.5),
    ]
    assert explanation.engine_sql is not None and explanation.engine_sql.count("-- part") == 2
    assert explanation.notes[0] == "UNION ALL of 2 parts: each is answered on its own with ε = 0.5"
