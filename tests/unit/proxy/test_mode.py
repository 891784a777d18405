"""MODE() WITHIN GROUP over a public domain: pricing, the engine histogram, release, the query service
on DuckDB and ``veil explain`` (data: tests/unit/proxy/donors_fixture.py)."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from mechanisms.mode import mode_count_gap_bound
from proxy.analysis.parse import parse_statements
from proxy.analysis.quantities import QuantityKind
from proxy.analysis.shape import QueryShape
from proxy.analysis.statements import PrivateQuery, classify
from proxy.backends.duckdb import DuckDBBackend
from proxy.config import ColumnType, DatasetPolicy
from proxy.query.explain import explain_query
from proxy.query.planning import collect_histograms, histogram_queries, prepare_release
from proxy.query.service import Principal, QueryService
from proxy.release.apply import release
from proxy.release.plan import ReleasePlan, price_query
from proxy.rewrite.bound_contributions import WEIGHT_UNIT
from proxy.settings import SessionSettings
from proxy.wire.scram import make_scram_verifier
from tests.service_fixture import serving
from tests.unit.proxy.donors_fixture import donors_policy, duckdb_donors

K = WEIGHT_UNIT
GROUPED = (
    "SELECT region, MODE() WITHIN GROUP (ORDER BY blood) AS blood, COUNT(*) AS n,"
    " MODE() WITHIN GROUP (ORDER BY dose) AS dose, MODE() WITHIN GROUP (ORDER BY stars) AS stars"
    " FROM donors GROUP BY region ORDER BY region"
)


def shape_for(sql: str, dataset: DatasetPolicy) -> QueryShape:
    statement = classify(parse_statements(sql)[0], dataset)
    assert isinstance(statement, PrivateQuery)
    return statement.shape


def plan_for(sql: str, *, epsilon: float = 1.0, **options: object) -> ReleasePlan:
    return price_query(shape_for(sql, donors_policy(Path("/nonexistent"))), epsilon=epsilon, **options)  # type: ignore[arg-type]


@pytest.fixture
def bank(tmp_path: Path) -> tuple[DatasetPolicy, Path]:
    return donors_policy(tmp_path), duckdb_donors(tmp_path)


# --- pricing ---------------------------------------------------------------------------------------------


def test_mode_is_one_monotone_exponential_selection_with_its_share_of_epsilon() -> None:
    plan = plan_for(
        "SELECT region, MODE() WITHIN GROUP (ORDER BY blood), COUNT(*) FROM donors GROUP BY region"
    )
    mode, count = plan.measurements
    assert mode.quantity.kind is QuantityKind.MODE and mode.quantity.label == "mode(blood)"
    assert mode.mechanism == "exponential (permute-and-flip, monotone)"
    assert (mode.epsilon, count.epsilon) == (0.5, 0.5)
    assert (mode.sensitivity, mode.weight) == (2 * K, K), "a donor's weights sum to at most L·K"
    assert plan.scalar_measurements == (count,) and plan.mode_measurements == (mode,)


def test_mode_error_bound_is_the_count_gap_in_rows_over_all_cells() -> None:
    plan = plan_for("SELECT region, MODE() WITHIN GROUP (ORDER BY blood) FROM donors GROUP BY region")
    (mode,) = plan.measurements
    # (L/ε)·ln(|values|·cells/0.05) = 2·ln(3·2/0.05) = 9.57 rows
    assert mode.error_bound(cells=2) == pytest.approx(2 * math.log(120), rel=1e-12)
    assert mode.error_bound(cells=2) == mode_count_gap_bound(
        epsilon=1.0, max_contributions=2, candidates=3, outputs=2
    )


def test_mode_takes_no_delta_in_gaussian_mode() -> None:
    plan = plan_for(
        "SELECT MODE() WITHIN GROUP (ORDER BY blood), COUNT(*) FROM donors", gaussian=True, delta=1e-6
    )
    mode, count = plan.measurements
    assert (mode.gaussian, mode.delta) == (False, 0.0)
    assert (count.gaussian, count.delta) == (True, 1e-6), "the one noisy quantity takes all of δ"


def test_a_mode_alone_in_gaussian_mode_charges_no_delta() -> None:
    plan = plan_for("SELECT MODE() WITHIN GROUP (ORDER BY blood) FROM donors", gaussian=True, delta=1e-6)
    assert plan.loss == PrivacyLoss(1.0, 0.0), "no Gaussian measurement spends δ, so none is charged"


# --- release -----------------------------------------------------------------------------------------------


def test_release_chooses_each_cells_majority_and_answers_an_empty_cell() -> None:
    plan = plan_for("SELECT region, MODE() WITHIN GROUP (ORDER BY blood) FROM donors GROUP BY region")
    histograms = {"mode(blood)": {("north",): [400 * K, 400 * K, 1200 * K]}}  # no row in the south
    answers = [release(plan, [], rng=random.Random(seed), histograms=histograms).rows for seed in range(60)]
    assert all(rows[0] == ("north", "O") for rows in answers), "gap 800 rows: wrong w.p. <= 2·e^-400"
    assert {rows[1][1] for rows in answers} == {"A", "B", "O"}, "an empty cell is a uniform public value"


def test_the_mode_column_has_the_type_of_its_column() -> None:
    table = release(plan_for(GROUPED), [], rng=random.Random(1))
    types = [column.type for column in table.columns]
    assert types == [
        ColumnType.TEXT,
        ColumnType.TEXT,
        ColumnType.INTEGER,
        ColumnType.REAL,
        ColumnType.INTEGER,
    ]
    assert all(row[3] in (0.5, 1.5, 2.5) and row[4] in range(1, 6) for row in table.rows)


# --- the engine histogram ----------------------------------------------------------------------------------


def test_histogram_bounds_each_donor_and_drops_values_outside_the_domain(
    bank: tuple[DatasetPolicy, Path],
) -> None:
    dataset, path = bank
    plan, _ = prepare_release(
        shape_for("SELECT MODE() WITHIN GROUP (ORDER BY blood) FROM donors", dataset),
        epsilon=1.0,
        dialect="duckdb",
    )
    with duckdb.connect(str(path), read_only=True) as connection:
        rows = connection.execute(histogram_queries(plan, dialect="duckdb")["mode(blood)"]).fetchall()
    # O: 1,200 donors × 2 visits; A: 400 × 2; B: 400 × 2 plus the heavy donor's 50 visits, weighted
    # ⌊2·K/50⌋ = 100 each (5,000 <= 2·K); 'AB' and NULL count for no value
    assert dict(rows) == {"O": 2400 * K, "A": 800 * K, "B": 800 * K + 50 * 100}


def test_engine_values_are_typed_as_their_column_before_lookup(bank: tuple[DatasetPolicy, Path]) -> None:
    dataset, path = bank
    sql = "SELECT region, MODE() WITHIN GROUP (ORDER BY dose) FROM donors GROUP BY region"
    plan, _ = prepare_release(shape_for(sql, dataset), epsilon=1.0, dialect="duckdb")
    with duckdb.connect(str(path), read_only=True) as connection:
        raw = connection.execute(histogram_queries(plan, dialect="duckdb")["mode(dose)"]).fetchall()
        histograms = collect_histograms(
            plan, execute=lambda text: ([], connection.execute(text).fetchall()), dialect="duckdb"
        )
    assert any(isinstance(row[1], Decimal) for row in raw), "DuckDB's DECIMAL arrives as Decimal"
    # doses 0.5, 1.5, 2.5 in policy order (visit i is in the north when (i // 2) is even, has 0.5 when
    # i % 3 = 0), plus the heavy donor's 2.5 in the north
    north = [i for i in range(4000) if (i // 2) % 2 == 0]
    low = sum(i % 3 == 0 for i in north)
    assert histograms["mode(dose)"][("north",)] == [low * K, (2000 - low) * K, 50 * 100]
    assert sum(histograms["mode(dose)"][("south",)]) == 2000 * K


# --- the query service and explain -------------------------------------------------------------------------


@pytest.fixture
def service(bank: tuple[DatasetPolicy, Path], tmp_path: Path) -> Iterator[QueryService]:
    dataset, path = bank
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    ledger.add_analyst("alice", make_scram_verifier("secret", iterations=1))
    ledger.grant("alice", "bank", PrivacyLoss(2.0))
    with serving(dataset, DuckDBBackend(path), ledger, seed=7) as service:
        yield service


def test_query_service_answers_modes_per_group_beside_other_aggregates(service: QueryService) -> None:
    settings = SessionSettings({"veil.epsilon": "1", "veil.show_error": "on"})
    (tree,) = service.parse(GROUPED)
    outcome = service.run(tree, principal=Principal("alice"), settings=settings)
    assert outcome.table is not None
    assert [(region, blood, dose, stars) for region, blood, _, dose, stars in outcome.table.rows] == [
        ("north", "O", 1.5, 3),
        ("south", "O", 1.5, 3),
    ]  # each gap is >= 660 rows; at ε/4 per mode, except w.p. 1e-9, at most (2/0.25)·ln(5·2/1e-9) = 184
    north_visits = outcome.table.rows[0][2]
    assert abs(north_visits - 2002) <= 8 * 20, "count: scale L/(ε/4) = 8, an e^-20 tail at 20 scales"
    assert "mode(blood) ε=0.25" in outcome.notices[0]
    assert service.ledger.balance("alice", "bank").spent_epsilon == pytest.approx(1.0)
    # (2/0.25)·ln(3·2/0.05) = 38.3 rows for blood and doses (3 values), (2/0.25)·ln(5·2/0.05) = 42.39 for stars
    assert "mode(blood) ±38.3" in outcome.notices[1] and "mode(stars) ±42.39" in outcome.notices[1]


def test_explain_shows_the_mode_with_its_mechanism_share_and_histogram(
    bank: tuple[DatasetPolicy, Path],
) -> None:
    dataset, _ = bank
    sandbox = DuckDBBackend.sandbox()
    try:
        explanation = explain_query(
            dataset,
            "SELECT region, MODE() WITHIN GROUP (ORDER BY blood), AVG(age) FROM donors GROUP BY region",
            backend=sandbox,
            epsilon=0.9,
        )
    finally:
        sandbox.close()
    mode = explanation.measurements[0]
    assert (mode.quantity, mode.mechanism) == ("mode(blood)", "exponential (permute-and-flip, monotone)")
    assert mode.epsilon == pytest.approx(0.3) and mode.sensitivity == 2 * K
    assert mode.error_bound_95 == pytest.approx(2 / mode.epsilon * math.log(3 * 2 / 0.05))
    assert "_dp_value_blood IN ('A', 'B', 'O')" in explanation.histogram_sql["mode(blood)"]
