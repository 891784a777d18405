"""What a release plan costs, in the terms every accountant of the ledger needs (budget/totals.py).

ε and δ are the plan's charge. ρ (zCDP) is summed over its measurements — exact, because the
ledger may account with zCDP: a Gaussian measurement at noise σ on an ℓ2 sensitivity Δ is
Δ²/(2σ²)-zCDP (Bun–Steinke 2016, Prop. 1.6; discrete Gaussian: Canonne–Kamath–Steinke 2020,
Thm. 4), and an ε-DP measurement (Laplace, exponential mechanism, the DP choice of the contribution
bound) is ε²/2-zCDP (Bun–Steinke 2016, Prop. 1.4); a top-k selection of k rounds at ε/k each is
ε²/(2k)-zCDP. The δ of τ-thresholding is outside ρ.
"""

from __future__ import annotations

import math

from budget.totals import Release
from proxy.release.plan import Measurement, ReleasePlan
from proxy.release.top_k import TopKPlan


def release_cost(plan: ReleasePlan) -> Release:
    selection = plan.selection.rho if isinstance(plan, TopKPlan) and plan.selection is not None else 0.0
    rho = math.fsum([*(_rho(m) for m in plan.measurements), plan.bound_epsilon**2 / 2, selection])
    return Release(
        epsilon=plan.epsilon,
        delta=plan.delta,
        rho=math.nextafter(rho, math.inf),
        rho_delta=plan.threshold_delta if plan.threshold is not None else 0.0,
    )


def _rho(measurement: Measurement) -> float:
    """A Gaussian measurement's ``sensitivity`` is its ℓ2 sensitivity (release/plan.py)."""
    if measurement.gaussian:
        return (measurement.sensitivity / measurement.gaussian_sigma()) ** 2 / 2
    return measurement.epsilon**2 / 2
