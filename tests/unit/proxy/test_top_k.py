"""Top-k queries: which shapes are recognised, when a DP selection answers them, its price, and the engine
query of people per key (each person in one partition)."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from pathlib import Path

import duckdb
import pytest
import sqlglot

from proxy.analysis.statements import PrivateQuery, classify
from proxy.analysis.top_k import TopK
from proxy.config import DatasetPolicy, parse_config
from proxy.errors import PolicyViolationError
from proxy.query.planning import prepare_release, resolve_group_domains
from proxy.release.cost import release_cost
from proxy.release.plan import ReleasePlan
from proxy.release.top_k import TopKPlan, release_top_k, selection_applies
from proxy.rewrite.top_k_scores import top_k_score_query

POLICY = """
[datasets.shop]
path = "shop.duckdb"

[datasets.shop.tables.buys]
privacy_unit = "user_id"
max_contributions = 10

[datasets.shop.tables.buys.columns]
user_id = { type = "integer" }
region = { type = "text", public = true, values = ["east", "west"] }
genre = { type = "text", public = true, values = ["a", "b", "c", "d", "e", "f"] }
item = { type = "text" }
price = { type = "real", lower = 0, upper = 10 }

[datasets.shop.tables.people]
privacy_unit = "row"

[datasets.shop.tables.people.columns]
genre = { type = "text", public = true, values = ["a", "b", "c", "d", "e", "f"] }
"""

PARTITIONED = (
    "SELECT region, genre, n FROM (SELECT region, genre, COUNT(DISTINCT user_id) AS n, ROW_NUMBER() OVER"
    " (PARTITION BY region ORDER BY COUNT(DISTINCT user_id) DESC, genre) AS r FROM buys GROUP BY region, genre)"
    " AS ranked WHERE r <= 2 ORDER BY region, r"
)


@pytest.fixture
def dataset() -> DatasetPolicy:
    policy = parse_config(POLICY, path=Path("/nonexistent/veil.toml")).dataset("shop")
    assert policy is not None
    return policy


def shape_of(sql: str, dataset: DatasetPolicy):  # type: ignore[no-untyped-def]
    statement = classify(sqlglot.parse_one(sql, read="postgres"), dataset)
    assert isinstance(statement, PrivateQuery)
    return statement.shape


@pytest.mark.parametrize(
    ("sql", "top"),
    [
        ("SELECT genre, COUNT(*) FROM buys GROUP BY genre ORDER BY COUNT(*) DESC LIMIT 2", TopK(2, 0)),
        ("SELECT genre, COUNT(*) AS n FROM buys GROUP BY genre ORDER BY n DESC, genre LIMIT 2", TopK(2, 0)),
        ("SELECT genre g, COUNT(*) FROM buys GROUP BY g ORDER BY 2 DESC LIMIT 2 OFFSET 3", TopK(5, 0)),
        (
            "SELECT genre, COUNT(DISTINCT user_id) FROM buys WHERE price > 2 GROUP BY genre"
            " ORDER BY COUNT(DISTINCT user_id) DESC LIMIT 100",
            TopK(100, 0),
        ),
        (PARTITIONED, TopK(2, 0, (0,))),
        ("SELECT genre, COUNT(*) FROM buys GROUP BY genre ORDER BY COUNT(*) DESC LIMIT 101", None),
        ("SELECT genre, COUNT(*) FROM buys GROUP BY genre ORDER BY COUNT(*) LIMIT 2", None),
        ("SELECT genre, COUNT(*) FROM buys GROUP BY genre ORDER BY genre DESC LIMIT 2", None),
        ("SELECT genre, COUNT(*) FROM buys GROUP BY genre ORDER BY COUNT(*) DESC", None),
        ("SELECT genre, COUNT(*) AS n FROM buys GROUP BY genre ORDER BY n * 2 DESC LIMIT 2", None),
        ("SELECT genre, COUNT(*), SUM(price) FROM buys GROUP BY genre ORDER BY 2 DESC LIMIT 2", None),
        ("SELECT genre, COUNT(price) FROM buys GROUP BY genre ORDER BY 2 DESC LIMIT 2", None),
        ("SELECT genre, COUNT(*) FROM buys GROUP BY genre HAVING COUNT(*) > 3 ORDER BY 2 DESC LIMIT 2", None),
        ("SELECT DISTINCT genre, COUNT(*) FROM buys GROUP BY genre ORDER BY 2 DESC LIMIT 2", None),
        ("SELECT COUNT(*) FROM buys ORDER BY 1 DESC LIMIT 2", None),
    ],
)
def test_recognises_top_k_shapes(dataset: DatasetPolicy, sql: str, top: TopK | None) -> None:
    assert shape_of(sql, dataset).top_k == top


def test_the_ranking_is_post_processing_over_the_noisy_table(dataset: DatasetPolicy) -> None:
    shape = shape_of(PARTITIONED, dataset)
    assert shape.output_names == ("region", "genre", "n")
    assert shape.postprocess.sql(dialect="duckdb") == (
        'SELECT region, genre, n FROM (SELECT _dp_key_0 AS "region", _dp_key_1 AS "genre", _dp_agg_0 AS n,'
        " ROW_NUMBER() OVER (PARTITION BY _dp_key_0 ORDER BY _dp_agg_0 DESC NULLS FIRST, _dp_key_1, _dp_key_0,"
        " _dp_key_1)"
        " AS r FROM _dp_noisy) AS ranked WHERE r <= 2 ORDER BY region, r"
    )


@pytest.mark.parametrize(
    "partition", ["COUNT(DISTINCT user_id)", "n", "region || 'x'", "1", "SUBSTRING(region FROM 1 FOR 2)"]
)
def test_a_partition_must_be_one_of_the_group_by_keys(dataset: DatasetPolicy, partition: str) -> None:
    """An aggregate or an expression is no partition of the noisy table: refused, not an internal error,
    quoting the partition as the client wrote it (PostgreSQL's syntax) and saying how to rank."""
    sql = PARTITIONED.replace("PARTITION BY region", f"PARTITION BY {partition}")
    with pytest.raises(PolicyViolationError) as refused:
        shape_of(sql, dataset)
    assert str(refused.value) == f"PARTITION BY {partition} must be one of the GROUP BY keys"
    assert refused.value.hint is not None and refused.value.hint.startswith("rank with ROW_NUMBER() OVER")


@pytest.mark.parametrize("limit", ["r <= 2", "r < 3", "2 >= r", "3 > r"])
def test_k_is_read_from_every_form_of_the_rank_limit(dataset: DatasetPolicy, limit: str) -> None:
    assert shape_of(PARTITIONED.replace("WHERE r <= 2", f"WHERE {limit}"), dataset).top_k == TopK(2, 0, (0,))


def test_a_partition_by_every_group_key_is_refused(dataset: DatasetPolicy) -> None:
    with pytest.raises(PolicyViolationError) as refused:
        shape_of(PARTITIONED.replace("PARTITION BY region", "PARTITION BY region, genre"), dataset)
    assert str(refused.value) == "PARTITION BY leaves no GROUP BY key to rank"
    assert refused.value.hint is not None and refused.value.hint.startswith("group by the partition and")


def plan_of(sql: str, dataset: DatasetPolicy, **options: object) -> tuple[ReleasePlan, str | None]:
    shape = shape_of(sql, dataset)
    with duckdb.connect() as connection:

        def execute(text: str):  # type: ignore[no-untyped-def]
            cursor = connection.execute(text)
            return [(c[0], str(c[1])) for c in cursor.description or []], cursor.fetchall()

        shape = resolve_group_domains(shape, execute=execute, dialect="duckdb")
    return prepare_release(shape, dialect="duckdb", **options)  # type: ignore[arg-type]


DISTINCT = "SELECT genre, COUNT(DISTINCT user_id) AS n FROM buys GROUP BY genre ORDER BY n DESC LIMIT {k}"


@pytest.mark.parametrize(
    ("sql", "options", "selected"),
    [
        (DISTINCT.format(k=2), {}, True),  # 4 < min(L = 10, 6 keys)
        (DISTINCT.format(k=3), {}, False),  # 6 = min(10, 6): noisy counts of the 6 keys are as good
        (PARTITIONED, {}, True),  # 4 < min(10, 12 cells)
        (DISTINCT.format(k=2), {"gaussian": True, "delta": 1e-6}, False),
        (DISTINCT.format(k=2), {"other_row": True}, False),
        ("SELECT genre, COUNT(*) AS n FROM buys GROUP BY genre ORDER BY n DESC LIMIT 1", {}, False),  # ℓ∞ = L
        ("SELECT genre, COUNT(*) AS n FROM people GROUP BY genre ORDER BY n DESC LIMIT 1", {}, False),
        (
            "SELECT item, COUNT(DISTINCT user_id) AS n FROM buys GROUP BY item ORDER BY n DESC LIMIT 4",
            {"delta": 1e-6},
            True,  # keys from the data: 8 < L = 10
        ),
    ],
)
def test_a_dp_selection_answers_when_it_needs_less_noise(
    dataset: DatasetPolicy, sql: str, options: dict[str, object], selected: bool
) -> None:
    plan, _ = plan_of(sql, dataset, epsilon=1.0, **options)
    gaussian, other_row = bool(options.get("gaussian")), bool(options.get("other_row"))
    assert selection_applies(plan.shape, gaussian=gaussian, other_row=other_row) is selected
    assert isinstance(plan, TopKPlan) is selected


def test_public_keys_split_epsilon_between_selection_and_counts(dataset: DatasetPolicy) -> None:
    plan, sql = plan_of(DISTINCT.format(k=2), dataset, epsilon=0.3)
    assert isinstance(plan, TopKPlan) and plan.selection is not None
    assert plan.epsilon == 0.3 and plan.delta == 0.0 and plan.threshold is None
    selection, counts = plan.selection, plan.counts
    assert Fraction(selection.epsilon) + Fraction(counts.epsilon) <= Fraction("0.3")
    assert selection.epsilon == counts.epsilon == pytest.approx(0.15)
    assert (selection.rounds, selection.candidates, selection.partitions) == (2, 6, 1)
    assert selection.round_epsilon == pytest.approx(0.075)
    # the counts of 2 selected keys: a person is in at most 2 of them, by at most 1 each
    assert (counts.sensitivity, counts.exact_integer, counts.integer_output) == (2.0, True, True)
    assert plan.describe() == (
        "ε=0.3 (top-2 selection: exponential mechanism, 2 rounds at ε=0.075, ε=0.15; "
        "count(DISTINCT user_id) of the selected keys ε=0.15)"
    )
    assert sql is not None and "COUNT(DISTINCT _dp_unit)" in sql
    # zCDP: the counts ε²/2 and the selection 2 · (ε/2)²/2
    cost = release_cost(plan)
    assert cost.rho == pytest.approx(0.15**2 / 2 + 2 * 0.075**2 / 2, rel=1e-12)
    assert cost.rho >= 0.15**2 / 2 + 2 * selection.round_epsilon**2 / 2


def test_keys_from_the_data_are_gated_by_tau_first(dataset: DatasetPolicy) -> None:
    sql = "SELECT item, COUNT(DISTINCT user_id) AS n FROM buys GROUP BY item ORDER BY n DESC LIMIT 4"
    plan, _ = plan_of(sql, dataset, epsilon=0.9, delta=1e-6)
    assert isinstance(plan, TopKPlan) and plan.gate is not None and plan.selection is not None
    assert plan.delta == 1e-6 and plan.threshold_delta == 1e-6
    share = plan.gate.epsilon
    assert share == plan.selection.epsilon == plan.counts.epsilon == pytest.approx(0.3)
    assert plan.gate.sensitivity == 10.0  # each person in at most L = 10 keys
    # τ = 1 + b·ln(L/(2δ)), b = L/ε₁
    assert plan.threshold == pytest.approx(1 + (10 / share) * math.log(10 / 2e-6))
    assert plan.selection.candidates is None
    assert "candidate keys: number of people above τ=" in plan.describe()


def test_the_selection_releases_the_top_keys_and_their_noisy_counts(dataset: DatasetPolicy) -> None:
    plan, _ = plan_of(DISTINCT.format(k=2), dataset, epsilon=400.0)
    assert isinstance(plan, TopKPlan)
    scores = [("a", 5), ("b", 90), ("c", 70), ("f", 20)]  # d and e: nobody, score 0
    table = release_top_k(plan, scores, rng=random.Random(5))
    assert [row[0] for row in table.rows] == ["b", "c"]
    assert [abs(row[1] - exact) <= 1 for row, exact in zip(table.rows, (90, 70), strict=True)] == [True, True]
    assert [column.name for column in table.columns] == ["_dp_key_0", "_dp_agg_0"]


def test_each_person_is_counted_in_their_first_partition_only(dataset: DatasetPolicy) -> None:
    shape = shape_of(PARTITIONED, dataset)
    with duckdb.connect() as connection:
        connection.execute(
            "CREATE TABLE buys AS SELECT * FROM (VALUES"
            " (1, 'east', 'a', 'x', 1.0), (1, 'east', 'a', 'x', 1.0), (1, 'west', 'b', 'x', 1.0),"
            " (2, 'west', 'b', 'x', 1.0), (2, 'west', 'c', 'x', 1.0), (3, 'north', 'a', 'x', 1.0),"
            " (3, 'west', 'c', 'x', 1.0), (4, NULL, 'a', 'x', 1.0), (4, 'east', 'zzz', 'x', 1.0))"
            " AS t(user_id, region, genre, item, price)"
        )

        def execute(text: str):  # type: ignore[no-untyped-def]
            cursor = connection.execute(text)
            return [(c[0], str(c[1])) for c in cursor.description or []], cursor.fetchall()

        shape = resolve_group_domains(shape, execute=execute, dialect="duckdb")
        sql = top_k_score_query(shape, partition=(0,), dialect="duckdb").sql(dialect="duckdb")
        rows = sorted(execute(sql)[1])
    # 1: east (its first partition) only, once for a; 2: west; 3: 'north' is outside the domain, so west;
    # 4: no row in the domain
    assert rows == [("east", "a", 1), ("west", "b", 1), ("west", "c", 2)]


def test_the_score_query_is_deterministic_sql(dataset: DatasetPolicy) -> None:
    """The engine query of the scores, word for word: its aliases are fixed names (docs/architecture.md), and
    PostgreSQL needs every subquery in FROM named."""
    sql = top_k_score_query(shape_of(DISTINCT.format(k=2), dataset), partition=(), dialect="postgres")
    assert sql.sql(dialect="postgres") == (
        "SELECT _dp_key_0, COUNT(DISTINCT _dp_unit) AS _dp_score FROM (SELECT user_id AS _dp_unit,"
        " genre AS _dp_key_0 FROM buys WHERE genre IN ('a', 'b', 'c', 'd', 'e', 'f')) AS _dp_rows"
        " GROUP BY _dp_key_0"
    )


def test_the_partitioned_score_query_is_deterministic_sql(dataset: DatasetPolicy) -> None:
    """The same with partitions: each person's first partition (``_dp_homes``) joined to their cells."""
    sql = top_k_score_query(shape_of(PARTITIONED, dataset), partition=(0,), dialect="postgres")
    assert sql.sql(dialect="postgres") == (
        "WITH _dp_cells AS (SELECT DISTINCT _dp_unit, _dp_key_0, _dp_key_1 FROM (SELECT user_id AS _dp_unit,"
        " region AS _dp_key_0, genre AS _dp_key_1 FROM buys WHERE region IN ('east', 'west')"
        " AND genre IN ('a', 'b', 'c', 'd', 'e', 'f')) AS _dp_rows WHERE NOT _dp_key_0 IS NULL),"
        " _dp_homes AS (SELECT _dp_unit, _dp_key_0 FROM (SELECT _dp_unit, _dp_key_0, ROW_NUMBER() OVER"
        " (PARTITION BY _dp_unit ORDER BY _dp_key_0) AS _dp_home FROM (SELECT DISTINCT _dp_unit, _dp_key_0"
        " FROM _dp_cells) AS _dp_partitions) AS _dp_ranked WHERE _dp_home = 1)"
        " SELECT _dp_key_0, _dp_key_1, COUNT(*) AS _dp_score FROM _dp_cells JOIN _dp_homes"
        " USING (_dp_unit, _dp_key_0) GROUP BY _dp_key_0, _dp_key_1"
    )


def test_a_function_around_the_ranking_subquery_is_named_as_sql_names_it(dataset: DatasetPolicy) -> None:
    """The outer query only selects, filters and orders the ranked noisy table: an aggregate over it is
    refused, named as the analyst wrote it (``sum()``, not sqlglot's class name ``Sum``)."""
    sql = PARTITIONED.replace("SELECT region, genre, n FROM", "SELECT SUM(n) FROM").replace(
        " ORDER BY region, r", ""
    )
    with pytest.raises(PolicyViolationError) as refused:
        shape_of(sql, dataset)
    assert str(refused.value) == "sum() is not supported around a ranking subquery"


@pytest.mark.parametrize("limit", ["r <= 0", "r <= 101"])
def test_k_outside_its_range_is_refused_with_how_to_rank(dataset: DatasetPolicy, limit: str) -> None:
    with pytest.raises(PolicyViolationError) as refused:
        shape_of(PARTITIONED.replace("WHERE r <= 2", f"WHERE {limit}"), dataset)
    assert str(refused.value) == f"WHERE {limit}: k must be between 1 and 100"
    assert refused.value.hint is not None and refused.value.hint.startswith("rank with ROW_NUMBER() OVER")


@pytest.mark.parametrize(
    "windows",
    [
        "ROW_NUMBER() OVER (ORDER BY COUNT(*) DESC) AS r, ROW_NUMBER() OVER (ORDER BY genre) AS s",
        "ROW_NUMBER() OVER (ORDER BY COUNT(*) DESC) + 1 AS r",
    ],
)
def test_a_ranking_subquery_has_one_plain_window_item(dataset: DatasetPolicy, windows: str) -> None:
    sql = f"SELECT genre FROM (SELECT genre, COUNT(*) AS n, {windows} FROM buys GROUP BY genre) AS t WHERE r <= 2"
    with pytest.raises(PolicyViolationError) as refused:
        shape_of(sql, dataset)
    assert (
        str(refused.value) == "a ranking subquery may have one window item: ROW_NUMBER() OVER (…) AS <rank>"
    )
