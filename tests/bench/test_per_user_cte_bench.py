"""The per-person derived table on MovieLens: ``AVG(n)`` over each user's number of ratings (issue 18).

``WITH per_user AS (SELECT user_id, COUNT(*) AS n FROM ratings GROUP BY user_id) SELECT AVG(n) FROM per_user``
at ε = 1, privacy unit userId (671 users, 100,004 ratings). No bound is given, so Veil chooses the bound of
``n`` with DP (a tenth of ε, the "auto" bound's mechanism on the grid 1, 2, 3, 4, 6, …, 1,000), clamps ``n`` to
it and answers noisy SUM / noisy COUNT with the rest. Metric: mean relative error |noisy − true| / true over
fresh draws (``answer_cache = false``, each run charged). Needs ../shared/data/movielens_dslabs.csv (skips
otherwise).
"""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from proxy.query.service import Principal
from proxy.settings import SessionSettings
from tests.bench.in_process import ANALYST, create_ledger, seeded_service, spent

pytestmark = pytest.mark.bench

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "movielens_dslabs.csv"
RUNS = 30
QUERY = (
    "WITH per_user AS (SELECT user_id, COUNT(*) AS n FROM ratings GROUP BY user_id)"
    " SELECT AVG(n), PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY n) FROM per_user"
)
POLICY = """
[datasets.movies]
path = "movies.duckdb"
default_epsilon = 1.0
max_epsilon = 1.0
answer_cache = false  # every run a fresh draw, charged

[datasets.movies.tables.ratings]
privacy_unit = "user_id"
max_contributions = "auto"
contribution_cap = 1000

[datasets.movies.tables.ratings.columns]
user_id = { type = "integer" }
rating = { type = "real", lower = 0, upper = 5 }
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not DATA.exists():
        pytest.skip(
            f"{DATA} is not present (MovieLens ratings: ml-latest-small from https://grouplens.org/datasets/movielens/)"
        )
    directory = tmp_path_factory.mktemp("per_user")
    with duckdb.connect(str(directory / "movies.duckdb")) as connection:
        connection.execute(
            "CREATE TABLE ratings AS SELECT userId AS user_id, rating FROM read_csv(?)", [str(DATA)]
        )
    create_ledger(directory, "movies")
    return directory


def test_average_ratings_per_user_from_a_cte(workdir: Path) -> None:
    with duckdb.connect(str(workdir / "movies.duckdb"), read_only=True) as connection:
        mean, median = connection.execute(
            "SELECT AVG(n), MEDIAN(n) FROM (SELECT COUNT(*) AS n FROM ratings GROUP BY user_id)"
        ).fetchone()
    service = seeded_service(POLICY, workdir, "movies", seed=0)
    errors, median_errors, charges, bounds = [], [], [], Counter()
    for _ in range(RUNS):
        before, _ = spent(service)
        (tree,) = service.parse(QUERY)
        outcome = service.run(tree, principal=Principal(ANALYST), settings=SessionSettings())
        assert outcome.table is not None
        noisy_mean, noisy_median = outcome.table.rows[0]
        charges.append(spent(service)[0] - before)
        errors.append(abs(noisy_mean - mean) / mean)
        median_errors.append(abs(noisy_median - median) / median)
        bounds[outcome.notices[0].split("n in [0, ")[1].split("]")[0]] += 1
    service.backend.close()
    print(
        f"\nMovieLens per-user CTE at ε = 1, {RUNS} fresh draws: AVG(n) true {mean:.1f}, mean relative error "
        f"{statistics.mean(errors):.3f} (median {statistics.median(errors):.3f}, max {max(errors):.3f}); "
        f"median of n true {median:g}, mean relative error {statistics.mean(median_errors):.3f}; "
        f"bounds of n chosen: {dict(sorted(bounds.items(), key=lambda item: float(item[0])))}; "
        f"ledger charge per run ε = {statistics.mean(charges):g}"
    )
    assert charges == pytest.approx([1.0] * RUNS)
    assert len(set(errors)) == RUNS, "every run must be a fresh draw"
    assert statistics.mean(errors) <= 0.2
