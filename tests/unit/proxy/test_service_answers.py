"""The query service's answers that spend nothing or are charged outside the ordinary plan: literal
pings, ``veil.budget`` and ``SHOW``, and ``veil_ttest`` — in process on DuckDB, so that ``make mutants``
(which leaves tests/integration out for time) covers them; docs/testing.md."""

from __future__ import annotations

import contextlib
import datetime
import json
import random
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from budget.accountants import get_accountant
from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy.backends.duckdb import DuckDBBackend
from proxy.config import ColumnType, FederationPolicy
from proxy.errors import InvalidParameterValueError, ProxyError, UnsupportedQueryError
from proxy.federation.exchange import FederatedCounts
from proxy.query import service as service_module
from proxy.query.planning import _typed
from proxy.query.service import Principal, QueryService, StatementOutcome
from proxy.query.ttest import NOTE as P_VALUE_NOTE
from proxy.release.plan import bound_selection_epsilon
from proxy.settings import SessionSettings
from proxy.wire.scram import make_scram_verifier
from proxy.wire.types import INT4
from tests.service_fixture import serving
from tests.unit.proxy.policy_fixture import HOSPITALS, clinic_policy

ALICE = Principal("alice")
VISITS = (
    "CREATE TABLE visits AS SELECT i // 3 AS patient_id, 20 + i % 50 AS age, 10.0 AS cost, 'x' AS note,"
    " CASE WHEN i % 2 = 0 THEN 'north' ELSE 'south' END AS region,"
    " CASE WHEN i % 3 = 0 THEN 'female' ELSE 'male' END AS sex FROM range(3000) t(i)"
)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[QueryService]:
    """alice holds ε = 10 and δ = 1e-5 on the clinic (3,000 visits of 1,000 patients, 8,000 ratings)."""
    path = tmp_path / "clinic.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.execute(VISITS)
        connection.execute(
            "CREATE TABLE ratings AS SELECT i // 4 AS user_id, 1 + i % 5 AS stars FROM range(8000) t(i)"
        )
        connection.execute(
            "CREATE TABLE zones AS SELECT * FROM (VALUES ('n1', 'north'), ('s1', 'south')) t(code, zone)"
        )
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    ledger.add_analyst("alice", make_scram_verifier("secret", iterations=1))
    ledger.grant("alice", "clinic", PrivacyLoss(10.0, 1e-5))
    with serving(clinic_policy(tmp_path), DuckDBBackend(path), ledger, seed=5) as service:
        yield service


def run(service: QueryService, sql: str, **settings: str) -> StatementOutcome:
    (tree,) = service.parse(sql)
    return service.run(tree, principal=ALICE, settings=SessionSettings(settings))


def spent(service: QueryService) -> float:
    return service.ledger.balance("alice", "clinic").spent_epsilon


# -- literals ----------------------------------------------------------------------------------------


def test_a_literal_ping_is_answered_as_the_sandbox_would(service: QueryService) -> None:
    """Integers (int4 when they fit, as PostgreSQL types them), text and booleans, without the engine."""
    sql = "SELECT 1, 'a' AS letter, TRUE, 3000000000"
    (tree,) = service.parse(sql)
    outcome = service.answer_literals(tree)
    assert outcome is not None and outcome.table is not None
    assert outcome.tag == "SELECT 1"
    assert outcome.table.rows == [(1, "a", True, 3000000000)]
    assert [(c.type, c.type_oid) for c in outcome.table.columns] == [
        (ColumnType.INTEGER, INT4),
        (ColumnType.TEXT, None),
        (ColumnType.BOOLEAN, None),
        (ColumnType.INTEGER, None),
    ]
    assert outcome.table.columns[1].name == "letter"
    through_the_sandbox = run(service, sql)
    assert through_the_sandbox.table == outcome.table
    assert spent(service) == 0.0


@pytest.mark.parametrize(
    "sql",
    ["SELECT COUNT(*) FROM visits", "SELECT 1 + 1", "SELECT 2.5", "SELECT 1 LIMIT 1", "SHOW veil.epsilon"],
)
def test_anything_but_plain_literals_is_left_to_the_pipeline(service: QueryService, sql: str) -> None:
    (tree,) = service.parse(sql)
    assert service.answer_literals(tree) is None


# -- veil.budget and SHOW ----------------------------------------------------------------------------


def test_the_budget_view_shows_the_analysts_own_grant_and_spending(service: QueryService) -> None:
    run(service, "SELECT COUNT(*) FROM visits", **{"veil.epsilon": "0.25"})
    outcome = run(
        service, "SELECT dataset, granted_epsilon, spent_epsilon, remaining_epsilon FROM veil.budget"
    )
    assert outcome.table is not None
    assert outcome.tag == "SELECT 1"
    assert [c.name for c in outcome.table.columns] == [
        "dataset",
        "granted_epsilon",
        "spent_epsilon",
        "remaining_epsilon",
    ]
    assert outcome.table.rows == [("clinic", 10.0, 0.25, 9.75)]
    assert outcome.charge is None and spent(service) == 0.25


def test_the_budget_views_star_expands_to_its_own_column_names(service: QueryService) -> None:
    outcome = run(service, "SELECT * FROM veil.budget")
    assert outcome.table is not None
    names = [c.name for c in outcome.table.columns]
    assert names[:2] == ["dataset", "granted_epsilon"] and "remaining_epsilon" in names
    filtered = run(service, "SELECT dataset FROM veil.budget WHERE remaining_epsilon > 100")
    assert filtered.table is not None and filtered.table.rows == [] and filtered.tag == "SELECT 0"


def test_show_gives_the_sessions_epsilon_or_the_policys_default(service: QueryService) -> None:
    default = run(service, "SHOW veil.epsilon")
    assert default.table is not None
    assert default.table.rows == [(repr(service.dataset.default_epsilon),)]
    assert [c.name for c in default.table.columns] == ["veil.epsilon"]
    chosen = run(service, "SHOW veil.epsilon", **{"veil.epsilon": "0.3"})
    assert chosen.table is not None and chosen.table.rows == [("0.3",)]


# -- veil_ttest --------------------------------------------------------------------------------------

TTEST = "SELECT veil_ttest(age, sex = 'male') FROM visits"


def test_a_ttest_is_charged_the_sessions_epsilon_and_delta(service: QueryService) -> None:
    outcome = run(service, TTEST, **{"veil.epsilon": "1", "veil.delta": "1e-6"})
    assert outcome.table is not None and outcome.charge is not None
    assert (outcome.charge.epsilon, outcome.charge.delta, outcome.charge.cached) == (1.0, 1e-6, False)
    balance = service.ledger.balance("alice", "clinic")
    assert (balance.spent_epsilon, balance.spent_delta) == (1.0, 1e-6)
    assert outcome.notices[0].startswith("differential privacy: this answer spent ")
    assert "9 of 10 ε remains on dataset clinic" in outcome.notices[0]


def test_a_repeated_ttest_gets_its_stored_answer_for_free(service: QueryService) -> None:
    first = run(service, TTEST, **{"veil.epsilon": "1", "veil.delta": "1e-6"})
    again = run(service, TTEST, **{"veil.epsilon": "1", "veil.delta": "1e-6"})
    assert again.table == first.table
    assert again.charge is not None and again.charge.cached
    assert "stored answer of the same query asked before, so it spent nothing" in again.notices[0]
    assert spent(service) == 1.0


def test_a_ttest_with_a_p_value_says_how_to_read_it(service: QueryService) -> None:
    outcome = run(
        service, "SELECT veil_ttest(age, sex = 'male', 'p_value') FROM visits", **{"veil.delta": "1e-6"}
    )
    assert outcome.notices[1] == f"veil_ttest: {P_VALUE_NOTE}"
    plain = run(service, TTEST, **{"veil.delta": "1e-6"})
    assert len(plain.notices) == 1


# -- a federated count -------------------------------------------------------------------------------

FEDERATED = "SELECT region, COUNT(*) FROM hospitals GROUP BY region"


class PeerSite:
    """The other site and the secure comparison, as their results: north's joint count reaches k, south's
    does not. Records what this site sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[list[tuple[str, ...]], list[float]]] = []

    def of_dataset(self, dataset: str) -> dict[str, FederationPolicy]:
        return {HOSPITALS.name: HOSPITALS} if dataset == HOSPITALS.dataset else {}

    def open(self, policy: FederationPolicy) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()

    def ask(
        self,
        link: None,
        policy: FederationPolicy,
        statement: str,
        cells: list[tuple[str, ...]],
        counts: list[float],
    ) -> FederatedCounts:
        self.sent.append((cells, counts))
        return FederatedCounts([counts[0] + 1000.4, None], peer_epsilon=0.5, bytes_exchanged=4321)


@pytest.fixture
def federated(service: QueryService) -> tuple[QueryService, PeerSite]:
    peer = PeerSite()
    service.federation = peer  # type: ignore[assignment]
    return service, peer


def test_a_federated_count_shows_the_joint_counts_it_reaches_k_for(
    federated: tuple[QueryService, PeerSite],
) -> None:
    service, peer = federated
    outcome = run(service, FEDERATED, **{"veil.epsilon": "1"})
    ((cells, counts),) = peer.sent
    assert cells == [("north",), ("south",)]
    assert all(abs(count - 1500) < 40 for count in counts), "this site's noisy counts, ε = 1, scale 3"
    assert outcome.table is not None
    assert outcome.table.rows == [("north", int(counts[0]) + 1000), ("south", None)], "typed as the count"
    assert outcome.notices[-1] == (
        "federation hospitals: 1 of 2 cells reach k = 20 and show both sites' noisy counts summed; 1 suppressed "
        "(NULL). The other site spent ε = 0.5 of its own budget; 4,321 bytes exchanged"
    )
    assert spent(service) == 1.0


def test_a_federated_count_is_sent_as_drawn_even_when_rounding_is_asked(
    federated: tuple[QueryService, PeerSite],
) -> None:
    """Both sites' counts are summed as drawn: clamping each at 0 first would bias the sum upward. South
    has no visit of a 20-year-old; with seed 2 its noisy count is below 0, and is sent so."""
    service, peer = federated
    service.rng = random.Random(2)
    few = "SELECT region, COUNT(*) FROM hospitals WHERE age < 21 GROUP BY region"
    run(service, few, **{"veil.epsilon": "1", "veil.raw_counts": "off"})
    ((_, (north, south)),) = peer.sent
    assert abs(north - 60) < 40 and south < 0


def test_the_peers_statement_is_answered_at_the_federations_epsilon(
    federated: tuple[QueryService, PeerSite],
) -> None:
    service, _ = federated
    answer = service.answer_for_peer(HOSPITALS, FEDERATED)
    assert answer.cells == [("north",), ("south",)] and answer.epsilon == 0.5
    assert all(abs(count - 1500) < 80 for count in answer.counts)
    assert spent(service) == 0.5


def test_a_copy_of_a_federated_count_is_refused_free_and_says_why(
    federated: tuple[QueryService, PeerSite],
) -> None:
    """COPY (…) TO STDOUT of a federated count: refused before any spend or any word to the peer, with
    what to send instead (it used to be told the federation "can only be counted on its own")."""
    service, peer = federated
    with pytest.raises(UnsupportedQueryError) as refused:
        run(service, f"COPY ({FEDERATED}) TO STDOUT", **{"veil.epsilon": "1"})
    assert refused.value.message == (
        "federation hospitals cannot be read by COPY: send its count as a SELECT statement of its own"
    )
    assert peer.sent == [] and spent(service) == 0.0


def test_the_peer_may_ask_for_a_federated_count_only(federated: tuple[QueryService, PeerSite]) -> None:
    service, _ = federated
    with pytest.raises(UnsupportedQueryError, match="not a count of federation hospitals"):
        service.answer_for_peer(HOSPITALS, "SELECT region, COUNT(*) FROM visits GROUP BY region")
    assert spent(service) == 0.0


# -- public tables, COPY, UNION ALL ------------------------------------------------------------------


def test_a_public_query_is_named_as_postgresql_names_it(service: QueryService) -> None:
    counted = run(service, "SELECT zone, COUNT(*) FROM zones GROUP BY zone ORDER BY zone")
    assert counted.table is not None
    assert [c.name for c in counted.table.columns] == ["zone", "count"]
    assert counted.table.rows == [("north", 1), ("south", 1)]
    starred = run(service, "SELECT * FROM zones ORDER BY code")
    assert starred.table is not None and [c.name for c in starred.table.columns] == ["code", "zone"]
    assert spent(service) == 0.0


def test_copy_of_a_public_query_sends_its_columns_with_decimals_as_floats(service: QueryService) -> None:
    outcome = run(
        service,
        "COPY (SELECT code, COUNT(*), 1.5 AS d FROM zones GROUP BY code ORDER BY code) TO STDOUT",
    )
    assert outcome.copy is not None and outcome.table is None
    assert (outcome.tag, outcome.copy.count) == ("COPY 2", 2)
    assert outcome.copy.names == ("code", "count", "d")
    assert outcome.copy.values == [["n1", "s1"], [1, 1], [1.5, 1.5]]
    assert all(type(value) is float for value in outcome.copy.values[2])


def test_copy_of_a_private_query_is_answered_and_charged_as_the_select(service: QueryService) -> None:
    outcome = run(
        service,
        "COPY (SELECT region, COUNT(*) FROM visits GROUP BY region) TO STDOUT",
        **{"veil.epsilon": "0.5"},
    )
    assert outcome.copy is not None and outcome.table is None and outcome.charge is not None
    assert (outcome.tag, outcome.copy.names) == ("COPY 2", ("region", "count"))
    assert outcome.copy.values[0] == ["north", "south"]
    assert all(abs(count - 1500) < 60 for count in outcome.copy.values[1])
    assert spent(service) == 0.5


def test_a_union_all_is_widened_to_real_then_ordered_and_limited(service: QueryService) -> None:
    outcome = run(
        service,
        "SELECT region, COUNT(*) FROM visits GROUP BY region UNION ALL "
        "SELECT sex, AVG(age) FROM visits GROUP BY sex ORDER BY 1 DESC LIMIT 3",
        **{"veil.epsilon": "1"},
    )
    assert outcome.table is not None
    assert [row[0] for row in outcome.table.rows] == ["south", "north", "male"]
    assert outcome.table.columns[1].type is ColumnType.REAL
    assert all(type(row[1]) is float for row in outcome.table.rows)
    assert spent(service) == 1.0


def test_a_union_all_shows_each_parts_error_bounds_and_charges_each_mechanism(service: QueryService) -> None:
    outcome = run(
        service,
        "SELECT COUNT(*) FROM visits UNION ALL SELECT MEDIAN(age) FROM visits",
        **{"veil.epsilon": "1", "veil.show_error": "on"},
    )
    assert re.fullmatch(
        r"95% error bounds of the noise: part 1: count\(\*\) ±[0-9.]+; part 2: median\(age\) ±[0-9.]+",
        outcome.notices[-1],
    ), outcome.notices
    assert outcome.charge is not None and outcome.charge.mechanisms == (
        "Laplace on a 2^k grid, exponential (permute-and-flip)"
    )


def test_a_union_all_charges_only_the_parts_not_answered_before(service: QueryService) -> None:
    run(service, "SELECT COUNT(*) FROM visits", **{"veil.epsilon": "0.5"})
    outcome = run(
        service,
        "SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*) FROM visits WHERE age > 30",
        **{"veil.epsilon": "1"},
    )
    assert outcome.charge is not None and outcome.charge.epsilon == pytest.approx(0.5)  # part 2 only
    assert spent(service) == pytest.approx(1.0)


def test_a_union_all_is_charged_the_statements_epsilon_not_the_float_sum_of_its_shares(
    service: QueryService,
) -> None:
    """Three parts at ε = 0.9 get 0.3 each, which add up to 0.8999999999999999 in floats: the charge and
    the ledger entry are the statement's 0.9."""
    outcome = run(
        service,
        "SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*) FROM visits WHERE age > 30"
        " UNION ALL SELECT COUNT(*) FROM visits WHERE age > 60",
        **{"veil.epsilon": "0.9"},
    )
    assert outcome.charge is not None and outcome.charge.epsilon == 0.9
    assert spent(service) == 0.9


def test_a_decimal_computed_over_a_noisy_answer_is_sent_as_a_float(service: QueryService) -> None:
    """``COUNT(*) * 1.5`` is DECIMAL in the sandbox engine: sent as the float it is, not as Decimal."""
    outcome = run(service, "SELECT COUNT(*) * 1.5 AS n FROM visits", **{"veil.epsilon": "1"})
    assert outcome.table is not None
    ((value,),) = outcome.table.rows
    assert type(value) is float and abs(value - 4500) < 30  # 1.5 · (3,000 ± Laplace of scale 3)


def test_a_reloaded_policy_and_accountant_apply_to_later_statements(service: QueryService) -> None:
    service.update_policy(clinic_policy(), accountant=get_accountant("zcdp"))
    outcome = run(service, "SELECT COUNT(*) FROM visits", **{"veil.epsilon": "0.5"})
    assert outcome.charge is not None and outcome.charge.accountant == "zcdp"
    assert service.dataset.path == clinic_policy().path


def test_the_catalog_reads_the_sessions_settings(service: QueryService) -> None:
    outcome = run(service, "SELECT current_setting('veil.epsilon')", **{"veil.epsilon": "0.7"})
    assert outcome.table is not None and outcome.table.rows == [("0.7",)]


def test_the_catalog_reads_server_parameters_whatever_their_case(service: QueryService) -> None:
    outcome = run(service, "SELECT current_setting('Max_Identifier_Length')")
    assert outcome.table is not None and outcome.table.rows == [("63",)]


def test_show_all_lists_every_setting_with_its_description(service: QueryService) -> None:
    outcome = run(service, "SHOW ALL", **{"veil.epsilon": "0.3"})
    assert outcome.table is not None
    assert [c.name for c in outcome.table.columns] == ["name", "setting", "description"]
    assert ("veil.epsilon", "0.3") in {row[:2] for row in outcome.table.rows}


@pytest.mark.parametrize("other_row", ["on", "off"])
def test_describe_plans_with_the_sessions_delta_and_other_row(service: QueryService, other_row: str) -> None:
    """Keys from the data (age has no public values) need the session's δ: Describe must plan with it, and
    with ``veil.other_row``, to give the columns the answer has."""
    (tree,) = service.parse("SELECT age, COUNT(*) FROM visits GROUP BY age ORDER BY 2 DESC LIMIT 3")
    settings = SessionSettings({"veil.other_row": other_row, "veil.delta": "1e-6"})
    described = service.describe(tree, principal=ALICE, settings=settings)
    answered = service.run(tree, principal=ALICE, settings=settings)
    assert answered.table is not None
    assert described.columns == answered.table.columns


def test_an_engines_timestamptz_key_is_read_in_utc_whatever_the_servers_zone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        aware = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))
        assert _typed(aware, ColumnType.TIMESTAMP) == datetime.datetime(2026, 1, 1, 10, 0)
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_union_all_of_parts_that_choose_their_bound_is_answered(service: QueryService) -> None:
    """ratings has max_contributions = "auto": each part chooses its bound with DP, with its own options."""
    outcome = run(
        service,
        "SELECT COUNT(*) FROM ratings UNION ALL SELECT COUNT(*) FROM ratings WHERE stars > 2",
        **{"veil.epsilon": "1"},
    )
    assert outcome.table is not None and len(outcome.table.rows) == 2
    assert outcome.charge is not None and "Laplace" in outcome.charge.mechanisms
    assert spent(service) == 1.0
    again = run(
        service,
        "SELECT COUNT(*) FROM ratings UNION ALL SELECT COUNT(*) FROM ratings WHERE stars > 2",
        **{"veil.epsilon": "1"},
    )
    assert again.table == outcome.table and again.charge is not None and again.charge.cached
    assert spent(service) == 1.0, "the stored answer of the same statement, for free"


# -- SET ---------------------------------------------------------------------------------------------


def test_set_changes_the_sessions_epsilon_and_refuses_one_above_the_maximum(service: QueryService) -> None:
    settings = SessionSettings({})
    (good,) = service.parse("SET veil.epsilon = 0.5")
    assert service.run(good, principal=ALICE, settings=settings).tag == "SET"
    assert settings.get("veil.epsilon") == "0.5"
    (too_much,) = service.parse(f"SET veil.epsilon = {service.dataset.max_epsilon * 2}")
    with pytest.raises(InvalidParameterValueError, match="max_epsilon") as refused:
        service.run(too_much, principal=ALICE, settings=settings)
    assert refused.value.hint == f"SET veil.epsilon to at most {service.dataset.max_epsilon:g}"
    assert settings.get("veil.epsilon") == "0.5", "the old value is kept"


def test_a_statement_over_the_datasets_token_limit_is_refused_before_parsing(service: QueryService) -> None:
    limit = service.dataset.limits.max_tokens
    with pytest.raises(ProxyError, match=f"more than this dataset's max_tokens of {limit}"):
        service.parse("SELECT " + ", ".join(["1"] * limit))


def test_top_k_queries_sharing_their_gate_do_not_share_a_stored_answer(service: QueryService) -> None:
    """Two top-k queries over the same data-derived keys share the gate query (people per key) but
    measure different things: each must be answered (and charged) on its own — the stored answer of
    one is never the other's."""
    delta = {"veil.delta": "1e-6", "veil.epsilon": "1"}
    rows = run(service, "SELECT age, COUNT(*) FROM visits GROUP BY age ORDER BY 2 DESC LIMIT 3", **delta)
    people = run(
        service,
        "SELECT age, COUNT(DISTINCT patient_id) FROM visits GROUP BY age ORDER BY 2 DESC LIMIT 3",
        **delta,
    )
    assert rows.charge is not None and not rows.charge.cached
    assert people.charge is not None and not people.charge.cached
    assert spent(service) == pytest.approx(2.0)
    again = run(service, "SELECT age, COUNT(*) FROM visits GROUP BY age ORDER BY 2 DESC LIMIT 3", **delta)
    assert again.charge is not None and again.charge.cached and again.table == rows.table


def test_top_k_selections_over_public_keys_differing_in_where_do_not_share_a_stored_answer(
    service: QueryService,
) -> None:
    """A DP top-k selection (COUNT(DISTINCT person), 2k < L = 3 and 4 cells) over keys from the policy's
    public lists: no gate query, so only the score query carries the WHERE — two such statements with
    different filters are different answers, each charged; the same statement again is the stored one."""
    top = "SELECT region, sex, COUNT(DISTINCT patient_id) FROM visits {} GROUP BY region, sex ORDER BY 3 DESC LIMIT 1"
    epsilon = {"veil.epsilon": "1"}
    everyone = run(service, top.format(""), **epsilon)
    young = run(service, top.format("WHERE age < 30"), **epsilon, **{"veil.show_error": "on"})
    for outcome in (everyone, young):
        assert outcome.charge is not None and not outcome.charge.cached
        assert (
            outcome.charge.mechanisms == "discrete Laplace, exponential (permute-and-flip, monotone, peeling)"
        )
        assert "top-1 selection: exponential mechanism" in outcome.notices[0]
    assert re.fullmatch(
        r"95% error bounds of the noise \(over all 1 row\(s\)\): count\(DISTINCT patient_id\) ±[0-9.]+;"
        r" top-k selection: at most [0-9.]+ people below the k-th largest count",
        young.notices[-1],
    ), young.notices
    assert spent(service) == pytest.approx(2.0)
    assert everyone.table is not None and young.table is not None
    # every patient has two visits as "male", one in each region: 1,000 people; under 30 (age = 20 + i % 50):
    # 200 visits per (region, male), one person each
    ((_, sex, people),), ((_, young_sex, young_people),) = everyone.table.rows, young.table.rows
    assert (sex, young_sex) == ("male", "male")
    assert abs(people - 1000) <= 60 and abs(young_people - 200) <= 60
    again = run(service, top.format("WHERE age < 30"), **epsilon)
    assert again.charge is not None and again.charge.cached and again.table == young.table
    assert spent(service) == pytest.approx(2.0)


def test_a_remembered_bound_records_what_its_choice_spent(service: QueryService, tmp_path: Path) -> None:
    """ratings chooses max_contributions with DP; the choice is stored (for the analyst's next query at
    the same ε) together with the ε it spent and the number of people it aimed at, and reused."""
    outcome = run(service, "SELECT COUNT(*) FROM ratings", **{"veil.epsilon": "1"})
    assert outcome.charge is not None and outcome.charge.epsilon == 1.0
    with contextlib.closing(sqlite3.connect(tmp_path / "ledger.sqlite")) as ledger:
        stored = ledger.execute("SELECT answer FROM answers WHERE query_key LIKE 'bound:%'").fetchall()
    (record,) = (json.loads(answer) for (answer,) in stored)
    assert record["selection_epsilon"] == bound_selection_epsilon(1.0) > 0
    assert 1 <= record["max_contributions"] <= 100 and record["target"] > 0
    bound = record["max_contributions"]
    assert f"contribution bound L={bound} ε=0.1, count(*) ε=0.9" in outcome.notices[0]
    # the same filters and grouping at the same ε: the bound is reused, the whole ε goes to the answer
    total = run(service, "SELECT SUM(stars) FROM ratings", **{"veil.epsilon": "1"})
    assert (
        f"contribution bound L={bound} remembered from an earlier choice ε=0, sum(stars) ε=1"
        in total.notices[0]
    )
    assert (
        total.table is not None and abs(total.table.rows[0][0] - 24000) <= 1000
    )  # 8,000 ratings, 3 on average
    assert total.charge is not None and total.charge.epsilon == 1.0 and spent(service) == 2.0


def test_a_union_part_with_per_person_values_chooses_their_bounds_at_its_share(service: QueryService) -> None:
    """The first part averages a per-person count, whose upper bound is chosen with DP when it runs (at
    the part's ε); every patient has 3 visits."""
    outcome = run(
        service,
        "SELECT AVG(n) FROM (SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY patient_id) AS p"
        " UNION ALL SELECT COUNT(*) FROM visits",
        **{"veil.epsilon": "1"},
    )
    assert outcome.table is not None
    (average,), (visits,) = outcome.table.rows
    assert abs(average - 3) <= 1 and abs(visits - 3000) <= 300
    assert outcome.charge is not None and outcome.charge.epsilon == pytest.approx(1.0)
    assert spent(service) == pytest.approx(1.0)


@pytest.mark.parametrize("key", ["z.zone", "upper(z.zone)"])
def test_a_lookup_tables_column_gives_the_group_keys_every_value(service: QueryService, key: str) -> None:
    """zones is a public lookup table (key "code"): its values are the GROUP BY keys — the column itself
    or an expression of it — each shown even though no visit's region matches a code (they are 'n1' and
    's1'), none taken from the private rows."""
    outcome = run(
        service,
        f"SELECT {key} AS zone, COUNT(*) AS n FROM visits v JOIN zones z ON v.region = z.code GROUP BY {key}",
        **{"veil.epsilon": "1", "veil.show_error": "on"},
    )
    assert outcome.table is not None and outcome.tag == "SELECT 2"
    assert re.fullmatch(
        r"95% error bounds of the noise \(over all 2 row\(s\)\): count\(\*\) ±[0-9.]+", outcome.notices[-1]
    ), outcome.notices
    counts = dict(outcome.table.rows)
    assert sorted(counts) == (["north", "south"] if key == "z.zone" else ["NORTH", "SOUTH"])
    assert all(abs(count) <= 60 for count in counts.values()), "noise around 0: scale 3, e^-20 tail at 60"
    assert spent(service) == 1.0


def test_a_per_person_value_gets_its_bound_chosen_at_the_statements_epsilon(service: QueryService) -> None:
    """The average of a per-person count: its upper bound is chosen with DP when the query runs, and the
    query planned again at the statement's ε with it; every patient has 3 visits."""
    outcome = run(
        service,
        "SELECT AVG(n) FROM (SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY patient_id) AS p",
        **{"veil.epsilon": "1"},
    )
    assert outcome.table is not None and outcome.tag == "SELECT 1"
    ((average,),) = outcome.table.rows
    assert abs(average - 3) <= 1
    assert outcome.charge is not None and outcome.charge.epsilon == 1.0 and spent(service) == 1.0


def test_a_per_person_subquerys_filter_divides_integers_as_postgresql_does(service: QueryService) -> None:
    """Clients speak PostgreSQL, where ``age / 10`` of integers is an integer: 240 patients have 600 visits
    at ages 20 to 29, 2.5 each. DuckDB's own ``/`` would divide as reals and keep only age 20 (60 patients
    with one visit each: 1.0), so the subquery's WHERE must be rewritten for the engine's dialect like
    any other filter. At ε = 1 the average of 240 people's counts (bounded at 3 or more) is within 0.5."""
    outcome = run(
        service,
        "SELECT AVG(n) FROM (SELECT patient_id, COUNT(*) AS n FROM visits WHERE age / 10 = 2"
        " GROUP BY patient_id) AS p",
        **{"veil.epsilon": "1"},
    )
    assert outcome.table is not None
    ((average,),) = outcome.table.rows
    assert abs(average - 2.5) <= 0.5


def test_a_per_person_subquerys_filter_is_made_error_free_for_duckdb(service: QueryService) -> None:
    """On DuckDB a text cast to a number is TRY_CAST (NULL where it does not convert); PostgreSQL's rewrite
    refuses it. The subquery's WHERE must be rewritten for the dataset's engine, not PostgreSQL's: every
    note is 'x', so every patient keeps its 3 visits (ε = 1: the average is within 0.5)."""
    outcome = run(
        service,
        "SELECT AVG(n) FROM (SELECT patient_id, COUNT(*) AS n FROM visits WHERE CAST(note AS INTEGER) IS NULL"
        " GROUP BY patient_id) AS p",
        **{"veil.epsilon": "1"},
    )
    assert outcome.table is not None
    ((average,),) = outcome.table.rows
    assert abs(average - 3) <= 0.5


@pytest.mark.parametrize(
    ("condition", "visits"),
    [("sqrt(age - 30) > 1", 2280), ("ln(age - 30) > 0", 2280), ("power(age, 200) > 1", 900)],
)
def test_functions_are_null_where_postgresql_would_fail_on_duckdb_too(
    service: QueryService, condition: str, visits: int
) -> None:
    """DuckDB answers NaN for sqrt and ln of a negative number and ∞ for a power past a double's range —
    and NaN > 1 is true there. PostgreSQL fails on such a row, and Veil makes it NULL; DuckDB must answer
    the same: ages 32–69 of 20–69 are 38 of 50 (2,280 visits); 20^200 and above overflow except ages
    20–34 (900 visits). Laplace noise of scale 3 at ε = 1: e^-20 beyond 60."""
    outcome = run(service, f"SELECT COUNT(*) FROM visits WHERE {condition}", **{"veil.epsilon": "1"})
    assert outcome.table is not None
    ((count,),) = outcome.table.rows
    assert abs(count - visits) <= 60


# --- a fresh sample of the query pipeline's mutants (seed 1130, docs/testing.md) --------------------------


def test_discard_all_resets_the_sessions_settings(service: QueryService) -> None:
    """Connection pools send DISCARD ALL before handing a connection to the next user: a ``veil.epsilon``
    the previous user set must not carry over (nor what DISCARD PLANS does not touch be reset)."""
    settings = SessionSettings({"veil.epsilon": "0.5"})
    (plans,) = service.parse("DISCARD PLANS")
    assert service.run(plans, principal=ALICE, settings=settings).tag == "DISCARD PLANS"
    assert settings.get("veil.epsilon") == "0.5"
    (discard,) = service.parse("DISCARD ALL")
    assert service.run(discard, principal=ALICE, settings=settings).tag == "DISCARD ALL"
    assert settings.get("veil.epsilon") == SessionSettings().get("veil.epsilon")


def test_integer_literals_are_int4_up_to_2_to_the_31_minus_1() -> None:
    """PostgreSQL types 2147483647 int4 and 2147483648 int8 (a client reads them as different types)."""
    assert service_module._literal_oid(2**31 - 1) == INT4 and service_module._literal_oid(-(2**31)) == INT4
    assert service_module._literal_oid(2**31) is None and service_module._literal_oid(-(2**31) - 1) is None


def test_a_union_all_of_integer_parts_stays_integer(service: QueryService) -> None:
    """Only an integer part of a column that is real in the union is widened: two counts stay counts."""
    outcome = run(
        service,
        "SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*) FROM visits WHERE age > 30",
        **{"veil.epsilon": "1"},
    )
    assert outcome.table is not None and outcome.table.columns[0].type is ColumnType.INTEGER
    assert all(type(value) is int for (value,) in outcome.table.rows)


def test_a_union_all_notice_names_the_stored_part_and_the_delta(service: QueryService) -> None:
    """The NOTICE of a union says which part was a stored answer (free) and the δ the statement spent."""
    run(service, "SELECT COUNT(*) FROM visits", **{"veil.epsilon": "0.5"})
    union = "SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*) FROM visits WHERE age > 30"
    outcome = run(service, union, **{"veil.epsilon": "1"})
    assert "part 1: the stored answer, free" in outcome.notices[0], outcome.notices
    gaussian = run(
        service, union, **{"veil.epsilon": "1", "veil.mechanism": "gaussian", "veil.delta": "1e-6"}
    )
    assert "ε=1, δ=1e-06 in 2 parts of a UNION ALL" in gaussian.notices[0], gaussian.notices


def test_a_query_with_a_remembered_bound_asked_again_gets_its_stored_answer(service: QueryService) -> None:
    """COUNT(*) chooses and remembers ratings' bound; SUM(stars) reuses it (its answer stored under the
    plan with the remembered bound); SUM(stars) again is that stored answer — free, with its notice."""
    run(service, "SELECT COUNT(*) FROM ratings", **{"veil.epsilon": "1"})
    first = run(service, "SELECT SUM(stars) FROM ratings", **{"veil.epsilon": "1"})
    again = run(service, "SELECT SUM(stars) FROM ratings", **{"veil.epsilon": "1"})
    assert again.table == first.table and again.charge is not None and again.charge.cached
    assert "this is the stored answer of the same query asked before, so it spent nothing" in again.notices[0]
    assert spent(service) == 2.0
