"""The answer cache's keys, the stored noisy table and a plan's zCDP cost, pinned field by field.

Two queries may share a stored noisy answer only if everything that shapes the noise is the same
(release/cache_key.py): a key that ignored one of those fields would hand one query's noise to
another, uncharged. Each test below changes exactly one field of a real plan and asserts the digest
changes with it (and that everything else about the plan leaves it alone). Found open by ``make
mutants`` (docs/testing.md).
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import hashlib
import json
import math

import pytest
from sqlglot import exp

from proxy.analysis.parse import parse_statements
from proxy.analysis.shape import QueryShape
from proxy.analysis.statements import PrivateQuery, classify
from proxy.analysis.top_k import TopK
from proxy.config import ColumnType
from proxy.release.apply import ReleasedTable, ResultColumn
from proxy.release.cache_key import (
    BOUND_CHOICE_PREFIX,
    answer_digest,
    bound_choice_digest,
    decode_bound_choice,
    encode_bound_choice,
)
from proxy.release.cost import release_cost
from proxy.release.plan import ReleasePlan, price_query
from proxy.release.stored import decode_table, encode_table
from proxy.release.top_k import TopKPlan, TopKSelection
from tests.unit.proxy.policy_fixture import clinic_policy

GROUPED = "SELECT region, COUNT(*), SUM(cost) FROM visits GROUP BY region"
SQL = ("SELECT 1 FROM visits",)


def shape_for(sql: str) -> QueryShape:
    statement = classify(parse_statements(sql)[0], clinic_policy())
    assert isinstance(statement, PrivateQuery)
    return statement.shape


def plan_for(sql: str = GROUPED, **options: object) -> ReleasePlan:
    return price_query(shape_for(sql), epsilon=1.0, **options)  # type: ignore[arg-type]


def with_key(plan: ReleasePlan, **changes: object) -> ReleasePlan:
    """The plan with its first group key changed (and nothing else)."""
    (key, *rest) = plan.shape.group_keys
    shape = dataclasses.replace(plan.shape, group_keys=(dataclasses.replace(key, **changes), *rest))
    return dataclasses.replace(plan, shape=shape)


def with_table(plan: ReleasePlan, **changes: object) -> ReleasePlan:
    shape = dataclasses.replace(plan.shape, table=dataclasses.replace(plan.shape.table, **changes))
    return dataclasses.replace(plan, shape=shape)


# -- answer_digest -------------------------------------------------------------------------------------


def test_the_same_plan_and_engine_sql_give_the_same_hex_digest() -> None:
    """Deterministic (a repeat must find its stored answer) and a SHA-256 hex digest, no prefix."""
    digest = answer_digest(plan_for(), SQL)
    assert digest == answer_digest(plan_for(), SQL)
    assert len(digest) == 64 and int(digest, 16) >= 0
    assert not digest.startswith(BOUND_CHOICE_PREFIX)


def test_the_digest_is_the_sha256_of_its_parts_joined_by_the_unit_separator() -> None:
    """The parts are joined by a character that no SQL text or repr contains, so two different lists of
    parts never join to the same text: ("a", "b c") and ("a b", "c") must not share an answer."""
    plan = plan_for()
    keys = [(key.label, key.values, key.thresholded) for key in plan.shape.group_keys]
    parts = (
        *SQL,
        repr(plan.measurements),
        repr(plan.shape.aggregates),
        repr(keys),
        repr((plan.epsilon, plan.delta, plan.threshold, plan.threshold_delta, plan.bound_epsilon)),
        repr(plan.shape.table),
        repr((plan.shape.top_k, None)),
    )
    assert answer_digest(plan, SQL) == hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
    assert answer_digest(plan, ("a", "b c")) != answer_digest(plan, ("a b", "c"))


@pytest.mark.parametrize(
    "engine_sql",
    [("SELECT 2 FROM visits",), ("SELECT 1 FROM visits", "SELECT 3"), ()],
)
def test_the_digest_follows_the_engine_sql(engine_sql: tuple[str, ...]) -> None:
    assert answer_digest(plan_for(), engine_sql) != answer_digest(plan_for(), SQL)


@pytest.mark.parametrize(
    "change",
    [
        {"epsilon": 2.0},
        {"delta": 1e-6},
        {"threshold": 7.5},
        {"threshold_delta": 1e-7},
        {"bound_epsilon": 0.1},
    ],
)
def test_the_digest_follows_every_charged_and_noise_parameter(change: dict[str, object]) -> None:
    """ε, δ, τ, δ_τ and the bound's ε each change the noise drawn or what it is charged as."""
    plan = plan_for()
    assert answer_digest(dataclasses.replace(plan, **change), SQL) != answer_digest(plan, SQL)


def test_the_digest_follows_the_measurements_and_the_aggregates() -> None:
    plan = plan_for()
    (first, *rest) = plan.measurements
    louder = dataclasses.replace(plan, measurements=(dataclasses.replace(first, sensitivity=9.0), *rest))
    assert answer_digest(louder, SQL) != answer_digest(plan, SQL)
    fewer = dataclasses.replace(plan.shape, aggregates=plan.shape.aggregates[:1])
    assert answer_digest(dataclasses.replace(plan, shape=fewer), SQL) != answer_digest(plan, SQL)


@pytest.mark.parametrize(
    "change",
    [{"values": ("north",)}, {"thresholded": True}, {"expression": exp.column("sex")}],
)
def test_the_digest_follows_each_group_key_label_domain_and_gate(change: dict[str, object]) -> None:
    """The keys' labels, their public values and whether they come from the data all shape the table."""
    plan = plan_for()
    assert answer_digest(with_key(plan, **change), SQL) != answer_digest(plan, SQL)


def test_the_digest_follows_the_table_policy() -> None:
    plan = plan_for()
    assert answer_digest(with_table(plan, max_contributions=4), SQL) != answer_digest(plan, SQL)


def test_the_digest_follows_the_top_k_and_its_selection() -> None:
    plan = plan_for()
    ranked = dataclasses.replace(plan.shape, top_k=TopK(count=0, k=1))
    top = dataclasses.replace(plan, shape=ranked)
    assert answer_digest(top, SQL) != answer_digest(plan, SQL)
    selection = TopKSelection(k=1, epsilon=0.5, candidates=2, partitions=1)
    selected = TopKPlan(ranked, plan.measurements, plan.epsilon, selection=selection)
    assert answer_digest(selected, SQL) != answer_digest(top, SQL)
    other = TopKPlan(
        ranked, plan.measurements, plan.epsilon, selection=dataclasses.replace(selection, epsilon=0.25)
    )
    assert answer_digest(other, SQL) != answer_digest(selected, SQL)


# -- bound_choice_digest -------------------------------------------------------------------------------

RATINGS = "SELECT COUNT(*) FROM ratings"
RATED = "SELECT stars, COUNT(*) FROM ratings GROUP BY stars"


def test_a_bound_choice_key_is_prefixed_and_ignores_what_the_query_measures() -> None:
    """A later query with the same filters, grouping and ε reuses the remembered bound whatever its
    aggregates: the key has the ``bound:`` prefix and a SHA-256 of the rule, the histogram SQL, the keys
    and (ε, bound ε, table name, cap, hint)."""
    plan = plan_for(RATINGS)
    digest = bound_choice_digest(plan, "H")
    assert digest.startswith("bound:") and len(digest) == len("bound:") + 64
    table = plan.shape.table
    parts = (
        "v1",
        "H",
        repr([]),
        repr(
            (plan.epsilon, plan.bound_epsilon, table.name, table.max_contributions, table.contribution_hint)
        ),
    )
    assert digest == "bound:" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
    other = plan_for("SELECT SUM(stars) FROM ratings")
    assert bound_choice_digest(other, "H") == digest


@pytest.mark.parametrize(
    "change",
    [
        lambda plan: with_table(plan, name="ratings2"),
        lambda plan: with_table(plan, max_contributions=7),
        lambda plan: with_table(plan, contribution_hint=12),
        lambda plan: dataclasses.replace(plan, epsilon=2.0),
        lambda plan: dataclasses.replace(plan, bound_epsilon=0.3),
        lambda plan: with_key(plan, values=(1, 2)),
        lambda plan: with_key(plan, thresholded=not plan.shape.group_keys[0].thresholded),
        lambda plan: with_key(plan, expression=exp.column("user_id")),
    ],
)
def test_a_bound_choice_key_follows_the_table_epsilon_and_grouping(change) -> None:  # type: ignore[no-untyped-def]
    plan = plan_for(RATED, delta=1e-6)
    assert bound_choice_digest(change(plan), "H") != bound_choice_digest(plan, "H")
    assert bound_choice_digest(plan, "H2") != bound_choice_digest(plan, "H")


def test_a_remembered_bound_is_stored_with_what_its_choice_spent_and_aimed_at() -> None:
    stored = encode_bound_choice(17, selection_epsilon=0.03, target=250)
    assert json.loads(stored) == {"max_contributions": 17, "selection_epsilon": 0.03, "target": 250}
    assert decode_bound_choice(stored) == 17
    assert decode_bound_choice('{"max_contributions": 4.0}') == 4


# -- the stored noisy table ----------------------------------------------------------------------------


def test_a_noisy_table_round_trips_with_its_types() -> None:
    """What the cache hands out again is the very same table: dates and timestamps come back as such,
    an integral REAL as a float, a NUMERIC as a float, NULL as NULL, and a key "(other)" stays text."""
    columns = (
        ResultColumn("d", ColumnType.DATE),
        ResultColumn("t", ColumnType.TIMESTAMP),
        ResultColumn("r", ColumnType.REAL),
        ResultColumn("i", ColumnType.INTEGER),
        ResultColumn("s", ColumnType.TEXT),
    )
    day, moment = datetime.date(2024, 2, 29), datetime.datetime(2024, 2, 29, 13, 5, 7)
    table = ReleasedTable(
        columns,
        [
            (day, moment, 3, 4, "a"),
            ("(other)", "(other)", decimal.Decimal("2.5"), None, None),
            (None, None, None, -1, "9"),
        ],
    )
    text = encode_table(table)
    assert json.loads(text) == {
        "columns": [["d", "date"], ["t", "timestamp"], ["r", "real"], ["i", "integer"], ["s", "text"]],
        "rows": [
            ["2024-02-29", "2024-02-29T13:05:07", 3, 4, "a"],
            ["(other)", "(other)", 2.5, None, None],
            [None, None, None, -1, "9"],
        ],
    }
    assert " " not in text, "compact separators"
    decoded = decode_table(text)
    assert decoded.columns == columns
    assert decoded.rows == [
        (day, moment, 3.0, 4, "a"),
        ("(other)", "(other)", 2.5, None, None),
        (None, None, None, -1, "9"),
    ]
    assert [type(value) for value in decoded.rows[0]] == [datetime.date, datetime.datetime, float, int, str]


def test_a_stored_row_of_the_wrong_width_is_refused() -> None:
    """zip(strict=True): a damaged stored answer is not silently cut to fit."""
    text = json.dumps({"columns": [["a", "integer"], ["b", "integer"]], "rows": [[1]]})
    with pytest.raises(ValueError):
        decode_table(text)


# -- release_cost --------------------------------------------------------------------------------------


def test_rho_of_laplace_measurements_is_the_sum_of_their_epsilon_squared_halves() -> None:
    """ε-DP is ε²/2-zCDP; the DP choice of L is one more ε-DP step; rounded up by one ulp."""
    plan = dataclasses.replace(plan_for(), bound_epsilon=0.2)
    cost = release_cost(plan)
    exact = math.fsum([m.epsilon**2 / 2 for m in plan.measurements] + [0.2**2 / 2])
    assert cost.rho == math.nextafter(exact, math.inf)
    assert (cost.epsilon, cost.delta, cost.rho_delta) == (plan.epsilon, plan.delta, 0.0)


def test_rho_of_gaussian_measurements_is_sensitivity_over_sigma_squared_half() -> None:
    plan = plan_for(delta=1e-6, gaussian=True)
    assert all(m.gaussian for m in plan.measurements)
    exact = math.fsum((m.sensitivity / m.gaussian_sigma()) ** 2 / 2 for m in plan.measurements)
    cost = release_cost(plan)
    assert cost.rho == math.nextafter(exact, math.inf)
    assert cost.rho != math.fsum(m.epsilon**2 / 2 for m in plan.measurements)
    assert (cost.delta, cost.rho_delta) == (1e-6, 0.0)


def test_a_thresholded_release_keeps_delta_tau_outside_rho_and_only_then() -> None:
    plan = plan_for("SELECT note, COUNT(*) FROM visits GROUP BY note", delta=1e-6)
    assert plan.threshold is not None
    assert release_cost(plan).rho_delta == plan.threshold_delta > 0
    unthresholded = dataclasses.replace(plan, threshold=None)
    assert release_cost(unthresholded).rho_delta == 0.0


def test_a_top_k_selection_adds_its_rho_and_a_plain_plan_none() -> None:
    plan = plan_for()
    selection = TopKSelection(k=2, epsilon=0.5, candidates=4, partitions=1)
    ranked = dataclasses.replace(plan.shape, top_k=TopK(count=0, k=2))
    top = TopKPlan(ranked, plan.measurements, plan.epsilon, selection=selection)
    base = math.fsum(m.epsilon**2 / 2 for m in plan.measurements)
    assert release_cost(top).rho == math.nextafter(math.fsum([base, selection.rho]), math.inf)
    assert selection.rho == pytest.approx(2 * 0.25**2 / 2)
    unselected = TopKPlan(ranked, plan.measurements, plan.epsilon, selection=None)
    assert release_cost(unselected).rho == math.nextafter(base, math.inf)
