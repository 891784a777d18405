"""Statement shapes Veil accepts or refuses, and what it tells the analyst (analysis/statements.py,
shape.py, set_operations.py, ttest.py, top_k.py, federated.py, aggregates.py, session_commands.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.analysis.statements import TTestStatement, UnionQuery
from proxy.config import parse_config
from proxy.errors import (
    PolicyViolationError,
    ProxyError,
    QuerySyntaxError,
    UnknownColumnError,
    UnsupportedQueryError,
)
from tests.unit.proxy.test_federated_statements import count_position
from tests.unit.proxy.test_mutants_an_hints import command
from tests.unit.proxy.test_mutants_an_joins import classified
from tests.unit.proxy.test_top_k import PARTITIONED, POLICY, shape_of

TTEST_USAGE = (
    "SELECT veil_ttest(value_column, group_predicate [, 'p_value']) FROM private_table [WHERE …]: "
    "the value column needs public bounds (lower, upper) in the policy"
)
RANKING_HINT = (
    "rank with ROW_NUMBER() OVER (PARTITION BY <group keys> ORDER BY COUNT(*) DESC) in a subquery "
    "grouped by the partition and the ranked keys, and keep rows with WHERE <rank> <= k"
)


def refusal(error: type[ProxyError], sql: str) -> ProxyError:
    with pytest.raises(error) as refused:
        classified(sql)
    return refused.value


def test_a_simple_case_is_not_read_as_a_condition_on_the_people_counted() -> None:
    """``CASE age WHEN 30 THEN patient_id END`` compares age with 30; read as ``CASE WHEN 30 THEN …``
    it would count every person."""
    error = refusal(
        PolicyViolationError, "SELECT COUNT(DISTINCT CASE age WHEN 30 THEN patient_id END) FROM visits"
    )
    assert error.message == "DISTINCT aggregates are only supported as COUNT(DISTINCT <privacy unit>)"


@pytest.mark.parametrize("kind", ["CROSS", "SEMI", "ANTI"])
def test_a_lookup_table_is_joined_inner_or_left_only(kind: str) -> None:
    error = refusal(
        PolicyViolationError, f"SELECT COUNT(*) FROM visits v {kind} JOIN zones z ON v.note = z.code"
    )
    assert error.message == "only inner and left joins with lookup tables are supported"


def test_two_tables_under_one_alias_are_refused_as_postgresql_refuses_them() -> None:
    error = refusal(
        PolicyViolationError, "SELECT COUNT(*) FROM visits v JOIN patients v ON v.patient_id = v.patient_id"
    )
    assert (error.message, error.hint) == (
        'table name "v" specified more than once',
        "give each table its own alias",
    )


def test_an_unknown_column_of_a_joined_table_is_named_as_written() -> None:
    error = refusal(
        UnknownColumnError,
        "SELECT COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id WHERE v.nothing > 3",
    )
    assert (error.sqlstate, error.message) == ("42703", 'column "v.nothing" does not exist')


def test_union_parts_of_different_widths_are_refused_with_postgresqls_words() -> None:
    error = refusal(QuerySyntaxError, "SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*), 1 FROM visits")
    assert (error.sqlstate, error.message) == (
        "42601",
        "each UNION query must have the same number of columns",
    )


@pytest.mark.parametrize("modifiers", ["LIMIT ALL", "LIMIT NULL OFFSET NULL", "LIMIT ALL OFFSET 1"])
def test_limit_all_and_null_mean_no_limit_on_a_union(modifiers: str) -> None:
    statement = classified(f"SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*) FROM patients {modifiers}")
    assert isinstance(statement, UnionQuery)
    assert statement.modifiers.limit is None
    assert statement.modifiers.offset == (1 if "OFFSET 1" in modifiers else None)


def test_a_ttest_keeps_its_row_filter() -> None:
    statement = classified("SELECT veil_ttest(cost, sex = 'female') FROM visits WHERE age > 30")
    assert isinstance(statement, TTestStatement)
    assert statement.query.where is not None
    assert statement.query.where.sql(dialect="postgres") == "age > 30"
    assert statement.query.group.sql(dialect="postgres") == "sex = 'female'"


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT DISTINCT veil_ttest(cost, sex = 'female') FROM visits",
            "a veil_ttest query takes no DISTINCT clause",
        ),
        (
            "SELECT veil_ttest(cost, sex = 'female'), 1 FROM visits",
            "veil_ttest must be the only item of the select list",
        ),
    ],
)
def test_a_ttest_is_the_whole_statement(sql: str, message: str) -> None:
    error = refusal(PolicyViolationError, sql)
    assert (error.message, error.hint) == (message, TTEST_USAGE)


def test_a_ranking_refusal_says_how_to_rank() -> None:
    dataset = parse_config(POLICY, path=Path("/nonexistent/veil.toml")).dataset("shop")
    assert dataset is not None
    with pytest.raises(PolicyViolationError) as unfiltered:
        shape_of(PARTITIONED.replace("WHERE r <= 2", "WHERE r IS NOT NULL"), dataset)
    assert (unfiltered.value.message, unfiltered.value.hint) == (
        "a ranking subquery must be filtered with WHERE r <= k",
        RANKING_HINT,
    )
    with pytest.raises(PolicyViolationError) as ordered_inside:
        shape_of(
            PARTITIONED.replace("GROUP BY region, genre)", "GROUP BY region, genre ORDER BY 1)"), dataset
        )
    assert (ordered_inside.value.message, ordered_inside.value.hint) == (
        "ORDER BY is not supported inside a ranking subquery",
        "sort and filter in the outer query: " + RANKING_HINT,
    )
    filtered = PARTITIONED.replace(
        "COUNT(DISTINCT user_id) DESC", "COUNT(DISTINCT user_id) FILTER (WHERE price > 1) DESC"
    ).replace("COUNT(DISTINCT user_id) AS n", "COUNT(DISTINCT user_id) FILTER (WHERE price > 1) AS n")
    with pytest.raises(PolicyViolationError) as conditional:
        shape_of(filtered, dataset)
    assert (conditional.value.message, conditional.value.hint) == (
        "ROW_NUMBER() does not rank by a count with a condition (FILTER or CASE)",
        "move the condition to WHERE: the keys rank the same, and those without a matching row rank last either way",
    )
    with pytest.raises(PolicyViolationError) as by_sum:
        shape_of(
            PARTITIONED.replace("ORDER BY COUNT(DISTINCT user_id) DESC", "ORDER BY SUM(price) DESC"), dataset
        )
    assert (by_sum.value.message, by_sum.value.hint) == (
        "ROW_NUMBER() ranks only by COUNT(*) or COUNT(DISTINCT <privacy unit>), the subquery's one aggregate",
        RANKING_HINT,
    )
    with pytest.raises(PolicyViolationError) as unknown:
        shape_of(PARTITIONED.replace("SELECT region, genre, n FROM", "SELECT region, genre, m FROM"), dataset)
    assert (unknown.value.message, unknown.value.hint) == (
        'column "m" is not an output of the ranking subquery',
        "the subquery's columns are region, genre, n, r",
    )


def test_a_federated_count_grouped_otherwise_names_the_federations_grouping() -> None:
    with pytest.raises(UnsupportedQueryError) as refused:
        count_position("SELECT sex, COUNT(*) FROM hospitals GROUP BY sex")
    assert refused.value.message == "federation hospitals is grouped by region, exactly"


@pytest.mark.parametrize("verb", ["CLOSE", "FETCH", "EXECUTE"])
def test_a_cursor_or_prepared_command_without_a_name_is_a_syntax_error(verb: str) -> None:
    with pytest.raises(QuerySyntaxError) as refused:
        command(verb)
    assert refused.value.sqlstate == "42601"


def test_a_correlation_of_per_person_values_is_clamped_to_the_bounds_chosen_for_them() -> None:
    shape = classified(
        "SELECT CORR(s, n) FROM (SELECT patient_id, COUNT(*) AS n, SUM(age) AS s FROM visits "
        "GROUP BY patient_id) p"
    ).shape  # type: ignore[attr-defined]
    chosen = tuple(bound.with_choice(4) for bound in shape.value_bounds)
    assert [bound.bounds for bound in chosen] == [(0.0, 400.0), (0.0, 4.0)]  # s: 4 × 100 (age ≤ 100), n: 4
    pair = shape.with_value_bounds(chosen).aggregates[0].pair
    assert (pair.y.lower, pair.y.upper, pair.x.lower, pair.x.upper) == (0.0, 400.0, 0.0, 4.0)
    assert (pair.product.lower, pair.product.upper) == (0.0, 1600.0)
    assert pair.label == "s, n"


RECONSTRUCT_USAGE = "SELECT * FROM veil_reconstruct('release_table', 'attribute' [, 'attribute' …])"


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT a FROM veil_reconstruct('r', 'x')",
            "select * from veil_reconstruct(…): its columns are the attributes and count",
        ),
        (
            "SELECT * FROM veil_reconstruct('r')",
            "veil_reconstruct takes the release's name and 1 to 6 attribute names, as strings",
        ),
        (
            "SELECT * FROM veil_reconstruct('r', 'a', 'b', 'c', 'd', 'e', 'f', 'g')",
            "veil_reconstruct takes the release's name and 1 to 6 attribute names, as strings",
        ),
        (
            "SELECT * FROM veil_reconstruct('visits', 'age')",
            '"visits" is a private table: veil_reconstruct reads published releases only',
        ),
    ],
)
def test_veil_reconstruct_reads_published_releases_in_one_form(sql: str, message: str) -> None:
    error = refusal(PolicyViolationError, sql)
    assert (error.sqlstate, error.message, error.hint) == ("42501", message, RECONSTRUCT_USAGE)


@pytest.mark.parametrize(
    ("sql", "message", "hint"),
    [
        (
            "SELECT mode(region) FROM visits",
            "mode(col) is not PostgreSQL's MODE aggregate",
            "write MODE() WITHIN GROUP (ORDER BY col)",
        ),
        (
            "SELECT MODE() WITHIN GROUP (ORDER BY region || 'x') FROM visits",
            "MODE() is answered only WITHIN GROUP (ORDER BY one column)",
            "write MODE() WITHIN GROUP (ORDER BY col) with a column declared public in the policy",
        ),
    ],
)
def test_a_mode_not_of_one_column_says_how_to_write_it(sql: str, message: str, hint: str) -> None:
    error = refusal(UnsupportedQueryError, sql)
    assert (error.sqlstate, error.message, error.hint) == ("0A000", message, hint)
