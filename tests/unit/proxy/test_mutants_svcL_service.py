"""Survivors of a random sample of proxy/query/service.py's charging path (seed 2125, docs/testing.md):
``QueryService.run``'s constant-time release and ``_answer_and_charge``'s use of the answer cache.

A statement on private rows must leave at the policy's ``response_deadline_ms`` (so that its response
time says nothing about those rows); a dataset without the answer cache must charge every answer,
also one re-planned with a contribution bound remembered from an earlier choice."""

from __future__ import annotations

import dataclasses
import time

import pytest

from proxy.backends.interrupts import RELEASE_AT
from proxy.query.service import QueryService
from tests.unit.proxy import test_service_answers as answers
from tests.unit.proxy.test_service_answers import run, spent

service = answers.service  # the clinic's query service, where alice holds ε = 10 and δ = 1e-5


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM visits",
        "SELECT veil_ttest(age, sex = 'male') FROM visits",
        "SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*) FROM ratings",
    ],
)
def test_a_statement_on_private_rows_is_released_at_the_policys_deadline(
    service: QueryService, sql: str
) -> None:
    """The session waits itself (``RELEASE_AT``): it is handed the deadline the policy fixed, 60 s
    after the statement began — for a plain aggregate, a t-test and a UNION ALL alike."""
    service.dataset = dataclasses.replace(service.dataset, response_deadline_ms=60_000)
    waiter: list[float] = []
    token = RELEASE_AT.set(waiter)
    try:
        began = time.monotonic()
        outcome = run(service, sql, **{"veil.epsilon": "0.5", "veil.delta": "1e-6"})
    finally:
        RELEASE_AT.reset(token)
    assert outcome.table is not None and outcome.charge is not None
    (deadline,) = waiter
    assert 59.0 < deadline - began <= 60.0 + (time.monotonic() - began)


def test_a_free_statement_is_not_held_to_the_deadline(service: QueryService) -> None:
    service.dataset = dataclasses.replace(service.dataset, response_deadline_ms=60_000)
    waiter: list[float] = []
    token = RELEASE_AT.set(waiter)
    try:
        run(service, "SHOW veil.epsilon")
    finally:
        RELEASE_AT.reset(token)
    assert waiter == []


def test_without_the_answer_cache_an_answer_with_a_remembered_bound_is_charged_every_time(
    service: QueryService,
) -> None:
    """``answer_cache = false``: the sum re-planned with ratings' remembered bound is measured and
    charged each time it is asked; no answer is stored for it to be served from."""
    service.dataset = dataclasses.replace(service.dataset, answer_cache=False)
    run(service, "SELECT COUNT(*) FROM ratings", **{"veil.epsilon": "1"})  # chooses and remembers the bound
    for asked in (2.0, 3.0):
        total = run(service, "SELECT SUM(stars) FROM ratings", **{"veil.epsilon": "1"})
        assert "remembered from an earlier choice" in total.notices[0]
        assert total.charge is not None and not total.charge.cached
        assert spent(service) == asked
