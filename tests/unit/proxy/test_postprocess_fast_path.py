"""The post-processing fast path: a select list of noisy columns as they are is answered without the
sandbox engine (``QueryShape.passthrough_columns``). It is an optimisation only, so with the same noise
it must give exactly the table the sandbox would — names, types and values — for every kind of column
(counts, sums, reals, dates, integer and text keys) and every output setting."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from budget.loss import PrivacyLoss
from proxy.analysis.shape import QueryShape
from proxy.backends.duckdb import DuckDBBackend
from proxy.config import parse_config
from proxy.query.service import Principal, QueryService
from proxy.release.apply import ReleasedTable
from proxy.settings import SessionSettings
from tests.service_fixture import granted_ledger
from tests.unit.proxy.test_dates_and_pairs import POLICY

QUERIES = [
    "SELECT COUNT(*) FROM m",
    "SELECT SUM(y), AVG(x) FROM m",
    "SELECT MIN(day), MAX(day), PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY day) FROM m",
    "SELECT date_trunc('month', day) AS mo, COUNT(*) FROM m GROUP BY 1",
    "SELECT CORR(y, x), STDDEV(x) FROM m",
    "SELECT y, COUNT(*), SUM(x) FROM m GROUP BY y",
    "SELECT label, COUNT(*) FROM m GROUP BY label",
    "SELECT AVG(x) FROM m WHERE y > 100",
]
SETTINGS = [{}, {"veil.raw_counts": "on", "veil.round": "off"}, {"veil.mechanism": "gaussian"}]


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, DuckDBBackend]]:
    """50 people with 8 rows each over 300 days of 2024; one text label."""
    folder = tmp_path_factory.mktemp("lab")
    with duckdb.connect(str(folder / "lab.duckdb")) as connection:
        connection.execute(
            "CREATE TABLE m AS SELECT i % 50 AS pid, DATE '2024-01-01' + (i % 300)::INT AS day,"
            " DATE '1900-01-01' + i::INT AS era, NULL::DATE AS undated, (i % 5) - 2.5 AS x,"
            " (i % 6) - 1 AS y, i AS free, 'a' AS label FROM range(400) t(i)"
        )
    engine = DuckDBBackend(folder / "lab.duckdb")
    yield folder, engine
    engine.close()


def answer(backend: tuple[Path, DuckDBBackend], sql: str, settings: dict[str, str]) -> ReleasedTable:
    """The answer of a new analyst (so nothing is stored yet) with the noise of seed 7."""
    folder, engine = backend
    dataset = parse_config(POLICY, path=folder / "veil.toml").dataset("lab")
    assert dataset is not None
    ledger = granted_ledger(folder / f"ledger-{uuid.uuid4().hex}.sqlite", "lab", PrivacyLoss(10.0, 0.5))
    sandbox = DuckDBBackend.sandbox()
    try:
        service = QueryService(dataset, backend=engine, sandbox=sandbox, ledger=ledger, rng=random.Random(7))
        (tree,) = service.parse(sql)
        outcome = service.run(
            tree,
            principal=Principal("alice"),
            settings=SessionSettings({"veil.epsilon": "1", "veil.delta": "1e-6", **settings}),
        )
    finally:
        sandbox.close()
    assert outcome.table is not None
    return outcome.table


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(s) or "defaults")
@pytest.mark.parametrize("sql", QUERIES)
def test_the_fast_path_gives_the_sandboxs_table(
    backend: tuple[Path, DuckDBBackend], sql: str, settings: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = answer(backend, sql, settings)
    monkeypatch.setattr(QueryShape, "passthrough_columns", property(lambda _: None))
    assert answer(backend, sql, settings) == fast
