"""Sensitivity of every aggregate over bounds of either sign, as a property of the whole pipeline (issue 21).

For random bounds (``|lower| > |upper|`` as often as not, both negative, both positive), a random
contribution bound L and a random aggregate (SUM, AVG, VAR, STDDEV, COUNT, CORR, COVAR, REGR_* of
columns and of expressions such as ``-cost``), the engine query Veil generates is run on a random
dataset D and on D plus one person with up to 2·L rows of extreme (even out-of-bounds) values. Every
noisy quantity of the plan — its whole vector over the group cells — must move by at most the
sensitivity its noise is calibrated on: ℓ1 for Laplace, ℓ2 for Gaussian. And for SUM the bound is tight:
L·max(|lower|, |upper|), which a person with L rows at the larger-magnitude bound reaches.

Quantiles and modes are selections from histograms of weighted row counts, sensitivity L·K in histogram
units whatever the bounds; tests/unit/proxy/test_release.py checks those.
"""

from __future__ import annotations

import math
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.analysis.parse import parse_statements
from proxy.analysis.quantities import QuantityKind
from proxy.analysis.statements import PrivateQuery, classify
from proxy.config import parse_config
from proxy.query.planning import prepare_release
from proxy.release.plan import ReleasePlan
from proxy.rewrite.bound_contributions import WEIGHT_UNIT

AGGREGATES = (
    "SUM(x)",
    "SUM(-x)",
    "SUM(x - y)",
    "SUM(2 * x)",
    "AVG(x)",
    "AVG(-x)",
    "VAR_POP(x)",
    "VAR_SAMP(-x)",
    "STDDEV_POP(x)",
    "STDDEV_SAMP(x)",
    "COUNT(x)",
    "COUNT(*)",
    "COVAR_POP(y, x)",
    "COVAR_SAMP(x, -y)",
    "CORR(y, x)",
    "REGR_SLOPE(y, x)",
    "REGR_SXY(-y, x)",
    "REGR_SXX(y, x)",
    "REGR_AVGY(y, x)",
)
SLACK = 1e-9  # relative: the engine sums in floating point


def policy(lower: float, upper: float, bound: int) -> str:
    return f"""
[datasets.d]
path = "d.duckdb"
[datasets.d.tables.t]
privacy_unit = "pid"
max_contributions = {bound}
[datasets.d.tables.t.columns]
pid = {{ type = "integer" }}
x = {{ type = "real", lower = {lower!r}, upper = {upper!r} }}
y = {{ type = "real", lower = {-upper!r}, upper = {-lower!r} }}
g = {{ type = "text", public = true, values = ["a", "b"] }}
"""


def plan_for(sql: str, lower: float, upper: float, bound: int, *, gaussian: bool) -> tuple[ReleasePlan, str]:
    dataset = parse_config(policy(lower, upper, bound), path=Path("/nonexistent/veil.toml")).dataset("d")
    assert dataset is not None
    statement = classify(parse_statements(sql)[0], dataset)
    assert isinstance(statement, PrivateQuery)
    plan, engine_sql = prepare_release(
        statement.shape, epsilon=1.0, delta=1e-6 if gaussian else 0.0, dialect="duckdb", gaussian=gaussian
    )
    return plan, engine_sql or ""  # "": every aggregate is a quantile, measured from histograms only


def bounds() -> st.SearchStrategy[tuple[float, float]]:
    """lower < upper, integers or halves, of either sign — |lower| > |upper| in about half the draws."""
    ends = st.integers(min_value=-400, max_value=400).map(lambda n: n / 2)
    return st.tuples(ends, ends).filter(lambda pair: pair[0] < pair[1])


def quantities(
    connection: duckdb.DuckDBPyConnection, sql: str, keys: int
) -> dict[tuple[object, ...], list[float]]:
    return {
        tuple(row[:keys]): [float(v) if v is not None else 0.0 for v in row[keys:]]
        for row in connection.execute(sql).fetchall()
    }


def vector_change(before: dict, after: dict, column: int, *, norm: int) -> float:  # type: ignore[type-arg]
    cells = set(before) | set(after)
    changes = [
        abs(after.get(c, [0.0] * (column + 1))[column] - before.get(c, [0.0] * (column + 1))[column])
        for c in cells
    ]
    return sum(changes) if norm == 1 else math.sqrt(sum(d * d for d in changes))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    aggregate=st.sampled_from(AGGREGATES),
    ends=bounds(),
    bound=st.integers(min_value=1, max_value=4),
    grouped=st.booleans(),
    gaussian=st.booleans(),
    data=st.data(),
)
def test_one_person_moves_every_noisy_quantity_by_at_most_its_sensitivity(
    aggregate: str,
    ends: tuple[float, float],
    bound: int,
    grouped: bool,
    gaussian: bool,
    data: st.DataObject,
) -> None:
    lower, upper = ends
    sql = f"SELECT g, {aggregate} FROM t GROUP BY g" if grouped else f"SELECT {aggregate} FROM t"
    plan, engine_sql = plan_for(sql, lower, upper, bound, gaussian=gaussian)
    keys = len(plan.shape.group_keys)
    width = upper - lower
    value = st.sampled_from([lower, upper, lower - width, upper + width, (lower + upper) / 2])
    row = st.tuples(st.sampled_from(["a", "b"]), value, value)
    others = data.draw(st.lists(st.lists(row, min_size=1, max_size=5), max_size=6), label="others")
    added = data.draw(st.lists(row, min_size=1, max_size=2 * bound), label="added person")
    connection = duckdb.connect()
    connection.execute("CREATE TABLE t (pid INTEGER, g VARCHAR, x DOUBLE, y DOUBLE)")
    for pid, rows in enumerate(others):
        connection.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", [(pid, *r) for r in rows])
    before = quantities(connection, engine_sql, keys)
    connection.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", [(999, *r) for r in added])
    after = quantities(connection, engine_sql, keys)
    for column, measurement in enumerate(plan.scalar_measurements):
        change = vector_change(before, after, column, norm=2 if measurement.gaussian else 1)
        assert change <= measurement.sensitivity * (1 + SLACK) + SLACK, (measurement.quantity.label, change)


@pytest.mark.parametrize(
    ("lower", "upper"), [(-50.0, 500.5), (-500.0, 20.0), (-9.0, -2.0), (3.0, 7.5), (-4.0, 4.0)]
)
@pytest.mark.parametrize("sql", ["SELECT SUM(x) FROM t", "SELECT SUM(-x) FROM t", "SELECT AVG(x) FROM t"])
def test_sum_sensitivity_is_l_times_the_larger_bound_magnitude(lower: float, upper: float, sql: str) -> None:
    plan, _ = plan_for(sql, lower, upper, 3, gaussian=False)
    (total,) = [m for m in plan.measurements if m.quantity.kind is QuantityKind.SUM]
    assert total.sensitivity == 3 * max(abs(lower), abs(upper))


@pytest.mark.parametrize(("lower", "upper"), [(-500.0, 20.0), (-9.0, -2.0), (3.0, 7.5)])
def test_squares_sensitivity_is_l_times_the_larger_square(lower: float, upper: float) -> None:
    plan, _ = plan_for("SELECT VAR_POP(-x) FROM t", lower, upper, 2, gaussian=False)
    (squares,) = [m for m in plan.measurements if m.quantity.kind is QuantityKind.SUM_SQUARES]
    assert squares.sensitivity == 2 * max(lower * lower, upper * upper)


def test_a_person_at_the_larger_magnitude_bound_reaches_the_sum_sensitivity() -> None:
    """SUM(-x) with x in [-500, 20]: -x in [-20, 500]; a person with L = 3 rows at x = -500 adds 1500."""
    plan, engine_sql = plan_for("SELECT SUM(-x) FROM t", -500.0, 20.0, 3, gaussian=False)
    connection = duckdb.connect()
    connection.execute("CREATE TABLE t (pid INTEGER, g VARCHAR, x DOUBLE, y DOUBLE)")
    connection.execute("INSERT INTO t VALUES (1, 'a', 1, 1)")
    before = quantities(connection, engine_sql, 0)[()][0]
    connection.executemany("INSERT INTO t VALUES (2, 'a', ?, 0)", [(-500.0,)] * 3)
    after = quantities(connection, engine_sql, 0)[()][0]
    assert after - before == pytest.approx(plan.measurements[0].sensitivity) == 1500.0


@pytest.mark.parametrize(("lower", "upper"), [(-500.0, 20.0), (-9.0, -2.0), (3.0, 7.5)])
@pytest.mark.parametrize(
    "sql", ["SELECT MEDIAN(x) FROM t", "SELECT MAX(-x) FROM t", "SELECT MIN(x - y) FROM t"]
)
def test_quantile_sensitivity_is_in_rows_whatever_the_bounds(lower: float, upper: float, sql: str) -> None:
    """A quantile is chosen from a histogram of weighted row counts (K units per row): one person moves
    it by at most L·K units, whatever the sign or size of the bounds (those only set the grid)."""
    plan, _ = plan_for(sql, lower, upper, 3, gaussian=False)
    (quantile,) = plan.quantile_measurements
    assert quantile.sensitivity == 3 * WEIGHT_UNIT and quantile.weight == WEIGHT_UNIT
