"""The refusal every shape check uses: 42501 with a hint that says what is allowed."""

from __future__ import annotations

from proxy.errors import PolicyViolationError

ALLOWED_SHAPE = (
    "queries on private tables must aggregate: SELECT [public group columns,] aggregates FROM table "
    "[WHERE …] [GROUP BY public columns] [HAVING …] [ORDER BY …] [LIMIT …], where the aggregates are COUNT(*), "
    "COUNT(col), COUNT(DISTINCT <privacy unit>), SUM, AVG, VAR_*, STDDEV_*, MEDIAN, PERCENTILE_CONT/DISC, MIN, MAX, "
    "MODE() WITHIN GROUP (ORDER BY public column), CORR, COVAR_POP/SAMP, REGR_*"
)


def refuse(message: str, *, hint: str = ALLOWED_SHAPE) -> PolicyViolationError:
    return PolicyViolationError(message, hint=hint)
