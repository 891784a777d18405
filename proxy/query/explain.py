"""``veil explain``: the same pipeline as a query, stopped before the ledger and the engine."""

from __future__ import annotations

from dataclasses import dataclass

from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import PrivateQuery, classify
from proxy.backends.base import Backend
from proxy.config import DatasetPolicy
from proxy.errors import UnsupportedQueryError
from proxy.query.planning import checked_epsilon, histogram_queries, prepare_release, resolve_group_domains


@dataclass(frozen=True)
class MeasurementExplanation:
    quantity: str
    mechanism: str
    sensitivity: float
    epsilon: float
    noise_scale: float
    error_bound_95: float  # no cell's noise exceeds this with probability >= 95% (union bound)
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
    )
