"""Every outcome after the noise is drawn is charged (issue 21): an error in the post-processing of a
fresh noisy answer — a cast over a noisy value in the select list, say — must not refund ε, or the
error would be an oracle on noisy answers that cost nothing. The ledger keeps the spend committed, the
error carries the charge, and the audit trail records a charged failure, not a free refusal."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from budget.audit import Decision
from proxy.errors import ProxyError, UnsupportedQueryError
from proxy.server.audit_trail import AuditTrail
from tests.adversarial.probe_dataset import BACKENDS, Probe, probe_service

# SUM(age) over 200 people is about 10,000: times 1,000 it overflows SMALLINT whatever the noise
OVERFLOW = "SELECT CAST(SUM(age) * 1000 AS SMALLINT) FROM people"


@pytest.fixture(params=BACKENDS)
def probe(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    with probe_service(request.param, tmp_path, request) as probe:
        yield probe


def audited(error: ProxyError) -> tuple[Decision, float]:
    trail = AuditTrail("alice", "127.0.0.1:5", "probe")
    trail.refused(OVERFLOW, error)
    (entry,) = trail.entries(datetime.now(UTC))
    return entry.decision, entry.epsilon


def test_a_cast_over_a_noisy_value_that_fails_is_charged(probe: Probe) -> None:
    with pytest.raises(UnsupportedQueryError, match="could not compute the select list") as failed:
        probe.run(OVERFLOW)
    assert probe.states() == ["committed"], "the noise was drawn: the spend stands"
    assert probe.spent() == pytest.approx(0.1)
    assert failed.value.charge is not None and failed.value.charge.epsilon == pytest.approx(0.1)
    assert audited(failed.value) == (Decision.FAILED, pytest.approx(0.1))
    # the engine's first line, which can only quote the noisy value: the analyst sees why it failed
    assert failed.value.detail is not None and "out of range" in failed.value.detail.lower()


def test_a_repeated_failure_reuses_the_stored_noisy_answer(probe: Probe) -> None:
    """The noisy table was stored before the post-processing failed: a repeat draws no fresh noise (so
    it learns nothing new and spends nothing new), and fails the same way, marked as a cached charge."""
    for _ in range(3):
        with pytest.raises(UnsupportedQueryError) as failed:
            probe.run(OVERFLOW, veil_epsilon="0.2")
    assert probe.states() == ["committed"]
    assert probe.spent() == pytest.approx(0.2)
    assert failed.value.charge is not None and failed.value.charge.cached


def test_a_failed_union_part_after_the_noise_is_charged(probe: Probe) -> None:
    union = f"{OVERFLOW} UNION ALL SELECT CAST(COUNT(*) AS SMALLINT) FROM people"
    with pytest.raises(UnsupportedQueryError) as failed:
        probe.run(union)
    assert probe.states() == ["committed"]
    assert probe.spent() == pytest.approx(0.1)
    assert failed.value.charge is not None and failed.value.charge.epsilon == pytest.approx(0.1)
