"""Survivors of a random sample of proxy/query/service.py's mutants (seed 2101, docs/testing.md): what
failures after the engine are charged, what the answer cache keys, and what COPY, the federated count,
UNION ALL, ``veil.budget``, session commands and Describe show the analyst and record."""

from __future__ import annotations

import dataclasses
import random
import re

import duckdb
import pytest

from proxy.analysis.federated import SHAPE_HINT
from proxy.config import ColumnType, FederationPolicy
from proxy.errors import (
    BackendUnavailableError,
    DatatypeMismatchError,
    InvalidParameterValueError,
    UnsupportedQueryError,
)
from proxy.federation.exchange import FederatedCounts
from proxy.query.service import QueryService
from proxy.settings import SessionSettings
from proxy.wire.types import INT4
from tests.unit.proxy import test_service_answers as answers
from tests.unit.proxy.test_service_answers import ALICE, FEDERATED, TTEST, PeerSite, run, spent

service = answers.service  # the clinic's query service, where alice holds ε = 10 and δ = 1e-5


class RecordingPeer(PeerSite):
    """The peer of test_service_answers, which also records the statement text it was asked and answers
    with joint counts 0.6 above an integer (so that rounding them to whole numbers would show)."""

    def __init__(self) -> None:
        super().__init__()
        self.statements: list[str] = []

    def ask(
        self,
        link: None,
        policy: FederationPolicy,
        statement: str,
        cells: list[tuple[str, ...]],
        counts: list[float],
    ) -> FederatedCounts:
        self.statements.append(statement)
        self.sent.append((cells, counts))
        return FederatedCounts([count + 1000.6 for count in counts], peer_epsilon=0.5, bytes_exchanged=10)


@pytest.fixture
def peer(service: QueryService) -> RecordingPeer:
    site = RecordingPeer()
    service.federation = site  # type: ignore[assignment]
    return site


# -- COPY --------------------------------------------------------------------------------------------


def test_copy_of_a_private_query_keeps_its_format_options(service: QueryService) -> None:
    """``COPY (…) TO STDOUT WITH (FORMAT csv, HEADER)``: the rows are written as the analyst asked."""
    outcome = run(
        service,
        "COPY (SELECT region, COUNT(*) FROM visits GROUP BY region) TO STDOUT WITH (FORMAT csv, HEADER)",
        **{"veil.epsilon": "0.5"},
    )
    assert outcome.copy is not None
    assert (outcome.copy.options.format, outcome.copy.options.header) == ("csv", True)
    assert outcome.copy.options.separator == ","


def test_the_ledger_records_a_copy_as_the_statement_the_analyst_sent(service: QueryService) -> None:
    """The spend's statement is the COPY itself (what the analyst typed), not the SELECT inside it."""
    run(
        service,
        "COPY (SELECT region, COUNT(*) FROM visits GROUP BY region) TO STDOUT",
        **{"veil.epsilon": "0.5"},
    )
    (entry,) = service.ledger.history("alice", "clinic")
    assert entry.statement.upper().startswith("COPY ("), entry.statement
    assert "TO STDOUT" in entry.statement.upper()


# -- the federated count -----------------------------------------------------------------------------


def test_the_peer_is_asked_the_analysts_statement(service: QueryService, peer: RecordingPeer) -> None:
    """The other site answers the same statement: it is sent as the audit log records it."""
    run(service, FEDERATED, **{"veil.epsilon": "1"})
    (tree,) = service.parse(FEDERATED)
    assert peer.statements == [service.statement_text(tree)]


def test_a_joint_count_is_rounded_to_six_decimals_then_typed_as_the_count(
    service: QueryService,
    peer: RecordingPeer,
) -> None:
    """The joint totals (this site's count + the peer's, 0.6 above a whole number) are released in the
    count's integer type, truncated as before; both cells reach k, so the notice suppresses none."""
    outcome = run(service, FEDERATED, **{"veil.epsilon": "1"})
    ((_, (north, south)),) = peer.sent
    assert outcome.table is not None
    assert outcome.table.rows == [("north", int(north) + 1000), ("south", int(south) + 1000)]
    assert outcome.notices[-1].startswith(
        "federation hospitals: 2 of 2 cells reach k = 20 and show both sites' noisy counts summed; "
        "0 suppressed (NULL)."
    )


def test_a_federated_statement_that_is_no_count_is_refused_with_the_shape_hint(
    service: QueryService,
    peer: RecordingPeer,
) -> None:
    """A t-test over the federation is no count: refused, with the hint on the shape it answers."""
    with pytest.raises(UnsupportedQueryError, match="answers counts only") as refused:
        run(service, "SELECT veil_ttest(age, sex = 'male') FROM hospitals", **{"veil.epsilon": "1"})
    assert refused.value.hint == SHAPE_HINT
    assert spent(service) == 0.0 and peer.sent == []


def test_describe_of_a_federated_count_plans_its_columns_without_spending(
    service: QueryService,
    peer: RecordingPeer,
) -> None:
    (tree,) = service.parse(FEDERATED)
    described = service.describe(tree, principal=ALICE, settings=SessionSettings({"veil.epsilon": "1"}))
    assert described.columns is not None and described.outcome is None
    assert [(c.name, c.type) for c in described.columns] == [
        ("region", ColumnType.TEXT),
        ("count", ColumnType.INTEGER),
    ]
    assert spent(service) == 0.0 and peer.sent == []


# -- Describe of a UNION ALL -------------------------------------------------------------------------


def test_describe_of_a_union_all_gives_the_matched_columns_without_spending(service: QueryService) -> None:
    (tree,) = service.parse(
        "SELECT region AS k, COUNT(*) AS n FROM visits GROUP BY region UNION ALL "
        "SELECT sex, AVG(age) FROM visits GROUP BY sex"
    )
    described = service.describe(tree, principal=ALICE, settings=SessionSettings({"veil.epsilon": "1"}))
    assert described.columns is not None
    assert [(c.name, c.type) for c in described.columns] == [("k", ColumnType.TEXT), ("n", ColumnType.REAL)]
    assert spent(service) == 0.0


def test_describe_of_a_ttest_gives_its_columns_without_spending(service: QueryService) -> None:
    (tree,) = service.parse(TTEST)
    described = service.describe(tree, principal=ALICE, settings=SessionSettings({"veil.delta": "1e-6"}))
    assert described.columns is not None and described.outcome is None
    assert [c.name for c in described.columns] == ["t", "noise_sd", "epsilon", "delta", "mode"]
    assert spent(service) == 0.0


def test_describe_of_a_free_statement_runs_it_for_the_analyst(service: QueryService) -> None:
    """A free statement is run at Describe, as the analyst who asked, and its outcome kept for Execute."""
    run(service, "SELECT COUNT(*) FROM visits", **{"veil.epsilon": "0.75"})
    (tree,) = service.parse("SELECT current_user AS u, 2 AS n")
    described = service.describe(tree, principal=ALICE, settings=SessionSettings())
    assert described.outcome is not None and described.outcome.table is not None
    assert described.outcome.table.rows == [("alice", 2)]
    assert described.columns == described.outcome.table.columns
    assert [(c.name, c.type) for c in described.columns] == [
        ("u", ColumnType.TEXT),
        ("n", ColumnType.INTEGER),
    ]
    (budget,) = service.parse("SELECT dataset, spent_epsilon FROM veil.budget")
    shown = service.describe(budget, principal=ALICE, settings=SessionSettings())
    assert shown.outcome is not None and shown.outcome.table is not None
    assert shown.outcome.table.rows == [("clinic", 0.75)]


# -- UNION ALL ---------------------------------------------------------------------------------------


def test_a_union_alls_integer_part_is_sent_as_reals_without_order_by(service: QueryService) -> None:
    """The column is real (count and average): the count part's values are floats too, as typed."""
    outcome = run(
        service,
        "SELECT region, COUNT(*) FROM visits GROUP BY region UNION ALL SELECT sex, AVG(age) FROM visits GROUP BY sex",
        **{"veil.epsilon": "1"},
    )
    assert outcome.table is not None and outcome.table.columns[1].type is ColumnType.REAL
    assert [type(row[1]) for row in outcome.table.rows] == [float] * 4


def test_a_gaussian_union_all_splits_delta_over_its_parts_and_charges_the_statements_delta(
    service: QueryService,
) -> None:
    """Two Gaussian parts each spend half of δ, and the ledger is charged the statement's δ exactly — not
    the parts' δ rounded up, nor δ twice."""
    outcome = run(
        service,
        "SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*) FROM visits WHERE age > 30",
        **{"veil.epsilon": "1", "veil.delta": "1e-6", "veil.mechanism": "gaussian"},
    )
    assert "part 1: ε=0.5, δ=5e-07 (count(*) ε=0.5 δ=5e-07)" in outcome.notices[0]
    assert "part 2: ε=0.5, δ=5e-07 (count(*) ε=0.5 δ=5e-07)" in outcome.notices[0]
    assert outcome.charge is not None and (outcome.charge.epsilon, outcome.charge.delta) == (1.0, 1e-6)
    balance = service.ledger.balance("alice", "clinic")
    assert (balance.spent_epsilon, balance.spent_delta) == (1.0, 1e-6)


def test_a_union_alls_error_bounds_list_each_parts_quantities(service: QueryService) -> None:
    outcome = run(
        service,
        "SELECT COUNT(*), SUM(age) FROM visits UNION ALL SELECT COUNT(*), AVG(age) FROM visits WHERE age > 30",
        **{"veil.epsilon": "1", "veil.show_error": "on"},
    )
    assert re.fullmatch(
        r"95% error bounds of the noise: part 1: count\(\*\) ±[0-9.]+, sum\(age\) ±[0-9.]+; "
        r"part 2: count\(\*\) ±[0-9.]+, sum\(age\) ±[0-9.]+, count\(age\) ±[0-9.]+",
        outcome.notices[-1],
    ), outcome.notices


# -- a t-test that fails in the engine ---------------------------------------------------------------


def test_a_ttest_that_fails_in_the_engine_is_charged_and_says_what_it_spent(
    service: QueryService,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(sql: str) -> None:
        raise duckdb.IOException("the disk is gone")

    monkeypatch.setattr(service.backend, "execute", broken)
    with pytest.raises(BackendUnavailableError) as failed:
        run(service, TTEST, **{"veil.epsilon": "1", "veil.delta": "1e-6"})
    assert failed.value.detail == (
        "this failed query was charged ε=1, δ=1e-06 (t ε=0.9 δ=1e-06, noise s.d. estimate ε=0.1), "
        "since the engine had read private rows"
    )
    charge = failed.value.charge
    assert charge is not None and (charge.epsilon, charge.delta, charge.cached) == (1.0, 1e-6, False)
    assert charge.cached is False
    assert spent(service) == 1.0


# -- veil.budget and constants -----------------------------------------------------------------------


def test_a_failing_query_on_the_budget_view_says_what_failed(service: QueryService) -> None:
    with pytest.raises(InvalidParameterValueError) as refused:
        run(service, "SELECT CAST(dataset AS INTEGER) FROM veil.budget")
    assert refused.value.message == "could not answer the query on veil.budget"
    # the engine's reason, one line (it can only quote the analyst's own budget row)
    detail = refused.value.detail
    assert detail is not None and detail.startswith("Conversion Error") and "'clinic'" in detail, detail
    assert "\n" not in detail


def test_the_budget_views_computed_columns_are_named_as_postgresql_names_them(service: QueryService) -> None:
    outcome = run(service, "SELECT COUNT(*), MAX(granted_epsilon - spent_epsilon) FROM veil.budget")
    assert outcome.table is not None
    assert [c.name for c in outcome.table.columns] == ["count", "max"]
    assert outcome.table.rows == [(1, 10.0)]


def test_a_constant_query_is_sent_to_the_sandbox_in_its_dialect(service: QueryService) -> None:
    """``strpos`` is STRPOS on DuckDB; the generic dialect's STR_POSITION is no DuckDB function."""
    outcome = run(service, "SELECT strpos('abc', 'c') + 1 AS p")
    assert outcome.table is not None and outcome.table.rows == [(4,)]


def test_a_union_all_of_int4_columns_is_sent_as_int4(service: QueryService) -> None:
    """Parts whose column is int4 in every part keep the type PostgreSQL would send (a client such as
    node-postgres reads int4 as a number but int8 as a string)."""
    outcome = run(
        service,
        "SELECT CAST(COUNT(*) AS INTEGER) AS n FROM visits UNION ALL "
        "SELECT CAST(COUNT(*) AS INTEGER) FROM visits WHERE age > 30",
        **{"veil.epsilon": "1"},
    )
    assert outcome.table is not None
    assert [(c.type, c.type_oid) for c in outcome.table.columns] == [(ColumnType.INTEGER, INT4)]


def test_a_union_all_of_text_and_a_number_is_refused_before_spending(service: QueryService) -> None:
    with pytest.raises(
        DatatypeMismatchError, match="UNION types text and integer cannot be matched"
    ) as refused:
        run(
            service,
            "SELECT region, COUNT(*) FROM visits GROUP BY region UNION ALL "
            "SELECT COUNT(*), COUNT(*) FROM visits",
            **{"veil.epsilon": "1"},
        )
    assert refused.value.hint == "make column 1 (region) the same type in every part, e.g. with CAST"
    assert spent(service) == 0.0


def test_a_union_all_that_fails_in_the_engine_is_charged_and_audited_so(
    service: QueryService,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The failure after the first engine query carries the union's charge (the audit log records it)."""
    measured = service.backend.execute
    calls = []

    def fails_second(sql: str) -> object:
        calls.append(sql)
        if len(calls) > 1:
            raise duckdb.IOException("the disk is gone")
        return measured(sql)

    monkeypatch.setattr(service.backend, "execute", fails_second)
    with pytest.raises(BackendUnavailableError) as failed:
        run(
            service,
            "SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*) FROM visits WHERE age > 30",
            **{"veil.epsilon": "1"},
        )
    charge = failed.value.charge
    assert charge is not None and (charge.epsilon, charge.delta, charge.cached) == (1.0, 0.0, False)
    assert failed.value.detail is not None and failed.value.detail.startswith(
        "this failed query was charged ε=1 in 2 parts of a UNION ALL"
    )
    assert spent(service) == 1.0


def test_show_veil_budget_shows_the_analysts_own_budget(service: QueryService) -> None:
    run(service, "SELECT COUNT(*) FROM visits", **{"veil.epsilon": "0.25"})
    outcome = run(service, "SHOW veil.budget")
    assert outcome.tag == "SHOW" and outcome.table is not None and outcome.charge is None
    names = [c.name for c in outcome.table.columns]
    (row,) = outcome.table.rows
    shown = dict(zip(names, row, strict=True))
    assert (shown["dataset"], shown["granted_epsilon"], shown["spent_epsilon"]) == ("clinic", 10.0, 0.25)


@pytest.mark.parametrize(
    ("sql", "tag"), [("DEALLOCATE ALL", "DEALLOCATE ALL"), ("DEALLOCATE s1", "DEALLOCATE")]
)
def test_deallocate_is_answered_with_its_tag(service: QueryService, sql: str, tag: str) -> None:
    """Drivers send DEALLOCATE for their prepared statements; the service answers it without a table."""
    outcome = run(service, sql)
    assert (outcome.tag, outcome.table) == (tag, None)


# -- the answer cache --------------------------------------------------------------------------------


def test_without_the_answer_cache_a_repeated_query_is_charged_again(service: QueryService) -> None:
    """``answer_cache = false``: no stored answer is looked up (nor a key made); every answer is fresh and
    charged — also one re-planned with a bound remembered from an earlier choice."""
    service.dataset = dataclasses.replace(service.dataset, answer_cache=False)
    first = run(service, "SELECT COUNT(*) FROM visits", **{"veil.epsilon": "0.5"})
    again = run(service, "SELECT COUNT(*) FROM visits", **{"veil.epsilon": "0.5"})
    assert first.charge is not None and again.charge is not None and not again.charge.cached
    assert spent(service) == 1.0
    run(service, "SELECT COUNT(*) FROM ratings", **{"veil.epsilon": "1"})  # chooses and remembers the bound
    total = run(service, "SELECT SUM(stars) FROM ratings", **{"veil.epsilon": "1"})
    assert "remembered from an earlier choice" in total.notices[0]
    assert total.charge is not None and not total.charge.cached and spent(service) == 3.0


def test_answers_with_remembered_bounds_are_stored_apart_for_different_filters(service: QueryService) -> None:
    """Two sums over different filters of ratings, each with a bound remembered from a count under its
    own filter: the second is measured, not given the first's stored answer — the filter is only in the
    engine SQL, so the stored answer's key must hold it. Each user has 4 consecutive star values of 1–5,
    so both filters leave the same per-user counts, and with the same noise draws the same bound is
    chosen. Sums over 8,000 ratings: 22,400 above one star, 16,000 below five."""
    answers, notices = {}, set()
    for where in ("stars > 1", "stars < 5"):
        service.rng = random.Random(7)  # the same draws for both choices of the bound
        run(service, f"SELECT COUNT(*) FROM ratings WHERE {where}", **{"veil.epsilon": "1"})
        total = run(service, f"SELECT SUM(stars) FROM ratings WHERE {where}", **{"veil.epsilon": "1"})
        assert total.charge is not None and not total.charge.cached
        assert total.table is not None
        ((answers[where],),) = total.table.rows
        notices.add(total.notices[0].split("; ")[0])
    (notice,) = notices  # the same bound, remembered for both
    assert "remembered from an earlier choice" in notice
    assert abs(answers["stars > 1"] - 22400) < 1000 and abs(answers["stars < 5"] - 16000) < 1000
    assert spent(service) == 4.0


# -- session commands --------------------------------------------------------------------------------


def test_set_of_a_reported_setting_tells_the_client_its_new_value(service: QueryService) -> None:
    """The session sends a ParameterStatus for application_name (drivers and pgAdmin show it); a Veil
    setting is not reported."""
    settings = SessionSettings()
    (named,) = service.parse("SET application_name = 'report'")
    outcome = service.run(named, principal=ALICE, settings=settings)
    assert (outcome.tag, outcome.parameter_changed) == ("SET", ("application_name", "report"))
    (epsilon,) = service.parse("SET veil.epsilon = 0.5")
    assert service.run(epsilon, principal=ALICE, settings=settings).parameter_changed is None


def test_reset_of_one_setting_restores_its_default_and_show_answers_with_its_tag(
    service: QueryService,
) -> None:
    settings = SessionSettings({"veil.epsilon": "0.5", "veil.round": "2"})
    (reset,) = service.parse("RESET veil.epsilon")
    assert service.run(reset, principal=ALICE, settings=settings).tag == "RESET"
    (show,) = service.parse("SHOW veil.epsilon")
    shown = service.run(show, principal=ALICE, settings=settings)
    assert shown.tag == "SHOW" and shown.table is not None
    assert shown.table.rows == [(repr(service.dataset.default_epsilon),)]
    assert settings.get("veil.round") == "2", "only the named setting is reset"
