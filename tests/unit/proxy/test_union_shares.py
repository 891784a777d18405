"""How a UNION ALL shares the statement's ε and δ among its parts (proxy/query/planning.py). Found
missing by ``make mutants`` (docs/testing.md): a mutant counting each δ-spending part twice survived."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from budget.amounts import as_decimal
from budget.totals import Release
from proxy.analysis.parse import parse_statements
from proxy.analysis.shape import QueryShape
from proxy.analysis.statements import PrivateQuery, classify
from proxy.query.planning import union_shares
from proxy.query.service import _union_cost
from tests.unit.proxy.policy_fixture import clinic_policy

DATA_KEYS = "SELECT note, COUNT(*) FROM visits GROUP BY note"  # keys from the data: spends δ
PUBLIC_KEYS = "SELECT region, COUNT(*) FROM visits GROUP BY region"


def shape(sql: str) -> QueryShape:
    statement = classify(parse_statements(sql)[0], clinic_policy())
    assert isinstance(statement, PrivateQuery)
    return statement.shape


@pytest.mark.parametrize(
    ("parts", "gaussian", "spenders"),
    [
        ([DATA_KEYS, PUBLIC_KEYS], False, 1),
        ([DATA_KEYS, DATA_KEYS, PUBLIC_KEYS], False, 2),
        ([PUBLIC_KEYS, PUBLIC_KEYS], True, 2),
        ([DATA_KEYS, PUBLIC_KEYS, PUBLIC_KEYS], True, 3),
    ],
)
def test_delta_is_shared_by_the_parts_that_spend_it(parts: list[str], gaussian: bool, spenders: int) -> None:
    epsilon_share, delta_share = union_shares(
        [shape(p) for p in parts], epsilon=1.0, delta=1e-6, gaussian=gaussian
    )
    assert Fraction(epsilon_share) * len(parts) <= Fraction(as_decimal(1.0))
    assert epsilon_share == pytest.approx(1.0 / len(parts), rel=1e-12)
    assert Fraction(delta_share) * spenders <= Fraction(as_decimal(1e-6))
    assert delta_share == pytest.approx(1e-6 / spenders, rel=1e-12)


def test_parts_without_delta_leave_it_whole() -> None:
    assert union_shares([shape(PUBLIC_KEYS)] * 2, epsilon=1.0, delta=1e-6, gaussian=False) == (0.5, 1e-6)


def test_a_union_measured_whole_is_charged_the_statements_epsilon_and_delta() -> None:
    """Every part measured: one ledger entry for the statement's own (ε, δ), which the parts' equal shares
    never exceed — not their float sum (a mutant charging the sum survived ``make mutants``)."""
    parts = [Release(0.5, 4.9e-7, rho=0.125, rho_delta=4.9e-7)] * 2  # as release_cost prices each part
    cost = _union_cost(parts, epsilon=1.0, delta=1e-6)
    assert (cost.epsilon, cost.delta) == (1.0, 1e-6)
    pure = [Release(0.5, rho=0.125)] * 2
    assert _union_cost(pure, epsilon=1.0, delta=1e-6).delta == 0.0, "no part spends δ: none is charged"
    partial = _union_cost(parts[:1], epsilon=None, delta=None)  # the other part was a stored answer
    up = math.inf  # the parts' exact sum, rounded up: never below the losses it adds
    assert (partial.epsilon, partial.delta) == (math.nextafter(0.5, up), math.nextafter(4.9e-7, up))


def test_a_unions_zcdp_cost_adds_its_parts_rho_and_their_delta_outside_rho() -> None:
    """Under the zCDP accountant a UNION ALL composes its parts' ρ (ρ adds up) and the δ each spends
    outside ρ (τ-thresholding of data-derived keys), never more than the δ charged: dropping either
    would under-charge, and ρ of the whole ε (ε²/2) would over-charge."""
    up = math.inf
    thresholded = Release(0.5, 4e-7, rho=0.125, rho_delta=3e-7)
    gaussian = Release(0.5, 5e-7, rho=0.02, rho_delta=0.0)
    cost = _union_cost([thresholded, gaussian], epsilon=1.0, delta=1e-6)
    assert cost.rho == math.nextafter(0.145, up)
    assert cost.rho_delta == math.nextafter(3e-7, up)
    assert _union_cost([thresholded, thresholded], epsilon=1.0, delta=5e-7).rho_delta == 5e-7, "capped at δ"
    partial = _union_cost([thresholded], epsilon=None, delta=None)
    assert (partial.rho, partial.rho_delta) == (math.nextafter(0.125, up), math.nextafter(3e-7, up))
