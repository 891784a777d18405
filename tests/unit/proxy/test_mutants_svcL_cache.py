"""Whose, and which data's, stored noisy answer a query may be given (survivors of seed 2125's sample of
proxy/query/service.py's ``_cache_key``, docs/testing.md).

A stored answer is free because its analyst already paid for it, on the data it was measured on. Served
to another analyst it would be an answer released without that analyst's charge; served after the data
changed, a measurement of other rows released without any. The query service on DuckDB, seeded, with a
data version the test sets (test_bound_memory's fixtures)."""

from __future__ import annotations

import pytest

from proxy.query.service import QueryService
from tests.unit.proxy import test_bound_memory as memory
from tests.unit.proxy.test_bound_memory import BOB, VersionedBackend, ask, spent

ratings, ledger, service = memory.ratings, memory.ledger, memory.service  # alice and bob hold ε = 10 each
STORED = "this is the stored answer of the same query asked before, so it spent nothing"


def test_another_analysts_same_query_is_measured_and_charged_to_him(
    service: tuple[QueryService, VersionedBackend],
) -> None:
    service_, _ = service
    alices = ask(service_, "SELECT COUNT(*) FROM ratings")
    bobs = ask(service_, "SELECT COUNT(*) FROM ratings", principal=BOB)
    assert bobs.charge is not None and not bobs.charge.cached and STORED not in bobs.notices[0]
    assert (spent(service_), spent(service_, "bob")) == (pytest.approx(1.0), pytest.approx(1.0))
    again = ask(service_, "SELECT COUNT(*) FROM ratings")  # alice's own answer is still hers, free
    assert again.table == alices.table and STORED in again.notices[0]


def test_an_answer_stored_before_the_data_changed_is_not_given_after(
    service: tuple[QueryService, VersionedBackend],
) -> None:
    service_, backend = service
    before = ask(service_, "SELECT COUNT(*) FROM ratings")
    backend.version = "v2"
    after = ask(service_, "SELECT COUNT(*) FROM ratings")
    assert after.charge is not None and not after.charge.cached and STORED not in after.notices[0]
    assert spent(service_) == pytest.approx(2.0)
    backend.version = "v1"  # the old data again: the answer measured on them is stored under them
    again = ask(service_, "SELECT COUNT(*) FROM ratings")
    assert again.table == before.table and STORED in again.notices[0]
    assert spent(service_) == pytest.approx(2.0)
