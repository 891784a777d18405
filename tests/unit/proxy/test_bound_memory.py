"""A contribution bound chosen with DP is remembered per analyst (``remember_bounds``): later queries on
the same table, filters, grouping and ε reuse it and spend nothing on it; another analyst, other
filters or changed data choose again. The query service on DuckDB, seeded."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy.backends.duckdb import DuckDBBackend
from proxy.config import DatasetPolicy
from proxy.query.service import Principal, QueryService, StatementOutcome
from proxy.settings import SessionSettings
from proxy.wire.scram import make_scram_verifier
from tests.unit.proxy.policy_fixture import clinic_policy

ALICE, BOB = Principal("alice"), Principal("bob")
AT_ONE = SessionSettings({"veil.epsilon": "1"})


class VersionedBackend:
    """DuckDB with a data version the test sets (a changed file, without rewriting it) and a record of
    every engine query, to see whether the per-person histogram was read."""

    def __init__(self, backend: DuckDBBackend) -> None:
        self.backend, self.version, self.sent = backend, "v1", list[str]()
        self.dialect = backend.dialect

    def execute(self, sql: str) -> tuple[list[tuple[str, str]], list[tuple[object, ...]]]:
        self.sent.append(sql)
        return self.backend.execute(sql)

    def data_version(self) -> str:
        return self.version

    def close(self) -> None:
        self.backend.close()

    def histograms_read(self) -> int:
        return sum("_dp_people" in sql for sql in self.sent)


@pytest.fixture
def ratings(tmp_path: Path) -> Path:
    """2,000 users with 4 ratings and one with 90."""
    path = tmp_path / "clinic.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.execute(
            "CREATE TABLE ratings AS SELECT i // 4 AS user_id, 1 + i % 5 AS stars FROM range(8000) t(i)"
            " UNION ALL SELECT 5000, 3 FROM range(90)"
        )
    return path


def make_service(dataset: DatasetPolicy, path: Path, ledger: Ledger) -> tuple[QueryService, VersionedBackend]:
    backend = VersionedBackend(DuckDBBackend(path))
    service = QueryService(
        dataset, backend=backend, sandbox=DuckDBBackend.sandbox(), ledger=ledger, rng=random.Random(3)
    )
    return service, backend


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    for analyst in ("alice", "bob"):
        ledger.add_analyst(analyst, make_scram_verifier("secret", iterations=1))
        ledger.grant(analyst, "clinic", PrivacyLoss(10.0))
    return ledger


@pytest.fixture
def service(ratings: Path, ledger: Ledger, tmp_path: Path) -> Iterator[tuple[QueryService, VersionedBackend]]:
    service, backend = make_service(clinic_policy(tmp_path), ratings, ledger)
    yield service, backend
    backend.close()


def ask(service: QueryService, sql: str, principal: Principal = ALICE) -> StatementOutcome:
    (tree,) = service.parse(sql)
    return service.run(tree, principal=principal, settings=AT_ONE)


def chosen_bound(outcome: StatementOutcome) -> int:
    return int(outcome.notices[0].split("contribution bound L=")[1].split()[0])


def spent(service: QueryService, analyst: str = "alice") -> float:
    return service.ledger.balance(analyst, "clinic").spent_epsilon


def test_a_later_query_reuses_the_remembered_bound_and_spends_nothing_on_it(
    service: tuple[QueryService, VersionedBackend],
) -> None:
    service_, backend = service
    first = ask(service_, "SELECT COUNT(*) FROM ratings")
    assert "ε=0.1, count(*) ε=0.9" in first.notices[0], "a tenth of ε = 1 chose the bound"
    second = ask(service_, "SELECT SUM(stars) FROM ratings")  # other aggregate, same table and filters
    assert backend.histograms_read() == 1, "the second query read no per-person histogram"
    assert f"contribution bound L={chosen_bound(first)} remembered" in second.notices[0]
    assert "ε=0, sum(stars) ε=1)" in second.notices[0], "all of ε measures the answer"
    assert spent(service_) == pytest.approx(2.0), "each answer costs its ε, the bound nothing more"


def test_a_repeated_query_is_still_the_stored_answer(service: tuple[QueryService, VersionedBackend]) -> None:
    service_, _ = service
    first = ask(service_, "SELECT COUNT(*) FROM ratings")
    again = ask(service_, "SELECT COUNT(*) AS n FROM ratings")
    assert again.table is not None and first.table is not None
    assert again.table.rows == first.table.rows and "spent nothing" in again.notices[0]
    assert spent(service_) == pytest.approx(1.0)


def test_the_remembered_bound_is_per_analyst(service: tuple[QueryService, VersionedBackend]) -> None:
    service_, backend = service
    ask(service_, "SELECT COUNT(*) FROM ratings")
    bobs = ask(service_, "SELECT SUM(stars) FROM ratings", principal=BOB)
    assert "remembered" not in bobs.notices[0] and "ε=0.1, sum(stars) ε=0.9" in bobs.notices[0]
    assert backend.histograms_read() == 2, "bob's query chose its own bound, on his own budget"
    assert spent(service_, "bob") == pytest.approx(1.0)


def test_other_filters_choose_again(service: tuple[QueryService, VersionedBackend]) -> None:
    service_, backend = service
    ask(service_, "SELECT COUNT(*) FROM ratings")
    filtered = ask(service_, "SELECT COUNT(*) FROM ratings WHERE stars > 2")
    assert "remembered" not in filtered.notices[0] and backend.histograms_read() == 2


def test_changed_data_forget_the_bound(service: tuple[QueryService, VersionedBackend]) -> None:
    service_, backend = service
    ask(service_, "SELECT COUNT(*) FROM ratings")
    backend.version = "v2"
    after = ask(service_, "SELECT SUM(stars) FROM ratings")
    assert "remembered" not in after.notices[0] and backend.histograms_read() == 2
    backend.version = "v1"  # the old data again: the choice made on them still holds
    assert "remembered" in ask(service_, "SELECT AVG(stars) FROM ratings").notices[0]


def test_without_remember_bounds_every_query_chooses(ratings: Path, ledger: Ledger, tmp_path: Path) -> None:
    dataset = dataclasses.replace(clinic_policy(tmp_path), remember_bounds=False)
    service, backend = make_service(dataset, ratings, ledger)
    try:
        ask(service, "SELECT COUNT(*) FROM ratings")
        second = ask(service, "SELECT SUM(stars) FROM ratings")
    finally:
        backend.close()
    assert "remembered" not in second.notices[0] and backend.histograms_read() == 2
