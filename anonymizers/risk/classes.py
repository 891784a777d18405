"""Algorithm 2 when the released table's equivalence classes are known: global recoding and Mondrian.

Why not run the general simulator: under global (full-domain) recoding every value has exactly one label
at the chosen level, so the generalization simulator's candidates for r_i^0 — released records whose
labels are ancestors of r_i^0's values — are exactly r_i^0's equivalence class. Records in suppressed
classes are not released (risk 0: pass their number as ``suppressed_records``) — or, when a release
keeps them as all-``*`` rows (ARX), the ``*`` rows are one more class: an attacker who sees a record's
class published rules them out, and one who does not knows the record is among them
(:mod:`anonymizers.risk.attack`). |C_i| is the class size, n_q the smallest released class (spec §1:
"a k-anonymous table scores exactly 1/k"). This needs only the class counts the search already has, so
a 10-million-row table is scored without reading its rows. For Mondrian the classes' boxes are disjoint
(strict cuts), so the candidates of a record are at least its class; the class size is an upper bound on
the risk an attacker can reach from the published values.

Revealing adversary (Def 4.5): n_s = the fewest distinct sensitive values in a released class; the
probabilistic variant = the largest share one sensitive value has in a class.
"""

from __future__ import annotations

import numpy as np

from anonymizers.risk.attack import (
    DEFAULT_OUTLIER_K,
    DEFAULT_THRESHOLD,
    AttackResult,
    attack_result,
    default_low_threshold,
)


def class_attack(
    sizes: np.ndarray, suppressed_records: int, sensitive: np.ndarray | None = None
) -> AttackResult:
    """The attack's result from released class sizes (and classes × sensitive-value counts)."""
    per_record = np.concatenate(
        [np.repeat(sizes.astype(np.float64), sizes), np.full(suppressed_records, np.nan)]
    )
    revealing: tuple[float | None, float | None] = (None, None)
    if sensitive is not None and len(sizes):
        distinct = (sensitive > 0).sum(axis=1)
        revealing = (float(distinct.min()), float((sensitive.max(axis=1) / sensitive.sum(axis=1)).max()))
    low = default_low_threshold(DEFAULT_THRESHOLD)  # reported only: classes are deterministic regions
    return attack_result(per_record, revealing, DEFAULT_THRESHOLD, low, DEFAULT_OUTLIER_K, None)
