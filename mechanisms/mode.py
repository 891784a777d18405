"""Differentially private MODE over a public domain: one exact, monotone exponential-mechanism selection.

The SQL layer hands this module, per group, the (weighted, integer) number of rows holding each value of a
public domain — a column declared with ``values = [...]`` or ``range`` in the policy, so the candidates
never come from the data. The mode is the value with the largest count, so the score of a value is its
count (McSherry & Talwar 2007 use the same score for the mode).

* Sensitivity: one privacy unit carries integer weights summing to at most Δ over *all* values and groups
  (Δ = L·K with the engine's weights, L rows of K units each), so it moves any one score by at most Δ.
* Monotone: adding a unit can only add weight, removing one only takes it away, so all scores move in the
  same direction and :func:`mechanisms.exponential.exponential_mechanism` runs with ``monotone=True`` —
  acceptance exp(-ε·(u* - u_r)/Δ), half the exponent gap of the general case (proof in that module).
* Several groups: a unit that puts weight w_g in group g moves that group's scores by at most w_g, so
  the group's selection costs ε·w_g/Δ and all groups together at most ε (Σ w_g <= Δ). One ε pays for the
  mode of every group.
* Utility (the exponential mechanism's theorem, monotone form): with probability at least 1 - β the
  released value's count is at most (Δ/ε)·ln(|Y|/β) below the true mode's count, |Y| the domain size —
  independent of the number of rows. :func:`mode_count_gap_bound` returns it in rows (Δ = L).
* An empty group scores every value 0, so the answer is a uniformly random value: emptiness is not
  revealed (SQL's mode() of no rows would be NULL).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

from budget.loss import PrivacyLoss
from mechanisms.errors import MechanismError
from mechanisms.exponential import exponential_error_bound, exponential_mechanism, exponential_privacy_loss
from mechanisms.random_source import RandomSource
from mechanisms.validation import check_positive_finite


def dp_mode_from_histogram(
    counts: Sequence[int], *, epsilon: float, sensitivity: int, rng: RandomSource
) -> int:
    """The index of the released value: ε-DP when one privacy unit's weights sum to at most
    ``sensitivity`` over the whole histogram (and every other histogram released with the same ε)."""
    check_positive_finite(epsilon, name="epsilon", hint="spend a positive budget, e.g. epsilon=1.0")
    _check_whole(sensitivity, name="sensitivity", hint="the most weight one unit can carry, e.g. 1")
    if not counts or any(
        isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 0 for count in counts
    ):
        raise MechanismError(
            "counts must be a non-empty sequence of non-negative integers",
            hint="pass one (weighted) row count per public value, zeros included",
        )
    scores = [int(count) for count in counts]
    return exponential_mechanism(scores, sensitivity=sensitivity, epsilon=epsilon, rng=rng, monotone=True)


def mode_privacy_loss(*, epsilon: float) -> PrivacyLoss:
    """:func:`dp_mode_from_histogram` run with ε is (ε, 0)-DP: one exponential-mechanism selection."""
    return exponential_privacy_loss(epsilon=epsilon)


def mode_count_gap_bound(
    *,
    epsilon: float,
    max_contributions: int,
    candidates: int,
    confidence: float = 0.95,
    outputs: int = 1,
) -> float:
    """Count gap G in rows: with probability >= ``confidence`` no one of ``outputs`` released modes has
    a count more than G rows below its group's true mode (a union bound over the outputs).

    G = (L/ε)·ln(candidates·outputs/(1 - confidence)), L = ``max_contributions``.
    """
    _check_whole(max_contributions, name="max_contributions", hint="rows kept per privacy unit, e.g. 1")
    _check_whole(outputs, name="outputs", hint="the number of groups answered, e.g. 1")
    _check_whole(candidates, name="candidates", hint="the number of public values, e.g. 3")
    # the union bound over outputs is the utility theorem over outputs × candidates
    return exponential_error_bound(
        sensitivity=max_contributions,
        epsilon=epsilon,
        candidates=candidates * outputs,
        confidence=confidence,
        monotone=True,
    )


def _check_whole(count: int, *, name: str, hint: str) -> None:
    if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 1:
        raise MechanismError(f"{name} must be a whole number >= 1, got {count!r}", hint=hint)
