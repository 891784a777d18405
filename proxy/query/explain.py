"""``veil explain``: the same pipeline as a query, stopped before the ledger and the engine."""

from __future__ import annotations

from dataclasses import dataclass

from mechanisms.ttest import noise_parameters
from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import PrivateQuery, TTestStatement, classify
from proxy.analysis.ttest import TTestQuery
from proxy.backends.base import Backend
from proxy.config import DatasetPolicy
from proxy.errors import UnsupportedQueryError
from proxy.query.planning import checked_epsilon, histogram_queries, prepare_release, resolve_group_domains
from proxy.query.ttest import plan_ttest


@dataclass(frozen=True)
class MeasurementExplanation:
    quantity: str
    mechanism: str
    sensitivity: float | None  # None: it depends on the data (veil_ttest's smooth sensitivity)
    epsilon: float
    noise_scale: float | None
    error_bound_95: float | None  # no cell's noise exceeds this with probability >= 95% (union bound)
    delta: float  # this measurement's share of δ (Gaussian noise), else 0


@dataclass(frozen=True)
class Explanation:
    engine_sql: str | None  # the main query; None when every aggregate is a quantile
    histogram_sql: dict[str, str]  # per column whose quantiles are measured; "mode(col)" per mode
    epsilon: float
    cells: int | None  # None: keys come from the data (τ-thresholding)
    delta: float
    threshold: float | None
    measurements: tuple[MeasurementExplanation, ...]
    threshold_delta: float  # δ_τ: the share of δ the threshold τ is calibrated for
    notes: tuple[str, ...] = ()
    partition: str | None = None  # charged to this partition only (parallel composition), e.g. t.c = 'v'


def explain_query(
    dataset: DatasetPolicy,
    sql: str,
    *,
    backend: Backend,
    epsilon: float | None = None,
    delta: float = 0.0,
    gaussian: bool = False,
    other_row: bool = False,
) -> Explanation:
    """``backend`` only evaluates GROUP BY key domains over VALUES lists; it reads no table."""
    trees = parse_statements(sql)
    if len(trees) != 1:
        raise UnsupportedQueryError("explain takes exactly one statement")
    statement = classify(trees[0], dataset)
    if isinstance(statement, TTestStatement):
        return _explain_ttest(statement.query, dataset, epsilon=epsilon, delta=delta, dialect=backend.dialect)
    if not isinstance(statement, PrivateQuery):
        raise UnsupportedQueryError("only queries on private tables have a privacy cost to explain")
    shape = resolve_group_domains(statement.shape, execute=backend.execute, dialect=backend.dialect)
    plan, engine_sql = prepare_release(
        shape,
        epsilon=checked_epsilon(dataset, epsilon),
        delta=delta,
        dialect=backend.dialect,
        gaussian=gaussian,
        other_row=other_row,
    )
    cells = shape.cells
    measurements = tuple(
        MeasurementExplanation(
            quantity=m.quantity.label + (" (total, for the (other) row)" if m.total else ""),
            mechanism=m.mechanism,
            sensitivity=m.sensitivity,
            epsilon=m.epsilon,
            noise_scale=m.gaussian_sigma() if m.gaussian else m.sensitivity / m.epsilon,
            error_bound_95=m.error_bound(cells=cells or 1),
            delta=m.delta if m.gaussian else 0.0,
        )
        for m in plan.measurements
    )
    histograms = histogram_queries(plan, dialect=backend.dialect)
    return Explanation(
        engine_sql,
        histograms,
        plan.epsilon,
        cells,
        plan.delta,
        plan.threshold,
        measurements,
        plan.threshold_delta,
        partition=shape.partition.label if shape.partition is not None else None,
    )


def _explain_ttest(
    query: TTestQuery, dataset: DatasetPolicy, *, epsilon: float | None, delta: float, dialect: str
) -> Explanation:
    """A t-test's price and noise, as far as they are known before any row is read: the noise of t is
    S/α, and S depends on the data, so the floor the analyst can count on is printed instead."""
    plan = plan_ttest(
        query,
        epsilon=checked_epsilon(dataset, epsilon),
        delta=delta,
        mode="sound",
        research_modes=dataset.research_modes,
        dialect=dialect,
    )
    t_share, scale_share, sizes_share = plan.shares
    alpha, beta = noise_parameters(epsilon=t_share, delta=plan.delta)
    measurements = [
        MeasurementExplanation("t", "smooth-sensitivity gaussian", None, t_share, None, None, plan.delta),
        MeasurementExplanation(
            "noise_sd (estimate)", "laplace on ln(S/α)", beta, scale_share, beta / scale_share, None, 0.0
        ),
    ]
    if sizes_share:
        measurements.append(
            MeasurementExplanation("n_a, n_b", "laplace", 2.0, sizes_share, 2 / sizes_share, None, 0.0)
        )
    notes = (
        f"the noise added to t has s.d. S/α with α = {alpha:.4g} (β = {beta:.4g}); S is the smooth "
        "sensitivity of t on the data, at least about 2·|t|, so the noise s.d. is at least "
        f"{plan.noise_floor():.3g}·|t|: a t smaller than that is hard to tell from its noise",
        f"dummy records at {plan.dummies[0]:g} and {plan.dummies[1]:g} (after shifting {query.value.name} "
        f"by its lower bound) are added to both groups",
    )
    return Explanation(plan.sql, {}, plan.epsilon, 1, plan.delta, None, tuple(measurements), 0.0, notes)
