"""The charging rule (docs/privacy.md, "Side channels" 1): once an engine query has been sent, the
statement is charged whatever its outcome — engine error, timeout, cancel, disconnection — with one
constant error per kind; a statement refused before the engine saw it spends nothing."""

from __future__ import annotations

import contextvars
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from budget.audit import Decision
from budget.errors import BudgetExhaustedError
from budget.loss import PrivacyLoss
from proxy.backends.interrupts import SESSION_INTERRUPTER, Interrupter
from proxy.errors import (
    BackendUnavailableError,
    ProxyError,
    QueryCanceledError,
    UnknownColumnError,
)
from proxy.server.audit_trail import AuditTrail
from proxy.wire.scram import make_scram_verifier
from tests.adversarial.probe_dataset import BACKENDS, SLOW_QUERY, Probe, probe_service


@pytest.fixture(params=BACKENDS)
def probe(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    with probe_service(request.param, tmp_path, request, statement_timeout_ms=60_000) as probe:
        yield probe


def test_an_engine_failure_is_charged_with_one_constant_error(probe: Probe) -> None:
    with pytest.raises(BackendUnavailableError) as failed:
        probe.run("SELECT COUNT(*) FROM ghost")  # declared in the policy, missing in the engine
    assert failed.value.message == "the database engine failed while answering the query"
    assert "this failed query was charged ε=0.1" in (failed.value.detail or "")
    assert failed.value.charge is not None and failed.value.charge.epsilon == pytest.approx(0.1)
    assert probe.states() == ["committed"]
    assert probe.spent() == pytest.approx(0.1)
    assert audited(failed.value) == (Decision.FAILED, "engine error", pytest.approx(0.1))


def audited(error: ProxyError) -> tuple[Decision, str, float]:
    """What the session's audit trail records for a statement that ended with ``error``."""
    trail = AuditTrail("alice", "127.0.0.1:5", "probe")
    trail.refused("SELECT …", error)
    (entry,) = trail.entries(datetime.now(UTC))
    return entry.decision, entry.outcome, entry.epsilon


def test_a_refusal_before_the_engine_spends_nothing(probe: Probe) -> None:
    with pytest.raises(UnknownColumnError) as unknown:
        probe.run("SELECT COUNT(*) FROM people WHERE salary > 1")
    assert audited(unknown.value) == (Decision.REFUSED, "", 0.0)
    probe.ledger.add_analyst("carol", make_scram_verifier("secret", iterations=1))
    probe.ledger.grant("carol", "probe", PrivacyLoss(0.05, 0))
    with pytest.raises(BudgetExhaustedError):  # the domain error; the session maps it to 53Z01
        probe.run("SELECT COUNT(*) FROM people", analyst="carol", veil_epsilon="0.1")
    assert (probe.states(), probe.states("carol")) == ([], [])


def _run_in_thread(probe: Probe, interrupter: Interrupter) -> list[BaseException]:
    """Run the slow query as a session's worker thread does: with the session's interrupter."""
    raised: list[BaseException] = []

    def work() -> None:
        SESSION_INTERRUPTER.set(interrupter)
        try:
            probe.run(SLOW_QUERY)
        except ProxyError as error:
            raised.append(error)

    thread = threading.Thread(target=contextvars.copy_context().run, args=(work,))
    thread.start()
    while not probe.states():  # reserved: the engine query is about to run
        time.sleep(0.01)
    time.sleep(0.2)
    return raised, thread  # type: ignore[return-value]


@pytest.mark.parametrize("stop", ["cancel", "close"])
def test_a_cancel_or_a_disconnection_is_charged(probe: Probe, stop: str) -> None:
    interrupter = Interrupter()
    raised, thread = _run_in_thread(probe, interrupter)  # type: ignore[misc]
    while thread.is_alive():  # a cancel can miss a PostgreSQL query between BEGIN and the query: repeat
        getattr(interrupter, stop)()
        thread.join(0.5)
    (error,) = raised
    assert isinstance(error, QueryCanceledError)
    expected = "user request" if stop == "cancel" else "the client disconnected"
    assert expected in error.message
    assert "this failed query was charged" in (error.detail or "")
    assert probe.states() == ["committed"]
    assert probe.spent() == pytest.approx(0.1)
    outcome = "cancelled" if stop == "cancel" else "disconnected"
    assert audited(error) == (Decision.FAILED, outcome, pytest.approx(0.1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_statement_timeout_is_charged(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    with probe_service(backend, tmp_path, request, statement_timeout_ms=200) as probe:
        with pytest.raises(
            QueryCanceledError, match="canceling statement due to statement timeout"
        ) as stopped:
            probe.run(SLOW_QUERY)
        assert "this failed query was charged ε=0.1" in (stopped.value.detail or "")
        assert probe.states() == ["committed"]
        assert audited(stopped.value) == (Decision.FAILED, "timed out", pytest.approx(0.1))
