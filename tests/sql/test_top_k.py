"""Top-k queries (docs/sql.md, "Top-k") on DuckDB, PostgreSQL and Spark: each accepted shape with its price and
its answer at a large ε against the exact top k; each refusal with its message, at no cost.

The dataset is tests/sql/shop_fixture.py: counts of people per genre ten apart overall, and opposite
rankings in the two regions. Every test that takes ``service`` runs on ``[duckdb]``, ``[postgres]``
(skipped without a server unless VEIL_REQUIRE_POSTGRES=1) and ``[spark]`` (the same rows as Parquet;
skipped without pyspark and Java unless VEIL_REQUIRE_SPARK=1).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql as pgsql

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy.backends.base import Backend
from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.postgres import PostgresBackend
from proxy.errors import PolicyViolationError, ProxyError, UnsupportedQueryError
from proxy.query.explain import explain_query
from proxy.query.service import Principal, QueryService, StatementOutcome
from proxy.settings import SessionSettings
from proxy.wire.scram import make_scram_verifier
from tests.conftest import schema_in
from tests.sql.shop_fixture import POLICY, POSTGRES_SHOP, duckdb_shop, shop_policy, shop_postgres_policy
from tests.sql.spark_fixture import open_spark, spark_policy

ALICE = Principal("alice")
BACKENDS = [
    "duckdb",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("spark", marks=pytest.mark.spark),
]
LARGE = "200"  # ε: the selection's rounds run at ε/(2k) >= 10 per person, the gaps are 10 people


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    ledger.add_analyst("alice", make_scram_verifier("secret", iterations=1))
    ledger.grant("alice", "shop", PrivacyLoss(100_000.0, 1e-3))
    return ledger


@pytest.fixture(params=BACKENDS)
def service(request: pytest.FixtureRequest, tmp_path: Path, ledger: Ledger) -> Iterator[QueryService]:
    backend: Backend
    with contextlib.ExitStack() as stack:
        if request.param == "duckdb":
            dataset = shop_policy(tmp_path)
            backend = DuckDBBackend(duckdb_shop(tmp_path))
        elif request.param == "spark":
            request.getfixturevalue("spark_ready")  # skips (or fails) here without pyspark and Java
            dataset = spark_policy(
                POLICY,
                'path = "shop.duckdb"\n',
                name="shop",
                duckdb_path=duckdb_shop(tmp_path),
                directory=tmp_path,
            )
            backend = open_spark(dataset)
        else:
            dsn = request.getfixturevalue("postgres_dsn")  # skips (or fails) here when the server is down
            schema = stack.enter_context(schema_in(dsn))
            with psycopg.connect(dsn, autocommit=True) as connection:
                connection.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
                connection.execute(POSTGRES_SHOP)  # type: ignore[call-overload]
            dataset = shop_postgres_policy(dsn, schema)
            assert dataset.dsn is not None
            backend = PostgresBackend(dataset.dsn, schema=dataset.schema, pool_size=dataset.pool_size)
        stack.callback(backend.close)
        sandbox = stack.enter_context(contextlib.closing(DuckDBBackend.sandbox()))
        yield QueryService(dataset, backend=backend, sandbox=sandbox, ledger=ledger, rng=random.Random(18))


def run(service: QueryService, sql: str, **settings: str) -> StatementOutcome:
    (tree,) = service.parse(sql)
    values = {f"veil.{name}": value for name, value in {"epsilon": LARGE, **settings}.items()}
    return service.run(tree, principal=ALICE, settings=SessionSettings(values))


def exact_people(service: QueryService, keys: str, where: str = "TRUE") -> dict[tuple[object, ...], int]:
    """The exact number of people per key, straight from the engine (behind Veil's back)."""
    sql = f"SELECT {keys}, COUNT(DISTINCT user_id) FROM purchases WHERE {where} GROUP BY {keys}"
    return {tuple(row[:-1]): int(row[-1]) for row in service.backend.execute(sql)[1]}


def top(counts: dict[tuple[object, ...], int], k: int) -> set[tuple[object, ...]]:
    ranked = sorted(counts, key=lambda key: -counts[key])
    assert counts[ranked[k - 1]] > counts[ranked[k]], "the test needs a strict k-th count"
    return set(ranked[:k])


@dataclass(frozen=True)
class Shape:
    """One accepted top-k shape: its SQL, the key columns, the NOTICE's split, and k per partition."""

    name: str
    sql: str
    keys: str
    k: int
    notice: str
    partition: str | None = None
    settings: tuple[tuple[str, str], ...] = ()
    delta: float = 0.0


SHAPES = [
    Shape(
        "distinct people, alias",
        "SELECT genre, COUNT(DISTINCT user_id) AS n FROM purchases GROUP BY genre ORDER BY n DESC LIMIT 3",
        "genre",
        3,
        "(top-3 selection: exponential mechanism, 3 rounds at ε=33.33, ε=100; count(DISTINCT user_id) of "
        "the selected keys ε=100)",
    ),
    Shape(
        "distinct people, the aggregate itself, tie-break, WHERE, OFFSET",
        "SELECT genre, COUNT(DISTINCT user_id) FROM purchases WHERE region IN ('east', 'west')"
        " GROUP BY genre ORDER BY COUNT(DISTINCT user_id) DESC, genre LIMIT 2 OFFSET 2",
        "genre",
        4,
        "(top-4 selection: exponential mechanism, 4 rounds at ε=25, ε=100;",
    ),
    Shape(
        "per partition",
        "SELECT region, genre, n FROM (SELECT region, genre, COUNT(DISTINCT user_id) AS n,"
        " ROW_NUMBER() OVER (PARTITION BY region ORDER BY COUNT(DISTINCT user_id) DESC) AS r"
        " FROM purchases GROUP BY region, genre) AS ranked WHERE r <= 3 ORDER BY region, n DESC",
        "region, genre",
        3,
        "(top-3 selection per partition: exponential mechanism, 3 rounds at ε=33.33, ε=100;",
        partition="region",
    ),
    Shape(
        "keys from the data",
        "SELECT item, COUNT(DISTINCT user_id) AS n FROM purchases GROUP BY item ORDER BY n DESC LIMIT 2",
        "item",
        2,
        "ε=200, δ=1e-06 (candidate keys: number of people above τ=",
        settings=(("delta", "1e-6"),),
        delta=1e-6,
    ),
    Shape(
        "COUNT(*): noisy counts of every key, sorted (ℓ∞ = ℓ1 = L)",
        "SELECT genre, COUNT(*) AS n FROM purchases GROUP BY genre ORDER BY 2 DESC LIMIT 3",
        "genre",
        3,
        "ε=200 (count(*) ε=200)",
    ),
    Shape(
        "2k >= min(L, keys): noisy counts of every key, sorted",
        "SELECT genre, COUNT(DISTINCT user_id) AS n FROM purchases GROUP BY genre ORDER BY n DESC LIMIT 6",
        "genre",
        6,
        "ε=200 (count(DISTINCT user_id) ε=200)",
    ),
    Shape(
        "per partition, COUNT(*): noisy counts ranked in post-processing",
        "SELECT * FROM (SELECT region, genre, COUNT(*) AS n, ROW_NUMBER() OVER (PARTITION BY region"
        " ORDER BY COUNT(*) DESC) AS r FROM purchases GROUP BY region, genre) AS ranked WHERE r < 3",
        "region, genre",
        2,
        "ε=200 (count(*) ε=200)",
        partition="region",
    ),
]


@pytest.mark.parametrize("shape", SHAPES, ids=[shape.name for shape in SHAPES])
def test_top_k_shape_is_priced_and_right_at_a_large_epsilon(
    service: QueryService, ledger: Ledger, shape: Shape
) -> None:
    outcome = run(service, shape.sql, **dict(shape.settings))
    assert outcome.table is not None
    assert shape.notice in outcome.notices[0]
    balance = ledger.balance("alice", "shop")
    assert balance.spent_epsilon == pytest.approx(float(LARGE))
    assert balance.spent_delta == pytest.approx(shape.delta)
    width = shape.keys.count(",") + 1
    exact = exact_people(service, shape.keys)
    names = [column.name for column in outcome.table.columns]
    count = names.index("n") if "n" in names else width
    released = {tuple(row[:width]): row[count] for row in outcome.table.rows}
    if shape.partition is None:
        offset = 2 if "OFFSET" in shape.sql else 0
        best = sorted(top(exact, shape.k), key=lambda key: -exact[key])
        assert list(released) == [key for key in best][offset:]
    else:
        for region in ("east", "west"):
            inside = {key: value for key, value in exact.items() if key[0] == region}
            if "COUNT(*)" not in shape.sql:
                assert {key for key in released if key[0] == region} == top(inside, shape.k)
            else:
                rows = exact_rows(service, region)
                assert {key for key in released if key[0] == region} == top(rows, shape.k)
    if "COUNT(*)" not in shape.sql:
        # counts of the selected keys: scale k/(ε/2) or L/ε, at most 0.2 here — within 5 of exact
        assert all(abs(value - exact[key]) <= 5 for key, value in released.items())


def exact_rows(service: QueryService, region: str) -> dict[tuple[object, ...], int]:
    sql = f"SELECT region, genre, COUNT(*) FROM purchases WHERE region = '{region}' GROUP BY region, genre"
    return {tuple(row[:2]): int(row[2]) for row in service.backend.execute(sql)[1]}


def test_a_key_only_one_person_holds_is_never_selected(service: QueryService) -> None:
    # 'secret' is one shopper's item: its gated people count is 1, τ ≈ 1 + (20/(ε/3))·ln(20/2e-6) = 5.8
    # at ε = 200, so it passes with probability <= 1e-6/20 per query
    outcome = run(
        service,
        "SELECT item, COUNT(DISTINCT user_id) AS n FROM purchases GROUP BY item ORDER BY n DESC LIMIT 5",
        delta="1e-6",
    )
    assert outcome.table is not None
    assert {row[0] for row in outcome.table.rows} == {"item0", "item1", "item2", "item3"}


def test_the_same_top_k_again_is_the_stored_answer_at_no_cost(service: QueryService, ledger: Ledger) -> None:
    sql = "SELECT genre, COUNT(DISTINCT user_id) AS n FROM purchases GROUP BY genre ORDER BY n DESC LIMIT 3"
    first = run(service, sql)
    again = run(service, sql.replace("AS n", "AS people").replace("BY n", "BY people"))
    assert first.table is not None and again.table is not None
    assert again.table.rows == first.table.rows
    assert "stored answer" in again.notices[0]
    assert ledger.balance("alice", "shop").spent_epsilon == pytest.approx(float(LARGE))


TOP_K_COUNTS = {  # (query, whether a DP selection answers it: COUNT(DISTINCT) with 2k < min(L, keys))
    "noisy-counts-of-every-key": (
        "SELECT genre, COUNT(*) AS n FROM purchases WHERE user_id < {people} GROUP BY genre ORDER BY 2 DESC"
        " LIMIT 10",
        False,
    ),
    "selection": (
        "SELECT genre, COUNT(DISTINCT user_id) AS n FROM purchases WHERE user_id < {people} GROUP BY genre"
        " ORDER BY n DESC LIMIT 3",
        True,
    ),
    "every-key-per-partition": (
        "SELECT * FROM (SELECT region, genre, COUNT(*) AS n, ROW_NUMBER() OVER (PARTITION BY region ORDER BY"
        " COUNT(*) DESC) AS r FROM purchases WHERE user_id < {people} GROUP BY region, genre) AS t WHERE r <= 8",
        False,
    ),
    "selection-per-partition": (
        "SELECT * FROM (SELECT region, genre, COUNT(DISTINCT user_id) AS n, ROW_NUMBER() OVER (PARTITION BY"
        " region ORDER BY COUNT(DISTINCT user_id) DESC) AS r FROM purchases WHERE user_id < {people}"
        " GROUP BY region, genre) AS t WHERE r <= 2",
        True,
    ),
}


@pytest.mark.parametrize("name", list(TOP_K_COUNTS))
def test_top_k_counts_are_non_negative_integers_unless_raw_counts(service: QueryService, name: str) -> None:
    """The counts of a top-k answer are shaped like every other count: integers, clamped at 0 — and as
    drawn (possibly negative) with veil.raw_counts = on, the same stored answer shown again for free —
    whether a DP selection chose the keys or every key was counted. Over a few people at ε = 0.05 the
    counts are mostly noise, so some are drawn negative (the selection's keys included: it chooses by
    its own noisy scores, and their counts are measured apart)."""
    template, selected = TOP_K_COUNTS[name]
    negative = False
    for people in range(3, 9):
        service.rng = random.Random(people)
        sql = template.format(people=people)
        shaped = run(service, sql, epsilon="0.05")
        raw = run(service, sql, epsilon="0.05", raw_counts="on")
        assert shaped.table is not None and raw.table is not None
        assert ("selection" in shaped.notices[0]) is selected, shaped.notices[0]
        assert raw.charge is not None and raw.charge.cached
        names = [column.name for column in shaped.table.columns]
        column, keys = names.index("n"), [names.index(name) for name in ("region", "genre") if name in names]
        shown = {tuple(row[i] for i in keys): row[column] for row in shaped.table.rows}
        drawn = {tuple(row[i] for i in keys): row[column] for row in raw.table.rows}
        assert all(isinstance(count, int) and count >= 0 for count in shown.values()), shown
        assert all(isinstance(count, int) for count in drawn.values()), drawn
        # ORDER BY … LIMIT runs over the values shown: keys whose counts are clamped to 0 tie, and the
        # shaped and the raw answer may keep different ones of them
        assert all(shown[key] == max(drawn[key], 0) for key in shown.keys() & drawn.keys()), (shown, drawn)
        negative = negative or min(drawn.values()) < 0
    assert negative, "no draw was negative: the clamp was never exercised"


def test_explain_states_the_split_without_spending(service: QueryService, ledger: Ledger) -> None:
    explanation = explain_query(
        service.dataset,
        "SELECT genre, COUNT(DISTINCT user_id) AS n FROM purchases GROUP BY genre ORDER BY n DESC LIMIT 3",
        backend=service.backend,
        epsilon=2.0,
    )
    assert explanation.epsilon == 2.0
    assert explanation.cells == 3
    assert [(m.quantity, m.epsilon, m.sensitivity) for m in explanation.measurements] == [
        ("top-3 selection", 1.0, 1.0),
        ("count(DISTINCT user_id) of the selected keys", 1.0, 3.0),
    ]
    assert explanation.engine_sql is not None and "COUNT(DISTINCT _dp_unit)" in explanation.engine_sql
    assert "3 rounds at ε=0.3333" in explanation.notes[0]
    assert ledger.history("alice") == []


@pytest.mark.parametrize(
    ("sql", "error", "message"),
    [
        (
            "SELECT * FROM (SELECT genre, COUNT(item) AS s, ROW_NUMBER() OVER (ORDER BY COUNT(item) DESC) AS r"
            " FROM purchases GROUP BY genre) AS t WHERE r <= 3",
            PolicyViolationError,
            "ROW_NUMBER\\(\\) ranks only by COUNT\\(\\*\\) or COUNT\\(DISTINCT <privacy unit>\\)",
        ),
        (
            "SELECT * FROM (SELECT genre, COUNT(*) FILTER (WHERE item <> 'x') AS n, ROW_NUMBER() OVER"
            " (ORDER BY COUNT(*) FILTER (WHERE item <> 'x') DESC) AS r FROM purchases GROUP BY genre) AS t"
            " WHERE r <= 3",
            PolicyViolationError,
            "ROW_NUMBER\\(\\) does not rank by a count with a condition \\(FILTER or CASE\\)",
        ),
        (
            "SELECT * FROM (SELECT genre, COUNT(*) AS n, RANK() OVER (ORDER BY COUNT(*) DESC) AS r"
            " FROM purchases GROUP BY genre) AS t WHERE r <= 3",
            PolicyViolationError,
            "only ROW_NUMBER\\(\\) OVER \\(PARTITION BY … ORDER BY …\\) ranks private counts, not RANK\\(\\)",
        ),
        (
            "SELECT * FROM (SELECT genre, COUNT(*) AS n, ROW_NUMBER() OVER (ORDER BY COUNT(*) DESC) AS r"
            " FROM purchases GROUP BY genre) AS t",
            PolicyViolationError,
            "a ranking subquery must be filtered with WHERE r <= k",
        ),
        (
            "SELECT * FROM (SELECT genre, COUNT(*) AS n, ROW_NUMBER() OVER (ORDER BY COUNT(*) DESC) AS r"
            " FROM purchases GROUP BY genre) AS t WHERE r <= 500",
            PolicyViolationError,
            "WHERE r <= 500: k must be between 1 and 100",
        ),
        (
            "SELECT * FROM (SELECT genre, COUNT(*) AS n, ROW_NUMBER() OVER (ORDER BY COUNT(*)) AS r"
            " FROM purchases GROUP BY genre) AS t WHERE r <= 3",
            PolicyViolationError,
            "ROW_NUMBER\\(\\) must rank by the count, descending",
        ),
        (
            "SELECT * FROM (SELECT region, genre, COUNT(*) AS n, ROW_NUMBER() OVER (PARTITION BY item"
            " ORDER BY COUNT(*) DESC) AS r FROM purchases GROUP BY region, genre) AS t WHERE r <= 3",
            PolicyViolationError,
            'column "item" is private',
        ),
        (
            "SELECT * FROM (SELECT region, COUNT(*) AS n, ROW_NUMBER() OVER (PARTITION BY region"
            " ORDER BY COUNT(*) DESC) AS r FROM purchases GROUP BY region) AS t WHERE r <= 3",
            PolicyViolationError,
            "PARTITION BY leaves no GROUP BY key to rank",
        ),
        (
            "SELECT genre, total FROM (SELECT genre, COUNT(*) AS n, ROW_NUMBER() OVER (ORDER BY COUNT(*) DESC)"
            " AS r FROM purchases GROUP BY genre) AS t WHERE r <= 3",
            PolicyViolationError,
            'column "total" is not an output of the ranking subquery',
        ),
        (
            "SELECT * FROM (SELECT genre, COUNT(*) AS n, ROW_NUMBER() OVER (ORDER BY COUNT(*) DESC) AS r"
            " FROM purchases GROUP BY genre ORDER BY n LIMIT 4) AS t WHERE r <= 3",
            PolicyViolationError,
            "ORDER BY is not supported inside a ranking subquery",
        ),
        (
            "SELECT item, COUNT(DISTINCT user_id) AS n FROM purchases GROUP BY item ORDER BY n DESC LIMIT 2",
            PolicyViolationError,
            "GROUP BY item: the keys are not public",
        ),
    ],
)
def test_refusals_say_what_is_wrong_and_spend_nothing(
    service: QueryService, ledger: Ledger, sql: str, error: type[ProxyError], message: str
) -> None:
    with pytest.raises(error, match=message) as raised:
        run(service, sql)
    assert raised.value.sqlstate == "42501"
    assert ledger.history("alice") == []


def test_the_other_row_is_refused_for_a_top_k_per_partition(service: QueryService, ledger: Ledger) -> None:
    sql = (
        "SELECT * FROM (SELECT region, genre, COUNT(*) AS n, ROW_NUMBER() OVER (PARTITION BY region"
        " ORDER BY COUNT(*) DESC) AS r FROM purchases GROUP BY region, genre) AS ranked WHERE r <= 2"
    )
    with pytest.raises(
        UnsupportedQueryError, match=r"veil\.other_row does not apply to a top k per partition"
    ):
        run(service, sql, other_row="on")
    assert ledger.history("alice") == []
