"""t-tests, federated counts and reconstructions: the statement shapes each accepts, what it reads from
them, and the refusals' exact words (analysis/ttest.py, federated.py, reconstruct.py)."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from proxy.analysis.federated import federation_read
from proxy.analysis.reconstruct import ReconstructQuery, is_reconstruct
from proxy.analysis.statements import ReconstructStatement, TTestStatement
from proxy.analysis.ttest import ttest_query
from proxy.errors import PolicyViolationError, UnsupportedQueryError
from tests.unit.proxy.policy_fixture import HOSPITALS, clinic_policy
from tests.unit.proxy.test_federated_statements import count_position
from tests.unit.proxy.test_mutants_an_joins import classified
from tests.unit.proxy.test_mutants_an_statements import RECONSTRUCT_USAGE, TTEST_USAGE, refusal

FEDERATION_HINT = (
    "a federation answers SELECT <its group columns>, COUNT(*) FROM <federation> [WHERE …] GROUP BY <them>"
)


def select(sql: str) -> exp.Select:
    tree = sqlglot.parse_one(sql, read="postgres")
    assert isinstance(tree, exp.Select)
    return tree


def test_a_ttest_reads_its_value_column_group_filter_and_p_value_option() -> None:
    statement = classified("SELECT veil_ttest(cost, sex = 'male', 'P_Value') AS t FROM visits WHERE age > 3")
    assert isinstance(statement, TTestStatement)
    query = statement.query
    assert (query.table.name, query.value.name, query.p_value) == ("visits", "cost", True)
    assert query.group.sql(dialect="postgres") == "sex = 'male'"
    assert query.where is not None and query.where.sql(dialect="postgres") == "age > 3"


def test_a_ttest_without_the_option_computes_no_p_value() -> None:
    statement = classified("SELECT veil_ttest(age, sex = 'male') FROM patients")
    assert isinstance(statement, TTestStatement)
    assert (statement.query.table.name, statement.query.value.name) == ("patients", "age")
    assert (statement.query.p_value, statement.query.where) == (False, None)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT veil_ttest(cost, sex = 'male') FROM visits LIMIT 1",
            "a veil_ttest query takes no LIMIT clause",
        ),
        (
            "SELECT veil_ttest(cost, sex = 'male') FROM visits OFFSET 1",
            "a veil_ttest query takes no OFFSET clause",
        ),
        (
            "SELECT veil_ttest(cost, sex = 'male') FROM visits GROUP BY region",
            "a veil_ttest query takes no GROUP BY clause",
        ),
        (
            "SELECT 1, veil_ttest(cost, sex = 'male') FROM visits",
            "veil_ttest must be the only item of the select list",
        ),
        (
            "SELECT veil_ttest(cost, sex = 'male', p_value) FROM visits",
            "veil_ttest's third argument can only be the string 'p_value'",
        ),
        (
            "SELECT veil_ttest(cost, sex = 'male', 'x') FROM visits",
            "veil_ttest's third argument can only be the string 'p_value'",
        ),
        (
            "SELECT veil_ttest(cost, sex = 'male', 'p_value', 'x') FROM visits",
            "veil_ttest takes a value column, a group predicate and optionally 'p_value'",
        ),
        (
            "SELECT veil_ttest(cost + 1, sex = 'male') FROM visits",
            "veil_ttest's first argument must be a column of the table",
        ),
        (
            "SELECT veil_ttest(note, sex = 'male') FROM visits",
            'column "note" is not numeric with public bounds to clamp it to',
        ),
    ],
)
def test_a_ttest_in_another_form_is_refused_with_the_accepted_form(sql: str, message: str) -> None:
    error = refusal(PolicyViolationError, sql)
    assert (error.sqlstate, error.message, error.hint) == ("42501", message, TTEST_USAGE)


def test_a_ttest_with_a_with_clause_is_refused_before_it_is_inlined() -> None:
    with pytest.raises(PolicyViolationError) as refused:
        ttest_query(
            select("WITH x AS (SELECT 1) SELECT veil_ttest(cost, sex = 'male') FROM visits"), clinic_policy()
        )
    assert refused.value.message == "a veil_ttest query takes no WITH clause"


def test_a_federation_counted_on_its_own_is_read_whatever_its_case() -> None:
    assert (
        federation_read(
            select("SELECT region, COUNT(*) FROM Hospitals GROUP BY region"), {"hospitals": HOSPITALS}
        )
        is HOSPITALS
    )
    assert federation_read(select("SELECT COUNT(*) FROM s.hospitals"), {"hospitals": HOSPITALS}) is None


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT COUNT(*) FROM hospitals JOIN (SELECT 1) s ON TRUE", "cannot be joined"),
        ("WITH h AS (SELECT 1) SELECT COUNT(*) FROM hospitals", "cannot be read beside a WITH query"),
        (  # one table, but not one SELECT
            "SELECT COUNT(*) FROM hospitals UNION ALL SELECT 1",
            "cannot be combined by UNION: send its count as a SELECT statement of its own",
        ),
        (
            "COPY hospitals TO STDOUT",
            "cannot be read by COPY: send its count as a SELECT statement of its own",
        ),
    ],
)
def test_a_federation_with_anything_beside_it_is_refused(sql: str, reason: str) -> None:
    """A federation releases joint counts of its own rows and nothing else: a join or a WITH clause
    (even one reading no table) is not that shape, and is refused before any spend."""
    with pytest.raises(UnsupportedQueryError) as refused:
        federation_read(sqlglot.parse_one(sql, read="postgres"), {"hospitals": HOSPITALS})
    assert (refused.value.message, refused.value.hint) == (f"federation hospitals {reason}", FEDERATION_HINT)


@pytest.mark.parametrize(
    ("sql", "message", "hint"),
    [
        (
            "SELECT region, sex, COUNT(*) FROM hospitals GROUP BY region, sex",
            "federation hospitals is grouped by region, exactly",
            FEDERATION_HINT,
        ),
        (
            "SELECT region, SUM(age) FROM hospitals GROUP BY region",
            "federation hospitals answers COUNT(*) only",
            FEDERATION_HINT,
        ),
        (
            "SELECT region, COUNT(*), COUNT(age) FROM hospitals GROUP BY region",
            "federation hospitals answers COUNT(*) only",
            FEDERATION_HINT,
        ),
        (
            "SELECT region, COUNT(*) + 1 FROM hospitals GROUP BY region",
            "a federated count is answered as it is: no HAVING, ORDER BY, LIMIT or arithmetic on it",
            "sort or filter the answer on the client",
        ),
    ],
)
def test_a_federated_count_of_another_shape_says_which_shape(sql: str, message: str, hint: str) -> None:
    with pytest.raises(UnsupportedQueryError) as refused:
        count_position(sql)
    assert (refused.value.message, refused.value.hint) == (message, hint)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT * FROM veil_reconstruct('rel', 'a', 'b')", ReconstructQuery("rel", ("a", "b"))),
        ("SELECT * FROM veil_reconstruct('zones', 'a')", ReconstructQuery("zones", ("a",))),
        (
            "SELECT * FROM VEIL_RECONSTRUCT('rel', 'a', 'b', 'c', 'd', 'e', 'f')",
            ReconstructQuery("rel", ("a", "b", "c", "d", "e", "f")),
        ),
    ],
)
def test_a_reconstruction_reads_a_public_release_by_name(sql: str, expected: ReconstructQuery) -> None:
    statement = classified(sql)
    assert isinstance(statement, ReconstructStatement)
    assert statement.query == expected


def test_only_veil_reconstruct_is_a_reconstruction() -> None:
    assert not is_reconstruct(select("SELECT * FROM other_function('rel', 'a')"))
    assert not is_reconstruct(select("SELECT * FROM veil_reconstruct"))
    assert not is_reconstruct(select("SELECT 1"))
    error = refusal(PolicyViolationError, "SELECT * FROM other_function('rel', 'a')")
    assert error.message == "table function anonymous() is not allowed"


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT * FROM veil_reconstruct('rel', 'a') WHERE a = 1", "veil_reconstruct takes no WHERE clause"),
        (
            "SELECT * FROM veil_reconstruct('rel', 'a') HAVING COUNT(*) > 1",
            "veil_reconstruct takes no HAVING clause",
        ),
        (
            "SELECT * FROM veil_reconstruct('rel', 'a') ORDER BY a",
            "veil_reconstruct takes no ORDER BY clause",
        ),
        ("SELECT * FROM veil_reconstruct('rel', 'a') LIMIT 1", "veil_reconstruct takes no LIMIT clause"),
        ("SELECT * FROM veil_reconstruct('rel', 'a') OFFSET 2", "veil_reconstruct takes no OFFSET clause"),
        ("SELECT DISTINCT * FROM veil_reconstruct('rel', 'a')", "veil_reconstruct takes no DISTINCT clause"),
        ("SELECT * FROM veil_reconstruct('rel', 'a', 'a')", "veil_reconstruct names an attribute twice"),
        (
            "SELECT * FROM veil_reconstruct('rel', 1)",
            "veil_reconstruct takes the release's name and 1 to 6 attribute names, as strings",
        ),
        (
            "SELECT * FROM veil_reconstruct('rel', a)",
            "veil_reconstruct takes the release's name and 1 to 6 attribute names, as strings",
        ),
    ],
)
def test_a_reconstruction_in_another_form_is_refused(sql: str, message: str) -> None:
    error = refusal(PolicyViolationError, sql)
    assert (error.sqlstate, error.message, error.hint) == ("42501", message, RECONSTRUCT_USAGE)
