"""``veil explain``: the same pipeline as a query, stopped before the ledger and the engine."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from mechanisms.ttest import noise_parameters
from proxy.analysis.parse import parse_statements
from proxy.analysis.shape import QueryShape
from proxy.analysis.statements import PrivateQuery, TTestStatement, UnionQuery, classify
from proxy.analysis.ttest import TTestQuery
from proxy.backends.base import Backend
from proxy.config import DatasetPolicy
from proxy.errors import UnsupportedQueryError
from proxy.query.planning import (
    bound_choice_epsilon,
    checked_epsilon,
    histogram_queries,
    prepare_release,
    resolve_group_domains,
    union_shares,
)
from proxy.query.top_k import gate_query
from proxy.query.ttest import plan_ttest
from proxy.release.plan import ReleasePlan
from proxy.release.top_k import TopKPlan


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
    if isinstance(statement, UnionQuery):
        return _explain_union(
            statement,
            dataset,
            backend=backend,
            epsilon=epsilon,
            delta=delta,
            gaussian=gaussian,
            other_row=other_row,
        )
    if not isinstance(statement, PrivateQuery):
        raise UnsupportedQueryError("only queries on private tables have a privacy cost to explain")
    return _explain_shape(
        statement.shape,
        backend=backend,
        epsilon=checked_epsilon(dataset, epsilon),
        delta=delta,
        gaussian=gaussian,
        other_row=other_row,
    )


def _explain_union(
    query: UnionQuery,
    dataset: DatasetPolicy,
    *,
    backend: Backend,
    epsilon: float | None,
    delta: float,
    gaussian: bool,
    other_row: bool,
) -> Explanation:
    """Each part explained at its share of ε (and of δ), as the query service charges it; the charge is
    the statement's ε, and δ when a part spends it."""
    shapes = list(query.parts)
    total = checked_epsilon(dataset, epsilon)
    share, delta_share = union_shares(shapes, epsilon=total, delta=delta, gaussian=gaussian)
    parts = [
        _explain_shape(
            shape, backend=backend, epsilon=share, delta=delta_share, gaussian=gaussian, other_row=other_row
        )
        for shape in shapes
    ]
    cells = [part.cells for part in parts]
    return Explanation(
        engine_sql=";\n".join(
            f"-- part {i}\n{part.engine_sql}" for i, part in enumerate(parts, start=1) if part.engine_sql
        )
        or None,
        histogram_sql={
            f"part {i}: {name}": sql
            for i, part in enumerate(parts, start=1)
            for name, sql in part.histogram_sql.items()
        },
        epsilon=total,
        cells=None if None in cells else sum(c or 0 for c in cells),
        delta=delta if any(part.delta for part in parts) else 0.0,
        threshold=None,
        measurements=tuple(
            dataclasses.replace(m, quantity=f"part {i}: {m.quantity}")
            for i, part in enumerate(parts, start=1)
            for m in part.measurements
        ),
        threshold_delta=0.0,
        notes=(
            f"UNION ALL of {len(parts)} parts: each is answered on its own with ε = {share:.4g}"
            + (
                f" (δ = {delta_share:.3g} for each part that spends δ)"
                if any(part.delta for part in parts)
                else ""
            ),
            *(
                f"part {i}: keys released only if their noisy number of people exceeds τ = {part.threshold:.4g}"
                for i, part in enumerate(parts, start=1)
                if part.threshold is not None
            ),
            *(f"part {i}: {note}" for i, part in enumerate(parts, start=1) for note in part.notes),
        ),
    )


def _explain_shape(
    shape: QueryShape, *, backend: Backend, epsilon: float, delta: float, gaussian: bool, other_row: bool
) -> Explanation:
    shape = resolve_group_domains(shape, execute=backend.execute, dialect=backend.dialect)
    plan, engine_sql = prepare_release(
        shape,
        epsilon=epsilon,
        delta=delta,
        dialect=backend.dialect,
        gaussian=gaussian,
        other_row=other_row,
        bound_epsilon=bound_choice_epsilon(shape, epsilon),  # as the query service charges it
    )
    if isinstance(plan, TopKPlan):
        return _explain_top_k(plan, engine_sql, dialect=backend.dialect)
    cells = shape.cells
    measurements = _bound_choices(plan) + tuple(
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
    notes = tuple(
        f"{bound.describe()}: ε={plan.bound_epsilon / len(shape.value_bounds):.4g} of the query's ε picks "
        f"its bound among {bound.unit:g} × (1, 2, 3, 4, 6, 8, … {bound.cap}); the sensitivities above are "
        "those of the widest bound it can pick"
        for bound in shape.value_bounds
    )
    if plan.bound_epsilon and not shape.value_bounds:
        notes = (
            f"max_contributions is chosen with DP when the query runs (at most {shape.table.max_contributions}); "
            "sensitivities, noise scales and error bounds above are for that cap, and shrink with the chosen L. "
            "An analyst for whom this choice is remembered from an earlier answer pays nothing for it: the "
            "whole ε then goes to the other parts",
        )
    return Explanation(
        engine_sql,
        histograms,
        plan.epsilon,
        cells,
        plan.delta,
        plan.threshold,
        measurements,
        plan.threshold_delta,
        notes=notes,
        partition=shape.partition.label if shape.partition is not None else None,
    )


def _bound_choices(plan: ReleasePlan) -> tuple[MeasurementExplanation, ...]:
    """The DP choices of bounds (max_contributions = "auto", or per-person values), first, as the charge
    lists them (``ReleasePlan.split``): the exponential mechanism over candidate bounds, each person one
    count (sensitivity 1)."""
    parts = plan.split()
    return tuple(
        MeasurementExplanation(
            label, "exponential (permute-and-flip)", 1.0, epsilon, 1.0 / epsilon, None, 0.0
        )
        for label, epsilon, _ in parts[: len(parts) - len(plan.measurements)]
        if epsilon > 0
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


def _explain_top_k(plan: TopKPlan, engine_sql: str | None, *, dialect: str) -> Explanation:
    """A top-k query answered by a DP selection: the gate (keys from the data), the selection and the
    counts of the selected keys, each with its share of ε; ``cells`` is the most rows it can release."""
    selection = plan.selection
    assert selection is not None
    top = plan.top_k
    rows = []
    gate = plan.gate
    if gate is not None:
        rows.append(
            MeasurementExplanation(
                quantity="count(distinct unit) per key, against τ",
                mechanism=gate.mechanism,
                sensitivity=gate.sensitivity,
                epsilon=gate.epsilon,
                noise_scale=gate.sensitivity / gate.epsilon,
                error_bound_95=None,
                delta=0.0,
            )
        )
    rows.append(
        MeasurementExplanation(
            quantity=f"top-{top.k} selection" + (" per partition" if top.partition else ""),
            mechanism=f"{selection.mechanism}: {selection.rounds} rounds at ε={selection.round_epsilon:.4g}",
            sensitivity=1.0,
            epsilon=selection.epsilon,
            noise_scale=1.0 / selection.round_epsilon,
            error_bound_95=selection.score_gap(),
            delta=0.0,
        )
    )
    counts = plan.counts
    released = selection.rounds * selection.partitions if selection.partitions is not None else None
    rows.append(
        MeasurementExplanation(
            quantity=f"{counts.quantity.label} of the selected keys",
            mechanism=counts.mechanism,
            sensitivity=counts.sensitivity,
            epsilon=counts.epsilon,
            noise_scale=counts.sensitivity / counts.epsilon,
            error_bound_95=counts.error_bound(cells=released or selection.rounds),
            delta=0.0,
        )
    )
    candidates = (
        "the keys whose noisy number of people exceeds τ"
        if selection.candidates is None
        else f"{selection.candidates} public key(s)"
        + (f" in each of {selection.partitions} partitions" if top.partition else "")
    )
    notes = (
        f"top-{top.k}: the keys are chosen among {candidates} by the exponential mechanism "
        f"(ε={selection.epsilon:.4g}: {selection.rounds} rounds at ε={selection.round_epsilon:.4g}, each "
        f"person moves a key's score by at most 1), then their counts get noise (ε={counts.epsilon:.4g}); "
        "the selection's error bound is how many people below the k-th largest count a selected key may be",
    )
    gate_sql = gate_query(plan, dialect=dialect)
    if gate_sql is not None:
        notes += (f"candidate keys from the data, each person in at most L keys: {gate_sql}",)
    return Explanation(
        engine_sql,
        {},
        plan.epsilon,
        released,
        plan.delta,
        plan.threshold,
        tuple(rows),
        plan.threshold_delta,
        notes,
    )
