"""Which statements Veil answers, and how it refuses the rest (with the SQLSTATE clients see)."""

from __future__ import annotations

import pytest

from proxy.analysis.aggregates import AggregateKind
from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import (
    ConstantQuery,
    PrivateQuery,
    PublicQuery,
    ResetStatement,
    SetStatement,
    ShowStatement,
    TransactionStatement,
    classify,
)
from proxy.errors import ProxyError, QuerySyntaxError
from tests.unit.proxy.policy_fixture import clinic_policy


def classify_sql(sql: str) -> object:
    (tree,) = parse_statements(sql)
    return classify(tree, clinic_policy())


@pytest.mark.parametrize(
    ("sql", "kinds", "groups"),
    [
        ("SELECT COUNT(*) FROM visits", ["count_rows"], []),
        ("select count(note) from visits", ["count"], []),
        ("SELECT SUM(cost), AVG(age) FROM visits WHERE age > 30 AND note LIKE 'x%'", ["sum", "avg"], []),
        ("SELECT region, COUNT(*) FROM visits GROUP BY region", ["count_rows"], ["region"]),
        (
            "SELECT v.region, v.sex, AVG(v.cost) AS c FROM visits AS v GROUP BY v.region, v.sex",
            ["avg"],
            ["region", "sex"],
        ),
        ("SELECT smoker, COUNT(*) FROM people GROUP BY smoker", ["count_rows"], ["smoker"]),
        (
            "SELECT COUNT(*) FROM visits WHERE CAST(note AS INT) = 3 OR age BETWEEN 1 AND 5",
            ["count_rows"],
            [],
        ),
        ("SELECT COUNT(DISTINCT patient_id) FROM visits", ["count_units"], []),
        (
            "SELECT VAR_POP(age), STDDEV(cost), VARIANCE(age) FROM visits",
            ["var_pop", "stddev_samp", "var_samp"],
            [],
        ),
        (
            "SELECT region AS r, COUNT(*) AS n FROM visits GROUP BY r ORDER BY n DESC LIMIT 1",
            ["count_rows"],
            ["region"],
        ),
        (
            "SELECT region, SUM(cost) / COUNT(*) FROM visits GROUP BY 1 HAVING COUNT(*) > 10",
            ["sum", "count_rows"],
            ["region"],
        ),
        ("SELECT upper(region), COUNT(*) FROM visits GROUP BY region", ["count_rows"], ["region"]),
        ("SELECT MEDIAN(age), MIN(cost), MAX(age) FROM visits", ["quantile", "quantile", "quantile"], []),
        ("SELECT PERCENTILE_DISC(0.9) WITHIN GROUP (ORDER BY age) FROM visits", ["quantile"], []),
        ("SELECT SUM(age * 2), SUM(CASE WHEN age > 50 THEN 1 ELSE 0 END) FROM visits", ["sum", "sum"], []),
        (
            "SELECT AVG(veil_clamp(patient_id, 0, 10)), COUNT(CASE WHEN age > 50 THEN 1 END) FROM visits",
            ["avg", "count"],
            [],
        ),
        (
            "SELECT FLOOR(age / 10) * 10 AS decade, COUNT(*) FROM visits GROUP BY 1",
            ["count_rows"],
            ["FLOOR(age / 10) * 10"],
        ),
        (
            "SELECT COUNT(*) FROM visits AS v GROUP BY CASE WHEN v.age < 18 THEN 'minor' END",
            ["count_rows"],
            ["CASE WHEN age < 18 THEN 'minor' END"],
        ),
    ],
)
def test_accepts_bounded_aggregates(sql: str, kinds: list[str], groups: list[str]) -> None:
    statement = classify_sql(sql)
    assert isinstance(statement, PrivateQuery)
    assert [a.kind.value for a in statement.shape.aggregates] == kinds
    assert [key.label for key in statement.shape.group_keys] == groups


def test_same_aggregate_twice_is_measured_once() -> None:
    statement = classify_sql("SELECT COUNT(*) AS a, COUNT(*) AS b FROM visits")
    assert isinstance(statement, PrivateQuery)
    assert statement.shape.aggregates == (statement.shape.aggregates[0],)
    assert statement.shape.aggregates[0].kind is AggregateKind.COUNT_ROWS
    assert statement.shape.output_names == ("a", "b")


@pytest.mark.parametrize(
    ("sql", "sqlstate", "message"),
    [
        ("SELECT * FROM visits", "42501", "would reveal private rows"),
        ("SELECT age FROM visits", "42501", 'column "age" is private'),
        ("SELECT region FROM visits", "42501", "must appear in the GROUP BY"),
        ("SELECT patient_id, COUNT(*) FROM visits GROUP BY patient_id", "42501", "one group per person"),
        ("SELECT COUNT(*) FROM visits GROUP BY age + patient_id", "42501", "exactly one column"),
        ("SELECT COUNT(*) FROM visits GROUP BY random()", "42501", "not allowed in GROUP BY"),
        (
            "SELECT SUM(patient_id) FROM visits",
            "42501",
            'sum.patient_id.: column "patient_id" has no declared bounds',
        ),
        ("SELECT SUM(note) FROM visits", "42501", r'sum\(note\): column "note" is not numeric'),
        ("SELECT MAX(note) FROM visits", "42501", r'max\(note\): column "note" is not numeric'),
        ("SELECT MODE() WITHIN GROUP (ORDER BY note) FROM visits", "42501", "no public value domain"),
        ("SELECT MODE() WITHIN GROUP (ORDER BY age) FROM visits", "42501", "no public value domain"),
        ("SELECT mode(sex) FROM visits", "0A000", "not PostgreSQL's MODE aggregate"),
        ("SELECT MODE() WITHIN GROUP (ORDER BY lower(sex)) FROM visits", "0A000", "ORDER BY one column"),
        (
            "SELECT note, MODE() WITHIN GROUP (ORDER BY sex) FROM visits GROUP BY note",
            "42501",
            r"MODE\(\) with GROUP BY keys taken from the data",
        ),
        ("SELECT PERCENTILE_CONT(1.5) WITHIN GROUP (ORDER BY age) FROM visits", "42501", "between 0 and 1"),
        (
            "SELECT note, MEDIAN(age) FROM visits GROUP BY note",
            "42501",
            "quantiles with GROUP BY keys taken from the data",
        ),
        (
            "SELECT COUNT(DISTINCT age) FROM visits",
            "42501",
            "only supported as COUNT.DISTINCT <privacy unit>",
        ),
        ("SELECT COUNT(DISTINCT smoker) FROM people", "42501", "only supported as COUNT"),
        ("SELECT COUNT(*) FROM visits ORDER BY age", "42501", 'column "age" is private'),
        (
            "SELECT COUNT(*) FROM visits HAVING AVG(note) > 1",
            "42501",
            r'avg\(note\): column "note" is not numeric',
        ),
        ("SELECT COUNT(*) + age FROM visits", "42501", 'column "age" is private'),
        ("SELECT region, COUNT(*) FROM visits", "42501", "must appear in the GROUP BY"),
        ("SELECT COUNT(*) FROM visits GROUP BY 3", "42703", "not in select list"),
        (
            "SELECT SUM(cost / age) FROM visits",
            "42501",
            r"sum\(cost / age\): the range of cost / age cannot be derived from the policy",
        ),
        (
            "SELECT SUM(patient_id + 1) FROM visits",
            "42501",
            r"sum\(patient_id \+ 1\): the range of patient_id \+ 1",
        ),
        ("SELECT AVG(veil_clamp(age, 5, 1)) FROM visits", "42501", "lower < upper"),
        ("SELECT SUM(random() * age) FROM visits", "42501", "not allowed in an aggregate"),
        ("SELECT COUNT(*) FROM visits WHERE age IN (SELECT age FROM visits)", "42501", "subqueries"),
        ("SELECT COUNT(*) FROM visits WHERE random() < 0.5", "42501", "not allowed in WHERE"),
        ("SELECT COUNT(*) FROM visits WHERE SUM(age) > 1", "42501", "aggregate functions"),
        ("SELECT COUNT(*) FROM visits v JOIN people p ON true", "42501", "no privacy-unit column"),
        (
            "SELECT COUNT(*) FROM (SELECT region, COUNT(*) AS n FROM visits GROUP BY region) s",
            "42501",
            "must GROUP BY its privacy unit",
        ),
        ("SELECT COUNT(*) OVER () FROM visits", "42501", "window"),
        ("DELETE FROM visits", "42501", "only SELECT"),
        ("INSERT INTO zones VALUES ('x', 'X')", "0A000", "INSERT statements are not supported"),
        ("SELECT COUNT(*) FROM nowhere", "42P01", 'relation "nowhere" does not exist'),
        ("SELECT COUNT(missing) FROM visits", "42703", 'column "missing" does not exist'),
        ("SELECT COUNT(*) FROM visits WHERE x.age > 1", "42P01", "missing FROM-clause entry"),
        (  # an alias hides the table's own name, as in PostgreSQL
            "SELECT COUNT(*) FROM visits v WHERE visits.age > 1",
            "42P01",
            'invalid reference to FROM-clause entry for table "visits"',
        ),
        ("CREATE TABLE t (a int)", "0A000", "not supported"),
        ("SELECT read_csv('/etc/passwd')", "0A000", "read_csv"),
        ("SELECT 1 + (SELECT 2)", "0A000", "not supported"),
    ],
)
def test_refuses_with_sqlstate(sql: str, sqlstate: str, message: str) -> None:
    with pytest.raises(ProxyError, match=message) as raised:
        classify_sql(sql)
    assert raised.value.sqlstate == sqlstate
    if sqlstate == "42501":
        assert raised.value.hint, "refusals say what is allowed"


def test_syntax_error_carries_position() -> None:
    with pytest.raises(QuerySyntaxError) as raised:
        parse_statements("SELECT COUNT(*) FROM visits WHERE")
    assert raised.value.sqlstate == "42601"
    assert raised.value.position is not None and raised.value.position > 20


@pytest.mark.parametrize("sql", ['SET a = ""', 'SET veil.round = ""'])
def test_text_sqlglot_rejects_with_a_value_error_is_a_syntax_error(sql: str) -> None:
    """Not an internal error: PostgreSQL answers 42601 ("zero-length delimited identifier")."""
    with pytest.raises(QuerySyntaxError, match="syntax error") as raised:
        parse_statements(sql)
    assert raised.value.sqlstate == "42601" and raised.value.hint


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SET veil.epsilon = 0.5", SetStatement("veil.epsilon", "0.5")),
        ("SET application_name TO 'x'", SetStatement("application_name", "x")),
        ("SET extra_float_digits = -2", SetStatement("extra_float_digits", "-2")),
        ("SET veil.epsilon = DEFAULT", SetStatement("veil.epsilon", None)),
        ("SET TIME ZONE 'UTC'", SetStatement("TimeZone", "UTC")),
        ("SHOW veil.epsilon", ShowStatement("veil.epsilon")),
        ("RESET ALL", ResetStatement(None)),
        ("RESET veil.epsilon", ResetStatement("veil.epsilon")),
        ("BEGIN", TransactionStatement("BEGIN")),
        ("COMMIT", TransactionStatement("COMMIT")),
        ("ROLLBACK", TransactionStatement("ROLLBACK")),
    ],
)
def test_session_statements(sql: str, expected: object) -> None:
    assert classify_sql(sql) == expected


@pytest.mark.parametrize(
    ("sql", "names"),
    [
        ("SELECT 1", ("?column?",)),
        ("SELECT version()", ("version",)),
        ("SELECT current_user, current_database()", ("current_user", "current_database")),
        ("SELECT 1 AS one, 'a' || 'b'", ("one", "?column?")),
    ],
)
def test_constant_queries_get_postgres_column_names(sql: str, names: tuple[str, ...]) -> None:
    statement = classify_sql(sql)
    assert isinstance(statement, ConstantQuery)
    assert statement.output_names == names


@pytest.mark.parametrize(
    "sql",
    ["SELECT note, COUNT(*) FROM visits GROUP BY note", "SELECT COUNT(*) FROM visits GROUP BY cost + 1"],
)
def test_keys_without_a_public_domain_are_thresholded(sql: str) -> None:
    """Accepted by analysis; priced only with veil.delta > 0 (test_query_service_both_backends covers the refusal)."""
    statement = classify_sql(sql)
    assert isinstance(statement, PrivateQuery)
    assert statement.shape.thresholded
    assert statement.shape.cells is None


@pytest.mark.parametrize(
    ("sql", "bounds"),
    [
        ("SELECT SUM(age * 2) FROM visits", (0.0, 200.0)),
        ("SELECT SUM(age * cost) FROM visits", (-5000.0, 50050.0)),
        ("SELECT SUM(CASE WHEN age > 50 THEN 1 ELSE 0 END) FROM visits", (0.0, 1.0)),
        ("SELECT AVG(veil_clamp(patient_id, 0, 10)) FROM visits", (0.0, 10.0)),
        ("SELECT SUM(LEAST(GREATEST(patient_id, -1), 7)) FROM visits", (-1.0, 7.0)),
    ],
)
def test_expression_bounds_come_from_interval_analysis(sql: str, bounds: tuple[float, float]) -> None:
    statement = classify_sql(sql)
    assert isinstance(statement, PrivateQuery)
    source = statement.shape.aggregates[0].column
    assert source is not None
    assert (source.lower, source.upper) == bounds


def test_per_person_subquery_is_a_table_of_people() -> None:
    statement = classify_sql(
        "SELECT AVG(veil_clamp(n, 0, 20)) FROM (SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY patient_id) p"
    )
    assert isinstance(statement, PrivateQuery)
    assert statement.shape.table.privacy_unit is None, "one row per person"
    assert statement.shape.source is not None and statement.shape.source.table.name == "visits"


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT COUNT(*) FROM (SELECT region, COUNT(*) AS n FROM visits GROUP BY region) s",
            "GROUP BY its privacy unit",
        ),
        (
            "SELECT COUNT(*) FROM (SELECT patient_id, age FROM visits GROUP BY patient_id) s",
            "must be aggregated",
        ),
        (
            "SELECT COUNT(*) FROM (SELECT patient_id, COUNT(*) FROM visits GROUP BY patient_id) s",
            "needs an alias",
        ),
        (
            "SELECT AVG(n) FROM (SELECT patient_id, MIN(note) AS n FROM visits GROUP BY patient_id) s",
            r'avg\(n\): column "n" is not numeric',
        ),
        ("SELECT COUNT(*) FROM (SELECT age FROM visits GROUP BY age) s", "GROUP BY its privacy unit"),
        (
            "SELECT COUNT(*) FROM (SELECT smoker, COUNT(*) AS n FROM people GROUP BY smoker) s",
            "one person per row",
        ),
    ],
)
def test_other_subqueries_are_refused(sql: str, message: str) -> None:
    with pytest.raises(ProxyError, match=message) as raised:
        classify_sql(sql)
    assert raised.value.sqlstate == "42501"


def test_join_on_the_privacy_unit_multiplies_the_bounds() -> None:
    statement = classify_sql(
        "SELECT p.sex, AVG(v.cost) FROM visits v JOIN patients p ON v.patient_id = p.patient_id GROUP BY p.sex"
    )
    assert isinstance(statement, PrivateQuery)
    assert (statement.shape.table.privacy_unit, statement.shape.table.max_contributions) == (
        "v__patient_id",
        3,
    )
    assert statement.shape.output_names == ("sex", "avg")


@pytest.mark.parametrize(
    ("sql", "sqlstate", "message"),
    [
        ("SELECT COUNT(*) FROM visits v JOIN patients p ON v.age = p.age", "42501", "privacy units"),
        (
            "SELECT COUNT(*) FROM visits v LEFT JOIN patients p ON v.patient_id = p.patient_id",
            "42501",
            "inner joins",
        ),
        ("SELECT COUNT(*) FROM visits v CROSS JOIN patients p", "42501", "inner joins"),
        ("SELECT COUNT(*) FROM visits NATURAL JOIN patients", "42501", "privacy units"),
        (
            "SELECT COUNT(*) FROM visits v JOIN people p ON v.patient_id = p.smoker",
            "42501",
            "no privacy-unit column",
        ),
        ("SELECT COUNT(*) FROM visits v JOIN ratings r ON v.patient_id = r.user_id", "42501", "auto"),
        (
            "SELECT COUNT(age) FROM visits v JOIN patients p ON v.patient_id = p.patient_id",
            "42702",
            "ambiguous",
        ),
        (
            "SELECT COUNT(x.age) FROM visits v JOIN patients p USING (patient_id)",
            "42P01",
            "missing FROM-clause",
        ),
    ],
)
def test_other_joins_are_refused(sql: str, sqlstate: str, message: str) -> None:
    with pytest.raises(ProxyError, match=message) as raised:
        classify_sql(sql)
    assert raised.value.sqlstate == sqlstate


def test_queries_on_public_tables_only_are_answered_exactly() -> None:
    statement = classify_sql("SELECT zone, COUNT(*) FROM zones GROUP BY zone ORDER BY 1")
    assert isinstance(statement, PublicQuery)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT COUNT(*) FROM visits v JOIN zones z ON v.region = z.zone", "key"),
        ("SELECT COUNT(*) FROM zones z JOIN visits v ON v.region = z.code", "one private table first"),
        ("SELECT COUNT(*) FROM visits v RIGHT JOIN zones z ON v.region = z.code", "inner and left joins"),
    ],
)
def test_lookup_joins_are_checked(sql: str, message: str) -> None:
    with pytest.raises(ProxyError, match=message) as raised:
        classify_sql(sql)
    assert raised.value.sqlstate == "42501"


def test_public_queries_cannot_call_arbitrary_functions() -> None:
    with pytest.raises(ProxyError, match="not supported in a query on public tables"):
        classify_sql("SELECT read_csv('/etc/passwd') FROM zones")


def test_a_table_named_after_its_alias_says_which_alias_to_use() -> None:
    """PostgreSQL's message and hint, word for word: `FROM visits v … visits.age` is refused before any
    engine query, where it used to be answered as if `visits` were still a name of the table."""
    with pytest.raises(ProxyError) as raised:
        classify_sql("SELECT COUNT(*) FROM visits v WHERE visits.age > 1")
    assert (raised.value.sqlstate, raised.value.message, raised.value.hint) == (
        "42P01",
        'invalid reference to FROM-clause entry for table "visits"',
        'Perhaps you meant to reference the table alias "v".',
    )
    assert isinstance(
        classify_sql("SELECT COUNT(*) FROM visits AS visits WHERE visits.age > 1"), PrivateQuery
    )
