"""Survivors of the fresh mutation sample (seed 1143) in proxy/query/service.py and
proxy/rewrite/top_k_scores.py: what an analyst or the ledger sees when each one differs."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from budget.accountants import get_accountant
from proxy.errors import UnsupportedQueryError
from proxy.query.service import Principal, QueryService
from proxy.settings import SessionSettings, lookup
from tests.adversarial.probe_dataset import Probe, probe_service
from tests.unit.proxy.policy_fixture import clinic_policy
from tests.unit.proxy.test_service_answers import run, service  # noqa: F401  (the clinic fixture)


@pytest.fixture
def probe(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Probe]:
    with probe_service("duckdb", tmp_path, request) as probe:
        yield probe


def test_a_failure_inside_the_measurement_before_any_engine_query_spends_nothing(
    probe: Probe, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reservation exists, but the statement fails before the engine is sent anything: the analyst
    gets the refusal itself (not the constant engine error), nothing is charged, the spend is cancelled."""

    def refuse_before_the_engine(self: QueryService, plan: object, sql: object, *, execute: object) -> None:
        raise UnsupportedQueryError("refused before the engine", hint="no engine query was sent")

    monkeypatch.setattr(QueryService, "_measure", refuse_before_the_engine)
    with pytest.raises(UnsupportedQueryError) as refused:
        probe.run("SELECT COUNT(*) FROM people")
    assert refused.value.message == "refused before the engine"
    assert "charged" not in (refused.value.detail or "")
    assert refused.value.charge is None
    assert probe.states() == ["cancelled"]
    assert probe.spent() == 0.0


def test_the_catalog_follows_a_reloaded_policy(service: QueryService) -> None:  # noqa: F811
    """After a reload (proxy/server/reload.py), catalog queries list the new policy's tables."""
    assert ("ratings",) in run(service, "SELECT table_name FROM information_schema.tables").table.rows
    reloaded = clinic_policy()
    tables = {name: table for name, table in reloaded.tables.items() if name != "ratings"}
    service.update_policy(dataclasses.replace(reloaded, tables=tables), accountant=get_accountant("basic"))
    listed = run(service, "SELECT table_name FROM information_schema.tables ORDER BY 1").table
    assert listed is not None
    names = {row[0] for row in listed.rows}
    assert "ratings" not in names and {"visits", "patients", "zones"} <= names


def test_set_to_default_resets_the_setting_and_reports_the_default(service: QueryService) -> None:  # noqa: F811
    """``SET name TO DEFAULT`` is a RESET: the session's value goes, and a reported parameter's new
    value (ParameterStatus) is its default."""
    settings = SessionSettings()
    for sql in ("SET veil.epsilon = 0.3", "SET application_name = 'psql'"):
        (tree,) = service.parse(sql)
        service.run(tree, principal=Principal("alice"), settings=settings)
    (tree,) = service.parse("SET veil.epsilon TO DEFAULT")
    assert service.run(tree, principal=Principal("alice"), settings=settings).parameter_changed is None
    assert settings.get("veil.epsilon") == lookup("veil.epsilon").default
    (tree,) = service.parse("SET application_name = DEFAULT")
    outcome = service.run(tree, principal=Principal("alice"), settings=settings)
    assert outcome.tag == "SET"
    assert outcome.parameter_changed == ("application_name", "")
    assert settings.get("application_name") == ""
