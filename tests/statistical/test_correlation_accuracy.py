"""CORR by composition of noisy sums: spec dp-mechanisms.md §7's accuracy test, under add/remove.

§7: 10^6 synthetic pairs in [0, 1]² with sample correlation C = 0.6, ε = 1; require |C̃ − C| <= 0.05 in at
least 99% of 200 seeded runs. The spec states it for its `replace` variant (three statistics, ε/3 each);
Veil's neighbouring relation is add/remove, where §7 prescribes six noisy sums at ε/6 each — the test
checks that form, with the plan's own sensitivities, on sums the engine computed. Its noise is far
smaller than the bound (each sum's noise has scale 6 against sums of order 10^5), so this mainly guards
the arithmetic; tests/unit/proxy/test_dates_and_pairs.py checks the sensitivities.
"""

from __future__ import annotations

import random
from pathlib import Path

import duckdb
import pytest

from proxy.analysis.parse import parse_statements
from proxy.analysis.statements import PrivateQuery, classify
from proxy.config import parse_config
from proxy.query.planning import prepare_release
from proxy.release.apply import release

pytestmark = pytest.mark.slow

RUNS = 200
POLICY = """
[datasets.s]
path = "s.duckdb"
[datasets.s.tables.pairs]
privacy_unit = "row"
[datasets.s.tables.pairs.columns]
a = { type = "real", lower = 0, upper = 1 }
b = { type = "real", lower = 0, upper = 1 }
"""


def test_corr_of_a_million_pairs_is_within_0_05_in_99_percent_of_runs() -> None:
    connection = duckdb.connect()
    connection.execute("SELECT setseed(0.7)")
    # b = (0.6 a + 0.8 v) / 1.4 with a, v uniform and independent: correlation 0.6, values in [0, 1]
    connection.execute(
        "CREATE TABLE pairs AS SELECT a, (0.6 * a + 0.8 * v) / 1.4 AS b"
        " FROM (SELECT random() AS a, random() AS v FROM range(1000000))"
    )
    (truth,) = connection.execute("SELECT CORR(b, a) FROM pairs").fetchone()  # type: ignore[misc]
    assert abs(truth - 0.6) < 0.005
    dataset = parse_config(POLICY, path=Path("/nonexistent/veil.toml")).dataset("s")
    assert dataset is not None
    (tree,) = parse_statements("SELECT CORR(b, a) FROM pairs")
    statement = classify(tree, dataset)
    assert isinstance(statement, PrivateQuery)
    plan, sql = prepare_release(statement.shape, epsilon=1.0, dialect="duckdb")
    assert [m.epsilon for m in plan.measurements] == [pytest.approx(1 / 6)] * 6
    assert sql is not None
    exact = connection.execute(sql).fetchall()
    within = 0
    for seed in range(RUNS):
        noisy = release(plan, exact, rng=random.Random(seed)).rows[0][0]  # then the noise column
        within += abs(noisy - truth) <= 0.05
    assert within >= 0.99 * RUNS
