"""A ``veil_ttest`` query through the pipeline: its price, its engine query, its released row.

The charge is the session's (ε, δ) — ``veil.epsilon`` and ``veil.delta``, which must be > 0: the smooth
sensitivity Gaussian mechanism is (ε′, δ′)-DP (mechanisms/ttest.py). ε is split three ways:

* 90 % (80 % with a p-value) for the noisy t;
* 10 % for a DP estimate of the noise's standard deviation. The exact s.d. S/α depends on the data, so
  it is not released as it is: ln S moves by at most β between neighbours (S is β-smooth), and
  ``exp(ln(S/α) + Laplace(β/ε_s))`` is ε_s-DP;
* with ``'p_value'``, 10 % for Laplace counts of the two groups, from which the degrees of freedom of the
  p-value are taken (n_A + n_B − 2, Welch's upper bound; spec §7). The p-value does not account for the
  added noise, and the answer says so.

δ goes to the t statistic. Under the zCDP accountant each part is charged ε_i²/2 with δ outside
(an (ε, δ)-DP mechanism is δ-approximately ε²/2-zCDP, Bun–Steinke 2016).

The two dummy records of every group are constants of the column's public bounds — 45 % and 55 % of
the way from ``lower`` to ``upper`` — never drawn from the data, so ε′ and δ′ are ordinary DP guarantees
about the people in the table (spec §3).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from budget.totals import Release
from mechanisms.random_source import RandomSource
from mechanisms.ttest import Mode, dp_group_sizes, dp_noise_scale, dp_ttest, noise_parameters, p_value
from proxy.analysis.ttest import TTestQuery
from proxy.config import ColumnType
from proxy.errors import InvalidParameterValueError, PolicyViolationError
from proxy.release.apply import ReleasedTable, ResultColumn
from proxy.rewrite.ttest_values import per_person_values

SCALE_SHARE, SIZES_SHARE = 0.1, 0.1  # of ε; the t statistic gets the rest
DUMMY_POSITIONS = (0.45, 0.55)  # where the dummies sit in [lower, upper]
COLUMNS = ("t", "noise_sd", "epsilon", "delta", "mode")
P_VALUE_COLUMNS = ("p_value", "df", "n_a", "n_b")
NOTE = "the p-value does not account for the noise added to t"


@dataclass(frozen=True)
class TTestPlan:
    query: TTestQuery
    epsilon: float
    delta: float
    mode: Mode
    sql: str

    @property
    def width(self) -> float:
        """m: every value lies in [0, m] once clamped and shifted."""
        column = self.query.value
        assert column.lower is not None and column.upper is not None
        return float(column.upper - column.lower)

    @property
    def dummies(self) -> tuple[float, float]:
        return (DUMMY_POSITIONS[0] * self.width, DUMMY_POSITIONS[1] * self.width)

    @property
    def shares(self) -> tuple[float, float, float]:
        """ε of the t statistic, of the noise-scale estimate, of the group counts (0 without p-value)."""
        sizes = SIZES_SHARE if self.query.p_value else 0.0
        return (self.epsilon * (1 - SCALE_SHARE - sizes), self.epsilon * SCALE_SHARE, self.epsilon * sizes)

    def describe(self) -> str:
        t, scale, sizes = self.shares
        parts = f"t ε={t:.4g} δ={self.delta:.3g}, noise s.d. estimate ε={scale:.4g}"
        return f"ε={self.epsilon:.4g}, δ={self.delta:.3g} ({parts}" + (
            f", group counts ε={sizes:.4g})" if sizes else ")"
        )

    def digest(self) -> str:
        """The answer cache's key: everything that shapes the noisy row (proxy/release/cache_key.py)."""
        parts = (self.sql, self.mode, repr((self.epsilon, self.delta, self.query.p_value, self.dummies)))
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()

    def noise_floor(self) -> float:
        """What ``veil explain`` can say before any data is read: the noise s.d. is S/α and S is at
        least the local sensitivity, about 2·|t| (spec §8), so the noise s.d. is at least 2·|t|/α."""
        alpha, _ = noise_parameters(epsilon=self.shares[0], delta=self.delta)
        return 2 / alpha


def plan_ttest(
    query: TTestQuery, *, epsilon: float, delta: float, mode: str, research_modes: bool, dialect: str
) -> TTestPlan:
    if delta <= 0:
        raise InvalidParameterValueError(
            "veil_ttest needs veil.delta > 0: its noise is Gaussian, scaled by the smooth sensitivity",
            hint="SET veil.delta = 1e-6 (for example; the analyst needs a δ grant too)",
        )
    if mode == "paper" and not research_modes:
        raise PolicyViolationError(
            "veil.ttest_mode = paper is for reproducing the seed's Algorithm 8 and is off on this dataset",
            detail="its bound follows one greedy path and is not proven to be a smooth upper bound",
            hint="SET veil.ttest_mode = sound; an administrator can set research_modes = true for a "
            "dataset used to reproduce the paper",
        )
    sql = per_person_values(query, dialect=dialect).sql(dialect=dialect)
    return TTestPlan(query, epsilon, delta, "paper" if mode == "paper" else "sound", sql)


def ttest_cost(plan: TTestPlan) -> Release:
    rho = math.fsum(share**2 / 2 for share in plan.shares)
    return Release(
        epsilon=plan.epsilon, delta=plan.delta, rho=math.nextafter(rho, math.inf), rho_delta=plan.delta
    )


def ttest_columns(plan: TTestPlan) -> tuple[ResultColumn, ...]:
    names = COLUMNS + (P_VALUE_COLUMNS if plan.query.p_value else ())
    types = {"mode": ColumnType.TEXT}
    return tuple(ResultColumn(name, types.get(name, ColumnType.REAL)) for name in names)


def answer_ttest(plan: TTestPlan, rows: Sequence[tuple[object, ...]], *, rng: RandomSource) -> ReleasedTable:
    """The released row, from the engine's (value, in group A) rows."""
    table = np.array(rows, dtype=np.float64).reshape(len(rows), 2)  # (value, in group A as 0/1)
    values, in_a = np.clip(table[:, 0], 0.0, plan.width), table[:, 1] > 0
    t_share, scale_share, sizes_share = plan.shares
    released = dp_ttest(
        values[in_a],
        values[~in_a],
        m=plan.width,
        dummies=plan.dummies,
        epsilon=t_share,
        delta=plan.delta,
        rng=rng,
        mode=plan.mode,
    )
    noise_sd = dp_noise_scale(released.noise_sd, beta=released.beta, epsilon=scale_share, rng=rng)
    row: list[object] = [released.t, noise_sd, plan.epsilon, plan.delta, plan.mode]
    if plan.query.p_value:
        n_a, n_b = dp_group_sizes(int(in_a.sum()), int((~in_a).sum()), epsilon=sizes_share, rng=rng)
        df = max(1.0, n_a + n_b + 2)  # the augmented groups: each also holds the two dummies
        row += [p_value(released.t, df), df, n_a, n_b]
    return ReleasedTable(ttest_columns(plan), [tuple(row)])
