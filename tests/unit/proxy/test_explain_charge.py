"""``veil explain`` lists exactly what a query is charged, and COUNT(DISTINCT <privacy unit>) spends nothing on
choosing a contribution bound (issue 18): the query service on DuckDB against the same plan."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import PrivateQuery, classify
from proxy.backends.duckdb import DuckDBBackend
from proxy.config import ColumnType, DatasetPolicy
from proxy.query.explain import Explanation, explain_query
from proxy.query.planning import bound_choice_epsilon
from proxy.query.service import Principal, QueryService, StatementOutcome
from proxy.release.plan import bound_matters, bound_selection_epsilon
from proxy.settings import SessionSettings
from proxy.wire.scram import make_scram_verifier
from tests.unit.proxy.policy_fixture import clinic_policy

ALICE = Principal("alice")
ROWS = [
    "CREATE TABLE visits AS SELECT i // 3 AS patient_id, 20 + i % 50 AS age, 10.0 AS cost, 'x' AS note,"
    " CASE WHEN i % 2 = 0 THEN 'north' ELSE 'south' END AS region,"
    " CASE WHEN i % 3 = 0 THEN 'female' ELSE 'male' END AS sex FROM range(3000) t(i)",
    "CREATE TABLE ratings AS SELECT i // 4 AS user_id, 1 + i % 5 AS stars FROM range(8000) t(i)",
]


def shape_of(sql: str, dataset: DatasetPolicy):  # type: ignore[no-untyped-def]
    statement = classify(parse_statements(sql)[0], dataset)
    assert isinstance(statement, PrivateQuery)
    return statement.shape


@pytest.fixture
def clinic(tmp_path: Path) -> tuple[DatasetPolicy, Path]:
    path = tmp_path / "clinic.duckdb"
    with duckdb.connect(str(path)) as connection:
        for statement in ROWS:
            connection.execute(statement)
    return clinic_policy(tmp_path), path


class CountingBackend(DuckDBBackend):
    """Remembers every engine query, to see which ones a statement sent."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.sent: list[str] = []

    def execute(self, sql: str):  # type: ignore[no-untyped-def, override]
        self.sent.append(sql)
        return super().execute(sql)


@pytest.fixture
def service(clinic: tuple[DatasetPolicy, Path], tmp_path: Path) -> Iterator[QueryService]:
    dataset, path = clinic
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    ledger.add_analyst("alice", make_scram_verifier("secret", iterations=1))
    ledger.grant("alice", "clinic", PrivacyLoss(10.0))
    backend, sandbox = CountingBackend(path), DuckDBBackend.sandbox()
    try:
        yield QueryService(dataset, backend=backend, sandbox=sandbox, ledger=ledger, rng=random.Random(3))
    finally:
        backend.close()
        sandbox.close()


@pytest.mark.parametrize(
    ("sql", "matters"),
    [
        ("SELECT COUNT(DISTINCT user_id) FROM ratings", False),
        ("SELECT COUNT(DISTINCT user_id) FROM ratings WHERE stars > 2", False),
        ("SELECT COUNT(DISTINCT user_id) FILTER (WHERE stars > 2) FROM ratings", False),
        ("SELECT COUNT(DISTINCT CASE WHEN stars > 2 THEN user_id END) FROM ratings", False),
        ("SELECT COUNT(DISTINCT user_id) FILTER (WHERE stars > 2), COUNT(*) FROM ratings", True),
        ("SELECT COUNT(*) FROM ratings", True),
        ("SELECT COUNT(DISTINCT user_id), COUNT(*) FROM ratings", True),
        ("SELECT stars % 2, COUNT(DISTINCT user_id) FROM ratings GROUP BY 1", True),  # people in 2 groups
    ],
)
def test_the_bound_matters_unless_the_query_only_counts_people(sql: str, matters: bool) -> None:
    shape = shape_of(sql, clinic_policy())
    assert bound_matters(shape) is matters
    assert bound_choice_epsilon(shape, 1.0) == pytest.approx(0.1 if matters else 0.0)


def test_counting_people_spends_nothing_on_a_bound_and_sends_no_bound_query(service: QueryService) -> None:
    (tree,) = service.parse("SELECT COUNT(DISTINCT user_id) FROM ratings")
    outcome = service.run(tree, principal=ALICE, settings=SessionSettings({"veil.epsilon": "1"}))
    assert outcome.table is not None and outcome.charge is not None
    assert "contribution bound" not in outcome.notices[0]
    assert "count(DISTINCT user_id) ε=1" in outcome.notices[0], "all of ε goes to the count, sensitivity 1"
    backend = service.backend
    assert isinstance(backend, CountingBackend)
    assert len(backend.sent) == 1, "only the count itself: no per-person row histogram for choosing L"
    (people,) = outcome.table.rows[0]
    assert abs(people - 2000) <= 20, "discrete Laplace of scale 1: an e^-20 tail at 20"


def test_counting_people_with_a_matching_row_spends_nothing_on_a_bound(service: QueryService) -> None:
    """COUNT(DISTINCT unit) FILTER (WHERE c): each person is one count whatever their rows, as without the
    clause. Users 0…1999 have 4 ratings each, stars 1 + i % 5: four users in five rated one 5 stars."""
    (tree,) = service.parse("SELECT COUNT(DISTINCT user_id) FILTER (WHERE stars = 5) FROM ratings")
    outcome = service.run(tree, principal=ALICE, settings=SessionSettings({"veil.epsilon": "1"}))
    assert outcome.table is not None
    assert "count(DISTINCT user_id) FILTER (WHERE stars = 5) ε=1" in outcome.notices[0]
    backend = service.backend
    assert isinstance(backend, CountingBackend)
    assert len(backend.sent) == 1, "no per-person row histogram for choosing L"
    (people,) = outcome.table.rows[0]
    assert abs(people - 1600) <= 20, "discrete Laplace of scale 1: an e^-20 tail at 20"


def explained_and_answered(
    service: QueryService, dataset: DatasetPolicy, sql: str
) -> tuple[Explanation, StatementOutcome]:
    """``veil explain`` of ``sql`` at ε = 0.5, then the answer to it at the same ε."""
    sandbox = DuckDBBackend.sandbox()
    try:
        explanation = explain_query(dataset, sql, backend=sandbox, epsilon=0.5)
    finally:
        sandbox.close()
    (tree,) = service.parse(sql)
    return explanation, service.run(tree, principal=ALICE, settings=SessionSettings({"veil.epsilon": "0.5"}))


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM ratings",
        "SELECT COUNT(DISTINCT user_id) FROM ratings",
        "SELECT COUNT(DISTINCT user_id) FILTER (WHERE stars = 5) FROM ratings",
        "SELECT stars % 2, COUNT(DISTINCT user_id) FILTER (WHERE stars > 1) FROM ratings GROUP BY 1",
        "SELECT stars % 2, COUNT(DISTINCT user_id), AVG(stars) FROM ratings GROUP BY 1",
        "SELECT region, AVG(age), MEDIAN(age) FROM visits GROUP BY region",
        "SELECT SUM(age * 2), STDDEV(cost) FROM visits",
    ],
)
def test_explain_lists_exactly_what_the_answer_is_charged(
    service: QueryService, clinic: tuple[DatasetPolicy, Path], sql: str
) -> None:
    explanation, outcome = explained_and_answered(service, clinic[0], sql)
    assert outcome.charge is not None
    assert explanation.epsilon == outcome.charge.epsilon == 0.5
    assert service.ledger.balance("alice", "clinic").spent_epsilon == pytest.approx(0.5)
    split = outcome.notices[0].split(" (", 1)[1].rsplit("); ", 1)[0]
    charged = [part.rsplit(" ε=", 1) for part in split.split(", ")]
    explained = [(m.quantity, f"{m.epsilon:.4g}") for m in explanation.measurements]
    # the same parts, in the same order, with the same ε; only the bound's L is known after the choice
    assert [(label.split(" L=")[0], epsilon) for label, epsilon in charged] == [
        (label.split(" L=")[0], epsilon) for label, epsilon in explained
    ]
    bound = [m for m in explanation.measurements if m.quantity.startswith("contribution bound")]
    if bound:
        assert bound[0].quantity == "contribution bound L=auto (≤ 100)"
        assert bound[0].epsilon == bound_selection_epsilon(0.5)
        assert any("chosen with DP" in note for note in explanation.notes)


def test_explain_of_a_filtered_per_person_value_lists_its_bound_and_what_is_charged(
    service: QueryService, clinic: tuple[DatasetPolicy, Path]
) -> None:
    """The bound of ``n`` where ``n > 2`` is chosen with DP (its own share of ε) before the sums are
    measured: ``veil explain`` lists it with the widest bound it can pick, the NOTICE with the chosen one."""
    sql = (
        "SELECT AVG(n) FILTER (WHERE n > 2), AVG(n)"
        " FROM (SELECT user_id, COUNT(*) AS n FROM ratings GROUP BY user_id) p"
    )
    explanation, outcome = explained_and_answered(service, clinic[0], sql)
    assert outcome.charge is not None and explanation.epsilon == outcome.charge.epsilon == 0.5
    split = outcome.notices[0].split(" (", 1)[1].rsplit("); ", 1)[0]
    charged = [part.rsplit(" ε=", 1) for part in re.split(r", (?![^\[]*\])", split)]  # not in [0, 4]
    explained = [(m.quantity, f"{m.epsilon:.4g}") for m in explanation.measurements]
    assert [(label.split(" in [")[0], epsilon) for label, epsilon in charged] == [
        (label.split(" in [")[0], epsilon) for label, epsilon in explained
    ]
    # two bounds, one per value read, in the order the aggregates are written, each chosen when it ran
    assert [label.split(" in [")[0] for label, _ in charged[:2]] == ["n FILTER (WHERE n > 2)", "n"]
    assert all(label.endswith("] chosen with DP") for label, _ in charged[:2])


def test_describe_types_integer_quantiles_as_integers(service: QueryService) -> None:
    (tree,) = service.parse("SELECT MEDIAN(age), MEDIAN(cost), AVG(age), COUNT(*) FROM visits")
    description = service.describe(tree, principal=ALICE, settings=SessionSettings())
    assert description.columns is not None
    assert [column.type for column in description.columns] == [
        ColumnType.INTEGER,
        ColumnType.REAL,
        ColumnType.REAL,
        ColumnType.INTEGER,
    ]
    assert [column.name for column in description.columns] == ["median", "median", "avg", "count"]
