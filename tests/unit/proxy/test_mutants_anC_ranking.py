"""Rankings and UNION ALL modifiers: the post-processing query of a top-k and what a refused ORDER BY of a
UNION tells the analyst (analysis/top_k.py, set_operations.py)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from proxy.config import DatasetPolicy, parse_config
from proxy.errors import PolicyViolationError, UnsupportedQueryError
from tests.unit.proxy.test_mutants_an_joins import classified
from tests.unit.proxy.test_mutants_an_statements import RANKING_HINT
from tests.unit.proxy.test_top_k import PARTITIONED, POLICY, shape_of


@pytest.fixture
def shop() -> DatasetPolicy:
    dataset = parse_config(POLICY, path=Path("/nonexistent/veil.toml")).dataset("shop")
    assert dataset is not None
    return dataset


def test_a_star_around_a_ranking_keeps_names_that_need_quotes(shop: DatasetPolicy) -> None:
    """``SELECT *`` over the ranking is expanded to the subquery's column names; a name with a space or
    capitals must stay quoted, or the post-processing query in the sandbox would not even parse."""
    shape = shape_of(
        'SELECT * FROM (SELECT region, genre, COUNT(*) AS "Top count", ROW_NUMBER() OVER'
        " (PARTITION BY region ORDER BY COUNT(*) DESC) AS r FROM buys GROUP BY region, genre)"
        " AS ranked WHERE r <= 1",
        shop,
    )
    assert shape.output_names == ("region", "genre", "Top count", "r")
    with duckdb.connect() as connection:
        connection.execute(
            "CREATE TABLE _dp_noisy AS SELECT * FROM (VALUES ('east', 'a', 5), ('east', 'b', 9),"
            " ('west', 'a', 7), ('west', 'c', 2)) AS t(_dp_key_0, _dp_key_1, _dp_agg_0)"
        )
        cursor = connection.execute(shape.postprocess.sql(dialect="duckdb"))
        names = [column[0] for column in cursor.description or []]
        assert (names, sorted(cursor.fetchall())) == (
            ["region", "genre", "Top count", "r"],
            [("east", "b", 9, 1), ("west", "a", 7, 1)],
        )


def test_an_expression_in_a_unions_order_by_says_what_to_order_by() -> None:
    with pytest.raises(UnsupportedQueryError) as refused:
        classified("SELECT COUNT(*) AS n FROM visits UNION ALL SELECT COUNT(*) FROM patients ORDER BY n + 1")
    error = refused.value
    assert (error.sqlstate, error.message, error.detail, error.hint) == (
        "0A000",
        "invalid UNION/INTERSECT/EXCEPT ORDER BY clause",
        "Only result column names can be used, not expressions or functions.",
        "order by an output column's name or position, e.g. ORDER BY 2 DESC",
    )


@pytest.mark.parametrize("condition", ["r <= n", "r <= 2.5", "n <= 2", "ranked.r <= 2"])
def test_only_a_whole_number_bound_on_the_rank_itself_gives_k(shop: DatasetPolicy, condition: str) -> None:
    """``n <= 2`` keeps keys with small noisy counts, not the top 2: it must not be read as k = 2."""
    with pytest.raises(PolicyViolationError) as refused:
        shape_of(PARTITIONED.replace("r <= 2", condition), shop)
    assert (refused.value.message, refused.value.hint) == (
        "a ranking subquery must be filtered with WHERE r <= k",
        RANKING_HINT,
    )


def test_the_outer_limit_may_only_read_the_rankings_columns(shop: DatasetPolicy) -> None:
    with pytest.raises(PolicyViolationError) as refused:
        shape_of(PARTITIONED + " LIMIT price", shop)
    assert (refused.value.message, refused.value.hint) == (
        'column "price" is not an output of the ranking subquery',
        "the subquery's columns are region, genre, n, r",
    )


@pytest.mark.parametrize(
    ("change", "clause"),
    [
        (("AS ranked", "AS ranked JOIN people ON ranked.genre = people.genre"), "JOIN"),
        (("WHERE r <= 2", "WHERE r <= 2 HAVING MAX(n) > 1"), "HAVING"),
        (("SELECT region, genre, n FROM", "SELECT DISTINCT region, genre, n FROM"), "DISTINCT"),
        (("WHERE r <= 2", "WHERE r <= 2 WINDOW w AS (ORDER BY n)"), "WINDOW"),
    ],
)
def test_the_query_around_a_ranking_only_selects_filters_and_orders(
    shop: DatasetPolicy, change: tuple[str, str], clause: str
) -> None:
    """A join, HAVING, DISTINCT or a named WINDOW around the ranking is refused by name: the outer query is run on the
    noisy table only, and a join would read another private table without any noise."""
    with pytest.raises(PolicyViolationError) as refused:
        shape_of(PARTITIONED.replace(*change), shop)
    assert (refused.value.message, refused.value.hint) == (
        f"{clause} is not supported around a ranking subquery",
        RANKING_HINT,
    )
