"""Privacy loss as a value: what one release costs, and how costs add up.

Composition rounds *up* (OpenDP's rule): a sum of floating-point epsilons computed with
``math.fsum`` is exact to one rounding, and one ``nextafter`` towards infinity makes sure the
recorded total is never smaller than the true one, so the ledger can only overcharge.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from budget.errors import InvalidBudgetError


@dataclass(frozen=True, order=True)
class PrivacyLoss:
    """An (epsilon, delta) pair; delta = 0 is pure differential privacy."""

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        if not math.isfinite(self.epsilon) or self.epsilon < 0:
            raise InvalidBudgetError(f"epsilon must be a finite number >= 0, got {self.epsilon!r}")
        if not math.isfinite(self.delta) or not 0 <= self.delta < 1:
            raise InvalidBudgetError(f"delta must be in [0, 1), got {self.delta!r}")


ZERO_LOSS = PrivacyLoss(0.0, 0.0)


def round_up(total: float) -> float:
    """One ulp above a non-zero float sum, so rounding error never favours the analyst."""
    return math.nextafter(total, math.inf) if total > 0 else 0.0


def compose_sequential(losses: Iterable[PrivacyLoss]) -> PrivacyLoss:
    """Basic sequential composition (McSherry 2009): epsilons and deltas add."""
    items = list(losses)
    epsilon = round_up(math.fsum(loss.epsilon for loss in items))
    delta = round_up(math.fsum(loss.delta for loss in items))
    return PrivacyLoss(epsilon, min(delta, math.nextafter(1.0, 0.0)))
