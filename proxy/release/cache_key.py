"""Which stored noisy answer a query may be given: the digest of everything that shapes it.

Two queries share a cached answer only if the engine would be asked exactly the same thing and the
noise would be drawn exactly the same way: the same engine SQL (which carries the predicates,
clamps, contribution bounds and key domains), the same measurements (quantities, sensitivities,
ε/δ shares, mechanisms), the same threshold and the same aggregates. What only shapes the
post-processing — aliases, arithmetic on aggregates, HAVING, ORDER BY, LIMIT — is left out, so
such variants of a query are served from its noisy table for free (post-processing costs nothing).
"""

from __future__ import annotations

import hashlib

from proxy.release.plan import ReleasePlan
from proxy.release.top_k import TopKPlan

_SEPARATOR = "\x1f"


def answer_digest(plan: ReleasePlan, engine_sql: tuple[str, ...]) -> str:
    """``engine_sql``: every query the answer would send to the engine, in a fixed order."""
    keys = [(key.label, key.values, key.thresholded) for key in plan.shape.group_keys]
    parts = (
        *engine_sql,
        repr(plan.measurements),
        repr(plan.shape.aggregates),
        repr(keys),
        repr((plan.epsilon, plan.delta, plan.threshold, plan.threshold_delta, plan.bound_epsilon)),
        repr(plan.shape.table),
        repr((plan.shape.top_k, plan.selection if isinstance(plan, TopKPlan) else None)),
    )
    return hashlib.sha256(_SEPARATOR.join(parts).encode()).hexdigest()
