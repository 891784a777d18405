"""Survivors of a random sample of proxy/query/service.py's mutants (seed 2116, docs/testing.md):
``veil_reconstruct`` answered through the service on DuckDB — tests/postgres/test_query_dialect_postgres.py
does it on PostgreSQL, which ``make mutants`` leaves out."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest

from anonymizers.sensitive_qid import AttributeRelease
from proxy.config import ColumnType
from proxy.query.service import QueryService, StatementOutcome
from tests.unit.proxy import test_service_answers as answers
from tests.unit.proxy.test_service_answers import run, spent

service = answers.service  # the clinic's query service, where alice holds ε = 10 and δ = 1e-5


def truthful_sex_release() -> dict[str, object]:
    """The metadata of a release whose value sets hold one value each (p = 1: each set says the truth)."""
    release = AttributeRelease(
        attribute="sex", domain=("female", "male"), p=1.0, eta=1, model="closeness", t=0.5
    )
    return {"attributes": [release.to_metadata()]}


def assert_estimated_from_truthful_release(outcome: StatementOutcome) -> None:
    """EM over sets that say the truth for 30 female and 70 male gives back those counts, free, and says so
    (shared with the PostgreSQL test, tests/postgres/test_query_dialect_postgres.py)."""
    assert outcome.table is not None and outcome.tag == "SELECT 2"
    assert [column.name for column in outcome.table.columns] == ["sex", "count"]
    assert [(sex, round(count, 6)) for sex, count in outcome.table.rows] == [("male", 70.0), ("female", 30.0)]
    (notice,) = outcome.notices
    assert re.fullmatch(
        r"veil_reconstruct: an estimate from the published release released \(EM, \d+ iterations\);"
        r" a public release, so nothing was spent",
        notice,
    ), notice
    assert outcome.charge is None


@pytest.fixture
def release(tmp_path: Path) -> None:
    """A release as ``veil materialize diversity --out db:released`` writes it, in the clinic's DuckDB file
    before the service opens it: value sets of one value each (p = 1, each set holds the true value) for
    30 female and 70 male, and the companion table of metadata."""
    metadata = truthful_sex_release()
    with duckdb.connect(str(tmp_path / "clinic.duckdb")) as connection:
        connection.execute(
            "CREATE TABLE released AS SELECT ['female'] AS sex FROM range(30)"
            " UNION ALL SELECT ['male'] FROM range(70)"
        )
        connection.execute("CREATE TABLE released__metadata (document VARCHAR)")
        connection.execute("INSERT INTO released__metadata VALUES (?)", [json.dumps(metadata)])


@pytest.mark.usefixtures("release")
def test_veil_reconstruct_answers_the_releases_estimate_and_spends_nothing(service: QueryService) -> None:
    """EM over sets that say the truth gives back their counts; the notice says it is a public release."""
    outcome = run(service, "SELECT * FROM veil_reconstruct('released', 'sex')")
    assert_estimated_from_truthful_release(outcome)
    assert [c.type for c in outcome.table.columns] == [ColumnType.TEXT, ColumnType.REAL]
    assert spent(service) == 0.0
