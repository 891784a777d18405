"""Top-k recognition and rankings (analysis/top_k.py): an ORDER BY by position or by a name is resolved to
the select item it stands for, and only the count makes a top-k; a ranking subquery is refused, with what to
write instead, wherever its ROW_NUMBER() would not rank the noisy counts as the analyst asked, and its outer
query runs over the noisy table under the subquery's own name.

Whether a query is a top-k decides which rows are answered: the k keys with the largest noisy counts
(a DP selection), or noisy counts of every key sorted as the analyst asked. ``ORDER BY 1 DESC`` over the
count is a top-k; ``ORDER BY genre DESC LIMIT 2`` (the last two genres) is not, even when the count has
an alias of its own.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from proxy.analysis.top_k import TopK
from proxy.config import DatasetPolicy, parse_config
from proxy.errors import PolicyViolationError
from tests.unit.proxy.test_mutants_an_statements import RANKING_HINT
from tests.unit.proxy.test_top_k import PARTITIONED, POLICY, shape_of


@pytest.fixture
def shop() -> DatasetPolicy:
    dataset = parse_config(POLICY, path=Path("/nonexistent/veil.toml")).dataset("shop")
    assert dataset is not None
    return dataset


def test_the_count_in_first_position_ranks_by_position(shop: DatasetPolicy) -> None:
    shape = shape_of("SELECT COUNT(*), genre FROM buys GROUP BY genre ORDER BY 1 DESC LIMIT 2", shop)
    assert shape.top_k == TopK(2, 0)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT genre, COUNT(*) AS n FROM buys GROUP BY genre ORDER BY genre DESC LIMIT 2",
        "SELECT genre, COUNT(*) AS n FROM buys GROUP BY genre ORDER BY 1 DESC LIMIT 2",
    ],
)
def test_ordering_by_a_key_is_not_a_top_k_even_beside_an_aliased_count(shop: DatasetPolicy, sql: str) -> None:
    assert shape_of(sql, shop).top_k is None


@pytest.mark.parametrize(
    ("change", "message", "hint"),
    [
        (
            ("GROUP BY region, genre)", "GROUP BY region, genre LIMIT 5)"),
            "LIMIT is not supported inside a ranking subquery",
            "sort and filter in the outer query: " + RANKING_HINT,
        ),
        (
            ("GROUP BY region, genre)", "GROUP BY region, genre HAVING COUNT(*) > 1)"),
            "HAVING is not supported inside a ranking subquery",
            "sort and filter in the outer query: " + RANKING_HINT,
        ),
        (
            ("GROUP BY region, genre)", "GROUP BY region, genre QUALIFY COUNT(*) > 1)"),
            "QUALIFY is not supported inside a ranking subquery",
            "sort and filter in the outer query: " + RANKING_HINT,
        ),
        (
            ("COUNT(DISTINCT user_id) DESC, genre", "COUNT(DISTINCT user_id), genre"),
            "ROW_NUMBER() must rank by the count, descending",
            RANKING_HINT,
        ),
        (
            ("ROW_NUMBER()", "RANK()"),
            "only ROW_NUMBER() OVER (PARTITION BY … ORDER BY …) ranks private counts, not RANK()",
            RANKING_HINT,
        ),
    ],
)
def test_a_ranking_that_would_not_rank_the_noisy_counts_is_refused(
    shop: DatasetPolicy, change: tuple[str, str], message: str, hint: str
) -> None:
    """A LIMIT, HAVING or QUALIFY inside would keep keys by their exact counts; an ascending ROW_NUMBER() or RANK()
    is not the top-k selection that is priced."""
    with pytest.raises(PolicyViolationError) as refused:
        shape_of(PARTITIONED.replace(*change), shop)
    assert (refused.value.sqlstate, refused.value.message, refused.value.hint) == ("42501", message, hint)


def test_the_outer_query_may_qualify_columns_with_the_subquerys_name(shop: DatasetPolicy) -> None:
    """``SELECT ranked.region …`` around ``(…) AS ranked``: the ranked noisy table keeps the name, or the
    post-processing query would fail in the sandbox after the budget was spent."""
    sql = PARTITIONED.replace("SELECT region, genre, n FROM", "SELECT ranked.region, ranked.genre, n FROM")
    shape = shape_of(sql, shop)
    with duckdb.connect() as connection:
        connection.execute(
            "CREATE TABLE _dp_noisy AS SELECT * FROM (VALUES ('east', 'a', 5), ('east', 'b', 9),"
            " ('east', 'c', 1), ('west', 'a', 7), ('west', 'c', 2)) AS t(_dp_key_0, _dp_key_1, _dp_agg_0)"
        )
        rows = connection.execute(shape.postprocess.sql(dialect="duckdb")).fetchall()
    assert rows == [("east", "b", 9), ("east", "a", 5), ("west", "a", 7), ("west", "c", 2)]
