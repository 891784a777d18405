"""Top-k recognition (analysis/top_k.py): an ORDER BY by position or by a name is resolved to the select
item it stands for, and only the count makes a top-k.

Whether a query is a top-k decides which rows are answered: the k keys with the largest noisy counts
(a DP selection), or noisy counts of every key sorted as the analyst asked. ``ORDER BY 1 DESC`` over the
count is a top-k; ``ORDER BY genre DESC LIMIT 2`` (the last two genres) is not, even when the count has
an alias of its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.analysis.top_k import TopK
from proxy.config import DatasetPolicy, parse_config
from tests.unit.proxy.test_top_k import POLICY, shape_of


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
