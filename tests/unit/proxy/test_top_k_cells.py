"""Which cells a top-k selection chooses among (proxy/release/top_k.py): every key of a public domain, those
without a row scored 0; for keys from the data, only the keys that passed τ."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
import sqlglot

from budget.loss import PrivacyLoss
from proxy.analysis.statements import PrivateQuery, classify
from proxy.backends.duckdb import DuckDBBackend
from proxy.config import DatasetPolicy, parse_config
from proxy.query.planning import prepare_release, resolve_group_domains
from proxy.query.service import Principal, QueryService
from proxy.release.top_k import TopKPlan, release_top_k
from proxy.settings import SessionSettings
from tests.service_fixture import granted_ledger, serving

POLICY = """
[datasets.shop]
path = "shop.duckdb"
max_epsilon = 1000.0

[datasets.shop.tables.buys]
privacy_unit = "user_id"
max_contributions = 10

[datasets.shop.tables.buys.columns]
user_id = { type = "integer" }
genre = { type = "text", public = true, values = ["a", "b", "c", "d", "e", "f"] }
item = { type = "text" }
"""


def shop(directory: Path) -> DatasetPolicy:
    dataset = parse_config(POLICY, path=directory / "veil.toml").dataset("shop")
    assert dataset is not None
    return dataset


def top_k_plan(sql: str, dataset: DatasetPolicy, *, epsilon: float) -> TopKPlan:
    statement = classify(sqlglot.parse_one(sql, read="postgres"), dataset)
    assert isinstance(statement, PrivateQuery)
    with duckdb.connect() as connection:

        def execute(text: str):  # type: ignore[no-untyped-def]
            cursor = connection.execute(text)
            return [(c[0], str(c[1])) for c in cursor.description or []], cursor.fetchall()

        shape = resolve_group_domains(statement.shape, execute=execute, dialect="duckdb")
    plan, _ = prepare_release(shape, epsilon=epsilon, dialect="duckdb")
    assert isinstance(plan, TopKPlan), "2k = 2 < min(L = 10, 6 keys): a DP selection answers"
    return plan


def test_a_public_key_without_rows_scores_zero() -> None:
    """Top-1 of six public genres where only 'c' has a person (score 1) and the other five have no row:
    they are absent from the engine's scores and must score 0, below 'c'. Scored 1 instead, all six would
    tie and the selection would be uniform: 'c' for every one of the 12 seeds with probability (1/6)^12.
    With the real scores, at ε = 400 the selection's one round runs at ε = 200 (monotone permute-and-flip:
    a key 1 below the best is accepted with probability exp(-200)), so 'c' is chosen but for a chance
    below 5·exp(-200) per seed."""
    plan = top_k_plan(
        "SELECT genre, COUNT(DISTINCT user_id) AS n FROM buys GROUP BY genre ORDER BY n DESC LIMIT 1",
        shop(Path("/nonexistent")),
        epsilon=400.0,
    )
    assert plan.selection is not None and plan.selection.candidates == 6 and plan.selection.rounds == 1
    chosen = [release_top_k(plan, [("c", 1)], rng=random.Random(seed)).rows[0][0] for seed in range(12)]
    assert chosen == ["c"] * 12


# 300 people bought 'x', 150 'y', 60 'w', 2 'z' (users 0..299 overlap: a person buys several items)
BUYS = (
    "CREATE TABLE buys AS"
    " SELECT i AS user_id, 'a' AS genre, 'x' AS item FROM range(300) t(i)"
    " UNION ALL SELECT i, 'b', 'y' FROM range(150) t(i)"
    " UNION ALL SELECT i, 'c', 'w' FROM range(60) t(i)"
    " UNION ALL SELECT i, 'd', 'z' FROM range(2) t(i)"
)
ALICE = Principal("alice")


@pytest.fixture
def service(tmp_path: Path) -> Iterator[QueryService]:
    """alice holds ε = 100 and δ = 1e-5 on the shop."""
    with duckdb.connect(str(tmp_path / "shop.duckdb")) as connection:
        connection.execute(BUYS)
    ledger = granted_ledger(tmp_path / "ledger.sqlite", "shop", PrivacyLoss(100.0, 1e-5))
    with serving(shop(tmp_path), DuckDBBackend(tmp_path / "shop.duckdb"), ledger, seed=11) as service:
        yield service


def test_private_keys_are_selected_among_the_keys_that_passed_tau(service: QueryService) -> None:
    """Top-2 items — a private column, so keys come from the data: gated by τ, then selected, then counted.
    ε = 30 is split in three (10 each). The gate: noise of scale L/ε₁ = 1 against
    τ = 1 + ln(L/(2δ)) ≈ 16.4, so x (300), y (150) and w (60) pass and z (2 people) does not but for a
    chance of about e^-14. The selection: 2 rounds at ε = 5 each, y leads w by 90 people (accepting w first
    has probability e^-450). The counts: discrete Laplace of scale k/ε₃ = 0.2, off by more than 3 with
    probability below e^-15. Were the candidates taken from the (absent) public domain instead, the one
    candidate would be the empty key, and no item would be released."""
    sql = "SELECT item, COUNT(DISTINCT user_id) AS n FROM buys GROUP BY item ORDER BY n DESC LIMIT 2"
    (tree,) = service.parse(sql)
    settings = SessionSettings({"veil.epsilon": "30", "veil.delta": "1e-6"})
    outcome = service.run(tree, principal=ALICE, settings=settings)
    assert outcome.table is not None
    assert any("candidate keys: number of people above" in notice for notice in outcome.notices)
    rows = outcome.table.rows
    assert [row[0] for row in rows] == ["x", "y"]
    assert [abs(row[1] - exact) <= 3 for row, exact in zip(rows, (300, 150), strict=True)] == [True, True]
