"""Statement shapes of their own (analysis/reconstruct.py, ttest.py). veil_reconstruct reads one published
release and nothing else: a join beside it — with a public table or a private one — would otherwise be
dropped without a word, and the analyst would read the reconstruction as the answer to the query they
wrote. veil_ttest needs a value column that is numeric *and* bounded."""

from __future__ import annotations

import pytest

from proxy.errors import PolicyViolationError
from tests.unit.proxy.test_mutants_an_statements import RECONSTRUCT_USAGE, TTEST_USAGE, refusal


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM veil_reconstruct('rel', 'a') JOIN visits v ON true",
        "SELECT * FROM veil_reconstruct('rel', 'a') r JOIN zones z ON r.a = z.code",
        "SELECT * FROM veil_reconstruct('rel', 'a'), zones",
    ],
)
def test_a_reconstruction_joined_with_a_table_is_refused(sql: str) -> None:
    error = refusal(PolicyViolationError, sql)
    assert (error.sqlstate, error.message, error.hint) == (
        "42501",
        "veil_reconstruct takes no JOIN clause",
        RECONSTRUCT_USAGE,
    )


@pytest.mark.parametrize(
    ("sql", "column"),
    [
        ("SELECT veil_ttest(income, smoker) FROM people", "income"),
        ("SELECT veil_ttest(patient_id, sex = 'male') FROM visits", "patient_id"),
    ],
)
def test_a_ttest_of_a_numeric_column_without_bounds_is_refused(sql: str, column: str) -> None:
    """The t statistic's sensitivity is computed from the value's public bounds: a number without them
    (here a real and an identifier) cannot be clamped, so no noise could hide one person's value."""
    error = refusal(PolicyViolationError, sql)
    assert (error.sqlstate, error.message, error.hint) == (
        "42501",
        f'column "{column}" is not numeric with public bounds to clamp it to',
        TTEST_USAGE,
    )
