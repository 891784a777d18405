"""Which stored noisy answer a query may be given: the digest of everything that shapes it.

Two queries share a cached answer only if the engine would be asked exactly the same thing and the
noise would be drawn exactly the same way: the same engine SQL (which carries the predicates,
clamps, contribution bounds and key domains), the same measurements (quantities, sensitivities,
ε/δ shares, mechanisms), the same threshold and the same aggregates. What only shapes the
post-processing — aliases, arithmetic on aggregates, HAVING, ORDER BY, LIMIT — is left out, so
such variants of a query are served from its noisy table for free (post-processing costs nothing).

The same store keeps one more kind of released value: a contribution bound chosen with DP
(``max_contributions = "auto"``), under ``bound_choice_key`` — see :func:`bound_choice_digest`.
"""

from __future__ import annotations

import hashlib
import json

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


BOUND_CHOICE_PREFIX = "bound:"  # answer-cache keys of remembered bounds; answers' keys are bare digests
_BOUND_RULE = "v1"  # bumped when the choice rule changes, so that older choices are not reused


def bound_choice_digest(plan: ReleasePlan, histogram_sql: str) -> str:
    """The key of a remembered contribution bound: the table and the query's filters (both in the
    per-person count histogram the choice reads, with the cap), the grouping (keys and their public
    values), the query's ε and the policy's hint. Not the aggregates: a later query with the same
    filters and grouping at the same ε reuses the bound whatever it measures."""
    keys = [(key.label, key.values, key.thresholded) for key in plan.shape.group_keys]
    table = plan.shape.table
    parts = (
        _BOUND_RULE,
        histogram_sql,
        repr(keys),
        repr(
            (plan.epsilon, plan.bound_epsilon, table.name, table.max_contributions, table.contribution_hint)
        ),
    )
    return BOUND_CHOICE_PREFIX + hashlib.sha256(_SEPARATOR.join(parts).encode()).hexdigest()


def encode_bound_choice(bound: int, *, selection_epsilon: float, target: int) -> str:
    """What is stored: the chosen L, and for the record what the choice spent and aimed at."""
    return json.dumps({"max_contributions": bound, "selection_epsilon": selection_epsilon, "target": target})


def decode_bound_choice(stored: str) -> int:
    return int(json.loads(stored)["max_contributions"])
