"""Measure a top-k query answered by a DP selection (proxy/release/top_k.py): the engine's numbers of
people per key — and, for keys from the data, the bounded numbers of people that gate them — then the
selection and the noisy counts."""

from __future__ import annotations

from mechanisms.random_source import RandomSource
from proxy.query.planning import Execute, typed_key_rows
from proxy.release.apply import ReleasedTable
from proxy.release.top_k import TopKPlan, release_top_k
from proxy.rewrite.bound_contributions import bounded_query


def gate_query(plan: TopKPlan, *, dialect: str) -> str | None:
    """Keys from the data: each person in at most L keys, the number of people per key (the gate)."""
    if plan.gate is None:
        return None
    return bounded_query(plan.shape, (plan.gate.quantity,), dialect=dialect).sql(dialect=dialect)


def measure_top_k(
    plan: TopKPlan, score_sql: str, *, execute: Execute, dialect: str, rng: RandomSource
) -> ReleasedTable:
    gate_sql = gate_query(plan, dialect=dialect)
    gate_rows = typed_key_rows(plan, execute(gate_sql)[1]) if gate_sql is not None else []
    scores = typed_key_rows(plan, execute(score_sql)[1])
    return release_top_k(plan, scores, rng=rng, gate_rows=gate_rows)
