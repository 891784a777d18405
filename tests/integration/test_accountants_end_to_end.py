"""A dataset's accountant decides how many answers a grant pays for, through the query pipeline."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from budget.accountants import get_accountant, zcdp_epsilon
from budget.errors import BudgetExhaustedError
from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy.backends.duckdb import DuckDBBackend
from proxy.config import parse_config
from proxy.query.service import Principal, QueryService
from proxy.settings import SessionSettings
from proxy.wire.scram import make_scram_verifier

POLICY = """
[datasets.shop]
path = "shop.duckdb"
accountant = "{accountant}"
answer_cache = false

[datasets.shop.tables.sales]
privacy_unit = "customer"
max_contributions = 2

[datasets.shop.tables.sales.columns]
customer = {{ type = "integer" }}
amount = {{ type = "real", lower = 0, upper = 100 }}
"""


def service(tmp_path: Path, accountant: str) -> tuple[QueryService, Ledger]:
    with duckdb.connect(str(tmp_path / "shop.duckdb")) as connection:
        connection.execute(
            "CREATE TABLE sales AS SELECT i % 500 AS customer, (i % 97)::DOUBLE AS amount FROM range(1000) t(i)"
        )
    policy = parse_config(POLICY.format(accountant=accountant), path=tmp_path / "veil.toml").dataset("shop")
    assert policy is not None and policy.path is not None
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    ledger.add_analyst("ann", make_scram_verifier("pw", iterations=1))
    ledger.grant("ann", "shop", PrivacyLoss(0.5, 2e-6), accountant=get_accountant(accountant))
    query_service = QueryService(
        policy,
        backend=DuckDBBackend(policy.path),
        sandbox=DuckDBBackend.sandbox(),
        ledger=ledger,
        rng=random.Random(7),
        accountant_of=lambda _dataset: get_accountant(accountant),
    )
    return query_service, ledger


def answers_until_refused(query_service: QueryService, limit: int) -> int:
    settings = SessionSettings()
    settings.set("veil.epsilon", "0.01")
    for number in range(limit):
        (tree,) = query_service.parse(f"SELECT COUNT(*) FROM sales WHERE amount > -1 - {number}")
        try:
            query_service.run(tree, principal=Principal("ann"), settings=settings)
        except BudgetExhaustedError:
            return number
    return limit


def test_basic_composition_pays_for_exactly_the_sum(tmp_path: Path) -> None:
    query_service, _ = service(tmp_path, "basic")
    assert answers_until_refused(query_service, 80) == 50  # 0.5 / 0.01


def most_answers(total: Callable[[int], float], grant: float = 0.5) -> int:
    """The largest k whose composed ε is within the grant, straight from the formula."""
    return max(k for k in range(1, 1000) if total(k) <= grant)


FORMULAS: dict[str, Callable[[int], float]] = {
    # Dwork–Rothblum–Vadhan at ε = 0.01, δ′ = half the grant's δ = 10⁻⁶
    "advanced": lambda k: math.sqrt(2 * math.log(1e6) * k * 0.01**2) + k * 0.01 * math.expm1(0.01),
    # zCDP: ρ = k·ε²/2, converted at δ_c = 10⁻⁶ (Canonne–Kamath–Steinke)
    "zcdp": lambda k: zcdp_epsilon(k * 0.01**2 / 2, 1e-6),
}


@pytest.mark.parametrize("accountant", ["advanced", "zcdp"])
def test_many_small_answers_cost_less_than_their_sum(tmp_path: Path, accountant: str) -> None:
    query_service, ledger = service(tmp_path, accountant)
    expected = most_answers(FORMULAS[accountant])
    assert expected > 80  # far beyond basic composition's 50
    answered = answers_until_refused(query_service, 300)
    assert expected - 1 <= answered <= expected  # the accountant rounds up, never down
    balance = ledger.balance("ann", "shop", accountant=get_accountant(accountant))
    assert balance.spent_epsilon <= 0.5 and balance.spent_delta <= 2e-6
    assert balance.accountant == accountant
    assert ledger.verify() == []
