"""Parameter checks shared by the mechanisms: refuse bad input on entry, with a message that says
the fix (the guide's rule), instead of failing deep inside a sampler."""

from __future__ import annotations

import math
import numbers

from mechanisms.errors import MechanismError


def check_positive_finite(number: object, *, name: str, hint: str) -> None:
    """Booleans are refused: ``True`` is an int in Python, but never a meant epsilon."""
    if (
        isinstance(number, bool)
        or not isinstance(number, numbers.Real)
        or not math.isfinite(number)
        or number <= 0
    ):
        raise MechanismError(f"{name} must be a finite number greater than 0, got {number!r}", hint=hint)
