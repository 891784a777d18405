"""Gaussian noise with τ-thresholding: ℓ2 sensitivities, the explicit δ split, the Gaussian τ, and a
single person's key never released; plus what ``veil explain`` shows of it."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import norm

from budget.ledger import as_decimal
from mechanisms.gaussian import discrete_gaussian_sigma
from proxy.analysis.parse import parse_statements
from proxy.analysis.quantities import THRESHOLD_QUANTITY, QuantityKind
from proxy.analysis.statements import PrivateQuery, classify
from proxy.backends.duckdb import DuckDBBackend
from proxy.query.explain import explain_query
from proxy.query.planning import prepare_release
from proxy.release.apply import release
from proxy.release.plan import ReleasePlan, price_query, split_delta
from tests.unit.proxy.policy_fixture import clinic_policy

NOTES = "SELECT note, COUNT(*) FROM visits GROUP BY note"  # note: private text, keys from the data; L = 3


def plan_for(sql: str, *, epsilon: float = 1.0, delta: float = 1e-6, gaussian: bool = True) -> ReleasePlan:
    statement = classify(parse_statements(sql)[0], clinic_policy())
    assert isinstance(statement, PrivateQuery)
    plan, _ = prepare_release(
        statement.shape, epsilon=epsilon, delta=delta, dialect="duckdb", gaussian=gaussian
    )
    return plan


def gate(plan: ReleasePlan):  # type: ignore[no-untyped-def]
    return next(m for m in plan.measurements if m.quantity == THRESHOLD_QUANTITY)


# --- ℓ2 sensitivity --------------------------------------------------------------------------------------


def test_the_gate_has_l2_sensitivity_sqrt_of_the_keys_one_person_may_hold() -> None:
    plan = plan_for(NOTES)
    count, people = plan.measurements
    assert people.quantity == THRESHOLD_QUANTITY and people.gaussian
    assert people.sensitivity == math.nextafter(math.sqrt(3), math.inf), "sqrt(3), rounded up"
    assert Fraction(people.sensitivity) ** 2 >= 3
    assert count.sensitivity == 3.0, "a person may put all L rows into one key: ℓ2 = ℓ1 = L"


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT COUNT(DISTINCT patient_id) FROM visits", 1.0),
        ("SELECT region, COUNT(DISTINCT patient_id) FROM visits GROUP BY region", math.sqrt(2)),
        ("SELECT region, sex, COUNT(DISTINCT patient_id) FROM visits GROUP BY region, sex", math.sqrt(3)),
    ],
)
def test_people_counts_over_public_keys_use_sqrt_of_min_l_and_cells(sql: str, expected: float) -> None:
    (measurement,) = plan_for(sql).measurements
    assert (
        measurement.sensitivity == pytest.approx(expected, rel=1e-15) and measurement.sensitivity >= expected
    )
    (laplace,) = plan_for(sql, gaussian=False).measurements
    assert laplace.sensitivity == round(expected**2), "Laplace keeps the ℓ1 bound min(L, cells)"


# --- the δ split -----------------------------------------------------------------------------------------


@given(
    st.sampled_from([1e-6, 1e-5, 3e-7, 0.1, 1e-9]),
    st.sampled_from(
        [
            NOTES,
            "SELECT note, COUNT(*), AVG(age) FROM visits GROUP BY note",
            "SELECT note, SUM(cost), STDDEV(age), COUNT(DISTINCT patient_id) FROM visits GROUP BY note",
        ]
    ),
)
def test_the_delta_split_sums_to_the_charged_delta(delta: float, sql: str) -> None:
    plan = plan_for(sql, delta=delta)
    noisy = [m for m in plan.measurements if m.gaussian]
    assert plan.delta == delta and plan.loss.delta == delta
    assert plan.delta_shares == (*(m.delta for m in noisy), plan.threshold_delta)
    total = sum(Fraction(share) for share in plan.delta_shares)
    charged = Fraction(as_decimal(delta))
    assert total <= charged, "never more than the ledger charges"
    assert charged - total <= charged * Fraction(1, 2**50), "and all of it, up to rounding"
    assert all(share == noisy[0].delta for share in (m.delta for m in noisy)), "equal shares"
    assert plan.threshold_delta >= noisy[0].delta, "the threshold takes the remainder"


def test_laplace_thresholding_keeps_all_of_delta_for_the_threshold() -> None:
    plan = plan_for(NOTES, gaussian=False)
    assert (plan.threshold_delta, plan.delta_shares) == (1e-6, (1e-6,))
    assert split_delta(1e-6, gaussian_parts=0, thresholded=True) == (0.0, 1e-6)
    assert split_delta(1e-6, gaussian_parts=2, thresholded=False) == (5e-7, 0.0)


# --- τ ---------------------------------------------------------------------------------------------------


def test_gaussian_tau_is_one_plus_sigma_times_the_normal_quantile() -> None:
    plan = plan_for(NOTES)
    people = gate(plan)
    sigma = people.gaussian_sigma()  # analytic σ of the grid mechanism
    expected = 1 + sigma * norm.isf(plan.threshold_delta / 3)  # δ_τ over the L = 3 keys one person adds
    assert plan.threshold is not None
    assert expected * (1 - 1e-5) <= plan.threshold <= expected * (1 + 1e-5)


def test_tables_of_people_get_an_integer_tau_from_the_discrete_gaussian() -> None:
    # people: one row per person, so one key each (groups_per_person = 1), exact integer counts
    plan = plan_for("SELECT income, COUNT(*) FROM people GROUP BY income")
    people = gate(plan)
    assert people.exact_integer and people.sensitivity == 1.0
    sigma = discrete_gaussian_sigma(sensitivity=1.0, epsilon=people.epsilon, delta=people.delta)
    assert plan.threshold is not None and plan.threshold.is_integer()
    assert abs(plan.threshold - (1 + sigma * norm.isf(plan.threshold_delta))) <= 1.0


def test_a_key_held_by_one_person_is_never_released_with_gaussian_noise() -> None:
    """P(release) per draw <= δ_τ / L = 1.1e-7 (union bound over a person's L keys); 2,000 seeded draws.
    A key shared by 1,000 people is released in every draw (τ ≈ 86, noise σ ≈ 15)."""
    plan = plan_for(NOTES)
    exact = [("x", 3000.0, 1000.0), ("secret", 1.0, 1.0)]  # key, COUNT(*), people (the gate)
    released = [
        {row[0] for row in release(plan, exact, rng=random.Random(seed)).rows} for seed in range(2000)
    ]
    assert all(keys == {"x"} for keys in released)


def test_the_notice_shows_each_delta_share_and_tau() -> None:
    text = plan_for(NOTES).describe()
    assert text.startswith("ε=1, δ=1e-06 (count(*) ε=0.5 δ=3.33e-07, people per key ε=0.5 δ=3.33e-07;")
    assert "; keys released above τ=" in text and text.endswith(" people (δ=3.33e-07))")


def test_explain_shows_tau_and_the_delta_split() -> None:
    sandbox = DuckDBBackend.sandbox()
    try:
        explanation = explain_query(
            clinic_policy(), NOTES, backend=sandbox, epsilon=1.0, delta=1e-6, gaussian=True
        )
    finally:
        sandbox.close()
    plan = plan_for(NOTES)
    assert explanation.threshold == plan.threshold and explanation.threshold is not None
    assert explanation.delta == 1e-6
    shares = [m.delta for m in explanation.measurements] + [explanation.threshold_delta]
    assert shares == list(plan.delta_shares)
    assert sum(Fraction(share) for share in shares) <= Fraction("1e-6")
    assert [m.mechanism for m in explanation.measurements] == ["Gaussian on a 2^k grid"] * 2
    assert explanation.measurements[1].sensitivity == gate(plan).sensitivity


def test_quantiles_take_no_delta_beside_a_gaussian_threshold() -> None:
    plan = price_query(
        classify(parse_statements("SELECT MEDIAN(age), COUNT(*) FROM visits")[0], clinic_policy()).shape,  # type: ignore[attr-defined]
        epsilon=1.0,
        delta=1e-6,
        gaussian=True,
    )
    assert [m.quantity.kind for m in plan.measurements if m.delta] == [QuantityKind.ROWS]
