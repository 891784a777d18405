"""The timing probe of docs/privacy.md, "Side channels": does a response time tell whether one person
is in the data, with and without the protections?

Two neighbouring DuckDB databases differ in one person (``present`` holds the target's row, ``absent``
does not). The same query text gates an expensive expression on the target's row, so it costs time only
when the target is there. Queries alternate between the databases in a random order (interleaved, so
drift hits both sides alike); each side gets ``SAMPLES`` response times measured in process around the
query pipeline — the strongest observer, with no network jitter. ``distinguisher.distinguish`` picks the
best threshold on one half and reports the advantage and a Clopper–Pearson ε lower bound on the other.
Every query is charged ε = 0.001 (the floor); the answer cache is off, so each one runs in the engine.

Configurations: no protection (the complexity budget raised so the probe of the issue fits, no
deadline); the default complexity budget alone (the heaviest probe it admits); and each with
``response_deadline_ms``. Results go into docs/benchmarks.md.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
import tomli_w

from budget.ledger import Ledger
from budget.loss import PrivacyLoss
from proxy.backends.duckdb import DuckDBBackend
from proxy.config import parse_config
from proxy.errors import QueryCanceledError
from proxy.query.service import Principal, QueryService
from proxy.settings import SessionSettings
from proxy.wire.scram import make_scram_verifier
from tests.bench.distinguisher import distinguish

pytestmark = pytest.mark.bench

SAMPLES = 200  # per side
PEOPLE = 10_000
EPSILON = 0.001
TARGET = "victim"
RAISED = {"max_literal_chars": 1_000_000, "max_function_calls": 1000, "max_depth": 1000, "max_nodes": 10_000}


def _gated(expression: str) -> str:
    return f"SELECT COUNT(*) FROM people WHERE CASE WHEN name = '{TARGET}' THEN length({expression}) ELSE 0 END >= 0"


# the probe: string functions nested around a large literal (200 KB, 30 passes)
HEAVY = _gated("lower(upper(" * 15 + f"concat(name, '{'x' * 200_000}')" + "))" * 15)
# the heaviest the default budget admits: 30 upper() over 1,000-character literals, one level deep
WITHIN_BUDGET = _gated("concat(" + ", ".join([f"upper(concat(name, '{'y' * 1000}'))"] * 30) + ")")


@dataclass(frozen=True)
class Setting:
    name: str
    query: str
    limits: dict[str, int]
    deadline_ms: int | None


SETTINGS = [
    Setting("no protection (budget raised, no deadline)", HEAVY, RAISED, None),
    Setting("default complexity budget, no deadline", WITHIN_BUDGET, {}, None),
    Setting("budget raised + response_deadline_ms = 100", HEAVY, RAISED, 100),
    Setting("default budget + response_deadline_ms = 100", WITHIN_BUDGET, {}, 100),
]


def _database(path: Path, *, present: bool) -> None:
    with duckdb.connect(str(path)) as connection:
        connection.execute(
            f"CREATE TABLE people AS SELECT i AS id, 'p' || i AS name FROM range({PEOPLE}) t(i) WHERE i > 0"
        )
        if present:
            connection.execute(f"INSERT INTO people VALUES (0, '{TARGET}')")


def _service(path: Path, ledger: Path, setting: Setting) -> QueryService:
    dataset: dict[str, Any] = {
        "path": str(path),
        "default_epsilon": EPSILON,
        "answer_cache": False,
        "limits": setting.limits,
        "tables": {
            "people": {
                "privacy_unit": "id",
                "max_contributions": 1,
                "columns": {"id": {"type": "integer"}, "name": {"type": "text"}},
            }
        },
    }
    if setting.deadline_ms is not None:
        dataset["response_deadline_ms"] = setting.deadline_ms
    policy = parse_config(tomli_w.dumps({"datasets": {"probe": dataset}}), path=path.parent / "veil.toml")
    probe = policy.dataset("probe")
    assert probe is not None
    return QueryService(
        probe,
        backend=DuckDBBackend(path),
        sandbox=DuckDBBackend.sandbox(),
        ledger=Ledger.open(ledger),
        rng=random.Random(1),
    )


def _timed(service: QueryService, sql: str) -> float:
    """Milliseconds to the answer; a missed deadline is an outcome of its own, recorded as +∞ so that
    the observer's threshold test sees it as plainly as an analyst sees the error."""
    (tree,) = service.parse(sql)
    started = time.perf_counter()
    try:
        service.run(tree, principal=Principal("attacker"), settings=SessionSettings())
    except QueryCanceledError:
        return math.inf
    return (time.perf_counter() - started) * 1000


@pytest.mark.parametrize("setting", SETTINGS, ids=[s.name for s in SETTINGS])
def test_timing_probe(setting: Setting, tmp_path: Path) -> None:
    for side in ("present", "absent"):
        _database(tmp_path / f"{side}.duckdb", present=side == "present")
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    ledger.add_analyst("attacker", make_scram_verifier("x", iterations=1))
    ledger.grant("attacker", "probe", PrivacyLoss(100.0))
    services = {
        side: _service(tmp_path / f"{side}.duckdb", tmp_path / "ledger.sqlite", setting)
        for side in ("present", "absent")
    }
    times: dict[str, list[float]] = {"present": [], "absent": []}
    for side in services:  # warm-up, not measured
        _timed(services[side], setting.query)
    order = ["present", "absent"] * SAMPLES
    random.Random(5).shuffle(order)
    for side in order:
        times[side].append(_timed(services[side], setting.query))
    result = distinguish(times["present"], times["absent"], seed=6)
    charged = ledger.balance("attacker", "probe").spent_epsilon / (2 * SAMPLES + 2)
    median = {side: sorted(values)[len(values) // 2] for side, values in times.items()}
    misses = {side: sum(math.isinf(value) for value in values) for side, values in times.items()}
    print(
        f"\n{setting.name}: median present {median['present']:.2f} ms, absent {median['absent']:.2f} ms; "
        f"deadline misses {misses['present']}/{misses['absent']}; "
        f"advantage {result.advantage:.3f}, empirical ε ≥ {result.epsilon_lower_bound:.3f} "
        f"(95% Clopper–Pearson), charged ε per query {charged:.4g}"
    )
    assert charged == pytest.approx(EPSILON)
    if setting.deadline_ms is not None:
        assert result.epsilon_lower_bound <= charged, "the deadline must hide the probe"
    if setting.limits == RAISED and setting.deadline_ms is None:
        assert result.epsilon_lower_bound > charged, "without protection the probe should show"
