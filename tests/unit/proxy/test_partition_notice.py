"""The NOTICE of a statement charged to a partition (parallel composition across statements): what it
spent, that only the partition was charged, and what is left both for statements pinned to the same
values and for any statement — in process on DuckDB, so that ``make mutants`` covers it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy.backends.duckdb import DuckDBBackend
from proxy.config import parse_config
from proxy.query.service import Principal, QueryService, StatementOutcome
from proxy.settings import SessionSettings
from proxy.wire.scram import make_scram_verifier
from tests.service_fixture import serving

ALICE = Principal("alice")
POLICY = """
[datasets.clinic]
path = "clinic.duckdb"

[datasets.clinic.tables.patients]
privacy_unit = "patient_id"
max_contributions = 1

[datasets.clinic.tables.patients.columns]
patient_id = { type = "integer" }
region = { type = "text", public = true, values = ["north", "south"], partition = true }
"""


def open_clinic(
    tmp_path: Path, *, renewal: str | None = None, clock: Callable[[], datetime] | None = None
) -> Iterator[QueryService]:
    """1,000 patients, one row each, half of them in the north; alice holds ε = 10 (per ``renewal``)."""
    with duckdb.connect(str(tmp_path / "clinic.duckdb")) as connection:
        connection.execute(
            "CREATE TABLE patients AS SELECT i AS patient_id,"
            " CASE WHEN i % 2 = 0 THEN 'north' ELSE 'south' END AS region FROM range(1000) t(i)"
        )
    dataset = parse_config(POLICY, path=tmp_path / "veil.toml").dataset("clinic")
    assert dataset is not None
    ledger = Ledger.create(tmp_path / "ledger.sqlite", clock=clock or (lambda: datetime.now(UTC)))
    ledger.add_analyst("alice", make_scram_verifier("secret", iterations=1))
    ledger.grant("alice", "clinic", PrivacyLoss(10.0, 0.0), renewal=renewal)
    with serving(dataset, DuckDBBackend(tmp_path / "clinic.duckdb"), ledger, seed=3) as service:
        yield service


@pytest.fixture
def service(tmp_path: Path) -> Iterator[QueryService]:
    yield from open_clinic(tmp_path)


def run(service: QueryService, sql: str, epsilon: str) -> StatementOutcome:
    (tree,) = service.parse(sql)
    return service.run(tree, principal=ALICE, settings=SessionSettings({"veil.epsilon": epsilon}))


def test_a_pinned_statement_says_it_was_charged_to_its_partition_only(service: QueryService) -> None:
    """North spends 1 and south 0.5, each of its own partition: any statement may still spend 10 − 1,
    one pinned to the south 9.5; the stored answer spent nothing, and an unpinned statement is charged
    to the dataset as a whole."""
    north = run(service, "SELECT COUNT(*) FROM patients WHERE region = 'north'", "1")
    assert north.notices == (
        "differential privacy: this answer spent ε=1 (count(*) ε=1), charged to the partition"
        " patients.region = 'north' only (parallel composition); 9 of 10 ε remains for statements pinned to"
        " patients.region = 'north', 9 for any statement on dataset clinic (basic composition)",
    )
    south = run(service, "SELECT COUNT(*) FROM patients WHERE region = 'south'", "0.5")
    assert south.notices == (
        "differential privacy: this answer spent ε=0.5 (count(*) ε=0.5), charged to the partition"
        " patients.region = 'south' only (parallel composition); 9.5 of 10 ε remains for statements pinned"
        " to patients.region = 'south', 9 for any statement on dataset clinic (basic composition)",
    )
    assert south.table is not None and abs(south.table.rows[0][0] - 500) <= 60  # scale 2: e^-30 at 60
    again = run(service, "SELECT COUNT(*) FROM patients WHERE region = 'south'", "0.5")
    assert again.table == south.table and again.charge is not None and again.charge.cached
    assert again.notices == (
        "differential privacy: this is the stored answer of the same query asked before, so it spent"
        " nothing; 9.5 of 10 ε remains for statements pinned to patients.region = 'south', 9 for any"
        " statement on dataset clinic (basic composition)",
    )
    anyone = run(service, "SELECT COUNT(*) FROM patients", "1")
    assert anyone.notices == (
        "differential privacy: this answer spent ε=1 (count(*) ε=1); 8 of 10 ε remains on dataset clinic"
        " (basic composition)",
    )


def test_a_stored_answer_from_an_earlier_period_reports_the_untouched_values_remainder(
    tmp_path: Path,
) -> None:
    """A daily grant: on day 1 the south is asked (0.5) and the north (1); on day 2 only the north (0.8).
    The south's stored answer, asked again on day 2, spends nothing — and the south has no spend in
    this period, so what is left for it is what any value without spends may still use: 10 − 0.8 would be
    wrong (that is the north's), 10 is what the untouched values have."""
    today = [datetime(2026, 11, 27, 9, tzinfo=UTC)]
    for service in open_clinic(tmp_path, renewal="day", clock=lambda: today[0]):
        south = run(service, "SELECT COUNT(*) FROM patients WHERE region = 'south'", "0.5")
        run(service, "SELECT COUNT(*) FROM patients WHERE region = 'north'", "1")
        today[0] += timedelta(days=1)
        run(service, "SELECT COUNT(*) FROM patients WHERE region = 'north'", "0.8")
        again = run(service, "SELECT COUNT(*) FROM patients WHERE region = 'south'", "0.5")
    assert again.table == south.table and again.charge is not None and again.charge.cached
    assert again.notices == (
        "differential privacy: this is the stored answer of the same query asked before, so it spent"
        " nothing; 10 of 10 ε remains for statements pinned to patients.region = 'south', 9.2 for any"
        " statement on dataset clinic (basic composition)",
    )
