"""How a noisy table is shown: counts as non-negative integers (and sums of non-negative values as
non-negative numbers), noisy sums and averages rounded to the digits their noise leaves meaningful
(``veil.raw_counts``, ``veil.round``).

Everything here is post-processing of DP outputs: it reads the noisy table (noisy values, and the
standard deviation of each aggregate's noise, computed from public parameters and noisy values by
``release``) and the plan (public), nothing else — no exact value, no row, no engine — so it costs no
privacy, whatever the settings. It runs after the answer cache, so one stored noisy answer can be shown
raw or rounded without being paid for twice.

>>> present(plan, noisy, Presentation())           # count -3 → 0; SUM 123456.78 with noise s.d. 1.2e3 → 123500.0
>>> present(plan, noisy, Presentation(raw_counts=True, rounding="off"))  # -3, 123456.78
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from proxy.analysis.aggregates import Aggregate, AggregateKind
from proxy.release.apply import ROUNDED, ReleasedTable, noise_column
from proxy.release.plan import ReleasePlan

AUTO = "auto"
OFF = "off"


@dataclass(frozen=True)
class Presentation:
    """``raw_counts``: counts (and sums of columns whose bounds fix their sign) as drawn — unbiased,
    possibly negative — instead of clamped at 0.
    ``rounding``: ``"auto"`` (to the noise's order of magnitude), ``"off"``, or a number of decimal
    digits as ROUND takes it (negative: tens, hundreds…)."""

    raw_counts: bool = False
    rounding: str | int = AUTO


def present(plan: ReleasePlan, noisy: ReleasedTable, presentation: Presentation) -> ReleasedTable:
    """The noisy table as the query's post-processing sees it: keys and aggregates, shaped as the session
    asks; the noise columns are dropped. A table stored before they existed is only not auto-rounded."""
    aggregates = plan.shape.aggregates
    names = [column.name for column in noisy.columns]
    keys = len(plan.shape.group_keys)
    noise = {i: names.index(noise_column(i)) for i in range(len(aggregates)) if noise_column(i) in names}
    width = keys + len(aggregates)
    rows = [
        row[:keys]
        + tuple(
            _shown(aggregate, row[keys + i], row[noise[i]] if i in noise else None, presentation)
            for i, aggregate in enumerate(aggregates)
        )
        for row in noisy.rows
    ]
    return ReleasedTable(noisy.columns[:width], rows)


def _shown(aggregate: Aggregate, value: Any, noise_sd: float | None, presentation: Presentation) -> Any:
    if value is None:
        return None
    if aggregate.is_count:
        return value if presentation.raw_counts else max(value, 0)
    if aggregate.kind is AggregateKind.SUM and not presentation.raw_counts:
        value = _signed(aggregate, value)
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    if presentation.rounding == OFF or aggregate.kind is AggregateKind.MODE or not numeric:
        return value  # a mode is a public value as declared; a date quantile is a date
    if presentation.rounding == AUTO:
        digits = auto_digits(noise_sd) if aggregate.kind in ROUNDED else None
    else:
        digits = int(presentation.rounding)
    if digits is None:
        return value
    return _within_range(aggregate, round(value, digits))


def _signed(aggregate: Aggregate, value: Any) -> Any:
    """A sum of values that are never negative is never negative (and of values never positive, never
    positive): clamped like a count, from the declared bounds alone."""
    column = aggregate.column
    assert column is not None and column.lower is not None and column.upper is not None
    zero = type(value)(0)
    if column.lower >= 0:
        return max(value, zero)
    return min(value, zero) if column.upper <= 0 else value


def auto_digits(noise_sd: float | None) -> int | None:
    """The decimal digits to keep for a value whose noise has this standard deviation: down to one digit
    below the noise's order of magnitude (s.d. 1,234 → hundreds, 0.0456 → thousandths). The noise then
    spans 10 to 100 units of the last digit shown, so rounding adds less than 1/1,200 of the noise's
    variance, and no digit is shown that the noise has already drowned. None: leave the value as it is."""
    if noise_sd is None or not math.isfinite(noise_sd) or noise_sd <= 0:
        return None
    return 1 - math.floor(math.log10(noise_sd))


def _within_range(aggregate: Aggregate, value: Any) -> Any:
    """Rounding must not take a value out of the range it was clamped into: an average or a quantile
    stays within the declared bounds (an integer column's quantile within its integers), a variance or a
    standard deviation non-negative, a correlation within [−1, 1]. Never a negative zero."""
    kind = aggregate.kind
    if kind in (AggregateKind.AVG, AggregateKind.QUANTILE):
        column = aggregate.column
        assert column is not None and column.lower is not None and column.upper is not None
        if isinstance(value, int):
            low, high = math.ceil(column.lower), math.floor(column.upper)
            return min(max(value, low), high) if low <= high else value
        return float(min(max(value, column.lower), column.upper)) + 0.0
    if kind in _NON_NEGATIVE:
        return max(value, 0.0) + 0.0
    if kind in (AggregateKind.CORR, AggregateKind.REGR_R2):
        return min(max(value, -1.0 if kind is AggregateKind.CORR else 0.0), 1.0) + 0.0
    return value + 0.0 if isinstance(value, float) else value  # -0.0 + 0.0 = 0.0


_NON_NEGATIVE = frozenset(
    {
        AggregateKind.VAR_POP,
        AggregateKind.VAR_SAMP,
        AggregateKind.STDDEV_POP,
        AggregateKind.STDDEV_SAMP,
        AggregateKind.REGR_SXX,
        AggregateKind.REGR_SYY,
    }
)


def settings_presentation(raw_counts: str, rounding: str) -> Presentation:
    """From the session's ``veil.raw_counts`` (on/off) and ``veil.round`` (auto/off/digits) values."""
    return Presentation(
        raw_counts=raw_counts == "on", rounding=rounding if rounding in (AUTO, OFF) else int(rounding)
    )
