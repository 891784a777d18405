"""Survivors of a fresh mutation sample (seed 1142, docs/testing.md): a Gaussian error bound's extra grid
step, a sum's digits from its larger side, and a free UNION ALL's notice without a δ."""

from __future__ import annotations

from statistics import NormalDist

import sqlglot

from budget.totals import Release
from proxy.analysis.magnitudes import largest_digits
from proxy.query.service import _union_description
from tests.unit.proxy.people_fixture import people
from tests.unit.proxy.test_mutants_release_plan import plan_for


def test_a_discrete_gaussian_error_bound_adds_one_grid_step_and_a_continuous_one_none() -> None:
    """docs/privacy.md: the continuous tail bound holds for discrete noise only one whole unit further
    out, so the bound *adds* the step (a bound one step short would be exceeded too often)."""
    (count,) = plan_for(
        "SELECT smoker, COUNT(*) FROM people GROUP BY smoker", epsilon=1.0, delta=1e-6, gaussian=True
    ).measurements
    assert count.exact_integer
    z = NormalDist().inv_cdf(1 - 0.05 / (2 * 4))
    assert count.error_bound(cells=4) == z * count.gaussian_sigma() + 1.0
    (weighted,) = plan_for(
        "SELECT region, COUNT(*) FROM visits GROUP BY region", epsilon=1.0, delta=1e-6, gaussian=True
    ).measurements
    assert not weighted.exact_integer
    assert weighted.error_bound(cells=4) == z * weighted.gaussian_sigma()


def test_a_sum_has_one_digit_more_than_its_larger_side_on_either_side() -> None:
    """A literal of 1,001 digits on the left of + or − bounds the result, not the small right side."""
    for sql in ("1e1000 + 1", "1e1000 - 1", "1 + 1e1000"):
        assert largest_digits(sqlglot.parse_one(sql, dialect="postgres"), table=people()) == 1002, sql


def test_a_union_of_stored_answers_names_no_delta_when_it_spends_none() -> None:
    """The NOTICE an analyst reads: ε only when δ is 0, and δ after it when one is spent."""
    parts = [object(), object()]
    free = _union_description(Release(1.0), parts, [True, True])  # type: ignore[arg-type]
    assert free == (
        "ε=1 in 2 parts of a UNION ALL (part 1: the stored answer, free; part 2: the stored answer, free)"
    )
    with_delta = _union_description(Release(1.0, 1e-6), parts, [True, True])  # type: ignore[arg-type]
    assert with_delta.startswith("ε=1, δ=1e-06 in 2 parts of a UNION ALL (")
