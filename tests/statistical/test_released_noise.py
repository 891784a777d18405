"""Every released quantity is random, with the variance its mechanism promises (issue 21).

Accuracy tests pass with no noise at all, so they cannot tell a quantity released exactly (the sum of
squares behind VAR/STDDEV, say) from a noisy one. Here, per mechanism and per aggregate:

* the released aggregate, over DRAWS seeded releases of one exact table, is compared with a reference
  sample: the same post-processing applied to the exact quantities plus noise drawn *by this test* from
  each measurement's promised law — discrete Laplace of scale Δ/ε on integer quantities, Laplace of scale
  Δ/ε on real ones, N(0, σ²) with the measurement's σ for Gaussian noise. The two samples must have
  the same spread (Brown–Forsythe test) and the same location (a
  Mann–Whitney test) — each check fails when its two-sided p-value is below 1e-6, which under a correct
  release happens with probability 1e-6 (asymptotically; the tests are distribution-free or robust);
* where the aggregate *is* the quantity (COUNT, SUM), its sample variance is checked against the promised
  variance itself: 2(Δ/ε)² for Laplace, σ² for Gaussian; the sample variance of DRAWS Laplace draws has
  relative standard error sqrt(5/DRAWS) (kurtosis 6), Gaussian sqrt(2/DRAWS); the tolerance is 4.89 of
  those (two-sided 1e-6).

The reference's post-processing is Veil's own (``release`` at ε = 10¹², where its noise is below 10⁻⁹ of
the reference noise): the aggregate formulas are checked by the accuracy tests, this test checks the noise.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import duckdb
import numpy as np
import pytest
from scipy.stats import levene, mannwhitneyu

from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import PrivateQuery, classify
from proxy.config import DatasetPolicy, parse_config
from proxy.query.planning import prepare_release
from proxy.release.apply import release
from proxy.release.plan import Measurement, ReleasePlan

pytestmark = pytest.mark.slow

DRAWS = 2000
FALSE_FAILURE = 1e-6
Z = 4.89  # two-sided normal quantile for 1e-6
NOISELESS = 1e12  # the reference's ε: post-processing only

POLICY = """
[datasets.d]
path = "d.duckdb"
[datasets.d.tables.people]
privacy_unit = "row"
[datasets.d.tables.people.columns]
age = { type = "integer", lower = -80, upper = 20 }
cost = { type = "real", lower = -300.5, upper = 120.25 }
[datasets.d.tables.visits]
privacy_unit = "pid"
max_contributions = 2
[datasets.d.tables.visits.columns]
pid = { type = "integer" }
cost = { type = "real", lower = -300.5, upper = 120.25 }
"""
# |lower| > |upper| on purpose: the sensitivity comes from the lower bound
AGGREGATES = (
    "COUNT(*)",
    "COUNT(cost)",
    "SUM(cost)",
    "SUM(-cost)",
    "AVG(cost)",
    "VAR_POP(cost)",
    "VAR_SAMP(cost)",
    "STDDEV_POP(cost)",
    "STDDEV_SAMP(-cost)",
    "COVAR_POP(cost, age)",
    "COVAR_SAMP(age, cost)",
    "CORR(cost, age)",
    "REGR_SLOPE(cost, age)",
    "REGR_INTERCEPT(cost, age)",
    "REGR_SXX(cost, age)",
    "REGR_AVGY(cost, age)",
)
PAIRS = ("COVAR", "CORR", "REGR")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[DatasetPolicy, duckdb.DuckDBPyConnection]:
    """300 people (one row each) and 300 patients with 1–3 visits, values spread inside their bounds."""
    rng = np.random.default_rng(21)
    connection = duckdb.connect()
    connection.execute("CREATE TABLE people (age INTEGER, cost DOUBLE)")
    ages = rng.integers(-80, 21, 300)
    costs = np.round(-90 + 0.9 * ages + rng.normal(0, 25, 300), 2).clip(-300.5, 120.25)
    connection.executemany(
        "INSERT INTO people VALUES (?, ?)", list(zip(ages.tolist(), costs.tolist(), strict=True))
    )
    connection.execute("CREATE TABLE visits (pid INTEGER, cost DOUBLE)")
    visits = [(pid, float(c)) for pid in range(300) for c in rng.normal(-60, 40, rng.integers(1, 4)).round(2)]
    connection.executemany("INSERT INTO visits VALUES (?, ?)", visits)
    policy = parse_config(POLICY, path=Path("/nonexistent/veil.toml")).dataset("d")
    assert policy is not None
    return policy, connection


def plan_and_exact(
    sql: str, dataset: tuple[DatasetPolicy, duckdb.DuckDBPyConnection], *, epsilon: float, gaussian: bool
) -> tuple[ReleasePlan, list[tuple[object, ...]]]:
    policy, connection = dataset
    statement = classify(parse_statements(sql)[0], policy)
    assert isinstance(statement, PrivateQuery)
    plan, engine_sql = prepare_release(
        statement.shape, epsilon=epsilon, delta=1e-6 if gaussian else 0.0, dialect="duckdb", gaussian=gaussian
    )
    assert engine_sql is not None
    return plan, connection.execute(engine_sql).fetchall()


def promised_noise(measurement: Measurement, rng: np.random.Generator) -> float:
    """One draw from the law the measurement's mechanism promises."""
    if measurement.gaussian:
        sigma = measurement.gaussian_sigma()
        return (
            float(round(rng.normal(0, sigma))) if measurement.exact_integer else float(rng.normal(0, sigma))
        )
    scale = measurement.sensitivity / measurement.epsilon
    if measurement.exact_integer:  # discrete Laplace: the difference of two geometric variables
        p = -math.expm1(-1 / scale)
        return float(rng.geometric(p) - rng.geometric(p))
    return float(rng.laplace(0, scale))


def released(plan: ReleasePlan, exact: list[tuple[object, ...]]) -> np.ndarray:
    values = [release(plan, exact, rng=random.Random(seed)).rows[0][0] for seed in range(DRAWS)]
    return np.array([np.nan if v is None else float(v) for v in values])  # type: ignore[arg-type]


def reference(plan: ReleasePlan, noiseless: ReleasePlan, exact: list[tuple[object, ...]]) -> np.ndarray:
    rng = np.random.default_rng(2026)
    (row,) = exact
    values = []
    for seed in range(DRAWS):
        noisy = tuple(
            (float(value) if value is not None else 0.0) + promised_noise(m, rng)  # type: ignore[arg-type]
            for value, m in zip(row, plan.scalar_measurements, strict=True)
        )
        value = release(noiseless, [noisy], rng=random.Random(seed)).rows[0][0]
        values.append(np.nan if value is None else float(value))  # type: ignore[arg-type]
    return np.array(values)


def table_for(aggregate: str) -> str:
    return "people" if aggregate.startswith(PAIRS) or "*" in aggregate else "visits"


@pytest.mark.parametrize("gaussian", [False, True], ids=["laplace", "gaussian"])
@pytest.mark.parametrize("aggregate", AGGREGATES)
def test_each_released_aggregate_carries_the_noise_of_every_quantity(
    aggregate: str, gaussian: bool, dataset: tuple[DatasetPolicy, duckdb.DuckDBPyConnection]
) -> None:
    sql = f"SELECT {aggregate} FROM {table_for(aggregate)}"
    plan, exact = plan_and_exact(sql, dataset, epsilon=1.0, gaussian=gaussian)
    noiseless, _ = plan_and_exact(sql, dataset, epsilon=NOISELESS, gaussian=False)
    ours, theirs = released(plan, exact), reference(plan, noiseless, exact)
    assert np.isnan(ours).mean() == pytest.approx(np.isnan(theirs).mean(), abs=Z * math.sqrt(0.5 / DRAWS))
    ours, theirs = ours[~np.isnan(ours)], theirs[~np.isnan(theirs)]
    assert np.std(ours) > 0, "the released value must vary with the seed"
    assert levene(ours, theirs, center="median").pvalue > FALSE_FAILURE, (np.std(ours), np.std(theirs))
    assert mannwhitneyu(ours, theirs).pvalue > FALSE_FAILURE, (np.median(ours), np.median(theirs))


@pytest.mark.parametrize("gaussian", [False, True], ids=["laplace", "gaussian"])
@pytest.mark.parametrize("aggregate", ["COUNT(*)", "COUNT(cost)", "SUM(cost)", "SUM(-cost)"])
@pytest.mark.parametrize("table", ["people", "visits"])
def test_a_released_count_or_sum_has_the_promised_variance(
    aggregate: str, table: str, gaussian: bool, dataset: tuple[DatasetPolicy, duckdb.DuckDBPyConnection]
) -> None:
    plan, exact = plan_and_exact(f"SELECT {aggregate} FROM {table}", dataset, epsilon=1.0, gaussian=gaussian)
    (measurement,) = plan.scalar_measurements
    if gaussian:
        promised, relative_error = measurement.gaussian_sigma() ** 2, math.sqrt(2 / DRAWS)
    else:
        promised, relative_error = (
            2 * (measurement.sensitivity / measurement.epsilon) ** 2,
            math.sqrt(5 / DRAWS),
        )
    variance = float(np.var(released(plan, exact), ddof=1))
    assert abs(variance / promised - 1) <= Z * relative_error, (variance, promised)
