"""Differentially private quantiles (MEDIAN, PERCENTILE, MIN, MAX) by exact selection over a public grid.

Spec §2.2 prices MIN/MAX at the full range m = upper - lower and says to answer them, like every quantile,
with the exponential mechanism instead (spec §4.1). The SQL layer hands this module the column's values
already clamped to [lower, upper] and sorted.

Construction (spec §4.1, grid row; the standard construction of e.g. Smith 2011 restricted to a grid):

* Candidates: the G + 1 public grid points y_j = lower + j·(upper - lower)/G, j = 0..G (``numpy.linspace``,
  so both bounds are exact). The candidate set depends only on the policy, never on the data.
* Score: u(y) = -|#{i : x_i < y} - q·n|, the distance in *rank* between y and the target rank q·n.
  ``numpy.searchsorted`` gives all G + 1 counts in one pass. q·n is an exact rational (a float q is a
  dyadic rational a/b), so the scores are passed to the mechanism as the integers b·u(y), with sensitivity
  b·L; that is the same mechanism, exactly.
* Sensitivity: L = max_contributions. Under ``replace`` one unit moves #{x_i < y} by at most L and n is
  fixed; under ``add_remove`` the count moves by at most L and q·n by q·L, in the same direction, so
  |count - q·n| moves by at most L·max(q, 1 - q) <= L.
* Selection: :func:`mechanisms.exponential.exponential_mechanism` (permute-and-flip, exact sampling), so the
  result is ε-DP and no floating-point weight is ever computed. Privacy map: :func:`quantile_privacy_loss`.

Why a grid and not Smith's interval variant. Smith (2011) picks the gap I_i = [z_i, z_{i+1}) between two
sorted data points with probability ∝ |I_i|·exp(-ε·|i - q·n|/2) and returns a uniform point of it. It has
no resolution limit, but its weights multiply real lengths by exponentials and its output is a continuous
uniform draw: exact sampling would need rejection sampling whose running time grows when the data are
concentrated, and a float uniform draw in a data-dependent interval is exactly the kind of output Mironov
(2012) warns about. The grid keeps the candidate set finite and public, makes the scores integers, and
lets permute-and-flip sample exactly. The price is resolution: the answer is a grid point, at most one
grid step (upper - lower)/G away from the best grid point in value. (Spec §4.1 lists the interval variant
as the default for real columns; this module deliberately implements the grid row.)

Utility theorem [derived from spec §4]: with probability at least 1 - β the released y satisfies

    |#{x_i < y} - q·n| <= min_j |#{x_i < y_j} - q·n| + (2L/ε)·ln((G + 1)/β),

a rank error independent of n (|Y| = G + 1 candidates, |Y_H| >= 1). :func:`quantile_rank_error_bound`
returns the second term. For MIN (q = 0) and MAX (q = 1) the guarantee is in rank too: at most that many
values lie below the released MIN (above the released MAX). In *value* the released MIN can be anywhere
between ``lower`` and the true minimum: every grid point below the smallest value has the same, best score,
and no mechanism can tell them apart without looking at the data more closely than DP allows.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from budget.loss import PrivacyLoss
from mechanisms.errors import MechanismError
from mechanisms.exponential import exponential_mechanism, exponential_privacy_loss
from mechanisms.random_source import RandomSource
from mechanisms.validation import check_positive_finite

DEFAULT_GRID_SIZE = 1000
"""G: the grid has G + 1 points, lower and upper included; one grid step is (upper - lower)/G."""

MAX_GRID_SIZE = 10**6
"""Beyond this the O(G) scoring dominates a query; a finer answer needs tighter bounds, not more points."""


def dp_quantile(
    sorted_values: Sequence[float] | npt.NDArray[np.floating],
    *,
    q: float,
    lower: float,
    upper: float,
    epsilon: float,
    rng: RandomSource,
    max_contributions: int = 1,
    grid_size: int = DEFAULT_GRID_SIZE,
) -> float:
    """An ε-DP q-quantile of a clamped, sorted column: a point of the public grid over [lower, upper].

    ``q`` is 0.5 for MEDIAN, p/100 for PERCENTILE p, 0 for MIN and 1 for MAX. ``sorted_values`` must
    already be clamped to [lower, upper] and sorted ascending, with at most ``max_contributions`` values
    per privacy unit. The privacy map is :func:`quantile_privacy_loss`.
    """
    _check_fraction(q)
    _check_bounds(lower, upper)
    check_positive_finite(epsilon, name="epsilon", hint="spend a positive budget, e.g. epsilon=1.0")
    _check_count(max_contributions, name="max_contributions", hint="rows kept per privacy unit, e.g. 1")
    _check_count(grid_size, name="grid_size", hint=f"use e.g. the default {DEFAULT_GRID_SIZE}")
    if grid_size > MAX_GRID_SIZE:
        raise MechanismError(
            f"grid_size must be at most {MAX_GRID_SIZE}, got {grid_size}",
            hint="a finer answer needs tighter lower/upper bounds rather than more grid points",
        )
    values = _checked_values(sorted_values, lower=lower, upper=upper)
    grid = quantile_grid(lower=lower, upper=upper, grid_size=grid_size)
    below = np.searchsorted(values, grid, side="left").tolist()  # #{i : x_i < y_j}, as Python ints
    target = Fraction(q)
    scale, scaled_target = target.denominator, target.numerator * len(values)
    scores = [-abs(scale * count - scaled_target) for count in below]
    index = exponential_mechanism(scores, sensitivity=scale * max_contributions, epsilon=epsilon, rng=rng)
    return float(grid[index])


def dp_quantile_from_histogram(
    bucket_counts: Sequence[int],
    *,
    q: float,
    lower: float,
    upper: float,
    epsilon: float,
    sensitivity: int,
    rng: RandomSource,
) -> float:
    """The same selection as :func:`dp_quantile`, from a histogram the database engine computed.

    ``bucket_counts[j]`` is the (integer, possibly weighted) count of values in the grid cell
    ``[y_j, y_{j+1})`` — the last cell also holds ``upper`` — so ``#{x < y_j}`` is the prefix sum of
    the first j cells and no row leaves the engine. ``sensitivity`` is the most one privacy unit can
    move any prefix sum or the total (e.g. L·K when each person's rows carry integer weights summing
    to at most L·K). The candidates are the G + 1 grid points, G = ``len(bucket_counts)``.
    """
    _check_fraction(q)
    _check_bounds(lower, upper)
    check_positive_finite(epsilon, name="epsilon", hint="spend a positive budget, e.g. epsilon=1.0")
    _check_count(sensitivity, name="sensitivity", hint="the largest weight one unit can carry, e.g. 1")
    if not bucket_counts or any(int(count) != count or count < 0 for count in bucket_counts):
        raise MechanismError(
            "bucket counts must be non-negative integers", hint="pass one count per grid cell"
        )
    below = [0, *np.cumsum(np.asarray(bucket_counts, dtype=object)).tolist()]
    target = Fraction(q)
    scale, scaled_target = target.denominator, target.numerator * below[-1]
    scores = [-abs(scale * count - scaled_target) for count in below]
    index = exponential_mechanism(scores, sensitivity=scale * sensitivity, epsilon=epsilon, rng=rng)
    return float(quantile_grid(lower=lower, upper=upper, grid_size=len(bucket_counts))[index])


def quantile_privacy_loss(*, epsilon: float) -> PrivacyLoss:
    """:func:`dp_quantile` run with ε is (ε, 0)-DP: one exponential-mechanism selection."""
    return exponential_privacy_loss(epsilon=epsilon)


def quantile_grid(
    *, lower: float, upper: float, grid_size: int = DEFAULT_GRID_SIZE
) -> npt.NDArray[np.float64]:
    """The G + 1 candidates lower, lower + (upper - lower)/G, ..., upper (public: depends on policy only)."""
    _check_bounds(lower, upper)
    _check_count(grid_size, name="grid_size", hint=f"use e.g. the default {DEFAULT_GRID_SIZE}")
    return np.linspace(lower, upper, grid_size + 1)


def quantile_rank_error_bound(
    *,
    epsilon: float,
    max_contributions: int = 1,
    grid_size: int = DEFAULT_GRID_SIZE,
    confidence: float = 0.95,
) -> float:
    """Extra rank error T: Pr[|rank(y) - q·n| > best grid rank error + T] <= 1 - confidence.

    T = (2L/ε)·ln((G + 1)/(1 - confidence)) (module docstring). In value, add one grid step.
    """
    check_positive_finite(epsilon, name="epsilon", hint="spend a positive budget, e.g. epsilon=1.0")
    _check_count(max_contributions, name="max_contributions", hint="rows kept per privacy unit, e.g. 1")
    _check_count(grid_size, name="grid_size", hint=f"use e.g. the default {DEFAULT_GRID_SIZE}")
    if not 0 < confidence < 1:
        raise MechanismError(
            f"confidence must be strictly between 0 and 1, got {confidence!r}",
            hint="use e.g. confidence=0.95",
        )
    return 2 * max_contributions / epsilon * (math.log(grid_size + 1) - math.log1p(-confidence))


def _checked_values(values: object, *, lower: float, upper: float) -> npt.NDArray[np.float64]:
    """The values as a float64 array, refused unless finite, sorted and inside [lower, upper].

    The messages never quote a value: they are about private data.
    """
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise MechanismError(
            "sorted_values must be a sequence of numbers", hint="pass the clamped column as floats"
        ) from None
    if array.ndim != 1:
        raise MechanismError(
            f"sorted_values must be one-dimensional, got {array.ndim} dimensions",
            hint="pass one column of values",
        )
    if array.size == 0:
        return array
    if np.isnan(array).any():
        raise MechanismError(
            "sorted_values must not contain NaN", hint="filter out NULL/NaN rows before the quantile"
        )
    if array[0] < lower or array[-1] > upper:
        raise MechanismError(
            "sorted_values must lie within [lower, upper]",
            hint="clamp the column with GREATEST(lower, LEAST(upper, x)) before the quantile",
        )
    if array.size > 1 and bool((array[1:] < array[:-1]).any()):
        raise MechanismError(
            "sorted_values must be sorted ascending", hint="ORDER BY the column (or sort it)"
        )
    return array


def _check_fraction(q: float) -> None:
    if isinstance(q, bool) or not isinstance(q, numbers.Real) or not 0 <= q <= 1:
        raise MechanismError(
            f"q must be a number between 0 and 1, got {q!r}",
            hint="0.5 for MEDIAN, p/100 for PERCENTILE p, 0 for MIN, 1 for MAX",
        )


def _check_bounds(lower: float, upper: float) -> None:
    for name, bound in (("lower", lower), ("upper", upper)):
        if isinstance(bound, bool) or not isinstance(bound, numbers.Real) or not math.isfinite(bound):
            raise MechanismError(
                f"{name} must be a finite number, got {bound!r}", hint="declare finite bounds for the column"
            )
    if not lower < upper:
        raise MechanismError(
            f"lower must be less than upper, got lower={lower!r}, upper={upper!r}",
            hint="declare bounds with lower < upper for the column",
        )


def _check_count(count: int, *, name: str, hint: str) -> None:
    if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 1:
        raise MechanismError(f"{name} must be a whole number >= 1, got {count!r}", hint=hint)
