"""Survivors of a random sample of proxy/query/service.py's mutants (seed 2116, docs/testing.md) on the
charging path: what a failure after the engine ran is charged and what its error reveals."""

from __future__ import annotations

import duckdb
import pytest

from proxy.errors import BackendUnavailableError, UnsupportedQueryError
from proxy.query.service import QueryService
from tests.unit.proxy import test_service_answers as answers
from tests.unit.proxy.test_service_answers import run, spent

service = answers.service  # the clinic's query service, where alice holds ε = 10 and δ = 1e-5


def test_an_engine_failure_after_the_engine_ran_says_only_that_it_failed_and_what_it_cost(
    service: QueryService,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """How a query failed can depend on private rows: the analyst gets one constant message and hint
    (the original error goes to the server log only), and the charge of the statement."""

    def broken(sql: str) -> None:
        raise duckdb.IOException("value 1234 of patient 17 is out of range")

    monkeypatch.setattr(service.backend, "execute", broken)
    with pytest.raises(BackendUnavailableError) as failed:
        run(service, "SELECT COUNT(*) FROM visits", **{"veil.epsilon": "0.5"})
    error = failed.value
    assert error.message == "the database engine failed while answering the query"
    assert error.hint == "the details are in the server log; try the query again or narrow it"
    assert error.detail == (
        "this failed query was charged ε=0.5 (count(*) ε=0.5), since the engine had read private rows"
    )
    assert "1234" not in f"{error.message} {error.hint} {error.detail}"
    assert error.charge is not None and (error.charge.epsilon, error.charge.cached) == (0.5, False)
    assert spent(service) == 0.5


def test_a_select_list_that_fails_over_the_noisy_answer_says_the_budget_is_spent(
    service: QueryService,
) -> None:
    """The noise was drawn before the query's own arithmetic failed: the spend stands, and the hint tells
    the analyst so (asking again with another expression spends again)."""
    with pytest.raises(UnsupportedQueryError) as failed:
        run(service, "SELECT CAST(COUNT(*) * 1000 AS SMALLINT) FROM visits", **{"veil.epsilon": "0.5"})
    error = failed.value
    assert error.message == "could not compute the select list over the noisy answer"
    assert error.hint == "the budget for this answer is spent; check the expressions around the aggregates"
    assert error.detail is not None and "out of range" in error.detail.lower()
    assert error.charge is not None and (error.charge.epsilon, error.charge.cached) == (0.5, False)
    assert spent(service) == 0.5
