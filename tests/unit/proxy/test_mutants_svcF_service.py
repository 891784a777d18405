"""Survivors of a random sample of proxy/query/service.py's mutants (seed 2116, docs/testing.md): the
session's transaction tags, what the federated count sends the peer and releases, ``veil.budget`` read
through a qualified star, and COPY of a public query's decimals."""

from __future__ import annotations

import pytest

from proxy.config import ColumnType, FederationPolicy
from proxy.federation.exchange import FederatedCounts
from proxy.query.service import QueryService
from tests.unit.proxy import test_mutants_svc_service as earlier
from tests.unit.proxy import test_service_answers as answers
from tests.unit.proxy.policy_fixture import HOSPITALS
from tests.unit.proxy.test_service_answers import TTEST, run, spent

service = answers.service  # the clinic's query service, where alice holds ε = 10 and δ = 1e-5


@pytest.mark.parametrize(
    ("sql", "transition"),
    [
        ("BEGIN", "BEGIN"),
        ("COMMIT", "COMMIT"),
        ("ROLLBACK", "ROLLBACK"),
        ("ROLLBACK TO SAVEPOINT s", "ROLLBACK TO SAVEPOINT"),
        ("SELECT 1", None),
    ],
)
def test_the_transaction_tag_is_what_the_sessions_status_follows(
    service: QueryService, sql: str, transition: str | None
) -> None:
    (tree,) = service.parse(sql)
    assert service.transaction_tag(tree) == transition


class PolicyPeer(earlier.RecordingPeer):
    """The recording peer, which also records the federation policy it was asked under."""

    def __init__(self) -> None:
        super().__init__()
        self.policies: list[FederationPolicy] = []

    def ask(
        self,
        link: None,
        policy: FederationPolicy,
        statement: str,
        cells: list[tuple[str, ...]],
        counts: list[float],
    ) -> FederatedCounts:
        self.policies.append(policy)
        return super().ask(link, policy, statement, cells, counts)


@pytest.fixture
def peer(service: QueryService) -> PolicyPeer:
    site = PolicyPeer()
    service.federation = site  # type: ignore[assignment]
    return site


def test_the_peer_is_asked_under_the_statements_federation(service: QueryService, peer: PolicyPeer) -> None:
    """The gateway finds the peer, its key and k from the policy: it must be the federation read."""
    run(service, "SELECT region, COUNT(*) FROM hospitals GROUP BY region", **{"veil.epsilon": "1"})
    assert peer.policies == [HOSPITALS]


def test_the_columns_after_a_federated_count_are_kept(service: QueryService, peer: PolicyPeer) -> None:
    """The count first, the group key after it: the joint count replaces the count in place."""
    outcome = run(
        service, "SELECT COUNT(*) AS n, region FROM hospitals GROUP BY region", **{"veil.epsilon": "1"}
    )
    ((cells, counts),) = peer.sent
    assert cells == [("north",), ("south",)]
    assert outcome.table is not None
    assert outcome.table.rows == [(int(counts[0]) + 1000, "north"), (int(counts[1]) + 1000, "south")]
    assert spent(service) == 1.0


def test_a_qualified_star_over_veil_budget_gives_the_views_column_names(service: QueryService) -> None:
    starred = run(service, "SELECT * FROM veil.budget")
    qualified = run(service, "SELECT b.* FROM veil.budget AS b")
    assert qualified.table is not None and starred.table is not None
    assert [c.name for c in qualified.table.columns] == [c.name for c in starred.table.columns]
    assert qualified.table.rows == starred.table.rows


def test_copy_of_a_public_query_sends_a_decimal_columns_null_as_null(service: QueryService) -> None:
    """Decimals become floats, and a NULL among them stays NULL (no float of nothing)."""
    outcome = run(
        service,
        "COPY (SELECT code, CASE WHEN code = 'n1' THEN 1.5 END AS x FROM zones ORDER BY code) TO STDOUT",
    )
    assert outcome.copy is not None and outcome.tag == "COPY 2"
    assert outcome.copy.values == [["n1", "s1"], [1.5, None]]
    assert type(outcome.copy.values[1][0]) is float


@pytest.mark.parametrize(
    ("sql", "value"), [("SHOW max_identifier_length", "63"), ("SHOW Transaction_Isolation", "read committed")]
)
def test_show_answers_a_fact_of_the_server_whatever_its_case(
    service: QueryService, sql: str, value: str
) -> None:
    """Drivers (pgjdbc, for one) read these before anything else; they are no session setting."""
    outcome = run(service, sql)
    assert outcome.tag == "SHOW" and outcome.table is not None
    assert outcome.table.rows == [(value,)]


def test_show_all_answers_three_text_columns(service: QueryService) -> None:
    outcome = run(service, "SHOW ALL")
    assert outcome.table is not None
    assert [(c.name, c.type) for c in outcome.table.columns] == [
        ("name", ColumnType.TEXT),
        ("setting", ColumnType.TEXT),
        ("description", ColumnType.TEXT),
    ]


def test_a_ttests_charge_names_its_mechanisms(service: QueryService) -> None:
    """The audit log records which mechanisms spent the budget: both the t statistic's and the noise
    estimate's."""
    outcome = run(service, TTEST, **{"veil.epsilon": "1", "veil.delta": "1e-6"})
    assert outcome.charge is not None
    assert outcome.charge.mechanisms == "smooth-sensitivity gaussian, laplace"
    assert outcome.charge.cached is False
